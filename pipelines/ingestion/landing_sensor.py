"""The sensor that notices files landing for a table's partitions and launches their ingestion.

A tick lists the landing location once (a template with ``{partition}``: every file, grouped by
the partition its path names; otherwise one listing for each of the last ``lookback``
partitions) and fingerprints each partition's files (paths, sizes, modification stamps; no
reads). A partition whose fingerprint differs from the one in the cursor gets a run of the
table's ingestion job, at most ``MAX_RUNS_PER_TICK`` per tick, newest first; the run key is
``<table>:<key>:<fingerprint>``, so one set of files launches one run even if the cursor is
reset, and the run (an overwrite of the partition, or an upsert) is idempotent anyway. Files
under keys that are not partitions of the asset are ignored.
"""

# No `from __future__ import annotations`: Dagster reads the context annotation as a real type.

import json

import dagster as dg

from pipelines import names
from pipelines.spec.declaration import PaimonTableSpec
from resources import keys
from resources.keys import TABLE_TAG
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
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        found = landed_files(landing, definition, mapping, ingestion.lookback)
        requests: list[dg.RunRequest] = []
        current = dict(seen)
        for key, files in found.items():
            name = key if key is not None else "-"
            fingerprint = files_fingerprint(files)[:16]
            if seen.get(name) == fingerprint:
                continue
            if len(requests) == MAX_RUNS_PER_TICK:
                break
            current[name] = fingerprint
            requests.append(dg.RunRequest(run_key=f"{spec.table}:{name}:{fingerprint}", partition_key=key,
                                          tags={TABLE_TAG: spec.table, keys.LANDED_FILES_TAG: str(len(files))}))
        if not requests:
            return dg.SkipReason(f"no new or changed files under {landing.path} ({len(found)} partition(s) with "
                                 "files, all ingested as they are)")
        return dg.SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True))

    return _sensor
