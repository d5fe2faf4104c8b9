"""The LSM shape of a write-only table, as the compaction sensors, jobs and checks see it.

A table whose spec turns the compaction sensor on is written write-only by its ingestion
(writers never compact, and never expire snapshots); its sensor launches
the table's compaction job when a bucket's level 0 grows, and a pair of checks on its asset
judge the shape. Everything here reads manifests only (``Table.lsm_state``), never data files,
so a sensor tick or a check costs a few small reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

import paimon_core as pc
from pipelines.cron import age_text, current_ms, iso
from pipelines.names import LEVEL0_CHECK, SMALL_FILES_CHECK
from pipelines.target import TableTarget
from pipelines.verdicts import CheckOutcome

# Buckets shown in metadata tables; the worst ones (most level-0 files) come first.
BUCKETS_SHOWN = 20
# Snapshots read back from the latest to find the last compaction: a compacted write-only table
# has one within a few commits; beyond this many the check says there is none that recent.
COMPACTION_LOOKBACK = 50


@dataclass(frozen=True, slots=True)
class LastCompaction:
    """The newest COMPACT snapshot among the ``looked_at`` newest (``snapshot_id`` None: none)."""

    snapshot_id: int | None
    time_ms: int | None
    looked_at: int

    def text(self, at_ms: int) -> str:
        """``last compaction: snapshot 30 at 2026-... (4 min 2 s before this check)``, or that there is none."""
        if self.snapshot_id is None or self.time_ms is None:
            return f"no compaction among the {self.looked_at} newest snapshot(s)"
        return (f"last compaction: snapshot {self.snapshot_id} at {iso(self.time_ms)} "
                f"({age_text(at_ms - self.time_ms)} before this check)")


def last_compaction(table: pc.Table, *, lookback: int = COMPACTION_LOOKBACK) -> LastCompaction:
    """The newest COMPACT snapshot, read back from the latest (at most ``lookback`` snapshot files)."""
    store = table.snapshot_store
    latest, earliest = store.latest_id(), store.earliest_id()
    if latest is None or earliest is None:
        return LastCompaction(None, None, 0)
    looked = 0
    for snapshot_id in range(latest, max(earliest, latest - lookback + 1) - 1, -1):
        looked += 1
        snapshot = store.snapshot(snapshot_id)
        if snapshot.commit_kind == "COMPACT":
            return LastCompaction(snapshot_id, snapshot.time_millis, looked)
    return LastCompaction(None, None, looked)



def default_level0_threshold(table: pc.Table) -> int:
    """Level-0 files of one bucket at which compaction is due.

    Primary-key tables: ``num-sorted-run.compaction-trigger`` (level-0 files alone reach it, so
    Paimon's picker always has work then). Append tables: ``compaction.min.file-num``, the small
    files the append picker waits for.
    """
    options = table.options
    return options.sorted_run_compaction_trigger if table.schema.primary_keys else options.compaction_min_file_num


def level0_threshold(target: TableTarget, table: pc.Table) -> int:
    """The level-0 files of one bucket at which ``target``'s sensor requests a run.

    The spec decides if it says; otherwise the table's own trigger, except for tables whose
    runs follow the writers: there the sensor launches a run as soon as a level-0 file
    appears, so the run is already up when the picker first has work (launching takes about as
    long as a fast writer needs to add the level-0 files between trigger and stop-trigger).
    """
    if target.level0_threshold:
        return target.level0_threshold
    return 1 if target.follow_seconds > 0 else default_level0_threshold(table)


def partition_spec(table: pc.Table, path: str) -> dict[str, Any]:
    """``{column: value}`` of a partition path as ``lsm_state`` reports it (``dt=2024-01-01``)."""
    return dict(table.partition_of(path))


def worst_buckets(state: pc.LsmState, limit: int = BUCKETS_SHOWN) -> list[pc.BucketState]:
    """The buckets with the most level-0 files (then most files), at most ``limit``."""
    return sorted(state.buckets, key=lambda b: (-b.level0_files, -b.files, b.partition, b.bucket))[:limit]


def levels_table(state: pc.LsmState, limit: int = BUCKETS_SHOWN) -> dg.MetadataValue:
    """The worst buckets' shape as a Dagster table (files per level 0..max, bytes, debt)."""
    shown = worst_buckets(state, limit)
    columns = [("partition", "string"), ("bucket", "int"), ("L0 files", "int"), ("sorted runs", "int"),
               ("files per level", "string"), ("bytes", "int"), ("small files", "int"),
               ("debt bytes", "int"), ("pending", "string")]
    records = [dg.TableRecord({
        "partition": b.partition or "-", "bucket": b.bucket, "L0 files": b.level0_files,
        "sorted runs": b.sorted_runs, "files per level": "/".join(map(str, b.level_files)),
        "bytes": b.total_bytes, "small files": b.small_files, "debt bytes": b.debt_bytes,
        "pending": b.pending or "-"}) for b in shown]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(
        columns=[dg.TableColumn(name, kind) for name, kind in columns]))


def state_metadata(state: pc.LsmState) -> dict[str, Any]:
    """Numbers worth plotting over time, plus the worst buckets."""
    return {
        "snapshot_id": state.snapshot_id if state.snapshot_id is not None else -1,
        "buckets": len(state.buckets),
        "max_level0_files": state.max_level0_files,
        "max_sorted_runs": state.max_sorted_runs,
        "stop_trigger": state.stop_trigger,
        "debt_bytes": state.debt_bytes,
        "small_file_ratio": round(state.small_file_ratio, 4),
        "files": sum(b.files for b in state.buckets),
        "bytes": sum(b.total_bytes for b in state.buckets),
        "levels": levels_table(state),
    }


def level0_outcome(state: pc.LsmState, *, trigger: int, last: LastCompaction, at_ms: int,
                   holder: str | None = None) -> CheckOutcome:
    """Level 0 of every bucket below the stop-trigger, with where the compaction trigger is and
    when the table was last compacted (as of ``at_ms``); ``holder``: the run holding the table's
    compaction slot, if one does (what a failing verdict then points at).

    A compacting Paimon writer stalls at the stop-trigger; write-only writers never do, so here
    reads pay instead (one more file, and for key tables one more sorted run to merge, per
    level-0 file). Failing is a WARN while level 0 is under twice the stop-trigger, an ERROR
    beyond: compaction is then not keeping up at all.
    """
    worst = state.max_level0_files
    stop = state.stop_trigger
    over = [b for b in state.buckets if b.level0_files >= stop]
    severity = dg.AssetCheckSeverity.ERROR if worst >= 2 * stop else dg.AssetCheckSeverity.WARN
    if not over:
        description = (f"at most {worst} level-0 file(s) per bucket (compaction at {trigger}, stop-trigger {stop}), "
                       f"{state.debt_bytes:,} bytes of compaction debt; {last.text(at_ms)}")
    else:
        description = (f"{len(over)} bucket(s) at or above the stop-trigger {stop} (worst {worst} level-0 "
                       f"files, compaction at {trigger}); {last.text(at_ms)}; "
                       + (f"{holder}: the table's compactions wait for it" if holder else
                          "is the compaction sensor running?"))
    when = ({"last_compaction": dg.MetadataValue.timestamp(last.time_ms / 1000),
             "last_compaction_snapshot": str(last.snapshot_id)} if last.time_ms is not None else {})
    return CheckOutcome(LEVEL0_CHECK, not over, severity, description, {
        "max_level0_files": worst, "compaction_trigger": trigger, "stop_trigger": stop,
        "buckets_at_stop_trigger": len(over), "debt_bytes": state.debt_bytes,
        "snapshot_id": state.snapshot_id if state.snapshot_id is not None else -1, **when,
        "levels": levels_table(state)},
        charted=frozenset({"max_level0_files", "buckets_at_stop_trigger", "debt_bytes"}))


def small_files_outside_level0(bucket: pc.BucketState, *, primary_key: bool) -> int:
    """Small files of a bucket that the next minor compaction will not fold.

    Key tables: small files above level 0 (level-0 files are folded at the compaction trigger
    and are the other check's business); counted as small files minus level-0 files, exact
    when every level-0 file is small, as they are when written by commits. Append tables have
    no levels: all their small files count.
    """
    return max(0, bucket.small_files - bucket.level0_files) if primary_key else bucket.small_files


def small_files_outcome(state: pc.LsmState, *, min_file_num: int, primary_key: bool) -> CheckOutcome:
    """No bucket holds too many small files that compaction leaves alone.

    Everything under ``target-file-size`` times ``compaction.small-file-ratio`` is small, so a
    small table is all small files and the table-wide ratio (in the metadata) says little; the
    verdict is per bucket. Key tables fail when ``compaction.min.file-num`` small files sit
    above level 0 (runs of small files at several levels: a full compaction would merge them);
    append tables, where the sensor compacts at ``compaction.min.file-num``, fail at twice that
    (compaction is not keeping up).
    """
    limit = min_file_num if primary_key else 2 * min_file_num
    counts = [small_files_outside_level0(b, primary_key=primary_key) for b in state.buckets]
    crowded = sum(1 for count in counts if count >= limit)
    worst = max(counts, default=0)
    where = "above level 0 " if primary_key else ""
    if not crowded:
        description = f"at most {worst} small file(s) {where}per bucket (limit {limit})"
    else:
        description = (f"{crowded} bucket(s) hold {limit} or more small files {where}(worst {worst}); "
                       "a full compaction merges them")
    return CheckOutcome(SMALL_FILES_CHECK, not crowded, dg.AssetCheckSeverity.WARN, description, {
        "small_file_ratio": round(state.small_file_ratio, 4),
        "small_files": sum(b.small_files for b in state.buckets),
        "files": sum(b.files for b in state.buckets),
        "max_small_files_per_bucket": worst, "limit": limit, "buckets_over": crowded},
        charted=frozenset({"small_file_ratio", "small_files", "files", "max_small_files_per_bucket"}))


def check_outcomes(table: pc.Table, target: TableTarget, state: pc.LsmState | None = None, *,
                   at_ms: int | None = None, holder: str | None = None) -> list[CheckOutcome]:
    """Both LSM checks of ``target``'s table (on ``state``, else its latest snapshot) as of ``at_ms``
    (default now); ``holder``: see :func:`level0_outcome`."""
    state = state if state is not None else table.lsm_state()
    return [level0_outcome(state, trigger=level0_threshold(target, table), last=last_compaction(table),
                           at_ms=current_ms() if at_ms is None else at_ms, holder=holder),
            small_files_outcome(state, min_file_num=table.options.compaction_min_file_num,
                                primary_key=bool(table.schema.primary_keys))]


def format_state(state: pc.LsmState, *, partitions: Sequence[str] | None = None, indent: str = "  ") -> str:
    """A small text table of the buckets (of ``partitions``, if given): what ``make demo`` prints."""
    buckets = [b for b in state.buckets if partitions is None or b.partition in partitions]
    lines = [f"{indent}{'partition':<15} {'bucket':>6}  {'L0':>3}  {'files per level':<15} {'bytes':>9}  pending"]
    for b in buckets:
        lines.append(f"{indent}{b.partition or '-':<15} {b.bucket:>6}  {b.level0_files:>3}  "
                     f"{'/'.join(map(str, b.level_files)):<15} {b.total_bytes:>9,}  {b.pending or '-'}")
    return "\n".join(lines)
