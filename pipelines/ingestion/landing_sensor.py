"""The sensor that notices files landing for a table's partitions and launches their ingestion.

A tick lists the landing location once (a template with ``{partition}``: every file, grouped by
the partition its path names; otherwise one listing for each of the last ``lookback``
partitions) and fingerprints each partition's files (paths, sizes, modification stamps; no
reads). A partition whose fingerprint differs from the one in the cursor gets a run of the
table's ingestion job, at most ``MAX_RUNS_PER_TICK`` per tick, newest first; the run key is
``<table>:<key>:<fingerprint>``, so one set of files launches one run even if the cursor is
reset, and the run (an overwrite of the partition, or an upsert) is idempotent anyway. Files
under keys that are not partitions of the asset are ignored. A tick with nothing new says how
the launched partitions fared: ingested, failed (named), or still running.
"""

# No `from __future__ import annotations`: Dagster reads the context annotation as a real type.

import json
from collections.abc import Mapping

import dagster as dg

from pipelines import names
from pipelines.instance_limits import ensure_pools
from pipelines.spec.declaration import PaimonTableSpec
from resources import keys
from resources.keys import RUN_KEY_TAG, TABLE_TAG
from resources.landing_location import LandedFile, LandingLocation, files_fingerprint
from resources.partition_mapping import PartitionMapping

MAX_RUNS_PER_TICK = 50


def watched_keys(definition: dg.PartitionsDefinition | None, lookback: int) -> list[str | None]:
    """Newest first: the last ``lookback`` time windows, every static key, or the whole table."""
    if definition is None:
        return [None]
    if isinstance(definition, dg.TimeWindowPartitionsDefinition):
        keys: list[str | None] = []
        window = definition.get_last_partition_window()
        while window is not None and len(keys) < lookback:
            keys.append(window.start.strftime(definition.fmt))
            window = definition.get_prev_partition_window(window.start)
        return keys
    return list(definition.get_partition_keys())


def landed_files(landing: LandingLocation, definition: dg.PartitionsDefinition | None,
                 mapping: PartitionMapping | None, lookback: int) -> dict[str | None, list[LandedFile]]:
    """The files of each partition that has some, newest partition first."""
    if definition is not None and "{partition}" in landing.path:
        grouped = landing.landed_partitions()
        valid = set(definition.get_partition_keys())
        ordered = [key for key in reversed(list(definition.get_partition_keys())) if key in grouped and key in valid]
        return {key: grouped[key] for key in ordered}
    found: dict[str | None, list[LandedFile]] = {}
    for key in watched_keys(definition, lookback):
        values = mapping.values(key) if mapping is not None and key is not None else {}
        files = landing.files(key, values)
        if files:
            found[key] = files
    return found


def run_key(table: str, partition: str, fingerprint: str) -> str:
    """The run key of a partition's files: one run per set of files, however often it is seen."""
    return f"{table}:{partition}:{fingerprint}"


def landed_outcomes(expected: Mapping[str, str], latest: Mapping[str, dg.DagsterRunStatus]) -> str:
    """How the partitions whose files were all launched already fared (pure): ``expected`` maps a
    partition to its files' run key, ``latest`` a run key to its newest run's status."""
    failed = sorted(name for name, key in expected.items() if latest.get(key) == dg.DagsterRunStatus.FAILURE)
    done = sum(1 for key in expected.values() if latest.get(key) == dg.DagsterRunStatus.SUCCESS)
    waiting = len(expected) - done - len(failed)
    text = f"{len(expected)} partition(s) with files: {done} ingested"
    if failed:
        shown = ", ".join(failed[:5]) + (f" and {len(failed) - 5} more" if len(failed) > 5 else "")
        text += (f", {len(failed)} whose run failed ({shown}): they run again when their files change, or "
                 "re-execute their runs")
    if waiting:
        text += f", {waiting} in progress or not known to this instance"
    return text


def latest_statuses(instance: dg.DagsterInstance, table: str, job_name: str) -> dict[str, dg.DagsterRunStatus]:
    """The newest run's status per run key among the table's recent ingestion runs (one query)."""
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job_name, tags={TABLE_TAG: table}), limit=1000)
    found: dict[str, dg.DagsterRunStatus] = {}
    for run in runs:  # newest first
        found.setdefault(run.tags.get(RUN_KEY_TAG, ""), run.status)
    return found


def landing_sensor(spec: PaimonTableSpec, job_name: str) -> dg.SensorDefinition:
    """``land_<db>_<table>_sensor``: RUNNING by default (it only lists files)."""
    assert spec.ingestion is not None and spec.ingestion.landing is not None
    ingestion, landing = spec.ingestion, spec.ingestion.landing
    mapping = spec.partition_mapping()
    definition = spec.partitions_def()

    @dg.sensor(name=names.landing_sensor(spec.table), job_name=job_name,
               minimum_interval_seconds=ingestion.sensor_interval_seconds,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description=f"Launch {job_name} for a partition of {spec.table} when files land or change under "
               f"{landing.path}; lists files only.")
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        ensure_pools(context.instance, [names.pool(spec.table)])
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        found = landed_files(landing, definition, mapping, ingestion.lookback)
        requests: list[dg.RunRequest] = []
        current = dict(seen)
        launched: dict[str, str] = {}
        for key, files in found.items():
            name = key if key is not None else "-"
            fingerprint = files_fingerprint(files)[:16]
            if seen.get(name) == fingerprint:
                launched[name] = run_key(spec.table, name, fingerprint)
                continue
            if len(requests) == MAX_RUNS_PER_TICK:
                break
            current[name] = fingerprint
            requests.append(dg.RunRequest(run_key=run_key(spec.table, name, fingerprint), partition_key=key,
                                          tags={TABLE_TAG: spec.table, keys.LANDED_FILES_TAG: str(len(files))}))
        if not requests:
            outcomes = landed_outcomes(launched, latest_statuses(context.instance, spec.table, job_name))
            return dg.SkipReason(f"no new or changed files under {landing.path}; {outcomes}")
        return dg.SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True))

    return _sensor
