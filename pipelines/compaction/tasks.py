"""The tasks of a compaction run: planning them from the LSM shape, running one, following writers.

A task is one partition's group of buckets. ``plan_tasks`` (pure: an LsmState in, tasks out)
splits each partition needing work into groups of ``buckets_per_step`` buckets, so a run fans
out over as many steps as the executor can run at once; each task either commits its own
COMPACT snapshot or only prepares it for one commit at the end of the run.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations as real types.

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import dagster as dg

import paimon_core as pc
from paimon_core.errors import CommitConflictError
from pipelines.target import TableTarget
from resources import keys
from resources.metadata import lsm_metadata, plottable
from resources.peak_memory import peak_rss_mib, reset_peak_rss

log = logging.getLogger(__name__)

# What a compaction observation charts in the asset's Plots (besides the LSM shape after it).
PLOTTED = frozenset({keys.COMPACTION_FILES_IN, keys.COMPACTION_FILES_OUT, keys.COMPACTION_BYTES_OUT,
                     keys.COMPACTION_CHANGELOG_ROWS})
# Attempts of one partition's compaction when a concurrent commit replaced its input files.
CONFLICT_ATTEMPTS = 2
# How often a following run looks at the table's shape (a few manifest reads each time).
POLL_SECONDS = 0.5

@dataclass(frozen=True, slots=True)
class PartitionTask:
    """One partition's buckets to compact (a step of the fan-out)."""

    target: TableTarget
    partition: str  # the path, "" for an unpartitioned table
    buckets: tuple[int, ...]
    full: bool
    level0_files: tuple[int, ...]  # per bucket, when planned
    commit: bool = True  # False: only prepare; the run commits every task at its end
    index: int = 0  # its place in the run's plan


@dataclass(frozen=True, slots=True)
class PartitionCompaction(pc.BucketTotals):
    """What compacting one partition did (plain values: it is an op output)."""

    table: str
    partition: str
    snapshot_id: int | None
    conflicts: int
    skipped: bool  # every attempt conflicted; the next run picks it up
    buckets: tuple[pc.BucketCompaction, ...]
    duration_s: float
    # commit_once: the task's prepared compaction (PreparedCommit bytes), until the run commits it
    prepared: bytes | None = None
    peak_rss_mib: float = 0.0  # of the process the step ran in, when it finished
    task: int = 0  # the index of the task it did


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The table's shape when the run planned, and what the run was asked to do after."""

    target: TableTarget
    full: bool
    snapshot_id: int | None
    max_level0_files: int
    debt_bytes: int
    partitions: int
    selected: tuple[str, ...] = ()  # the partitions configured (empty: all)
    level0_threshold: int = 0
    follow_seconds: int = 0
    idle_seconds: int = 10
    commit_once: bool = False
    tasks: tuple[PartitionTask, ...] = ()  # what the run fanned out


# ---- planning -------------------------------------------------------------------------------


def needs_work(bucket: pc.BucketState, *, full: bool, level0_threshold: int) -> bool:
    """Whether a bucket is worth a compaction step.

    Minor: the picker has work for it (``pending``) and it reached ``level0_threshold``. Full:
    anything but a bucket that already is one file (one run at the max level, or one append file).
    """
    if full:
        return bucket.files > 1 or (bucket.level0_files > 0 and len(bucket.level_files) > 1)
    return bucket.pending is not None and bucket.level0_files >= level0_threshold


def plan_tasks(state: pc.LsmState, target: TableTarget, *, full: bool, level0_threshold: int = 0,
               buckets_per_step: int = 0, commit: bool = True) -> list[PartitionTask]:
    """Tasks of the buckets needing work, partitions and buckets in order: one per partition, or
    with ``buckets_per_step`` one per that many buckets of a partition (0: all of them)."""
    by_partition: dict[str, list[pc.BucketState]] = {}
    for bucket in state.buckets:
        if needs_work(bucket, full=full, level0_threshold=level0_threshold):
            by_partition.setdefault(bucket.partition, []).append(bucket)
    tasks: list[PartitionTask] = []
    for partition, buckets in sorted(by_partition.items()):
        size = buckets_per_step or len(buckets)
        for start in range(0, len(buckets), size):
            group = buckets[start:start + size]
            tasks.append(PartitionTask(target, partition, tuple(b.bucket for b in group), full,
                                       tuple(b.level0_files for b in group), commit, len(tasks)))
    return tasks


def mapping_key(index: int, partition: str) -> str:
    """A DynamicOutput key (letters, digits, underscores) that still reads like the partition."""
    return f"p{index}_{re.sub(r'[^A-Za-z0-9]+', '_', partition).strip('_')}"[:100]



# ---- compacting -----------------------------------------------------------------------------


def compact_task(table: pc.Table, task: PartitionTask, *, commit_user: str,
                 attempts: int = CONFLICT_ATTEMPTS) -> tuple[pc.CompactionResult | None, int]:
    """Compact one partition's buckets; on a conflict re-plan from the newer snapshot.

    Returns the result (None when every attempt conflicted) and the conflicts met.
    """
    conflicts = 0
    for _ in range(attempts):
        try:
            return table.compact(partitions=task.partition or None, buckets=task.buckets, full=task.full,
                                 commit_user=commit_user, require_existing=False), conflicts
        except CommitConflictError as error:
            conflicts += 1
            log.warning("compaction of %s partition %r conflicted with a concurrent commit (%s); nothing "
                        "was lost", table.name, task.partition, error)
    return None, conflicts


def buckets_table(buckets: Sequence[pc.BucketCompaction], partitions: Sequence[str] | None = None
                  ) -> dg.MetadataValue:
    """One row per compacted bucket (with its partition, when ``partitions`` gives each one's)."""
    columns = [*([("partition", "string")] if partitions is not None else []), ("bucket", "int"),
               ("reason", "string"), ("output level", "int"), ("files in", "int"),
               ("files out", "int"), ("files moved up", "int"), ("bytes in", "int"), ("bytes out", "int"),
               ("changelog rows", "int"), ("files per level before", "string"), ("files per level after", "string")]
    records = [dg.TableRecord({
        **({"partition": partitions[i] or "-"} if partitions is not None else {}),
        "bucket": b.bucket, "reason": b.reason, "output level": b.output_level, "files in": b.files_in,
        "files out": b.files_out, "files moved up": b.files_upgraded, "bytes in": b.bytes_in,
        "bytes out": b.bytes_out, "changelog rows": b.changelog_rows,
        "files per level before": "/".join(map(str, b.level_files_before)),
        "files per level after": "/".join(map(str, b.level_files_after))}) for i, b in enumerate(buckets)]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(
        columns=[dg.TableColumn(name, kind) for name, kind in columns]))


def compaction_metadata(done: PartitionCompaction) -> dict[str, Any]:
    return {
        keys.COMPACTION_TABLE: done.table,
        keys.COMPACTION_PARTITION: done.partition or "-",
        keys.COMPACTION_SNAPSHOT_ID: str(done.snapshot_id) if done.snapshot_id is not None else "-",
        keys.COMPACTION_BUCKETS_COMPACTED: len(done.buckets),
        keys.COMPACTION_FILES_IN: done.files_in,
        keys.COMPACTION_FILES_OUT: done.files_out,
        keys.COMPACTION_BYTES_IN: done.bytes_in,
        keys.COMPACTION_BYTES_OUT: done.bytes_out,
        keys.COMPACTION_ROWS_IN: sum(b.rows_in for b in done.buckets),
        keys.COMPACTION_ROWS_OUT: sum(b.rows_out for b in done.buckets),
        keys.COMPACTION_LEVEL0_FILES_BEFORE: sum(b.level_files_before[0] for b in done.buckets),
        keys.COMPACTION_LEVEL0_FILES_AFTER: sum(b.level_files_after[0] for b in done.buckets),
        # The changelog the compaction wrote (changelog-producer full-compaction: compactions
        # into the max level, for the keys that changed there).
        keys.COMPACTION_CHANGELOG_ROWS: done.changelog_rows,
        keys.COMPACTION_CHANGELOG_FILES: sum(b.changelog_files for b in done.buckets),
        keys.COMPACTION_CONFLICTS: done.conflicts,
        keys.COMPACTION_DURATION_S: round(done.duration_s, 3),
        keys.COMPACTION_PEAK_RSS_MIB: done.peak_rss_mib,
        keys.COMPACTION_BUCKETS: buckets_table(done.buckets),
    }


def prepare_task(context: dg.OpExecutionContext, table: pc.Table, task: PartitionTask) -> PartitionCompaction:
    """Rewrite one task's buckets without committing (the run commits every task at its end)."""
    started = time.monotonic()
    reset_peak_rss()
    prepared = table.prepare_compaction(partitions=task.partition or None, buckets=task.buckets, full=task.full)
    context.log.info(f"{task.target.table} partition {task.partition!r} buckets {list(task.buckets)}: prepared "
                     f"{len(prepared.compactions)} bucket compaction(s), {prepared.files} new file(s), for the "
                     "run's commit")
    return PartitionCompaction(table=task.target.table, partition=task.partition, snapshot_id=None, conflicts=0,
                               skipped=False, buckets=prepared.reports, duration_s=time.monotonic() - started,
                               prepared=prepared.to_bytes() if not prepared.empty else None,
                               peak_rss_mib=peak_rss_mib(), task=task.index)


def complete(context: dg.OpExecutionContext, table: pc.Table, plan: CompactionPlan,
             done: list[PartitionCompaction]) -> list[PartitionCompaction]:
    """The results of every task the run planned, doing here the ones that have none.

    A re-execution from failure (Dagster's run retries, or "Re-execute from failure") runs the
    fanned-out steps that failed, not those its killed parent never started: their results are
    simply absent, and the run would end with those partitions left uncompacted.
    """
    have = {d.task for d in done}
    missing = [task for task in plan.tasks if task.index not in have]
    if not missing:
        return done
    context.log.warning(f"{table.name}: {len(missing)} planned step(s) have no result (a re-execution from failure "
                        "runs only the steps that failed, not those that never started): doing them here, "
                        f"partitions {sorted({t.partition for t in missing})}")
    return [*done, *((run_task if task.commit else prepare_task)(context, table, task) for task in missing)]


def commit_tasks(context: dg.OpExecutionContext, table: pc.Table, target: TableTarget,
                 done: list[PartitionCompaction]) -> list[PartitionCompaction]:
    """Commit every task's prepared compaction as one COMPACT snapshot, exactly once per root run.

    A conflict (another compaction or an overwrite replaced an input file) commits nothing and
    removes the prepared files; the next run plans again.
    """
    prepared = [d.prepared for d in done if d.prepared is not None]
    if not prepared:
        return [replace(d, prepared=None) for d in done]
    run = context.run
    started = time.monotonic()
    try:
        outcome = table.commit(prepared, commit_user=f"dagster-{run.root_run_id or run.run_id}-compaction",
                               commit_identifier=1)
    except CommitConflictError as error:
        context.log.warning(f"{table.name}: the run's compaction conflicted with a concurrent commit ({error}); "
                            "nothing was committed, nothing lost; left for the next compaction run")
        return [replace(d, prepared=None, skipped=d.prepared is not None, conflicts=d.conflicts + 1,
                        buckets=() if d.prepared is not None else d.buckets) for d in done]
    snapshot = outcome.compaction_snapshot
    context.log.info(f"{table.name}: committed {len(prepared)} task(s) as COMPACT snapshot {snapshot} in "
                     f"{time.monotonic() - started:.2f}s")
    return [replace(d, prepared=None, snapshot_id=snapshot if d.prepared is not None else None) for d in done]


def observation(target: TableTarget, after: pc.LsmState,
                compacted: Sequence[PartitionCompaction]) -> dg.AssetObservation | None:
    """One event on the table's asset for a run's committed compactions (None: it committed none):
    the table's LSM shape after them, their totals, and per bucket what each did. Not on the
    partitions: a partition's detail shows its writes, and an hourly compaction of many
    partitions stays one event."""
    done = [c for c in compacted if c.snapshot_id is not None]
    if not done:
        return None
    snapshots = sorted({c.snapshot_id for c in done if c.snapshot_id is not None})
    buckets = [(c.partition, b) for c in done for b in c.buckets]
    totals = {
        keys.COMPACTION_TABLE: target.table,
        keys.COMPACTION_PARTITIONS: ", ".join(sorted({c.partition or "-" for c in done})),
        keys.COMPACTION_SNAPSHOT_ID: ", ".join(map(str, snapshots)),
        keys.COMPACTION_BUCKETS_COMPACTED: len(buckets),
        keys.COMPACTION_FILES_IN: sum(c.files_in for c in done),
        keys.COMPACTION_FILES_OUT: sum(c.files_out for c in done),
        keys.COMPACTION_BYTES_IN: sum(c.bytes_in for c in done),
        keys.COMPACTION_BYTES_OUT: sum(c.bytes_out for c in done),
        keys.COMPACTION_LEVEL0_FILES_BEFORE: sum(b.level_files_before[0] for _, b in buckets),
        keys.COMPACTION_LEVEL0_FILES_AFTER: sum(b.level_files_after[0] for _, b in buckets),
        keys.COMPACTION_CHANGELOG_ROWS: sum(c.changelog_rows for c in done),
        keys.COMPACTION_CONFLICTS: sum(c.conflicts for c in compacted),
    }
    # The shape's numbers are all series (lsm_metadata); of the totals, the volumes are.
    metadata = {**lsm_metadata(after), keys.LSM_SNAPSHOT_ID: str(after.snapshot_id), **plottable(totals, PLOTTED),
                keys.COMPACTION_BUCKETS: buckets_table([b for _, b in buckets], [p for p, _ in buckets])}
    return dg.AssetObservation(
        asset_key=target.asset_key, metadata=metadata,
        description=(f"COMPACT snapshot(s) {totals[keys.COMPACTION_SNAPSHOT_ID]} of "
                     f"{totals[keys.COMPACTION_PARTITIONS]}: {totals[keys.COMPACTION_FILES_IN]} files -> "
                     f"{totals[keys.COMPACTION_FILES_OUT]}; worst level 0 now {after.max_level0_files}"))


def run_task(context: dg.OpExecutionContext, table: pc.Table, task: PartitionTask) -> PartitionCompaction:
    """Compact one partition's buckets and log what happened (the run observes the asset once)."""
    started = time.monotonic()
    reset_peak_rss()
    result, conflicts = compact_task(table, task, commit_user=f"dagster-{context.run_id}")
    done = PartitionCompaction(
        table=task.target.table, partition=task.partition,
        snapshot_id=result.snapshot_id if result is not None else None, conflicts=conflicts,
        skipped=result is None, buckets=result.buckets if result is not None else (),
        duration_s=time.monotonic() - started, peak_rss_mib=peak_rss_mib(), task=task.index)
    if result is None:
        context.log.warning(f"{task.target.table} partition {task.partition!r}: every attempt conflicted with a "
                            "concurrent commit; left for the next compaction run")
    elif result.snapshot_id is None:
        context.log.info(f"{task.target.table} partition {task.partition!r}: nothing to compact any more")
    else:
        context.log.info(f"{task.target.table} partition {task.partition!r}: snapshot {result.snapshot_id}, "
                         f"{done.files_in} files ({done.bytes_in:,} bytes) -> {done.files_out} files "
                         f"({done.bytes_out:,} bytes), level-0 files per bucket "
                         f"{[b.level_files_before[0] for b in done.buckets]} -> "
                         f"{[b.level_files_after[0] for b in done.buckets]}"
                         + (f", {done.changelog_rows:,} changelog rows" if done.changelog_rows else ""))
    return done



# ---- following ------------------------------------------------------------------------------


@dataclass
class FollowState:
    """Bookkeeping of a follow loop: which snapshots are ours and when others last committed."""

    last_seen: int
    last_activity: float
    own: set[int]

    def observe(self, snapshot_id: int | None, now: float) -> None:
        """Note the latest snapshot; a snapshot since the last one that is not ours is activity."""
        if snapshot_id is None or snapshot_id <= self.last_seen:
            return
        if set(range(self.last_seen + 1, snapshot_id + 1)) - self.own:
            self.last_activity = now
        self.last_seen = snapshot_id


def follow(context: dg.OpExecutionContext, table: pc.Table, plan: CompactionPlan,
           first_pass: list[int], *, poll_seconds: float = POLL_SECONDS
           ) -> tuple[dict[str, Any], list[PartitionCompaction]]:
    """Keep compacting what the picker asks for until the deadline or until writers go idle.

    Polls the selected partitions' shape (manifests only) every ``poll_seconds`` and compacts a
    bucket as soon as it needs work, so level 0 stays near the compaction trigger however fast
    the writers commit, as long as one compaction is faster than the commits it has to fold.
    """
    specs = list(plan.selected) or None
    started = time.monotonic()
    deadline = started + plan.follow_seconds
    latest = table.latest_snapshot()
    watch = FollowState(latest.id if latest is not None else 0, started, set(first_pass))
    done: list[PartitionCompaction] = []
    polls, max_level0 = 0, 0
    stop = "deadline"
    while (now := time.monotonic()) < deadline:
        state = table.lsm_state(partitions=specs)
        polls += 1
        watch.observe(state.snapshot_id, now)
        max_level0 = max(max_level0, state.max_level0_files)
        progressed = False
        for task in plan_tasks(state, plan.target, full=False, level0_threshold=plan.level0_threshold):
            compacted = run_task(context, table, task)
            done.append(compacted)
            if compacted.snapshot_id is not None:
                watch.own.add(compacted.snapshot_id)
                progressed = True
        if progressed:
            continue  # look again at once: the writers did not wait
        if now - watch.last_activity >= plan.idle_seconds:
            stop = "idle"
            break
        time.sleep(poll_seconds)
    snapshots = [c.snapshot_id for c in done if c.snapshot_id is not None]
    summary = {"followed_s": round(time.monotonic() - started, 1), "stopped_by": stop, "polls": polls,
               "compactions": len(snapshots), "max_level0_files_seen": max_level0,
               "files_in": sum(c.files_in for c in done), "files_out": sum(c.files_out for c in done),
               "bytes_in": sum(c.bytes_in for c in done), "bytes_out": sum(c.bytes_out for c in done),
               "conflicts": sum(c.conflicts for c in done)}
    context.log.info(f"{plan.target.table}: followed for {summary['followed_s']}s (stopped by {stop}), "
                     f"{len(snapshots)} compaction(s), at most {max_level0} level-0 file(s) per bucket seen")
    return summary, done

