"""Maintenance of the write-only tables: what the expiry and orphan-cleanup jobs share.

Writers of the integration's tables are ``write-only``: they never compact and never expire,
so every commit's snapshot, manifests and every file a compaction or overwrite replaced would
stay forever. Two jobs per table do what a maintaining Paimon writer (or Paimon's procedures)
would, each with the table's config as its default (``pipelines.target``):

- ``expire_snapshots_<db>_<table>_job`` (``pipelines.maintenance.expiry``): ``Table.expire_snapshots`` with the
  table's retention (``snapshot.num-retained.min`` 10, ``snapshot.num-retained.max``,
  ``snapshot.time-retained`` 1 h, ``snapshot.expire.limit`` 50) unless the spec or the run
  overrides it; consumers' unread snapshots and tagged snapshots are kept by the engine.
- ``remove_orphan_files_<db>_<table>_job`` (``pipelines.maintenance.orphans``): ``Table.remove_orphan_files``,
  files no snapshot or tag references and older than a day.

Each run logs one line of what it deleted, attaches counts as output metadata and, when it
deleted something (not a dry run, not a no-op), as an ``AssetObservation`` on the table's asset,
and records the matching check (``pipelines.maintenance.verdicts``) as of after the run.

**Concurrency.** Maintenance jobs carry ``paimon/compaction=<db.table>`` (every run inherits it), the tag
``dagster_home/dagster.yaml`` limits to one run per table: so an expiry or a cleanup never runs
next to a compaction of the same table (or next to each other), while ingestion goes on. Sharing
the key, rather than adding one, is what makes the exclusion work: Dagster limits runs per tag
value, so two kinds of runs exclude each other only through a tag they both carry.

**Schedules**, per table whose spec keeps them (``Maintenance.expire_cron``, default hourly;
``Maintenance.orphans_cron``, default daily at 03:00 UTC), start RUNNING: expiry deletes only
what the table's retention allows, the cleanup only files nothing references that are older
than a day. A tick skips while the table does not exist yet.
"""

# No `from __future__ import annotations`: Dagster reads the context, config and resource
# annotations of decorated functions as real types when the decorator runs.

from collections.abc import Callable, Mapping
from typing import Any, cast

import dagster as dg
from pydantic import Field

import paimon_core as pc
from paimon_core.errors import DatabaseNotFoundError, TableNotFoundError
from pipelines import names
from pipelines.cron import current_ms, parse_time
from pipelines.instance_limits import warn_about_gaps
from pipelines.runtime_bounds import MAINTENANCE_S, bound_tags
from pipelines.target import TableTarget, TargetConfig, existing_table, job_metadata, resolve_target
from pipelines.verdicts import CheckOutcome
from resources import PaimonCatalogResource
from resources.keys import COMPACTION_TAG

# The op of a table's expiry job, whose config says whether a run was a dry run.
EXPIRY_OP = "expire_snapshots"


class MaintenanceConfig(TargetConfig):
    """What both maintenance jobs take: the table, and whether to only list what would go."""

    dry_run: bool = Field(default=False, description="Only list what would be deleted, delete nothing.")


def maintenance_tags(table: str) -> dict[str, str]:
    """Tags of a maintenance run: the per-table limit it shares with compaction."""
    return {COMPACTION_TAG: table}


def table_or_none(catalog: PaimonCatalogResource, table: str) -> pc.Table | None:
    try:
        return catalog.table(table)
    except (DatabaseNotFoundError, TableNotFoundError):
        return None


def record(context: dg.OpExecutionContext, target: TableTarget, outcome: CheckOutcome) -> None:
    """Record a check's verdict on the table's asset from inside a run (as report_compaction does).

    ``log_event`` takes check evaluations at run time though its annotation does not list them.
    """
    context.log_event(cast(Any, outcome.evaluation(target.asset_key)))


def maintenance_target(context: dg.OpExecutionContext, config: MaintenanceConfig, catalog: PaimonCatalogResource,
                       older_than: str | None) -> tuple[pc.Table, TableTarget, int | None]:
    """The table a maintenance run works on (after checking it is its job's own), its target,
    and ``older_than`` as epoch milliseconds (None: the table's own window)."""
    target = resolve_target(context, config)
    warn_about_gaps(context)
    table = existing_table(catalog, target.table)
    return table, target, parse_time(older_than, now_ms=current_ms(), field="older_than")


# Successful runs of a table's expiry job looked through for the last one that was not a dry run.
EXPIRY_RUNS_LOOKED_AT = 20


def deleted_for_real(run_config: Mapping[str, Any], op: str) -> bool:
    """Whether a maintenance run with ``run_config`` could delete (``dry_run`` false); a config
    without the field ran with the job's default, the launchpad's dry run."""
    config = run_config.get("ops", {}).get(op, {}).get("config", {})
    return config.get("dry_run", True) is False


def last_expiry_ms(instance: dg.DagsterInstance, table: str) -> int | None:
    """When the table's last successful expiry that was not a dry run ended (None: none among its
    job's last ``EXPIRY_RUNS_LOOKED_AT`` successful runs)."""
    records = instance.get_run_records(dg.RunsFilter(job_name=names.expire_job(table),
                                                     statuses=[dg.DagsterRunStatus.SUCCESS]),
                                       limit=EXPIRY_RUNS_LOOKED_AT)
    for record in records:
        if record.end_time is not None and deleted_for_real(record.dagster_run.run_config, EXPIRY_OP):
            return int(record.end_time * 1000)
    return None


def launchpad_config(op: str, **overrides: Any) -> dict[str, Any]:
    """What a maintenance job's launchpad opens with: a dry run (as the ``paimon`` CLI without
    ``--execute``), and the spec's overrides that are set; the table is the job's own."""
    config = {"dry_run": True, **{k: v for k, v in overrides.items() if v is not None}}
    return {"ops": {op: {"config": config}}}


def maintenance_job(graph: dg.GraphDefinition, *, name: str, target: TableTarget,
                    config: dict[str, Any], description: str, resources: Mapping[str, Any]) -> dg.JobDefinition:
    """One table's maintenance job: in process (one small step), the table in its metadata,
    ``config`` (what a person may choose) as the launchpad's default, and the table's compaction
    tag on every run, whoever launches it."""
    return graph.to_job(name=name, executor_def=dg.in_process_executor, config=config, description=description,
                        resource_defs=dict(resources) or None, metadata=job_metadata(target),
                        tags={**maintenance_tags(target.table), **bound_tags(MAINTENANCE_S)})


def maintenance_schedule(target: TableTarget, *, name: str, cron: str, job: dg.JobDefinition,
                         run_config: Callable[[TableTarget], dict[str, Any]],
                         description: str) -> dg.ScheduleDefinition:
    """A RUNNING schedule of one maintenance job for ``target`` (skipped until the table exists)."""

    @dg.schedule(name=name, cron_schedule=cron, job=job, execution_timezone="UTC",
                 required_resource_keys={target.catalog_key},
                 default_status=dg.DefaultScheduleStatus.RUNNING, description=description)
    def _schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        if table_or_none(target.catalog(context), target.table) is None:
            return dg.SkipReason(f"{target.table} does not exist yet")
        return dg.RunRequest(run_config=run_config(target), tags=maintenance_tags(target.table))

    return _schedule
