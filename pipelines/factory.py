"""``paimon_definitions``: everything Dagster needs for a list of declared Paimon tables.

For each ``PaimonTableSpec``: its asset (ingesting from the spec's function or landing
location; or the user's own asset passed in ``assets``; or, with neither, an external asset of
a table written elsewhere), its ingestion job, schedule and landing sensor, its compaction and
full-compaction jobs and sensor, its expiry and orphan-cleanup jobs and schedules, and its
checks. Shared by the tables of a warehouse: the ``paimon_catalog`` / ``paimon_io_manager``
resources.

Any number of calls and YAML components (for different tables) merge into one code location:
every definition but the resources is a table's own, and calls for the same warehouse get the
same resource objects, which is what Dagster's merge asks of a resource key both sides define.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

import paimon_core as pc
from pipelines.compaction.checks import lsm_checks
from pipelines.compaction.jobs import compaction_jobs
from pipelines.compaction.sensor import compaction_sensor
from pipelines.dagster_internals import calling_definitions
from pipelines.errors import TableDefinitionError
from pipelines.ingestion.asset import external_asset, ingestion_job, ingestion_schedule, table_asset
from pipelines.ingestion.changes import changes_sensor
from pipelines.ingestion.data_checks import data_check
from pipelines.ingestion.fanout import fanned_asset
from pipelines.ingestion.landing_sensor import landing_sensor
from pipelines.instance_limits import instance_check, warn_at_load
from pipelines.maintenance.checks import maintenance_checks
from pipelines.maintenance.expiry import expire_job, expire_schedule
from pipelines.maintenance.orphans import orphans_job, orphans_schedule
from pipelines.spec.declaration import PaimonTableSpec, check_unique
from pipelines.spec.declared_once import check_declared_once
from pipelines.spec.parts import Ingestion
from pipelines.target import TableTarget, job_resources
from pipelines.watchdog import Watched, watch_sensor
from resources import PaimonCatalogResource, PaimonTableIOManager, keys
from resources.catalog import checked_warehouse
from resources.keys import CATALOG_KEY, IO_MANAGER_KEY

# Resource objects per warehouse (and per catalog object), so that definitions built by several
# calls for one warehouse merge: Dagster accepts a resource key on both sides only when it is
# the very same object. Holds configuration only, never a table.
_RESOURCES: dict[Any, dict[str, Any]] = {}


def catalog_for(warehouse: str, storage_options: Mapping[str, Any] | None = None) -> PaimonCatalogResource:
    """The catalog resource of ``warehouse`` (one object per warehouse and options); a warehouse
    that cannot be one (empty: an unset environment variable, most likely) is refused by name."""
    try:
        checked_warehouse(warehouse)
    except ValueError as exc:
        hint = " (is the environment variable it comes from set?)" if not warehouse.strip() else ""
        raise TableDefinitionError(f"paimon_definitions: {exc}{hint}", field="warehouse") from None
    options = sorted((str(k), v.env_var_name if isinstance(v, dg.EnvVar) else str(v), type(v).__name__)
                     for k, v in (storage_options or {}).items())
    key = (str(warehouse), tuple(options))
    if key not in _RESOURCES:
        catalog = PaimonCatalogResource(warehouse=warehouse, storage_options=dict(storage_options or {}))
        _RESOURCES[key] = paimon_resources_of(catalog)
    catalog = _RESOURCES[key][CATALOG_KEY]
    assert isinstance(catalog, PaimonCatalogResource)
    return catalog


def paimon_resources_of(catalog: PaimonCatalogResource, catalog_name: str | None = None) -> dict[str, Any]:
    """``{"paimon_catalog": catalog, "paimon_io_manager": ...}`` (``_<name>`` suffixed for a named
    catalog), the same objects for one catalog."""
    key = ("catalog", id(catalog))
    entry = _RESOURCES.get(key)
    if entry is None or entry[CATALOG_KEY] is not catalog:
        entry = {CATALOG_KEY: catalog, IO_MANAGER_KEY: PaimonTableIOManager(catalog=catalog)}
        _RESOURCES[key] = entry
    return {keys.catalog_key(catalog_name): entry[CATALOG_KEY],
            keys.io_manager_key(catalog_name): entry[IO_MANAGER_KEY]}


def check_catalog_name(catalog_name: str | None) -> None:
    """A catalog name is a suffix of resource keys: a Python identifier's letters."""
    if catalog_name is not None and not re.fullmatch(r"[a-z][a-z0-9_]*", catalog_name):
        raise TableDefinitionError(f"catalog_name {catalog_name!r}: use lower-case letters, digits and _ (it ends "
                                   "the resource keys paimon_catalog_<name> and paimon_io_manager_<name>)",
                                   field="catalog_name")


def table_uri(catalog: PaimonCatalogResource, table: str) -> str | None:
    """The table's URI for the UI, when the warehouse is known at load (not an ``EnvVar``)."""
    values = [catalog.warehouse, *catalog.storage_options.values()]
    if any(isinstance(value, dg.EnvVar) for value in values):
        return None
    try:
        return pc.Catalog(catalog.warehouse, storage_options=None).table_uri(table)
    except (ValueError, ImportError):
        return None


def asset_keys(asset: dg.AssetsDefinition | dg.AssetSpec) -> set[dg.AssetKey]:
    return {asset.key} if isinstance(asset, dg.AssetSpec) else set(asset.keys)


def table_checks(spec: PaimonTableSpec, target: TableTarget) -> list[dg.AssetChecksDefinition]:
    """The table's LSM, maintenance and instance checks, and its data check when the spec declares one."""
    data = [data_check(spec, target)] if spec.checks is not None else []
    return [*data, *lsm_checks(target), *maintenance_checks(target), instance_check(target.asset_key, target.table)]


@dataclass(frozen=True, slots=True)
class Upkeep:
    """A table's compaction and maintenance jobs, and the sensor and schedules launching them."""

    jobs: list[dg.JobDefinition]
    sensors: list[dg.SensorDefinition]
    schedules: list[dg.ScheduleDefinition]


def table_upkeep(spec: PaimonTableSpec, target: TableTarget, carried: Mapping[str, Any]) -> Upkeep:
    """Every table's own compaction and maintenance jobs, whether or not a sensor or schedule
    launches them (the launchpad does, with the table's config and limit), and its watchdog."""
    compaction = compaction_jobs(target, carried)
    maintenance = spec.maintenance
    expiry = expire_job(target, retain_min=maintenance.retain_min, retain_max=maintenance.retain_max,
                        max_deletes=maintenance.max_deletes, resources=carried)
    cleanup = orphans_job(target, carried)
    watched = Watched(spec.table, spec.key, spec.partitions_def(),
                      spec.ingestion.partition_runtime_s() if spec.ingestion else None)
    upkeep = Upkeep([*compaction, expiry, cleanup], [watch_sensor(watched)], [])
    if spec.compaction.sensor:
        upkeep.sensors.append(compaction_sensor(target, compaction, interval_seconds=spec.compaction.interval_seconds,
                                                full_job=spec.compaction.job == "full",
                                                described_full=spec.full_compactions,
                                                full_every=spec.full_compaction_every))
    if maintenance.expire_cron:
        upkeep.schedules.append(expire_schedule(target, expiry, cron=maintenance.expire_cron,
                                                retain_min=maintenance.retain_min, retain_max=maintenance.retain_max,
                                                max_deletes=maintenance.max_deletes))
    if maintenance.orphans_cron:
        upkeep.schedules.append(orphans_schedule(target, cleanup, cron=maintenance.orphans_cron))
    return upkeep


def paimon_definitions(specs: Sequence[PaimonTableSpec], *, warehouse: str | None = None,
                       storage_options: Mapping[str, Any] | None = None,
                       catalog: PaimonCatalogResource | None = None,
                       assets: Sequence[dg.AssetsDefinition | dg.AssetSpec] = (),
                       executor: dg.ExecutorDefinition | None = None,
                       resources: Mapping[str, Any] | None = None,
                       declared_in: str | None = None, catalog_name: str | None = None) -> dg.Definitions:
    """Definitions for exactly these tables.

    Args:
        specs: the tables; each table and asset key once.
        warehouse / storage_options: where the tables live (a path or fsspec URL; secrets as
            ``dg.EnvVar``); or pass ``catalog``, a ``PaimonCatalogResource`` of your own.
        assets: your own assets of declared tables (e.g. from ``paimon_asset``) and any others
            to include; a spec whose asset key is among them gets no generated asset.
        executor: the executor of the compaction and maintenance jobs, of the ingestion jobs of
            tables that name none (``Ingestion.executor``) and of materializations launched from
            the asset pages; default in-process (most runs are a few small steps, and a process
            per step would cost more). Fanned-out writes (``Ingestion.workers``) and
            compactions (``Compaction.buckets_per_step``) spread over a multiprocess, Dask,
            Kubernetes or Celery executor's workers (see ``pipelines.executors.named``).
        resources: further resources your source functions ask for by parameter name.
        declared_in: the file the specs come from (shown as the assets' code reference).
        catalog_name: where a code location holds tables of more than one warehouse, a name for
            this one: its resources are ``paimon_catalog_<name>`` and ``paimon_io_manager_<name>``
            instead of ``paimon_catalog`` and ``paimon_io_manager``.
    """
    specs = list(specs)
    check_unique(specs)
    check_catalog_name(catalog_name)
    warn_at_load()
    if catalog is None:
        if warehouse is None:
            raise TableDefinitionError("paimon_definitions needs warehouse= (a path or fsspec URL) or catalog=")
        catalog = catalog_for(warehouse, storage_options)
    caller = calling_definitions()
    if caller is not None:  # in a @dg.definitions function of a dg project's defs folder
        check_declared_once(specs, caller[0], declared_in or caller[1], catalog_key=keys.catalog_key(catalog_name),
                            warehouse=str(catalog.warehouse))
    provided = {key for asset in assets for key in asset_keys(asset)}
    keys_by_table = {spec.table: spec.key for spec in specs}
    built: list[dg.AssetsDefinition | dg.AssetSpec] = []
    checks: list[dg.AssetChecksDefinition] = []
    jobs: list[Any] = []
    schedules: list[dg.ScheduleDefinition] = []
    sensors: list[dg.SensorDefinition] = []
    for spec in specs:
        uri = table_uri(catalog, spec.table)
        if spec.key in provided:
            asset: dg.AssetsDefinition | dg.AssetSpec | None = next(a for a in assets if spec.key in asset_keys(a))
        elif spec.ingestion is not None:
            source = spec.ingestion.changes_of
            asset = fanned_asset(spec, table_uri=uri, declared_in=declared_in, catalog_name=catalog_name) \
                if spec.ingestion.workers > 1 else \
                table_asset(spec, table_uri=uri, declared_in=declared_in, catalog_name=catalog_name,
                            changes_key=keys_by_table.get(source) if source else None)
            built.append(asset)
        else:
            built.append(external_asset(spec, table_uri=uri, declared_in=declared_in))
            asset = None
        if isinstance(asset, dg.AssetsDefinition):
            job = ingestion_job(spec, asset, executor)
            jobs.append(job)
            if spec.ingestion is not None and spec.ingestion.schedule:
                schedules.append(ingestion_schedule(spec, job))
            if spec.ingestion is not None and spec.ingestion.landing is not None and spec.ingestion.landing_sensor:
                sensors.append(landing_sensor(spec, job.name))
            if spec.ingestion is not None and spec.ingestion.changes_of is not None:
                sensors.append(changes_sensor(spec, job.name, interval_seconds=spec.ingestion.sensor_interval_seconds,
                                              catalog_key=keys.catalog_key(catalog_name)))
        target = dataclasses.replace(spec.target(), catalog_name=catalog_name)
        checks.extend(table_checks(spec, target))
        upkeep = table_upkeep(spec, target, job_resources(catalog, catalog_name))
        jobs.extend(upkeep.jobs)
        sensors.extend(upkeep.sensors)
        schedules.extend(upkeep.schedules)
    return dg.Definitions(
        assets=[*built, *assets], asset_checks=checks, jobs=jobs,
        schedules=schedules, sensors=sensors,
        resources={**paimon_resources_of(catalog, catalog_name), **(resources or {})},
        # Also the asset page's materializations (the implicit asset job): a partition write is
        # one step, and a process per step would cost far more than most writes.
        executor=executor or dg.in_process_executor,
    )


def paimon_asset(spec: PaimonTableSpec, *, mode: str | None = None
                 ) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """Decorate a function returning a partition's data into the asset of ``spec``'s table.

    The function takes the asset's context (and resources by parameter name) and returns an
    Arrow table, record-batch reader or iterator, or a pandas / polars DataFrame; it is written
    with ``mode`` (default: the spec's ingestion mode, else ``overwrite``). Pass the result to
    ``paimon_definitions(..., assets=[...])`` with the spec.
    """

    def decorate(function: Callable[..., Any]) -> dg.AssetsDefinition:
        base = spec.ingestion or Ingestion()
        ingestion = Ingestion(**{**{f: getattr(base, f) for f in base.__dataclass_fields__},
                                 "function": function, "landing": None, "mode": mode or base.mode})
        return table_asset(spec.with_options(ingestion=ingestion))

    return decorate
