"""The dedicated compaction jobs of the write-only Paimon tables: two per table.

``compact_<db>_<table>_job`` and ``full_compact_<db>_<table>_job`` (what the table's sensor
launches; the launchpad opens them with the table's config) share one shape: ``plan`` reads the
table's LSM shape from its manifests and fans out one ``compact_partition`` step per partition
that needs work, each commits one COMPACT snapshot of that partition's buckets, and
``report_compaction`` sums them up, logs the table's shape after and records the LSM checks'
verdicts on the table's asset. With ``follow_seconds`` the minor job then keeps watching the
partitions and compacts each bucket as soon as the picker has work for it
(``follow_compaction``), for writers that commit faster than a run can be launched. A full
compaction of a table with ``changelog-producer = full-compaction`` also writes the changelog of
the keys it changed into its COMPACT snapshots; the steps report its rows.

Compaction commits only replace files, so it runs next to ingestion (the engine lands APPENDs
and COMPACTs of one table side by side). Two compactions of one table would conflict, so the
jobs carry ``paimon/compaction=<db.table>`` as a job tag, which every run of theirs inherits
however it was launched and which ``dagster_home/dagster.yaml`` limits to one run at a time; a
conflict that still happens (a partition overwritten meanwhile) raises ``CommitConflictError``
with nothing lost: the step re-plans once from the new snapshot and otherwise leaves the
partition to the next run.
"""

# No `from __future__ import annotations`: Dagster reads the context, config and resource
# annotations of decorated functions as real types when the decorator runs.

import logging
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, cast

import dagster as dg
from pydantic import Field

import paimon_core as pc
from pipelines import names
from pipelines.compaction.lsm import check_outcomes, state_metadata
from pipelines.compaction.tasks import (
    CompactionPlan,
    PartitionCompaction,
    PartitionTask,
    commit_tasks,
    compaction_metadata,
    complete,
    follow,
    mapping_key,
    observation,
    plan_tasks,
    prepare_task,
    run_task,
)
from pipelines.instance_limits import warn_about_gaps
from pipelines.runtime_bounds import COMPACTION_DEFAULT_S, bound_tags
from pipelines.target import TableTarget, TargetConfig, existing_table, job_metadata, resolve_target
from pipelines.watchdog import slot_holder
from resources import PaimonCatalogResource, keys
from resources.keys import COMPACTION_TAG

log = logging.getLogger(__name__)



class CompactionTarget(TargetConfig):
    """Which table (and which of its partitions) to compact."""

    partitions: list[str] = Field(
        default=[],
        description="Partitions to compact, as paths like 'dt=2024-01-01' (what `paimon lsm` and the "
        "levels metadata show; several keys as 'a=1/b=x'). Empty: every partition.",
    )
    buckets_per_step: int = Field(
        default=0, ge=0,
        description="Buckets of a partition per compaction step: the run fans out one step per that many "
        "buckets, which the job's executor runs in parallel (multiprocess, Dask, k8s). 0: one step per "
        "partition.",
    )
    commit_once: bool = Field(
        default=False,
        description="Commit every step's compaction as one COMPACT snapshot at the end of the run (readers see "
        "all of it at once). False: each step commits its own, so progress survives a failed step.",
    )


class CompactionConfig(CompactionTarget):
    """A minor compaction: what Paimon's picker asks for in each bucket, and nothing more."""

    full: bool = Field(default=False, description="Rewrite every selected bucket into one sorted run at "
                       "the max level (append tables: every small file), as the table's full compaction job does.")
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


def plan(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource, target: CompactionTarget, *,
         full: bool, level0_threshold: int, follow_seconds: int = 0,
         idle_seconds: int = 10) -> Iterator[dg.Output | dg.DynamicOutput]:
    resolved = resolve_target(context, target)
    warn_about_gaps(context)
    table = existing_table(paimon_catalog, resolved.table)
    state = table.lsm_state(partitions=list(target.partitions) or None)
    # a hand launch naming only the table fans out as the table declares
    per_step = target.buckets_per_step or resolved.buckets_per_step
    once = target.commit_once or resolved.commit_once
    tasks = plan_tasks(state, resolved, full=full, level0_threshold=level0_threshold,
                       buckets_per_step=per_step, commit=not once)
    kind = "full" if full else "minor"
    partitions = len({t.partition for t in tasks})
    context.log.info(f"{resolved.table} snapshot {state.snapshot_id}: {len(state.buckets)} bucket(s), max "
                     f"{state.max_level0_files} level-0 file(s), {state.debt_bytes:,} debt bytes; {kind} "
                     f"compaction of {sum(len(t.buckets) for t in tasks)} bucket(s) in {partitions} partition(s), "
                     f"{len(tasks)} step(s), " + ("one commit at the end" if once else "a commit per step"))
    yield dg.Output(CompactionPlan(resolved, full, state.snapshot_id, state.max_level0_files,
                                   state.debt_bytes, partitions, tuple(target.partitions), level0_threshold,
                                   follow_seconds, idle_seconds, once, tuple(tasks)),
                    output_name="plan", metadata=state_metadata(state))
    for index, task in enumerate(tasks):
        where = task.partition if per_step == 0 else f"{task.partition} b{task.buckets[0]}"
        yield dg.DynamicOutput(task, mapping_key=mapping_key(index, where), output_name="tasks")


PLAN_OUTS = {
    "plan": dg.Out(CompactionPlan, description="The table's shape when the run planned."),
    "tasks": dg.DynamicOut(PartitionTask, description="One partition's buckets to compact."),
}


@dg.op(out=PLAN_OUTS, tags={keys.OPERATION_TAG: "plan-compaction"})
def plan_compaction(context: dg.OpExecutionContext, config: CompactionConfig,
                    paimon_catalog: PaimonCatalogResource) -> Iterator[dg.Output | dg.DynamicOutput]:
    """Read the table's LSM shape (manifests only) and fan out the partitions needing compaction."""
    yield from plan(context, paimon_catalog, config, full=config.full, level0_threshold=config.level0_threshold,
                    follow_seconds=0 if config.full else config.follow_seconds, idle_seconds=config.idle_seconds)


@dg.op(out=PLAN_OUTS, tags={keys.OPERATION_TAG: "plan-compaction"})
def plan_full_compaction(context: dg.OpExecutionContext, config: FullCompactionConfig,
                         paimon_catalog: PaimonCatalogResource) -> Iterator[dg.Output | dg.DynamicOutput]:
    """Fan out every partition whose buckets are not yet one file each, for a full compaction."""
    yield from plan(context, paimon_catalog, config, full=True, level0_threshold=0)


@dg.op(tags={keys.OPERATION_TAG: "compact"})
def compact_partition(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource,
                      task: PartitionTask) -> dg.Output[PartitionCompaction]:
    """Compact one task's buckets: commit them as a COMPACT snapshot and observe the table's asset,
    or (the run commits once) only write their files and hand the messages on."""
    table = paimon_catalog.table(task.target.table)
    done = run_task(context, table, task) if task.commit else prepare_task(context, table, task)
    return dg.Output(done, metadata=compaction_metadata(done))


@dg.op(tags={keys.OPERATION_TAG: "commit-compaction"})
def commit_compaction(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource, plan: CompactionPlan,
                      compacted: list[PartitionCompaction]) -> list[PartitionCompaction]:
    """With ``commit_once``, commit every step's prepared compaction as one COMPACT snapshot (exactly
    once per root run); otherwise the steps committed already and this passes their results on.
    Planned steps without a result (see ``complete``) are done here first."""
    table = paimon_catalog.table(plan.target.table)
    compacted = complete(context, table, plan, compacted)
    if not plan.commit_once:
        return compacted
    return commit_tasks(context, table, plan.target, compacted)


# ---- report ---------------------------------------------------------------------------------


def record_checks(context: dg.OpExecutionContext, target: TableTarget, table: pc.Table, state: pc.LsmState) -> None:
    """Record the table's LSM checks on its asset, as of ``state`` (after compacting).

    ``log_event`` takes check evaluations at run time (and records them like a check step
    would) though its annotation lists only materializations, observations and expectations.
    """
    for outcome in check_outcomes(table, target, state, holder=slot_holder(context.instance, target.table,
                                                                          exclude=context.run_id)):
        context.log_event(cast(Any, outcome.evaluation(target.asset_key)))


@dg.op(tags={keys.OPERATION_TAG: "report-compaction"})
def report_compaction(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource, plan: CompactionPlan,
                      compacted: list[PartitionCompaction]) -> dg.Output[dict[str, Any]]:
    """Sum the partitions up, read the table's shape after, and record the LSM checks on its asset."""
    table = paimon_catalog.table(plan.target.table)
    after = table.lsm_state()
    record_checks(context, plan.target, table, after)
    snapshots = sorted({c.snapshot_id for c in compacted if c.snapshot_id is not None})
    summary: dict[str, Any] = {
        "table": plan.target.table,
        "full": plan.full,
        "partitions_planned": plan.partitions,
        "partitions_compacted": len({c.partition for c in compacted if c.snapshot_id is not None}),
        "steps": len(compacted),
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
    observed = observation(plan.target, after, compacted)
    if observed is not None:
        context.log_event(observed)
    return dg.Output(summary, metadata=metadata)



@dg.op(tags={keys.OPERATION_TAG: "follow-compaction"})
def follow_compaction(context: dg.OpExecutionContext, paimon_catalog: PaimonCatalogResource, plan: CompactionPlan,
                      report: dict[str, Any]) -> dg.Output[dict[str, Any]]:
    """With ``follow_seconds``, keep compacting as writers commit (else return at once)."""
    if plan.follow_seconds <= 0:
        return dg.Output({"followed_s": 0}, metadata={"followed_s": 0})
    table = paimon_catalog.table(plan.target.table)
    summary, compacted = follow(context, table, plan, list(report.get("snapshots", [])))
    after = table.lsm_state()
    observed = observation(plan.target, after, compacted)
    if observed is not None:
        context.log_event(observed)
    record_checks(context, plan.target, table, after)
    return dg.Output(summary, metadata={**summary, "max_level0_files_after": after.max_level0_files})


# ---- jobs -----------------------------------------------------------------------------------

# The executor is the code location's (``paimon_definitions(executor=...)``, in-process by
# default: a compaction of a few buckets is cheaper on threads than a process per step). With
# ``buckets_per_step`` the steps fan out over a multiprocess, Dask or k8s executor's workers.


@dg.graph(description="Minor compaction of a Paimon table: in every partition that needs it, what Paimon's "
          "picker asks for (level 0 folded into the levels).")
def minor_compaction() -> None:
    plan_out, tasks = plan_compaction()
    compacted = commit_compaction(plan_out, tasks.map(compact_partition).collect())
    follow_compaction(plan_out, report_compaction(plan_out, compacted))


@dg.graph(description="Full compaction of a Paimon table (or some partitions): every bucket rewritten into one "
          "sorted run at the max level, superseded versions and deletes dropped.")
def full_compaction() -> None:
    plan_out, tasks = plan_full_compaction()
    report_compaction(plan_out, commit_compaction(plan_out, tasks.map(compact_partition).collect()))


def compaction_jobs(target: TableTarget, resources: Mapping[str, Any] = MappingProxyType({})
                    ) -> tuple[dg.JobDefinition, dg.JobDefinition]:
    """The table's minor and full compaction jobs: the table in their metadata, so the launchpad
    opens with only what a person chooses (which partitions, a full rewrite), and its compaction
    tag on every run, whoever launches it. ``resources``: those the
    jobs carry themselves (see :func:`pipelines.target.job_resources`)."""
    # The job's name says what it does; its tags are the per-table limit every run carries and
    # the default bound of a run launched without the sensor's (which sizes it to the work).
    tags = {**compaction_tags(target.table), **bound_tags(COMPACTION_DEFAULT_S)}
    minor = minor_compaction.to_job(
        name=names.compaction_job(target.table), tags=tags, metadata=job_metadata(target),
        config={"ops": {"plan_compaction": {"config": {"partitions": [], "full": False}}}},
        resource_defs=dict(resources) or None,
        description=f"Minor compaction of {target.table}: what Paimon's picker asks for in every partition that "
        f"needs it. Launched by {names.compaction_sensor(target.table)}; one compaction of the table at a time.")
    full = full_compaction.to_job(
        name=names.full_compaction_job(target.table), tags=tags, metadata=job_metadata(target),
        config={"ops": {"plan_full_compaction": {"config": {"partitions": []}}}},
        resource_defs=dict(resources) or None,
        description=f"Full compaction of {target.table}: every bucket rewritten into one sorted run at the max "
        "level (and, with changelog-producer full-compaction, the changelog of the keys that changed).")
    return minor, full


def compaction_run_config(target: TableTarget, *, partitions: list[str] | None = None, full: bool = False,
                          level0_threshold: int = 0, follow_seconds: int = 0) -> dict[str, Any]:
    """Run config of the table's minor compaction job (what its sensor requests)."""
    config = {**target.config(), **target.fan_out(), "partitions": list(partitions or []), "full": full,
              "level0_threshold": level0_threshold, "follow_seconds": follow_seconds}
    return {"ops": {"plan_compaction": {"config": config}}}


def full_compaction_run_config(target: TableTarget, *, partitions: list[str] | None = None) -> dict[str, Any]:
    """Run config of the table's full compaction job."""
    config = {**target.config(), **target.fan_out(), "partitions": list(partitions or [])}
    return {"ops": {"plan_full_compaction": {"config": config}}}


def compaction_tags(table: str) -> dict[str, str]:
    return {COMPACTION_TAG: table}
