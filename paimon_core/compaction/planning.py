"""Per-bucket compaction decisions of a table, from file metadata only.

Pure: given a bucket's live files and the table options, says what compacting it would do now
(which picker strategy fired, which files are rewritten or moved, how many bytes that costs).
Used both to run compactions and to report a table's LSM shape without touching data files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from paimon_core.compaction.append import (
    AppendLimits,
    Group,
    pick_bucketed,
    pick_bucketed_full,
    pick_unaware,
)
from paimon_core.compaction.intervals import Bounds
from paimon_core.compaction.levels import Levels
from paimon_core.compaction.merge_tree import TaskPlan, plan_task
from paimon_core.compaction.picker import CompactionPlan, force_pick_level0, needs_lookup, pick, pick_full
from paimon_core.manifest import DataFileMeta
from paimon_core.options import TableOptions
from paimon_core.write.routing import Partition


@dataclass(frozen=True, slots=True)
class BucketFiles:
    """The live files of one (partition, bucket)."""

    partition: Partition
    bucket: int
    total_buckets: int
    files: tuple[DataFileMeta, ...]


@dataclass(frozen=True, slots=True)
class BucketWork:
    """What compacting one bucket does: a merge-tree task or append groups."""

    bucket: BucketFiles
    reason: str
    task: TaskPlan | None = None
    groups: tuple[Group, ...] = ()

    @property
    def rewrite_bytes(self) -> int:
        if self.task is not None:
            return self.task.rewrite_bytes
        return sum(f.file_size for group in self.groups for f in group)

    @property
    def empty(self) -> bool:
        return not self.groups and (self.task is None or not self.task.actions)


@dataclass(frozen=True, slots=True)
class Planner:
    """Plans buckets of one table (options and key decoding fixed)."""

    options: TableOptions
    primary_key: bool
    key_of: Callable[[bytes], tuple[Any, ...]]
    bounds: Bounds

    def levels(self, files: Sequence[DataFileMeta]) -> Levels:
        if not self.primary_key:
            return Levels(tuple(files), (), 1)
        return Levels.of(files, self.options.num_levels, self.key_of)

    def plan(self, bucket: BucketFiles, *, full: bool, now_ms: int = 0) -> BucketWork | None:
        if self.primary_key:
            return self._plan_merge_tree(bucket, full=full, now_ms=now_ms)
        return self._plan_append(bucket, full=full)

    def _plan_merge_tree(self, bucket: BucketFiles, *, full: bool, now_ms: int) -> BucketWork | None:
        options = self.options
        levels = self.levels(bucket.files)
        runs = levels.sorted_runs()
        plan: CompactionPlan | None
        if _lookup_needs_merge(options) and levels.level0:
            full = True  # the deeper version would have to join the merge: rewrite the bucket instead
        if full:
            plan = pick_full(runs, levels.num_levels, force_rewrite=options.compaction_force_rewrite_all_files)
        else:
            plan = pick(runs, levels.num_levels, options, now_ms=now_ms, last_full_ms=_last_full_ms(levels))
            if plan is None and needs_lookup(options) and _force_level0_now(options, len(levels.level0)):
                plan = force_pick_level0(runs, levels.num_levels, options)
        if plan is None:
            return None
        task = plan_task(plan, levels, self.bounds, min_file_size=options.compaction_file_size(primary_key=True),
                         force_rewrite=options.compaction_force_rewrite_all_files,
                         deletion_vectors=options.deletion_vectors_enabled,
                         first_row=options.merge_engine == "first-row",
                         changelog_producer=options.changelog_producer)
        work = BucketWork(bucket, plan.reason.value, task=task)
        return None if work.empty else work

    def _plan_append(self, bucket: BucketFiles, *, full: bool) -> BucketWork | None:
        options = self.options
        limits = AppendLimits(target_size=options.target_file_size_for(primary_key=False),
                              small_file_size=options.compaction_file_size(primary_key=False),
                              min_file_num=options.compaction_min_file_num,
                              open_file_cost=options.split_open_file_cost)
        groups: list[Group]
        if bucket.bucket == -1 or bucket.total_buckets == -1:
            groups = pick_unaware(bucket.files, limits, full=full)
        else:
            picked = (pick_bucketed_full(bucket.files, limits, force=options.compaction_force_rewrite_all_files)
                      if full else pick_bucketed(bucket.files, limits))
            groups = [picked] if picked else []
        if not groups:
            return None
        return BucketWork(bucket, "full-compaction" if full else "small-files", groups=tuple(groups))


def _force_level0_now(options: TableOptions, level0_runs: int) -> bool:
    """``lookup-compact``: radical forces level 0 up at every trigger; gentle every max-interval-th.

    Each commit adds one level-0 run and triggers once, so the run count stands for the triggers
    since level 0 was last emptied.
    """
    return options.lookup_compact == "radical" or level0_runs >= options.lookup_compact_max_interval


def _lookup_needs_merge(options: TableOptions) -> bool:
    """Deletion-vector tables whose new rows cannot just mask the old: the old row takes part in
    the merge (partial-update, aggregation) or may be newer by ``sequence.field``."""
    return options.deletion_vectors_enabled and (options.merge_engine != "deduplicate"
                                                  or bool(options.sequence_field))


def _last_full_ms(levels: Levels) -> int | None:
    """When the bucket was last fully compacted, as far as metadata tells: its newest max-level file."""
    top = levels.levels[-1] if levels.levels else ()
    times = [f.creation_time_ms for f in top if f.creation_time_ms is not None]
    return max(times) if times else None
