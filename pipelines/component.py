"""``PaimonTables``: the Dagster Component that declares Paimon tables in a ``defs.yaml``.

.. code-block:: yaml

    type: pipelines.component.PaimonTables
    attributes:
      warehouse: "{{ env.PAIMON_WAREHOUSE }}"
      tables:
        - table: crm.customers
          asset_key: [lake, crm, customers]
          columns:
            - {name: id, type: BIGINT, description: The customer's id}
            - {name: name, type: STRING}
            - {name: dt, type: STRING}
          primary_key: [dt, id]
          partition_keys: [dt]
          partitions: {kind: daily, start: 2024-01-01}
          ingestion: {mode: upsert, function: my_project.sources:customers}

Every field is a field of ``PaimonTableSpec`` (``pipelines.spec.declaration``) spelled the same way, with
column types as Paimon / SQL type names; ``{{ env.X }}`` templates are resolved when the
component loads. Each table becomes a spec, checked as the Python API checks it, and
``paimon_definitions`` builds the rest, so a table declared here gets everything a table
declared in Python gets.
"""

from __future__ import annotations

import datetime as dt_
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from pipelines.errors import TableDefinitionError
from pipelines.executors.named import executor_named
from pipelines.factory import paimon_definitions
from pipelines.spec.declaration import (
    Column,
    Compaction,
    DataChecks,
    Ingestion,
    Input,
    Maintenance,
    PaimonTableSpec,
    Partitions,
)
from resources.landing_location import LandingLocation

Scalar = str | int | float | bool


def _text(value: Any) -> str | None:
    """YAML reads ``2024-01-01`` as a date and ``2`` as a number; the spec wants text."""
    if value is None:
        return None
    if isinstance(value, dt_.datetime):
        return value.strftime("%Y-%m-%d-%H:%M")
    if isinstance(value, dt_.date):
        return value.isoformat()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ColumnModel(dg.Model, dg.Resolvable):
    name: str
    type: str = Field(description="A Paimon / SQL type name: BIGINT, DECIMAL(12, 2), TIMESTAMP(6), ARRAY<STRING> ...")
    description: str | None = None
    nullable: bool = True


class PartitionsModel(dg.Model, dg.Resolvable):
    kind: str = Field(default="none", description="none, daily, hourly, weekly, monthly or static.")
    start: str | None = None
    end: str | None = None
    timezone: str = "UTC"
    keys: list[str] = []
    mapping: dict[str, str] = Field(default={}, description="Paimon column: strftime pattern of the window start "
                                    "(or '{key}' for static partitions).")


class LandingModel(dg.Model, dg.Resolvable):
    path: str = Field(description="Template path with {partition} (and {<column>}), local or s3://, with globs.")
    format: str | None = None
    storage_options: dict[str, Scalar] = {}
    csv_delimiter: str = ","
    batch_size: int = 65_536


class InputModel(dg.Model, dg.Resolvable):
    asset_key: list[str]
    columns: list[str] = []


class IngestionModel(dg.Model, dg.Resolvable):
    mode: str = "overwrite"
    function: str | None = Field(default=None, description="'package.module:function' returning the partition's data.")
    landing: LandingModel | None = None
    landing_sensor: bool = True
    sensor_interval_seconds: int = 60
    lookback: int = 3
    schedule: bool = False
    schedule_hour: int | None = None
    schedule_minute: int = 0
    retries: int = 3
    retry_delay_seconds: float = 5.0
    executor: str | None = Field(default=None, description="in_process, multiprocess, dask, k8s or celery for this "
                                "table's ingestion job.")
    executor_config: dict[str, Any] = Field(default={}, description="The executor's config (as in run config).")
    workers: int = Field(default=1, description="Write steps per partition run, committed as one snapshot.")
    inputs: dict[str, InputModel] = {}
    commit_every_rows: int = 0
    extra_columns: str = Field(default="refuse", description="refuse (fail naming them) or ignore (drop) input "
                               "columns the table does not have, for landed files and DataFrames alike.")
    allow_empty_partitions: bool = Field(default=False, description="Let an overwrite with no rows empty a "
                                         "partition that holds rows (otherwise the run fails, nothing written).")
    changes_of: str | None = Field(default=None, description="db.table whose changes feed this table.")
    consumer_id: str | None = None
    change_columns: list[str] = []


class CompactionModel(dg.Model, dg.Resolvable):
    sensor: bool = True
    level0_threshold: int | None = None
    interval_seconds: int | None = None
    follow_seconds: int | None = None
    job: str = "minor"
    buckets_per_step: int = Field(default=0, description="Buckets per compaction step (0: a partition per step).")
    commit_once: bool = Field(default=False, description="Commit every step's compaction as one snapshot.")


class MaintenanceModel(dg.Model, dg.Resolvable):
    enabled: bool = Field(default=True, description="False: no expiry or cleanup schedule.")
    expire_cron: str | None = "0 * * * *"
    orphans_cron: str | None = "0 3 * * *"
    retain_min: int | None = None
    retain_max: int | None = None
    max_deletes: int | None = None


class ChecksModel(dg.Model, dg.Resolvable):
    min_rows: int = 1
    not_null: list[str] = []
    unique: list[str] = []
    accepted_values: dict[str, list[str]] = {}
    blocking: bool = True


class TableModel(dg.Model, dg.Resolvable):
    table: str = Field(description="db.table")
    columns: list[ColumnModel]
    primary_key: list[str] = []
    partition_keys: list[str] = []
    options: dict[str, Scalar] = {}
    asset_key: list[str] = []
    group: str | None = None
    description: str | None = None
    owners: list[str] = []
    tags: dict[str, str] = {}
    partitions: PartitionsModel = PartitionsModel()
    ingestion: IngestionModel | None = None
    compaction: CompactionModel = CompactionModel()
    maintenance: MaintenanceModel = MaintenanceModel()
    consumers: list[str] = []
    checks: ChecksModel | None = None

    def spec(self) -> PaimonTableSpec:
        ingestion = None
        if self.ingestion is not None:
            raw = self.ingestion
            landing = None
            if raw.landing is not None:
                landing = LandingLocation(path=raw.landing.path, format=raw.landing.format,
                                          storage_options=dict(raw.landing.storage_options),
                                          csv_delimiter=raw.landing.csv_delimiter, batch_size=raw.landing.batch_size)
            ingestion = Ingestion(mode=raw.mode, function=raw.function, landing=landing,
                                  landing_sensor=raw.landing_sensor,
                                  sensor_interval_seconds=raw.sensor_interval_seconds,
                                  lookback=raw.lookback, schedule=raw.schedule, schedule_hour=raw.schedule_hour,
                                  schedule_minute=raw.schedule_minute, retries=raw.retries,
                                  retry_delay_seconds=raw.retry_delay_seconds, executor=raw.executor,
                                  executor_config=dict(raw.executor_config), workers=raw.workers,
                                  inputs={name: Input(tuple(i.asset_key), tuple(i.columns))
                                          for name, i in raw.inputs.items()},
                                  commit_every_rows=raw.commit_every_rows, extra_columns=raw.extra_columns,
                                  allow_empty_partitions=raw.allow_empty_partitions, changes_of=raw.changes_of,
                                  consumer_id=raw.consumer_id, change_columns=tuple(raw.change_columns))
        maintenance = self.maintenance
        return PaimonTableSpec(
            table=self.table,
            columns=tuple(Column(c.name, c.type, c.description, c.nullable) for c in self.columns),
            primary_key=tuple(self.primary_key), partition_keys=tuple(self.partition_keys),
            options={k: _text(v) or "" for k, v in self.options.items()}, asset_key=tuple(self.asset_key),
            group=self.group, description=self.description, owners=tuple(self.owners), tags=dict(self.tags),
            partitions=Partitions(kind=self.partitions.kind, start=_text(self.partitions.start),
                                  end=_text(self.partitions.end), timezone=self.partitions.timezone,
                                  keys=tuple(self.partitions.keys), mapping=dict(self.partitions.mapping)),
            ingestion=ingestion,
            compaction=Compaction(sensor=self.compaction.sensor, level0_threshold=self.compaction.level0_threshold,
                                  interval_seconds=self.compaction.interval_seconds,
                                  follow_seconds=self.compaction.follow_seconds, job=self.compaction.job,
                                  buckets_per_step=self.compaction.buckets_per_step,
                                  commit_once=self.compaction.commit_once),
            maintenance=Maintenance(expire_cron=maintenance.expire_cron if maintenance.enabled else None,
                                    orphans_cron=maintenance.orphans_cron if maintenance.enabled else None,
                                    retain_min=maintenance.retain_min, retain_max=maintenance.retain_max,
                                    max_deletes=maintenance.max_deletes),
            consumers=tuple(self.consumers),
            checks=None if self.checks is None else DataChecks(
                min_rows=self.checks.min_rows, not_null=tuple(self.checks.not_null), unique=tuple(self.checks.unique),
                accepted_values={k: tuple(v) for k, v in self.checks.accepted_values.items()},
                blocking=self.checks.blocking),
        )


class PaimonTables(dg.Component, dg.Model, dg.Resolvable):
    """Paimon tables declared in YAML, each with its asset, ingestion, compaction and maintenance."""

    warehouse: str = Field(description="Warehouse root: an absolute path, file:// URI or fsspec URL "
                           "(s3://bucket/warehouse).")
    storage_options: dict[str, str] = Field(default={}, description="fsspec options of the warehouse "
                                            "(for S3: endpoint_url, key, secret ...); use {{ env.X }} for secrets.")
    executor: str | None = Field(default=None, description="The executor of the compaction and maintenance jobs "
                                 "and of tables naming none: in_process (default), multiprocess, dask, k8s, celery.")
    executor_config: dict[str, Any] = Field(default={}, description="That executor's config (as in run config).")
    tables: list[TableModel]

    def specs(self) -> list[PaimonTableSpec]:
        specs = []
        for index, model in enumerate(self.tables):
            try:
                specs.append(model.spec())
            except TableDefinitionError:
                raise
            except (ValueError, TypeError) as exc:
                raise TableDefinitionError(f"tables[{index}] ({model.table}): {exc}") from None
        return specs

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        executor = executor_named(self.executor, self.executor_config, table="(code location)", field="executor") \
            if self.executor else None
        return paimon_definitions(self.specs(), warehouse=self.resolved_warehouse(context.project_root),
                                  storage_options=self.storage_options, executor=executor)

    def resolved_warehouse(self, project_root: Path) -> str:
        """A relative path is the project's: the webserver, daemon and run workers may start in
        different directories and must all see the same tables."""
        text = self.warehouse.strip()
        if not text:
            raise TableDefinitionError("PaimonTables: warehouse is empty (is the environment variable of its "
                                       "{{ env.X }} template set?)")
        if "://" in text or Path(text).is_absolute():
            return text
        return str((project_root / text).resolve())
