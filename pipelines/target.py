"""The table a compaction or maintenance run acts on, as its ops need it.

Every table has its own compaction and maintenance jobs, which carry it in their metadata
(``paimon/target``): the table, the asset its observations and check evaluations go to, how the
table's Paimon partitions map onto that asset's partitions, its fan-out and the schedules its
maintenance checks are judged against. A run launched from the launchpad sets only what a person
chooses; sensors and schedules fill all of it in their run config; a run naming another table
than its job's is refused (it would escape both tables' limits).
"""

# No `from __future__ import annotations`: Dagster reads the config annotations as real types.

import json
import os
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pydantic import Field

import paimon_core as pc
from paimon_core.errors import DatabaseNotFoundError, InvalidNameError, TableNotFoundError
from pipelines import names
from pipelines.cron import DEFAULT_EXPIRE_CRON, DEFAULT_ORPHANS_CRON
from resources import PaimonCatalogResource, keys
from resources.keys import COMPACTION_TAG, TARGET_METADATA_KEY
from resources.partition_mapping import PartitionMapping

# Seconds between two evaluations of a compaction sensor when the table's spec does not say
# (the daemon evaluates sensors at most every 5 s whatever this says). Read when the code
# location loads.
SENSOR_INTERVAL_ENV = "PAIMON_COMPACTION_SENSOR_INTERVAL"
DEFAULT_SENSOR_INTERVAL_S = 30
# Seconds a sensor-launched run keeps following the table when its spec does not say; 0 (the
# default) means one pass per run.
FOLLOW_ENV = "PAIMON_COMPACTION_FOLLOW_SECONDS"


def job_resources(catalog: PaimonCatalogResource, catalog_name: str | None) -> dict[str, Any]:
    """The resources a table's compaction and maintenance jobs carry themselves. Their ops ask for
    ``paimon_catalog`` and Dagster keeps op names unique in a code location, so the jobs of a named
    catalog's tables bind that catalog to ``paimon_catalog`` in the job; the default catalog's
    jobs take it from the definitions."""
    return {} if catalog_name is None else {keys.CATALOG_KEY: catalog}


@dataclass(frozen=True, slots=True)
class TableTarget:
    """A table and its asset. ``expire_cron`` / ``orphans_cron``: the maintenance schedules its
    checks judge it by (None: no schedule, the checks then use the defaults)."""

    table: str
    asset_key: dg.AssetKey
    mapping: PartitionMapping | None = None
    expire_cron: str | None = DEFAULT_EXPIRE_CRON
    orphans_cron: str | None = DEFAULT_ORPHANS_CRON
    level0_threshold: int | None = None
    follow_seconds: int = 0
    buckets_per_step: int = 0
    commit_once: bool = False
    catalog_name: str | None = None  # the warehouse's name when the code location has several

    @property
    def catalog_key(self) -> str:
        """The resource key of the table's catalog."""
        return keys.catalog_key(self.catalog_name)

    @property
    def io_manager_key(self) -> str:
        """The resource key of the IO manager reading and writing the table."""
        return keys.io_manager_key(self.catalog_name)

    def catalog(self, context: Any) -> PaimonCatalogResource:
        """The table's catalog among a sensor's, schedule's, check's or step's resources."""
        catalog = getattr(context.resources, self.catalog_key)
        assert isinstance(catalog, PaimonCatalogResource)
        return catalog

    @property
    def name(self) -> str:
        """``db_table``: the suffix of the table's sensor and schedule names."""
        return names.suffix(self.table)

    def partition_key(self, values: dict[str, Any]) -> str | None:
        """The asset partition of a Paimon partition (None when they do not map one to one)."""
        return None if self.mapping is None else self.mapping.key_of(values)

    def config(self) -> dict[str, Any]:
        """The fields of ``TargetConfig`` describing this target."""
        return {"table": self.table, "asset_key": list(self.asset_key.path),
                "partition_mapping": self.mapping.to_metadata() if self.mapping else "",
                "expire_cron": self.expire_cron or "", "orphans_cron": self.orphans_cron or ""}

    def fan_out(self) -> dict[str, Any]:
        """How the table's compaction runs fan out (fields of the compaction configs)."""
        return {"buckets_per_step": self.buckets_per_step, "commit_once": self.commit_once}

    def to_metadata(self) -> dg.MetadataValue:
        """The jobs' ``paimon/target``: what a run launched with nothing else needs (JSON the UI
        shows as a tree: the partition mapping nested, not a string in a string)."""
        data: dict[str, Any] = {**self.config(), **self.fan_out(), "level0_threshold": self.level0_threshold,
                                "follow_seconds": self.follow_seconds}
        data["partition_mapping"] = json.loads(data["partition_mapping"]) if data["partition_mapping"] else None
        return dg.MetadataValue.json(data)

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> "TableTarget":
        """From run config (``TargetConfig`` fields) or the asset's ``paimon/target``."""
        mapping = data.get("partition_mapping") or ""
        return cls(table=str(data["table"]), asset_key=dg.AssetKey(list(data["asset_key"])),
                   mapping=(PartitionMapping.from_json(mapping if isinstance(mapping, str) else json.dumps(mapping))
                            if mapping else None),
                   expire_cron=data.get("expire_cron") or None, orphans_cron=data.get("orphans_cron") or None,
                   level0_threshold=data.get("level0_threshold") or None,
                   follow_seconds=int(data.get("follow_seconds") or 0),
                   buckets_per_step=int(data.get("buckets_per_step") or 0),
                   commit_once=bool(data.get("commit_once") or False))

    @classmethod
    def from_metadata(cls, raw: Any) -> "TableTarget | None":
        """The target in a job's ``paimon/target`` metadata (None when absent)."""
        value = getattr(raw, "value", getattr(raw, "data", raw))
        if not value:
            return None
        return cls.from_config(json.loads(value) if isinstance(value, str) else dict(value))


class TargetConfig(dg.Config):
    """Which table a run works on, and the asset that shows what it did."""

    table: str = Field(default="", description="The table, as db.table (e.g. shop.orders). Empty: the job's "
                       "own table.")
    asset_key: list[str] = Field(
        default=[],
        description="The asset the run's observations and check results go to. Empty: the job's table's.",
    )
    partition_mapping: str = Field(
        default="", description="How the table's partitions map onto the asset's (JSON; filled by the sensors "
        "and schedules). Empty: the job's table's.")
    expire_cron: str = Field(default="", description="The expiry schedule the retention check judges by.")
    orphans_cron: str = Field(default="", description="The cleanup schedule the orphan check judges by.")


def job_metadata(target: TableTarget) -> dict[str, Any]:
    """What a table's own compaction and maintenance jobs carry: its target (see :func:`job_target`)."""
    return {TARGET_METADATA_KEY: target.to_metadata()}


def job_target(job: dg.JobDefinition) -> TableTarget | None:
    """The target a table's own compaction or maintenance job carries in its metadata."""
    return TableTarget.from_metadata((job.metadata or {}).get(TARGET_METADATA_KEY))


def resolve_target(context: dg.OpExecutionContext, config: TargetConfig) -> TableTarget:
    """The run's target, after refusing a table that is not its job's own: from the run config
    when it names the asset (as sensors and schedules do), else the job's own (a launch from the
    launchpad sets only what a person chooses)."""
    own = job_target(context.job_def)
    table = config.table or (own.table if own is not None else "")
    if not table:
        raise dg.Failure(description=f"{context.job_def.name}: name the table in the run config (table: db.table)",
                         allow_retries=False)
    own_table(context, table)
    if config.asset_key:
        return TableTarget.from_config({**config.model_dump(), "table": table})
    if own is None or own.table != table:
        raise dg.Failure(description=f"{context.job_def.name} is not {table}'s own job; give asset_key in the run "
                         "config, or launch the table's own job", allow_retries=False)
    return own


def declared_targets(definitions: dg.Definitions) -> dict[str, TableTarget]:
    """``{db.table: target}`` of every table whose own compaction and maintenance jobs are in
    ``definitions``."""
    found: dict[str, TableTarget] = {}
    for job in definitions.resolve_all_job_defs():
        target = job_target(job)
        if target is not None:
            found[target.table] = target
    return found


def own_table(context: dg.OpExecutionContext, table: str) -> None:
    """Refuse a run whose config names another table than its job's own (a table's compaction
    and maintenance jobs carry it as their ``paimon/compaction`` tag): the run would escape that
    table's limit of one at a time and the other table's too."""
    own = context.job_def.tags.get(COMPACTION_TAG)
    if own is not None and own != table:
        raise dg.Failure(description=f"{context.job_def.name} works on {own}, but its run config names {table}; "
                         f"use {table}'s own job", allow_retries=False)


def existing_table(catalog: PaimonCatalogResource, table: str) -> pc.Table:
    """The table a run works on; one that does not exist, or a bad name, fails the run in one line
    naming it (not a stack trace), without retries."""
    try:
        return catalog.table(table)
    except (DatabaseNotFoundError, TableNotFoundError, InvalidNameError) as exc:
        raise dg.Failure(description=f"Paimon table {table}: {exc}", allow_retries=False) from None


def env_seconds(name: str, default: int, *, minimum: int) -> int:
    """Whole seconds from the environment variable ``name``, checked, or ``default``."""
    configured = os.environ.get(name, "").strip()
    if not configured:
        return default
    try:
        seconds = int(configured)
    except ValueError:
        raise dg.DagsterInvariantViolationError(
            f"${name} must be a whole number of seconds, got {configured!r}") from None
    if seconds < minimum:
        raise dg.DagsterInvariantViolationError(f"${name} must be at least {minimum}, got {seconds}")
    return seconds


def sensor_interval_seconds(configured: int | None = None) -> int:
    """``configured``, else ``$PAIMON_COMPACTION_SENSOR_INTERVAL`` (seconds, at least 1), else 30."""
    if configured is not None:
        return configured
    return env_seconds(SENSOR_INTERVAL_ENV, DEFAULT_SENSOR_INTERVAL_S, minimum=1)


def follow_seconds(configured: int | None = None) -> int:
    """``configured``, else ``$PAIMON_COMPACTION_FOLLOW_SECONDS``, else 0 (one pass per run)."""
    if configured is not None:
        return configured
    return env_seconds(FOLLOW_ENV, 0, minimum=0)
