"""The dedicated compaction jobs of the write-only Paimon tables.

``paimon_compaction_job`` and ``paimon_full_compaction_job`` (what the sensors launch) share one
shape: ``plan`` reads the table's LSM shape from its manifests and fans out one
``compact_partition`` step per partition that needs work, each commits one COMPACT snapshot of
that partition's buckets, and ``report_compaction`` sums them up, logs the table's shape after
and records the LSM checks' verdicts on the table's asset. With ``follow_seconds`` the minor job
then keeps watching the partitions and compacts each bucket as soon as the picker has work for
it (``follow_compaction``), for writers that commit faster than a run can be launched. A full
compaction of a table with ``changelog-producer = full-compaction`` also writes the changelog
of the keys it changed into its COMPACT snapshots; the steps report its rows.

Compaction commits only replace files, so it runs next to ingestion (the engine lands APPENDs
and COMPACTs of one table side by side). Two compactions of one table would conflict, so their
runs carry ``paimon/compaction=<db.table>``, which ``dagster_home/dagster.yaml`` limits to one
run at a time; a conflict that still happens (a run launched without the tag, or a partition
overwritten meanwhile) raises ``CommitConflictError`` with nothing lost: the step re-plans once
from the new snapshot and otherwise leaves the partition to the next run.
"""

# No `from __future__ import annotations`: Dagster reads the context, config and resource
# annotations of decorated functions as real types when the decorator runs.

import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import dagster as dg
from pydantic import Field

import paimon_core as pc
from paimon_core.errors import CommitConflictError
from pipelines.lsm import COMPACTION_TAG, check_outcomes, lsm_metadata, partition_spec, state_metadata
from pipelines.target import TableTarget, TargetConfig, existing_table, resolve_target
from resources import PaimonCatalogResource
from resources.metadata import plottable

log = logging.getLogger(__name__)

COMPACTION_JOB = "paimon_compaction_job"
# What a compaction observation charts in the asset's Plots (besides the LSM shape after it).
PLOTTED = frozenset({"paimon/compaction/files_in", "paimon/compaction/files_out", "paimon/compaction/bytes_out",
                     "paimon/compaction/changelog_rows"})
FULL_COMPACTION_JOB = "paimon_full_compaction_job"
# Attempts of one partition's compaction when a concurrent commit replaced its input files.
CONFLICT_ATTEMPTS = 2
# How often a following run looks at the table's shape (a few manifest reads each time).
POLL_SECONDS = 0.5


class CompactionTarget(TargetConfig):
    """Which table (and which of its partitions) to compact."""

    partitions: list[str] = Field(
        default=[],
        description="Partitions to compact, as paths like 'dt=2024-01-01' (what `paimon lsm` and the "
        "levels metadata show; several keys as 'a=1/b=x'). Empty: every partition.",
    )


class CompactionConfig(CompactionTarget):
    """A minor compaction: what Paimon's picker asks for in each bucket, and nothing more."""

    full: bool = Field(default=False, description="Rewrite every selected bucket into one sorted run at "
                       "the max level (append tables: every small file), as paimon_full_compaction_job does.")
    level0_threshold: int = Field(
        default=0, ge=0,
        description="Only compact buckets with at least this many level-0 files. 0: every bucket the "
        "picker has work for (the sensors leave it at 0 and choose the partitions instead).",
    )
    follow_seconds: int = Field(
        default=0, ge=0,
        description="After the first pass, keep watching the partitions for up to this many seconds and "
        "compact each bucket as soon as the picker has work for it, as a streaming compaction job "
        "does; for ingestion that commits faster than a run can be launched. 0: one pass.",
    )
    idle_seconds: int = Field(
        default=10, ge=1,
        description="When following, stop early once no other writer committed for this long.",
    )


class FullCompactionConfig(CompactionTarget):
    """A full compaction: every selected bucket rewritten into one run at the max level."""


@dataclass(frozen=True, slots=True)
class PartitionTask:
    """One partition's buckets to compact (a step of the fan-out)."""

    target: TableTarget
    partition: str  # the path, "" for an unpartitioned table
    buckets: tuple[int, ...]
    full: bool
    level0_files: tuple[int, ...]  # per bucket, when planned


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


# ---- planning -------------------------------------------------------------------------------


def needs_work(bucket: pc.BucketState, *, full: bool, level0_threshold: int) -> bool:
    """Whether a bucket is worth a compaction step.

    Minor: the picker has work for it (``pending``) and it reached ``level0_threshold``. Full:
    anything but a bucket that already is one file (one run at the max level, or one append file).
    """
    if full:
        return bucket.files > 1 or (bucket.level0_files > 0 and len(bucket.level_files) > 1)
    return bucket.pending is not None and bucket.level0_files >= level0_threshold


def plan_tasks(state: pc.LsmState, target: TableTarget, *, full: bool,
               level0_threshold: int = 0) -> list[PartitionTask]:
    """One task per partition with buckets needing work, partitions and buckets in order."""
    by_partition: dict[str, list[pc.BucketState]] = {}
    for bucket in state.buckets:
        if needs_work(bucket, full=full, level0_threshold=level0_threshold):
            by_partition.setdefault(bucket.partition, []).append(bucket)
    return [PartitionTask(target, partition, tuple(b.bucket for b in buckets), full,
                          tuple(b.level0_files for b in buckets))
            for partition, buckets in sorted(by_partition.items())]


def mapping_key(index: int, partition: str) -> str:
    """A DynamicOutput key (letters, digits, underscores) that still reads like the partition."""
    return f"p{index}_{re.sub(r'[^A-Za-z0-9]+', '_', partition).strip('_')}"[:100]


def check_compaction_tag(context: dg.OpExecutionContext, table: str) -> None:
    """Warn when the run escapes the one-compaction-per-table limit (e.g. a bare launchpad run)."""
    if context.run.tags.get(COMPACTION_TAG) != table:
        context.log.warning(f"run has no tag {COMPACTION_TAG}={table}, so the one-compaction-per-table "
                            "limit does not apply; a concurrent compaction of the same buckets would "
                            "conflict (safely: the loser commits nothing)")


def plan(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource, target: CompactionTarget, *,
         full: bool, level0_threshold: int, follow_seconds: int = 0,
         idle_seconds: int = 10) -> Iterator[dg.Output | dg.DynamicOutput]:
    check_compaction_tag(context, target.table)
    resolved = resolve_target(context, target)
    table = existing_table(paimon_catalog, target.table)
    state = table.lsm_state(partitions=list(target.partitions) or None)
    tasks = plan_tasks(state, resolved, full=full, level0_threshold=level0_threshold)
    kind = "full" if full else "minor"
    context.log.info(f"{target.table} snapshot {state.snapshot_id}: {len(state.buckets)} bucket(s), max "
                     f"{state.max_level0_files} level-0 file(s), {state.debt_bytes:,} debt bytes; {kind} "
                     f"compaction of {sum(len(t.buckets) for t in tasks)} bucket(s) in {len(tasks)} partition(s)")
    yield dg.Output(CompactionPlan(resolved, full, state.snapshot_id, state.max_level0_files,
                                   state.debt_bytes, len(tasks), tuple(target.partitions), level0_threshold,
                                   follow_seconds, idle_seconds),
                    output_name="plan", metadata=state_metadata(state))
    for index, task in enumerate(tasks):
        yield dg.DynamicOutput(task, mapping_key=mapping_key(index, task.partition), output_name="tasks")


PLAN_OUTS = {
    "plan": dg.Out(CompactionPlan, description="The table's shape when the run planned."),
    "tasks": dg.DynamicOut(PartitionTask, description="One partition's buckets to compact."),
}


@dg.op(out=PLAN_OUTS, tags={"paimon/operation": "plan-compaction"})
def plan_compaction(context: dg.OpExecutionContext, config: CompactionConfig,
                    paimon_catalog: PaimonCatalogResource) -> Iterator[dg.Output | dg.DynamicOutput]:
    """Read the table's LSM shape (manifests only) and fan out the partitions needing compaction."""
    yield from plan(context, paimon_catalog, config, full=config.full, level0_threshold=config.level0_threshold,
                    follow_seconds=0 if config.full else config.follow_seconds, idle_seconds=config.idle_seconds)


@dg.op(out=PLAN_OUTS, tags={"paimon/operation": "plan-compaction"})
def plan_full_compaction(context: dg.OpExecutionContext, config: FullCompactionConfig,
                         paimon_catalog: PaimonCatalogResource) -> Iterator[dg.Output | dg.DynamicOutput]:
    """Fan out every partition whose buckets are not yet one file each, for a full compaction."""
    yield from plan(context, paimon_catalog, config, full=True, level0_threshold=0)


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
                                 commit_user=commit_user), conflicts
        except CommitConflictError as error:
            conflicts += 1
            log.warning("compaction of %s partition %r conflicted with a concurrent commit (%s); nothing "
                        "was lost", table.name, task.partition, error)
    return None, conflicts


def buckets_table(buckets: tuple[pc.BucketCompaction, ...]) -> dg.MetadataValue:
    columns = [("bucket", "int"), ("reason", "string"), ("output level", "int"), ("files in", "int"),
               ("files out", "int"), ("files moved up", "int"), ("bytes in", "int"), ("bytes out", "int"),
               ("changelog rows", "int"), ("files per level before", "string"), ("files per level after", "string")]
    records = [dg.TableRecord({
        "bucket": b.bucket, "reason": b.reason, "output level": b.output_level, "files in": b.files_in,
        "files out": b.files_out, "files moved up": b.files_upgraded, "bytes in": b.bytes_in,
        "bytes out": b.bytes_out, "changelog rows": b.changelog_rows,
        "files per level before": "/".join(map(str, b.level_files_before)),
        "files per level after": "/".join(map(str, b.level_files_after))}) for b in buckets]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(
        columns=[dg.TableColumn(name, kind) for name, kind in columns]))


def compaction_metadata(done: PartitionCompaction) -> dict[str, Any]:
    return {
        "paimon/compaction/table": done.table,
        "paimon/compaction/partition": done.partition or "-",
        "paimon/compaction/snapshot_id": str(done.snapshot_id) if done.snapshot_id is not None else "-",
        "paimon/compaction/buckets_compacted": len(done.buckets),
        "paimon/compaction/files_in": done.files_in,
        "paimon/compaction/files_out": done.files_out,
        "paimon/compaction/bytes_in": done.bytes_in,
        "paimon/compaction/bytes_out": done.bytes_out,
        "paimon/compaction/rows_in": sum(b.rows_in for b in done.buckets),
        "paimon/compaction/rows_out": sum(b.rows_out for b in done.buckets),
        "paimon/compaction/level0_files_before": sum(b.level_files_before[0] for b in done.buckets),
        "paimon/compaction/level0_files_after": sum(b.level_files_after[0] for b in done.buckets),
        # The changelog the compaction wrote (changelog-producer full-compaction: compactions
        # into the max level, for the keys that changed there).
        "paimon/compaction/changelog_rows": done.changelog_rows,
        "paimon/compaction/changelog_files": sum(b.changelog_files for b in done.buckets),
        "paimon/compaction/conflicts": done.conflicts,
        "paimon/compaction/duration_s": round(done.duration_s, 3),
        "paimon/compaction/buckets": buckets_table(done.buckets),
    }


def run_task(context: dg.OpExecutionContext, table: pc.Table, task: PartitionTask) -> PartitionCompaction:
    """Compact one partition's buckets, log what happened and observe the table's asset."""
    started = time.monotonic()
    result, conflicts = compact_task(table, task, commit_user=f"dagster-{context.run_id}")
    done = PartitionCompaction(
        table=task.target.table, partition=task.partition,
        snapshot_id=result.snapshot_id if result is not None else None, conflicts=conflicts,
        skipped=result is None, buckets=result.buckets if result is not None else (),
        duration_s=time.monotonic() - started)
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
    target = task.target
    if done.snapshot_id is not None:
        context.log_event(dg.AssetObservation(
            asset_key=target.asset_key, metadata=plottable(compaction_metadata(done), PLOTTED),
            partition=target.partition_key(partition_spec(table, task.partition)),
            description=f"COMPACT snapshot {done.snapshot_id} of partition {task.partition or '-'}"))
    return done


@dg.op(tags={"paimon/operation": "compact"})
def compact_partition(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource,
                      task: PartitionTask) -> dg.Output[PartitionCompaction]:
    """Compact one partition's buckets as one COMPACT snapshot and observe the table's asset."""
    done = run_task(context, paimon_catalog.table(task.target.table), task)
    return dg.Output(done, metadata=compaction_metadata(done))


# ---- report ---------------------------------------------------------------------------------


def record_checks(context: dg.OpExecutionContext, target: TableTarget, table: pc.Table, state: pc.LsmState) -> None:
    """Record the table's LSM checks on its asset, as of ``state`` (after compacting).

    ``log_event`` takes check evaluations at run time (and records them like a check step
    would) though its annotation lists only materializations, observations and expectations.
    """
    for outcome in check_outcomes(table, state):
        context.log_event(cast(Any, outcome.evaluation(target.asset_key)))


@dg.op(tags={"paimon/operation": "report-compaction"})
def report_compaction(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource, plan: CompactionPlan,
                      compacted: list[PartitionCompaction]) -> dg.Output[dict[str, Any]]:
    """Sum the partitions up, read the table's shape after, and record the LSM checks on its asset."""
    table = paimon_catalog.table(plan.target.table)
    after = table.lsm_state()
    record_checks(context, plan.target, table, after)
    snapshots = [c.snapshot_id for c in compacted if c.snapshot_id is not None]
    summary: dict[str, Any] = {
        "table": plan.target.table,
        "full": plan.full,
        "partitions_planned": plan.partitions,
        "partitions_compacted": len(snapshots),
        "partitions_skipped": sum(1 for c in compacted if c.skipped),
        "conflicts": sum(c.conflicts for c in compacted),
        "snapshots": snapshots,
        "files_in": sum(c.files_in for c in compacted),
        "files_out": sum(c.files_out for c in compacted),
        "bytes_in": sum(c.bytes_in for c in compacted),
        "bytes_out": sum(c.bytes_out for c in compacted),
        "changelog_rows": sum(c.changelog_rows for c in compacted),
        "changelog_files": sum(b.changelog_files for c in compacted for b in c.buckets),
        "max_level0_files_before": plan.max_level0_files,
        "max_level0_files_after": after.max_level0_files,
        "debt_bytes_before": plan.debt_bytes,
        "debt_bytes_after": after.debt_bytes,
    }
    context.log.info(f"{plan.target.table}: {summary['partitions_compacted']} partition(s) compacted in snapshots "
                     f"{snapshots}, {summary['files_in']} files ({summary['bytes_in']:,} bytes) -> "
                     f"{summary['files_out']} files ({summary['bytes_out']:,} bytes), {summary['changelog_rows']:,} "
                     f"changelog rows; max level-0 files {plan.max_level0_files} -> {after.max_level0_files}")
    metadata: dict[str, Any] = {key: value for key, value in summary.items() if key != "snapshots"}
    metadata["snapshots"] = ", ".join(map(str, snapshots)) or "-"
    metadata["levels_after"] = state_metadata(after)["levels"]
    if snapshots:
        context.log_event(dg.AssetObservation(
            asset_key=plan.target.asset_key, metadata={**lsm_metadata(after), "paimon/lsm/snapshot_id": str(
                after.snapshot_id)}, description=f"LSM shape after compaction snapshot(s) {metadata['snapshots']}"))
    return dg.Output(summary, metadata=metadata)


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
           first_pass: list[int], *, poll_seconds: float = POLL_SECONDS) -> dict[str, Any]:
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
    return summary


@dg.op(tags={"paimon/operation": "follow-compaction"})
def follow_compaction(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource, plan: CompactionPlan,
                      report: dict[str, Any]) -> dg.Output[dict[str, Any]]:
    """With ``follow_seconds``, keep compacting as writers commit (else return at once)."""
    if plan.follow_seconds <= 0:
        return dg.Output({"followed_s": 0}, metadata={"followed_s": 0})
    table = paimon_catalog.table(plan.target.table)
    summary = follow(context, table, plan, list(report.get("snapshots", [])))
    after = table.lsm_state()
    record_checks(context, plan.target, table, after)
    return dg.Output(summary, metadata={**summary, "max_level0_files_after": after.max_level0_files})


# ---- jobs -----------------------------------------------------------------------------------

# In-process: a compaction is a few manifest reads and rewrites on threads; a process per step
# would cost more than most compactions. Steps run one partition after the other, each
# committing its own snapshot, so progress survives a failure half way.
JOB_TAGS = {"paimon/operation": "compact"}


@dg.job(name=COMPACTION_JOB, executor_def=dg.in_process_executor, tags=JOB_TAGS,
        description="Minor compaction of one Paimon table: in every partition that needs it, what "
        "Paimon's picker asks for (level 0 folded into the levels). Launched by the compaction "
        "sensors with paimon/compaction=<db.table>; launch it by hand with that tag too.")
def paimon_compaction_job() -> None:
    plan_out, tasks = plan_compaction()
    follow_compaction(plan_out, report_compaction(plan_out, tasks.map(compact_partition).collect()))


@dg.job(name=FULL_COMPACTION_JOB, executor_def=dg.in_process_executor, tags=JOB_TAGS,
        description="Full compaction of one Paimon table (or some partitions): every bucket rewritten "
        "into one sorted run at the max level, superseded versions and deletes dropped. Tag runs "
        "with paimon/compaction=<db.table>.")
def paimon_full_compaction_job() -> None:
    plan_out, tasks = plan_full_compaction()
    report_compaction(plan_out, tasks.map(compact_partition).collect())


def compaction_run_config(target: TableTarget, *, partitions: list[str] | None = None, full: bool = False,
                          level0_threshold: int = 0, follow_seconds: int = 0) -> dict[str, Any]:
    """Run config of ``paimon_compaction_job`` (what the sensors request)."""
    config = {**target.config(), "partitions": list(partitions or []), "full": full,
              "level0_threshold": level0_threshold, "follow_seconds": follow_seconds}
    return {"ops": {"plan_compaction": {"config": config}}}


def full_compaction_run_config(target: TableTarget, *, partitions: list[str] | None = None) -> dict[str, Any]:
    """Run config of ``paimon_full_compaction_job``."""
    config = {**target.config(), "partitions": list(partitions or [])}
    return {"ops": {"plan_full_compaction": {"config": config}}}


def compaction_tags(table: str) -> dict[str, str]:
    return {COMPACTION_TAG: table}
