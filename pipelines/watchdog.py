"""The watchdog of a table's runs: a run holding the table that has run past its bound is failed,
with a message naming the table, so the runs queued behind it go on.

A run whose process died with its host (a crash, an OOM kill of the code server, an evicted pod)
stays STARTED under a launcher without worker health checks, and holds what it held: a
compaction or maintenance run the table's ``paimon/compaction`` slot (every later compaction,
expiry and orphan cleanup of the table queues behind it), an ingestion run the table's writers'
pool (every later write queues). The instance's run monitoring fails compaction and maintenance
runs past their ``dagster/max_runtime`` tag (:mod:`pipelines.runtime_bounds`); the watchdog

- fails ingestion runs past their bound, ``ingestion.partition_runtime`` times the partitions the
  run writes (so a backfill of thirty days in one run gets thirty times a day's), which no
  instance-wide setting can size;
- fails compaction and maintenance runs past their tag when the instance has no run monitoring,
  or when monitoring has not done it ``MONITOR_GRACE_S`` after the bound;
- fails runs stuck CANCELING for ``CANCEL_GRACE_S``;
- fails at once a run whose worker is gone: Dagster's default run launcher starts run workers
  from a code server, which is asked on each tick whether it still executes the run; a run its
  server does not run (or whose server is no longer there: the host or the whole deployment went
  down and came back) on two ticks in a row is dead, whatever its bound. This is what frees a
  table within a minute after a crash instead of after its bound.

It asks the run's process to stop first (a live but hung run) and then marks the run failed,
writing why into the run's own log. The decisions are pure (:func:`overdue`); the table's
``watch_<db>_<table>_sensor`` runs them every tick, and records the table's ``instance_settings``
check whenever what the instance lacks changes.
"""

# No `from __future__ import annotations`: Dagster reads the context annotation of the decorated
# sensor function as a real type when the decorator runs.

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from pipelines import names
from pipelines.cron import age_text
from pipelines.dagster_internals import run_worker_gone
from pipelines.instance_limits import InstanceSettings, instance_outcome
from pipelines.target import sensor_interval_seconds
from resources.keys import COMPACTION_TAG, MAX_RUNTIME_TAG, TABLE_TAG

# After a run's bound, how long the instance's run monitoring (which polls every 30 s as shipped)
# gets to fail a run carrying dagster/max_runtime before the watchdog does it.
MONITOR_GRACE_S = 120.0
# A run asked to stop gets this long to end before it counts as stuck (Dagster's default
# run_monitoring.cancel_timeout_seconds).
CANCEL_GRACE_S = 180.0
# In-progress runs of the instance looked at per tick (all tables' runs: the table's are found
# among them by tag and asset selection).
RUNS_LOOKED_AT = 500
IN_PROGRESS = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


@dataclass(frozen=True, slots=True)
class HeldRun:
    """A started run holding a table, what it does to the table, and how long it may run."""

    run_id: str
    job_name: str
    role: str  # "ingestion" (holds the writers' pool) or "compaction" (the compaction slot)
    canceling: bool
    started_s: float
    changed_s: float  # when its status last changed (a CANCELING run: when it was asked to stop)
    bound_s: float | None  # None: never failed for its runtime
    tagged: bool  # the bound is its dagster/max_runtime tag, which run monitoring enforces too
    why_bound: str  # how the bound was sized, for the message


def ingestion_bound(tags: Mapping[str, str], partition_runtime_s: float | None, partitions_def: dg.PartitionsDefinition
                    | None, tables_in_run: int = 1) -> tuple[float | None, str]:
    """An ingestion run's bound: ``partition_runtime_s`` per partition it writes (one for a
    partition's run or an unpartitioned table, the range's length for a ranged run), per table
    of its selection."""
    if partition_runtime_s is None:
        return None, "ingestion.partition_runtime is unset"
    count = 1
    start, end = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    if start is not None and end is not None and partitions_def is not None:
        keys = partitions_def.get_partition_keys()
        # A range the definitions no longer have (the partitions changed since): one per end.
        count = keys.index(end) - keys.index(start) + 1 if start in keys and end in keys else 2
    bound = partition_runtime_s * count * max(1, tables_in_run)
    per = f"{count} partition(s)" + (f" of {tables_in_run} tables" if tables_in_run > 1 else "")
    return bound, f"{per} x ingestion.partition_runtime {partition_runtime_s:.0f} s"


def overdue(run: HeldRun, *, now_s: float, monitored: bool, gone: bool = False) -> str | None:
    """Why ``run`` must be failed now (pure), or None while it may still finish by itself;
    ``gone``: its worker was found gone on two ticks in a row."""
    if gone and not run.canceling:
        return "its worker is gone (the code server that launched it does not run it, seen on two ticks)"
    if run.canceling:
        stuck = now_s - run.changed_s
        if stuck > CANCEL_GRACE_S:
            return f"asked to stop {stuck:.0f} s ago and still not ended"
        return None
    if run.bound_s is None:
        return None
    grace = MONITOR_GRACE_S if run.tagged and monitored else 0.0
    ran = now_s - run.started_s
    if ran <= run.bound_s + grace:
        return None
    return f"it has run {ran:.0f} s, past its bound of {run.bound_s:.0f} s ({run.why_bound})"


@dataclass(frozen=True, slots=True)
class Watched:
    """What the watchdog needs of one table."""

    table: str
    asset_key: dg.AssetKey
    partitions_def: dg.PartitionsDefinition | None
    partition_runtime_s: float | None


def held_run(record: dg.RunRecord, watched: Watched) -> HeldRun | None:
    """``record``'s run as a holder of ``watched``'s table, or None when it does not hold it."""
    run = record.dagster_run
    tags = run.tags
    if tags.get(COMPACTION_TAG) == watched.table:
        role = "compaction"
    elif tags.get(TABLE_TAG) == watched.table or (run.asset_selection and watched.asset_key in run.asset_selection):
        role = "ingestion"
    else:
        return None
    tagged = MAX_RUNTIME_TAG in tags
    if tagged:
        try:
            bound: float | None = float(tags[MAX_RUNTIME_TAG])
            why = f"its {MAX_RUNTIME_TAG} tag"
        except ValueError:
            bound, why, tagged = None, f"its {MAX_RUNTIME_TAG} tag is not a number", False
    elif role == "ingestion":
        bound, why = ingestion_bound(tags, watched.partition_runtime_s, watched.partitions_def,
                                     len(run.asset_selection or ()) or 1)
    else:
        bound, why = None, f"no {MAX_RUNTIME_TAG} tag"
    started = record.start_time if record.start_time is not None else record.create_timestamp.timestamp()
    return HeldRun(run.run_id, run.job_name, role, run.status == dg.DagsterRunStatus.CANCELING, started,
                   record.update_timestamp.timestamp(), bound, tagged, why)


def runs_holding(instance: dg.DagsterInstance, watched: Watched) -> list[HeldRun]:
    """The started (or canceling) runs holding ``watched``'s table, oldest first."""
    records = instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS), limit=RUNS_LOOKED_AT)
    held = [h for h in (held_run(r, watched) for r in records) if h is not None]
    return sorted(held, key=lambda h: h.started_s)


def describe(run: HeldRun, table: str) -> str:
    """``compaction run <id> (<job>) holding <table>'s compaction slot``."""
    what = "compaction slot" if run.role == "compaction" else "writers' pool"
    return f"{run.role} run {run.run_id} ({run.job_name}) holding {table}'s {what}"


def slot_holder(instance: dg.DagsterInstance, table: str, *, exclude: str | None = None,
                now_s: float | None = None) -> str | None:
    """The oldest started run holding ``table``'s compaction slot (but ``exclude``, the run asking),
    with how long it has held it: what a compaction or an expiry of the table is waiting for."""
    records = instance.get_run_records(dg.RunsFilter(tags={COMPACTION_TAG: table}, statuses=IN_PROGRESS), limit=10)
    held = sorted((r for r in records if r.dagster_run.run_id != exclude),
                  key=lambda r: r.start_time or r.create_timestamp.timestamp())
    if not held:
        return None
    record = held[0]
    run = record.dagster_run
    since = record.start_time or record.create_timestamp.timestamp()
    now = time.time() if now_s is None else now_s
    bound = run.tags.get(MAX_RUNTIME_TAG)
    return (f"run {run.run_id} ({run.job_name}) has held {table}'s compaction slot for "
            f"{age_text(int((now - since) * 1000))}" + (f" (bound {bound} s)" if bound else ""))


def fail_run(instance: dg.DagsterInstance, run_id: str, message: str) -> str:
    """Ask the run's process to stop, then mark the run failed with ``message``; what was done."""
    run = instance.get_run_by_id(run_id)
    if run is None or run.is_finished:
        return "it ended meanwhile"
    instance.report_engine_event(message, run)
    try:
        asked = bool(instance.run_launcher.terminate(run_id))
        done = "its process was asked to stop" if asked else "its process could not be reached (gone)"
    except dg.DagsterError as error:  # its process or its code server is gone: mark it failed anyway
        done = f"its process could not be asked to stop ({type(error).__name__})"
    run = instance.get_run_by_id(run_id)
    if run is not None and not run.is_finished:
        instance.report_run_failed(run, message)
    return done


@dataclass(frozen=True, slots=True)
class WatchReport:
    """What one pass saw and did, and the runs whose worker it found gone (the next pass fails
    those still gone)."""

    message: str
    gone: frozenset[str]


def watch(instance: dg.DagsterInstance, watched: Watched, *, now_s: float | None = None,
          seen_gone: frozenset[str] = frozenset()) -> WatchReport:
    """One pass over the runs holding ``watched``'s table: fail the overdue ones."""
    now = time.time() if now_s is None else now_s
    monitored = bool(instance.run_monitoring_enabled)
    held = runs_holding(instance, watched)
    failed, gone = [], set()
    for run in held:
        record = instance.get_run_by_id(run.run_id)
        if not run.canceling and record is not None and run_worker_gone(record):
            gone.add(run.run_id)
        reason = overdue(run, now_s=now, monitored=monitored, gone=run.run_id in gone and run.run_id in seen_gone)
        if reason is None:
            continue
        message = (f"paimon watchdog: failing {describe(run, watched.table)}: {reason}; the table's queued runs "
                   "wait for it")
        failed.append(f"failed {run.run_id} ({reason}; {fail_run(instance, run.run_id, message)})")
        gone.discard(run.run_id)
    note = "" if monitored else "; this instance has no run_monitoring, so the watchdog alone fails dead runs"
    if failed:
        return WatchReport(f"{watched.table}: " + "; ".join(failed) + note, frozenset(gone))
    if not held:
        return WatchReport(f"no run holds {watched.table}{note}", frozenset())
    oldest = held[0]
    bound = f" of its {oldest.bound_s:.0f} s bound" if oldest.bound_s is not None else " (unbounded)"
    suspect = f"; {len(gone)} whose worker looks gone (failed if still so next tick)" if gone else ""
    return WatchReport(f"{len(held)} run(s) hold {watched.table}, none past its bound; the oldest, {oldest.run_id}, "
                       f"has run {now - oldest.started_s:.0f} s{bound}{suspect}{note}", frozenset(gone))


def read_cursor(text: str | None) -> dict[str, Any]:
    """The watchdog's cursor: the runs found gone at the last tick and the instance check's last
    verdict. Anything else (an older format, a cursor set by hand) reads as empty: at worst a run
    is probed once more and the check recorded again."""
    try:
        cursor = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(cursor, dict) or not isinstance(cursor.get("gone", []), list):
        return {}
    return cursor


def watch_sensor(watched: Watched, *, interval_seconds: int | None = None) -> dg.SensorDefinition:
    """The table's watchdog, named ``watch_<db>_<table>_sensor`` (it launches nothing)."""

    @dg.sensor(
        name=names.watch_sensor(watched.table),
        minimum_interval_seconds=sensor_interval_seconds(interval_seconds),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(f"Fails a run holding {watched.table} (its writers' pool or its compaction slot) once it has "
                     "run past its bound, so the runs queued behind a dead one go on; launches nothing."),
    )
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        cursor = read_cursor(context.cursor)
        report = watch(context.instance, watched, seen_gone=frozenset(cursor.get("gone", ())))
        # The table's instance_settings check, recorded when its verdict changes (and at the first tick).
        outcome = instance_outcome(InstanceSettings.of(context.instance), watched.table)
        recorded = cursor.get("instance") == outcome.description
        return dg.SensorResult(
            skip_reason=report.message,
            cursor=json.dumps({"gone": sorted(report.gone), "instance": outcome.description}),
            asset_events=[] if recorded else [outcome.evaluation(watched.asset_key)])

    return _sensor

