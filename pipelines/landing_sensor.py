"""The sensor that notices files landing for a table's partitions and launches their ingestion.

A tick fingerprints the landed files (paths, sizes, modification stamps: one listing per
partition, no reads) of the partitions it watches: every key of static partitions, the last
``lookback`` windows of time partitions. A partition whose fingerprint differs from the one in
the cursor gets a run of the table's ingestion job; the run key is ``<table>:<key>:<fingerprint>``,
so one set of files launches one run even if the cursor is reset, and the run (an overwrite of
the partition, or an upsert) is idempotent anyway. Partitions without files are skipped.
"""

# No `from __future__ import annotations`: Dagster reads the context annotation as a real type.

import json

import dagster as dg

from pipelines.spec import PaimonTableSpec
from pipelines.target import TABLE_TAG


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


def landing_sensor(spec: PaimonTableSpec, job_name: str) -> dg.SensorDefinition:
    """``land_<db>_<table>_sensor``: RUNNING by default (it only lists files)."""
    assert spec.ingestion is not None and spec.ingestion.landing is not None
    ingestion, landing = spec.ingestion, spec.ingestion.landing
    mapping = spec.partition_mapping()
    definition = spec.partitions_def()

    @dg.sensor(name=f"land_{spec.name}_sensor", job_name=job_name,
               minimum_interval_seconds=ingestion.sensor_interval_seconds,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description=f"Launch {job_name} for a partition of {spec.table} when files land or change under "
               f"{landing.path} (watching the last {ingestion.lookback} partition(s)); lists files only.")
    def _sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        requests, current = [], {}
        for key in watched_keys(definition, ingestion.lookback):
            values = mapping.values(key) if mapping is not None and key is not None else {}
            files = landing.files(key, values)
            if not files:
                continue
            fingerprint = landing.fingerprint(key, values)
            name = key if key is not None else "-"
            current[name] = fingerprint
            if seen.get(name) != fingerprint:
                requests.append(dg.RunRequest(run_key=f"{spec.table}:{name}:{fingerprint}", partition_key=key,
                                              tags={TABLE_TAG: spec.table, "paimon/landed-files": str(len(files))}))
        if not requests:
            return dg.SkipReason(f"no new or changed files under {landing.path} for the "
                                 f"{len(current)} watched partition(s) with files")
        return dg.SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True))

    return _sensor
