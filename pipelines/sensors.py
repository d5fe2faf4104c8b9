"""Compaction sensors: one per table of ``COMPACTED_TABLES``, launching ``paimon_compaction_job``.

A tick reads the table's LSM shape from its manifests (a few small files, never data) and asks
for a run when a bucket's level 0 reached the threshold (default: the table's own compaction
trigger), naming the partitions that did. The cursor is the last snapshot evaluated, and the
run key is ``<db.table>@<snapshot>``, so one table state never launches two runs, even if the
cursor is reset. While a compaction run of the table waits in the queue, ticks skip: that run
plans when it starts, so it will see the newer files anyway; so do ticks while a run follows
the table (``follow_seconds``), as it compacts new files as they come.

The sensors start RUNNING when the code location is first loaded (the daemon must run, as
under ``dagster dev``): they only read, and what they launch never changes what a reader sees.
Stop one in the UI (Automation) or with ``dagster sensor stop``; the state is kept.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import dagster as dg

from paimon_core.errors import DatabaseNotFoundError, TableNotFoundError
from pipelines.compaction import COMPACTION_JOB, compaction_run_config, compaction_tags
from pipelines.lsm import (
    COMPACTED_TABLES,
    COMPACTION_TAG,
    FOLLOW_TAG,
    TRIGGER_LEVEL0_TAG,
    TRIGGER_SNAPSHOT_TAG,
    CompactedTable,
    follow_seconds,
    level0_threshold,
    sensor_interval_seconds,
)
from resources import PaimonCatalogResource

# Runs that have not planned yet: they will see the newest files when they do.
WAITING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]


def run_key(table: str, snapshot_id: int) -> str:
    return f"{table}@{snapshot_id}"


def pending_compaction(instance: dg.DagsterInstance, table: str) -> str | None:
    """A compaction run of ``table`` that will fold new level-0 files without another run:
    one that has not started yet, or a following one that is running. Described, or None."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={COMPACTION_TAG: table}, statuses=WAITING), limit=1)
    if runs:
        status = runs[0].status.value.lower().replace("_", " ")
        return f"compaction run {runs[0].run_id} is {status} and will see them"
    running = instance.get_runs(filters=dg.RunsFilter(tags={COMPACTION_TAG: table},
                                                      statuses=[dg.DagsterRunStatus.STARTED]), limit=5)
    following = [run for run in running if run.tags.get(FOLLOW_TAG, "0") != "0"]
    if following:
        return f"compaction run {following[0].run_id} is following the table"
    return None


def evaluate(context: dg.SensorEvaluationContext, catalog: PaimonCatalogResource,
             spec: CompactedTable) -> dg.RunRequest | dg.SkipReason:
    """One tick of ``spec``'s sensor (see the module docstring)."""
    try:
        table = catalog.table(spec.table)
    except (DatabaseNotFoundError, TableNotFoundError):
        return dg.SkipReason(f"{spec.table} does not exist yet")
    state = table.lsm_state()
    if state.snapshot_id is None:
        return dg.SkipReason(f"{spec.table} has no snapshot yet")
    if context.cursor == str(state.snapshot_id):
        return dg.SkipReason(f"{spec.table} snapshot {state.snapshot_id} was evaluated already")
    context.update_cursor(str(state.snapshot_id))
    threshold = level0_threshold(spec, table)
    over = state.over(threshold)
    if not over:
        return dg.SkipReason(f"{spec.table} snapshot {state.snapshot_id}: at most {state.max_level0_files} "
                             f"level-0 file(s) per bucket, below the threshold {threshold}")
    pending = pending_compaction(context.instance, spec.table)
    if pending is not None:
        return dg.SkipReason(f"{spec.table} snapshot {state.snapshot_id}: {len(over)} bucket(s) at {threshold}+ "
                             f"level-0 files, but {pending}")
    partitions = sorted({b.partition for b in over})
    worst = max(b.level0_files for b in over)
    follow = follow_seconds(spec)
    context.log.info(f"{spec.table} snapshot {state.snapshot_id}: {len(over)} bucket(s) in {len(partitions)} "
                     f"partition(s) reached {threshold} level-0 files (worst {worst}); requesting compaction")
    return dg.RunRequest(
        run_key=run_key(spec.table, state.snapshot_id),
        # An unpartitioned table's partition is "": compact the whole table.
        run_config=compaction_run_config(spec.table, partitions=[p for p in partitions if p],
                                         follow_seconds=follow),
        tags={**compaction_tags(spec.table), TRIGGER_SNAPSHOT_TAG: str(state.snapshot_id),
              TRIGGER_LEVEL0_TAG: str(worst), FOLLOW_TAG: str(follow)},
    )


def compaction_sensor(spec: CompactedTable) -> dg.SensorDefinition:
    """The sensor of one compacted table, named ``compact_<db>_<table>_sensor``."""

    @dg.sensor(
        name=f"compact_{spec.name}_sensor",
        job_name=COMPACTION_JOB,  # by name: the job itself is bound to resources in defs
        minimum_interval_seconds=sensor_interval_seconds(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Launch paimon_compaction_job for {spec.table} when a bucket's level 0 reaches "
        + (f"{spec.level0_threshold} files" if spec.level0_threshold else
           "the table's compaction trigger (num-sorted-run.compaction-trigger; append tables: "
           "compaction.min.file-num)") + "; reads manifests only.",
    )
    def _sensor(context: dg.SensorEvaluationContext, catalog: PaimonCatalogResource
                ) -> dg.RunRequest | dg.SkipReason:
        return evaluate(context, catalog, spec)

    return _sensor


compaction_sensors = [compaction_sensor(spec) for spec in COMPACTED_TABLES]
