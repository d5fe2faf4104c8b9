"""Paimon's universal compaction picker: which sorted runs of a bucket to merge, and where to.

Pure functions over a bucket's sorted runs (newest first, the last is the oldest/largest), in
Paimon's order: early full compaction, size amplification, size ratio, run count. Each returns
a :class:`CompactionPlan` carrying the reason and numbers, or None when it does not apply.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from paimon_core.compaction.levels import SortedRun, runs_size
from paimon_core.options import TableOptions

log = logging.getLogger(__name__)


class Reason(StrEnum):
    EARLY_FULL = "early-full-compaction"
    SIZE_AMPLIFICATION = "size-amplification"
    SIZE_RATIO = "size-ratio"
    RUN_COUNT = "sorted-run-count"
    FORCE_LEVEL0 = "force-up-level-0"
    FULL = "full-compaction"


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Merge ``runs`` (a prefix of the bucket's runs) into ``output_level``."""

    runs: tuple[SortedRun, ...]
    output_level: int
    reason: Reason
    detail: str

    @property
    def files(self) -> list:
        return [f for run in self.runs for f in run.files]


def _unit(runs: Sequence[SortedRun], max_level: int, count: int, reason: Reason, detail: str) -> CompactionPlan:
    """Paimon's createUnit: output level below the first unpicked run, never level 0."""
    if count == len(runs):
        return CompactionPlan(tuple(runs), max_level, reason, detail)
    output = max(0, runs[count].level - 1)
    if output == 0:
        for run in runs[count:]:
            count += 1
            if run.level != 0:
                output = run.level
                break
    if count == len(runs):
        output = max_level
    return CompactionPlan(tuple(runs[:count]), output, reason, detail)


def pick_for_size_ratio(runs: Sequence[SortedRun], max_level: int, options: TableOptions, *,
                        candidates: int = 1, force: bool = False,
                        reason: Reason = Reason.SIZE_RATIO) -> CompactionPlan | None:
    """Grow the newest ``candidates`` runs while the next run is not much bigger.

    Once triggered, level-0/1 runs are absorbed even when big (Paimon's fix for level-1 inflation).
    """
    size = runs_size(runs[:candidates])
    count = candidates
    triggered = force or candidates > 1
    ratio = options.compaction_size_ratio
    for run in runs[candidates:]:
        if size * (100.0 + ratio) / 100.0 < run.size and (not triggered or run.level > 1):
            break
        size += run.size
        count += 1
        triggered = True
    if not triggered:
        return None
    return _unit(runs, max_level, count, reason, f"{count} runs, {size} bytes, size ratio {ratio}%")


def pick_size_amplification(runs: Sequence[SortedRun], max_level: int,
                            options: TableOptions) -> CompactionPlan | None:
    if len(runs) < options.sorted_run_compaction_trigger:
        return None
    rest, last = runs_size(runs[:-1]), runs[-1].size
    limit = options.max_size_amplification_percent
    if rest * 100 > limit * last:
        return CompactionPlan(tuple(runs), max_level, Reason.SIZE_AMPLIFICATION,
                              f"{rest} bytes above the oldest run's {last} exceed {limit}%")
    return None


def pick_early_full(runs: Sequence[SortedRun], max_level: int, options: TableOptions, *,
                    now_ms: int, last_full_ms: int | None) -> CompactionPlan | None:
    """``compaction.optimization-interval``: a full compaction when the last one is too old."""
    interval = options.compaction_optimization_interval_ms
    if interval is None or len(runs) <= 1:
        return None
    if last_full_ms is None or now_ms - last_full_ms > interval:
        age = "never" if last_full_ms is None else f"{now_ms - last_full_ms} ms ago"
        return CompactionPlan(tuple(runs), max_level, Reason.EARLY_FULL,
                              f"last full compaction {age}, interval {interval} ms")
    return None


def pick(runs: Sequence[SortedRun], num_levels: int, options: TableOptions, *, now_ms: int = 0,
         last_full_ms: int | None = None) -> CompactionPlan | None:
    """Paimon's UniversalCompaction.pick, strategies tried in its order."""
    max_level = num_levels - 1
    trigger = options.sorted_run_compaction_trigger
    plan = (pick_early_full(runs, max_level, options, now_ms=now_ms, last_full_ms=last_full_ms)
            or pick_size_amplification(runs, max_level, options)
            or (pick_for_size_ratio(runs, max_level, options) if len(runs) >= trigger else None))
    if plan is None and len(runs) > trigger:
        plan = pick_for_size_ratio(runs, max_level, options, candidates=len(runs) - trigger + 1,
                                   reason=Reason.RUN_COUNT)
    if plan is not None:
        log.debug("compaction picked %d of %d runs into level %d: %s (%s)", len(plan.runs), len(runs),
                 plan.output_level, plan.reason.value, plan.detail)
    return plan


def force_pick_level0(runs: Sequence[SortedRun], num_levels: int, options: TableOptions) -> CompactionPlan | None:
    """Push every level-0 file up (lookup tables: first-row, deletion vectors, lookup changelog)."""
    level0 = 0
    for run in runs:
        if run.level > 0:
            break
        level0 += 1
    if level0 == 0:
        return None
    return pick_for_size_ratio(runs, num_levels - 1, options, candidates=level0, force=True,
                               reason=Reason.FORCE_LEVEL0)


def pick_full(runs: Sequence[SortedRun], num_levels: int, *, force_rewrite: bool = False) -> CompactionPlan | None:
    """Everything into the max level (``compact(full=True)``, ``full-compaction.delta-commits``).

    A bucket already holding one run at the max level is left alone, unless every file must be
    rewritten.
    """
    max_level = num_levels - 1
    if not runs or (len(runs) == 1 and runs[0].level == max_level and not force_rewrite):
        return None
    return CompactionPlan(tuple(runs), max_level, Reason.FULL, f"{len(runs)} runs, full compaction")


def needs_lookup(options: TableOptions) -> bool:
    """Tables Paimon compacts with level 0 forced up at every trigger."""
    return (options.changelog_producer == "lookup" or options.merge_engine == "first-row"
            or options.deletion_vectors_enabled)
