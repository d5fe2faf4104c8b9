"""Compaction sensors: one per table whose spec asks for one, launching the compaction jobs.

A tick reads the table's LSM shape from its manifests (a few small files, never data) and asks
for a run when a bucket's level 0 reached the threshold (default: the table's own compaction
trigger), naming the partitions that did. Primary-key tables with scheduled full compactions
(``full-compaction.delta-commits``, or ``changelog-producer = full-compaction``, whose changelog
is written by full compactions only) get the full compaction job instead when that many
data commits landed since the last full compaction, for every partition with files above the
max level; tables with the full-compaction producer also get it, not the minor job, when level 0
reaches the threshold, since only compactions into the max level produce their changes. The
run's tags say why (``paimon/trigger-reason``).

The cursor is the last snapshot evaluated, and the run key is ``<db.table>@<snapshot>``, so one
table state never launches two runs (of either job), even if the cursor is reset, unless that
run failed: then the state's run is requested again with backoff, a few times
(:mod:`pipelines.compaction.retries`), so compaction resumes without a new commit. While a
compaction run of the table (either job: both carry ``paimon/compaction=<db.table>``, which
allows one at a time) waits in the queue, ticks skip: that run plans when it starts, so it will
see the newer files anyway; so do ticks while a run follows the table (``follow_seconds``), as
it compacts new files as they come.

The sensors start RUNNING when the code location is first loaded (the daemon must run, as
under ``dagster dev``): they only read, and what they launch never changes what a reader sees.
Stop one in the UI (Automation) or with ``dagster sensor stop``; the state is kept.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import time
import warnings
from dataclasses import dataclass

import dagster as dg

import paimon_core as pc
from paimon_core.errors import DatabaseNotFoundError, TableNotFoundError
from pipelines import names
from pipelines.compaction.jobs import compaction_run_config, compaction_tags, full_compaction_run_config
from pipelines.compaction.lsm import level0_threshold
from pipelines.compaction.retries import RetryVerdict, failed_attempts, retry_key, retry_verdict
from pipelines.instance_limits import ensure_pools
from pipelines.runtime_bounds import bound_tags, compaction_bound_s
from pipelines.target import TableTarget, sensor_interval_seconds
from resources import PaimonCatalogResource
from resources.keys import (
    COMPACTION_TAG,
    FOLLOW_TAG,
    RETRY_TAG,
    TRIGGER_COMMITS_TAG,
    TRIGGER_LEVEL0_TAG,
    TRIGGER_REASON_TAG,
    TRIGGER_SNAPSHOT_TAG,
)

REASON_LEVEL0 = "level0"
REASON_FULL_DUE = "full-compaction-due"

# A sensor that may launch either compaction job names both job objects; Definitions rebinds
# them to its resources and, doing so, re-creates the sensor through an internal initializer
# that warns about its own (unset) beta parameter `owners` at every load of the code location.
# Only that message is silenced.
warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer `SensorDefinition\.__init__`",
                        category=dg.BetaWarning)
# The same happens to the asset checks when a defs folder's definitions are merged: Dagster
# re-creates each through an initializer that warns about its own `execution_type` parameter.
warnings.filterwarnings("ignore", message=r"Parameter `execution_type` of function `AssetsDefinition\.__init__`",
                        category=dg.BetaWarning)

# Runs that have not planned yet: they will see the newest files when they do.
WAITING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]


def run_key(table: str, snapshot_id: int) -> str:
    return f"{table}@{snapshot_id}"


def pending_compaction(instance: dg.DagsterInstance, table: str) -> str | None:
    """A compaction run of ``table`` that will fold new level-0 files without another run:
    one that has not started yet, or a following one that is running. Described, or None.

    Maintenance runs (expiry, orphan cleanup) carry the compaction tag too, for the run limit,
    but compact nothing: only runs of the table's compaction jobs count.
    """
    jobs = (names.compaction_job(table), names.full_compaction_job(table))
    runs = [run for run in instance.get_runs(filters=dg.RunsFilter(tags={COMPACTION_TAG: table}, statuses=WAITING),
                                             limit=10) if run.job_name in jobs]
    if runs:
        status = runs[0].status.value.lower().replace("_", " ")
        return f"compaction run {runs[0].run_id} is {status} and will see them"
    running = instance.get_runs(filters=dg.RunsFilter(tags={COMPACTION_TAG: table},
                                                      statuses=[dg.DagsterRunStatus.STARTED]), limit=5)
    following = [run for run in running if run.job_name in jobs and run.tags.get(FOLLOW_TAG, "0") != "0"]
    if following:
        return f"compaction run {following[0].run_id} is following the table"
    return None


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """What a tick asks for: a full or a minor compaction, of which partitions (paths), and why."""

    full: bool
    partitions: tuple[str, ...]
    reasons: tuple[str, ...]  # REASON_FULL_DUE and/or REASON_LEVEL0
    worst_level0: int  # the most level-0 files of one bucket among those partitions


def above_max_level(bucket: pc.BucketState) -> bool:
    """Whether a primary-key bucket holds files above its max level: rows a full compaction still
    has to fold (with the full-compaction producer, changes not yet in the changelog)."""
    return any(bucket.level_files[:-1])


def decide(state: pc.LsmState, *, threshold: int, primary_key: bool, changelog: bool) -> CompactionRequest | None:
    """The run a table's state calls for, or None (pure: the sensor's whole policy).

    A scheduled full compaction that is due (``state.full_compaction_due``) fully compacts every
    partition with a bucket above the max level; otherwise buckets whose level 0 reached
    ``threshold`` get a minor compaction of their partitions, or a full one when the table's
    changelog comes from full compactions (``changelog``).
    """
    over = state.over(threshold)
    if primary_key and state.full_compaction_due:
        unsettled = [b for b in state.buckets if above_max_level(b)]
        if unsettled:
            reasons = (REASON_FULL_DUE, REASON_LEVEL0) if over else (REASON_FULL_DUE,)
            return CompactionRequest(True, tuple(sorted({b.partition for b in unsettled})), reasons,
                                     max(b.level0_files for b in unsettled))
    if not over:
        return None
    return CompactionRequest(primary_key and changelog, tuple(sorted({b.partition for b in over})), (REASON_LEVEL0,),
                             max(b.level0_files for b in over))


def schedule_note(state: pc.LsmState) -> str:
    """``; 3/5 commits since the last full compaction`` for tables with scheduled full compactions."""
    if state.full_compaction_every is None:
        return ""
    return f"; {state.commits_since_full}/{state.full_compaction_every} commits since the last full compaction"


def evaluate(context: dg.SensorEvaluationContext, catalog: PaimonCatalogResource, spec: TableTarget, *,
             full_job: bool = False) -> dg.RunRequest | dg.SkipReason:
    """One tick of ``spec``'s sensor (see the module docstring); ``full_job``: level 0 reaching the
    threshold launches the full compaction job, not the minor one."""
    try:
        table = catalog.table(spec.table)
    except (DatabaseNotFoundError, TableNotFoundError):
        return dg.SkipReason(f"{spec.table} does not exist yet")
    state = table.lsm_state()
    if state.snapshot_id is None:
        return dg.SkipReason(f"{spec.table} has no snapshot yet")
    retry: RetryVerdict | None = None
    if context.cursor == str(state.snapshot_id):
        unchanged = (f"{spec.table} snapshot {state.snapshot_id}, unchanged since the last tick: at most "
                     f"{state.max_level0_files} level-0 file(s) per bucket, {state.debt_bytes:,} debt bytes")
        failed = failed_attempts(context.instance, spec.table, state.snapshot_id)
        if failed is None:
            return dg.SkipReason(unchanged)
        retry = retry_verdict(failed, now_s=time.time())
        if not retry.due:
            return dg.SkipReason(f"{unchanged}; {retry.message}")
    context.update_cursor(str(state.snapshot_id))
    threshold = level0_threshold(spec, table)
    request = decide(state, threshold=threshold, primary_key=bool(table.schema.primary_keys),
                     changelog=full_job or table.options.changelog_producer == "full-compaction")
    if request is None:
        return dg.SkipReason(f"{spec.table} snapshot {state.snapshot_id}: at most {state.max_level0_files} "
                             f"level-0 file(s) per bucket, below the threshold {threshold}{schedule_note(state)}")
    why = " and ".join(("a full compaction is due" if r == REASON_FULL_DUE else
                        f"level 0 reached {threshold} files (worst {request.worst_level0})") for r in request.reasons)
    if retry is not None:
        why = f"{why}; {retry.message}"
    pending = pending_compaction(context.instance, spec.table)
    if pending is not None:
        return dg.SkipReason(f"{spec.table} snapshot {state.snapshot_id}: {why}, but {pending}")
    full = request.full
    follow = 0 if full else spec.follow_seconds
    job_name = names.full_compaction_job(spec.table) if full else names.compaction_job(spec.table)
    context.log.info(f"{spec.table} snapshot {state.snapshot_id}: {why}{schedule_note(state)}; requesting "
                     f"{job_name} for {len(request.partitions)} partition(s)")
    # An unpartitioned table's partition is "": compact the whole table.
    partitions = [p for p in request.partitions if p]
    tags = {**compaction_tags(spec.table), TRIGGER_SNAPSHOT_TAG: str(state.snapshot_id),
            TRIGGER_LEVEL0_TAG: str(request.worst_level0), TRIGGER_REASON_TAG: ",".join(request.reasons)}
    if follow:  # only runs that follow the writers say so (the Runs list shows every tag)
        tags[FOLLOW_TAG] = str(follow)
    # Bounded by what it may rewrite: every file of the buckets of its partitions.
    rewrite = sum(b.total_bytes for b in state.buckets if b.partition in request.partitions)
    tags.update(bound_tags(compaction_bound_s(rewrite, follow_seconds=follow)))
    if state.full_compaction_every is not None:
        tags[TRIGGER_COMMITS_TAG] = f"{state.commits_since_full}/{state.full_compaction_every}"
    key = run_key(spec.table, state.snapshot_id)
    if retry is not None:
        key = retry_key(key, retry.attempt)
        tags[RETRY_TAG] = str(retry.attempt)
    return dg.RunRequest(
        run_key=key,
        job_name=job_name,
        run_config=(full_compaction_run_config(spec, partitions=partitions) if full else
                    compaction_run_config(spec, partitions=partitions, follow_seconds=follow)),
        tags=tags,
    )


def sensor_description(target: TableTarget, *, full_job: bool, full_every: int | None) -> str:
    """What a table's compaction sensor launches, and when (its page in the UI shows it)."""
    threshold = (f"{target.level0_threshold} files" if target.level0_threshold else
                 "the table's compaction trigger (num-sorted-run.compaction-trigger; append tables: "
                 "compaction.min.file-num)")
    full_name = names.full_compaction_job(target.table)
    level0_job = full_name if full_job else names.compaction_job(target.table)
    text = f"Launch {level0_job} when a bucket's level 0 reaches {threshold}"
    if full_every:
        text += f", and {full_name} every {full_every} data commits (full-compaction.delta-commits)"
    if full_job:
        text += " (its changelog comes from full compactions)"
    return text + "; reads manifests only."


def compaction_sensor(target: TableTarget, jobs: tuple[dg.JobDefinition, dg.JobDefinition], *,
                      interval_seconds: int | None = None, full_job: bool = False,
                      described_full: bool = False, full_every: int | None = None) -> dg.SensorDefinition:
    """The sensor of one write-only table, named ``compact_<db>_<table>_sensor``, launching its
    ``jobs`` (``compaction_jobs``: the minor one, the full one).

    ``full_job``: level 0 reaching the threshold launches full compactions whatever the table's
    options; tables whose changelog comes from full compactions get them anyway (read at each
    tick), which ``described_full`` and ``full_every`` tell in the sensor's description.
    """

    @dg.sensor(
        name=names.compaction_sensor(target.table),
        jobs=list(jobs),  # the table's own (minor, full), the same objects the definitions bind
        required_resource_keys={target.catalog_key},
        minimum_interval_seconds=sensor_interval_seconds(interval_seconds),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=sensor_description(target, full_job=full_job or described_full, full_every=full_every),
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        ensure_pools(context.instance, [names.pool(target.table)])
        return evaluate(context, target.catalog(context), target, full_job=full_job)

    return _sensor
