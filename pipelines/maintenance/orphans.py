"""``remove_orphan_files_<db>_<table>_job``: a table's files that nothing references, older than the window.

Config (``RemoveOrphanFilesConfig``): the target table, ``dry_run``, optional ``older_than``
(default a day ago) and ``force``. Orphans are crash leftovers, files of failed commits, of
rolled-back snapshots, of deleted tags. A window closer than an hour to now needs ``force``, and
a forced run refuses to start while the instance shows another run writing the table (its files
in flight would look like orphans).
"""

# No `from __future__ import annotations`: Dagster reads the context, config and resource
# annotations of decorated functions as real types when the decorator runs.

from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import dagster as dg
from pydantic import Field

import paimon_core as pc
from paimon_core.errors import OptionError
from pipelines import names
from pipelines.cron import iso
from pipelines.maintenance.runs import (
    MaintenanceConfig,
    launchpad_config,
    maintenance_job,
    maintenance_schedule,
    maintenance_target,
    record,
)
from pipelines.maintenance.verdicts import ORPHAN_KINDS, PATHS_SHOWN, kind_of, orphans_outcome, paths_md, relative
from pipelines.target import TableTarget
from resources import PaimonCatalogResource, keys
from resources.keys import COMPACTION_TAG, TABLE_TAG
from resources.metadata import plottable

# What a cleanup observation charts in the asset's Plots.
PLOTTED = frozenset({keys.MAINTENANCE_ORPHAN_FILES, keys.MAINTENANCE_BYTES})
# Runs that may have files in flight: a forced cleanup refuses to run next to them.
ACTIVE = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


class RemoveOrphanFilesConfig(MaintenanceConfig):
    """Which table to clean, and how old an unreferenced file must be."""

    older_than: str | None = Field(
        default=None,
        description="Only files last modified before this time are candidates: 'now' or an ISO-8601 "
        "time (UTC unless it has an offset). Default: a day ago. Within an hour of now needs force.",
    )
    force: bool = Field(
        default=False,
        description="Allow a window within an hour of now, where files of commits in flight live. The "
        "run still refuses while another run tagged for the table is in progress.",
    )



def orphans_run_config(target: TableTarget, *, dry_run: bool = False, older_than: str | None = None,
                       force: bool = False) -> dict[str, Any]:
    """Run config of the table's orphan-cleanup job."""
    config: dict[str, Any] = {**target.config(), "dry_run": dry_run, "force": force}
    if older_than is not None:
        config["older_than"] = older_than
    return {"ops": {"remove_orphan_files": {"config": config}}}


def writers_running(instance: dg.DagsterInstance, table: str, *, own_run_id: str) -> list[str]:
    """Other runs in progress tagged as writing ``table`` (ingestion or compaction): ``job (run id)``."""
    found: dict[str, str] = {}
    for key in (TABLE_TAG, COMPACTION_TAG):
        for run in instance.get_runs(filters=dg.RunsFilter(tags={key: table}, statuses=ACTIVE), limit=20):
            if run.run_id != own_run_id:
                found[run.run_id] = f"{run.job_name} ({run.run_id})"
    return sorted(found.values())


def orphans_metadata(table: pc.Table, result: pc.OrphanFiles, *, forced: bool) -> dict[str, Any]:
    kinds = Counter(kind_of(table, p) for p in result.orphans)
    return {
        keys.MAINTENANCE_TABLE: table.name,
        keys.MAINTENANCE_DRY_RUN: result.dry_run,
        keys.MAINTENANCE_ORPHAN_FILES: len(result.orphans),
        keys.MAINTENANCE_BYTES: result.bytes,
        **{keys.maintenance_files(kind): kinds.get(kind, 0)
           for kind in ("data", *sorted(set(ORPHAN_KINDS.values())))},
        keys.MAINTENANCE_FILES_OLDER_THAN_WINDOW: result.candidates,
        keys.MAINTENANCE_OLDER_THAN: iso(result.older_than_ms),
        keys.MAINTENANCE_FORCED: forced,
        keys.MAINTENANCE_DURATION_S: round(result.duration_s, 3),
        keys.MAINTENANCE_ORPHANS: paths_md(table, result.orphans),
    }


@dg.op(tags={keys.OPERATION_TAG: "remove-orphan-files"})
def remove_orphan_files(context: dg.OpExecutionContext, config: RemoveOrphanFilesConfig,
                        paimon_catalog: PaimonCatalogResource) -> dg.Output[pc.OrphanFiles]:
    """Delete the table's files that nothing references and that are older than the window."""
    table, target, older_than = maintenance_target(context, config, paimon_catalog, config.older_than)
    if config.force and not config.dry_run:
        busy = writers_running(context.instance, config.table, own_run_id=context.run_id)
        if busy:
            raise dg.Failure(description=f"a forced orphan cleanup of {config.table} would delete the files of "
                             f"commits in flight; runs in progress: {', '.join(busy)}", allow_retries=False)
    try:
        result = table.remove_orphan_files(older_than=older_than, dry_run=config.dry_run, force=config.force)
    except OptionError as exc:  # a window too close to now without force
        raise dg.Failure(description=f"{config.table}: {exc}", allow_retries=False) from None
    metadata = orphans_metadata(table, result, forced=config.force)
    verb = "would delete" if result.dry_run else "deleted"
    context.log.info(("dry run, nothing deleted: " if result.dry_run else "")
                     + f"{table.name}: {verb} {len(result.orphans)} orphan file(s) ({result.bytes:,} bytes) of "
                     f"{result.candidates} file(s) older than {iso(result.older_than_ms)}"
                     + (f": {', '.join(relative(table, p) for p in result.orphans[:PATHS_SHOWN])}"
                        if result.orphans else ""))
    if not result.dry_run and result.orphans:  # a cleanup that found nothing leaves no event on the asset
        context.log_event(dg.AssetObservation(
            asset_key=target.asset_key, metadata=plottable(metadata, PLOTTED),
            description=f"removed {len(result.orphans)} orphan file(s), {result.bytes:,} bytes"))
    record(context, target, orphans_outcome(table, target))
    return dg.Output(result, metadata=metadata)



@dg.graph(description="Delete a Paimon table's orphan files (referenced by no snapshot or tag) older than a day, "
          "or the configured window.")
def orphan_cleanup() -> None:
    remove_orphan_files()


def orphans_job(target: TableTarget, resources: Mapping[str, Any] = MappingProxyType({})) -> dg.JobDefinition:
    """``remove_orphan_files_<db>_<table>_job``: the table's orphan cleanup, a dry run from the
    launchpad (as ``paimon remove-orphan-files`` without --execute); its schedule deletes."""
    return maintenance_job(
        orphan_cleanup, name=names.orphans_job(target.table), target=target,
        resources=resources,
        config=launchpad_config("remove_orphan_files"),
        description=f"Delete {target.table}'s orphan files (referenced by no snapshot or tag) older than a day, or "
        f"the configured window. Launched by {names.orphans_schedule(target.table)}; never next to a compaction "
        "of the table.")


def orphans_schedule(target: TableTarget, job: dg.JobDefinition, *, cron: str) -> dg.ScheduleDefinition:
    """``remove_orphan_files_<db>_<table>``: the table's orphan cleanup with the one-day window."""
    return maintenance_schedule(
        target, name=names.orphans_schedule(target.table), cron=cron, job=job, run_config=orphans_run_config,
        description=f"Delete {target.table}'s files that no snapshot or tag references and that are older than a "
        "day; RUNNING by default: it changes nothing a reader sees.")
