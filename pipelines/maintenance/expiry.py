"""``expire_snapshots_<db>_<table>_job``: a table's snapshots beyond its retention, and the files only they reached.

Config (``ExpireSnapshotsConfig``): the target table, ``dry_run``, and optional overrides of the
table's retention options: ``older_than`` ("now" or an ISO-8601 time, UTC unless it says),
``retain_min``, ``retain_max``, ``max_deletes``. A table with ``tag.automatic-creation =
process-time`` first gets its due automatic tag (and loses those beyond
``tag.num-retained-max``), as a maintaining writer does before it expires: write-only writers do
neither.
"""

# No `from __future__ import annotations`: Dagster reads the context, config and resource
# annotations of decorated functions as real types when the decorator runs.

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import dagster as dg
from pydantic import Field

import paimon_core as pc
from pipelines import names
from pipelines.cron import current_ms, iso
from pipelines.maintenance.runs import (
    EXPIRY_OP,
    MaintenanceConfig,
    last_expiry_ms,
    launchpad_config,
    maintenance_job,
    maintenance_schedule,
    maintenance_target,
    record,
)
from pipelines.maintenance.verdicts import SnapshotSpan, consumers_text, paths_md, relative, retention_outcome
from pipelines.target import TableTarget
from resources import PaimonCatalogResource, keys
from resources.metadata import plottable

# What an expiry observation charts in the asset's Plots: snapshots retained, expired, bytes freed.
PLOTTED = frozenset({keys.MAINTENANCE_SNAPSHOTS_RETAINED_AFTER, keys.MAINTENANCE_SNAPSHOTS_EXPIRED,
                     keys.MAINTENANCE_BYTES})


class ExpireSnapshotsConfig(MaintenanceConfig):
    """Which table to expire, and overrides of its retention options."""

    older_than: str | None = Field(
        default=None,
        description="Keep every snapshot that was current at or after this time: 'now' or an ISO-8601 "
        "time (UTC unless it has an offset). Default: now minus snapshot.time-retained.",
    )
    retain_min: int | None = Field(default=None, ge=1,
                                   description="Override snapshot.num-retained.min (always kept).")
    retain_max: int | None = Field(default=None, ge=1,
                                   description="Override snapshot.num-retained.max (never more kept).")
    max_deletes: int | None = Field(default=None, ge=1,
                                    description="Override snapshot.expire.limit (most expired in one run).")


def expire_run_config(target: TableTarget, *, dry_run: bool = False, older_than: str | None = None,
                      retain_min: int | None = None, retain_max: int | None = None,
                      max_deletes: int | None = None) -> dict[str, Any]:
    """Run config of the table's expiry job (unset overrides left out)."""
    overrides = {"older_than": older_than, "retain_min": retain_min, "retain_max": retain_max,
                 "max_deletes": max_deletes}
    config = {**target.config(), "dry_run": dry_run, **{k: v for k, v in overrides.items() if v is not None}}
    return {"ops": {EXPIRY_OP: {"config": config}}}


def automatic_tags(table: pc.Table) -> bool:
    """Whether the table tags finished periods itself (``tag.automatic-creation = process-time``)."""
    return table.options.tag_automatic_creation == "process-time"


def expiry_metadata(table: pc.Table, plan: pc.ExpiryPlan, before: SnapshotSpan, after: SnapshotSpan,
                    older_than_ms: int | None, tags: pc.AutoTagResult | None = None) -> dict[str, Any]:
    deleted = [*plan.data_files, *plan.changelog_files, *plan.index_files, *plan.metadata_files]
    auto = {} if tags is None else {keys.MAINTENANCE_AUTOMATIC_TAG_CREATED: tags.created or "-",
                                    keys.MAINTENANCE_AUTOMATIC_TAGS_DELETED: ", ".join(tags.deleted) or "-"}
    return {
        keys.MAINTENANCE_TABLE: table.name,
        keys.MAINTENANCE_DRY_RUN: plan.dry_run,
        keys.MAINTENANCE_SNAPSHOTS_EXPIRED: len(plan.snapshots),
        keys.MAINTENANCE_EXPIRED_SNAPSHOTS: f"{plan.snapshots[0]}..{plan.snapshots[-1]}" if plan.snapshots else "-",
        # Ids as text (worth reading, not plotting); the counts below are the plots.
        keys.MAINTENANCE_EARLIEST_SNAPSHOT_BEFORE: str(before.earliest) if before.earliest is not None else "-",
        keys.MAINTENANCE_EARLIEST_SNAPSHOT_AFTER: (str(plan.earliest_after) if plan.earliest_after is not None
                                                       else "-"),
        keys.MAINTENANCE_LATEST_SNAPSHOT: str(after.latest) if after.latest is not None else "-",
        keys.MAINTENANCE_SNAPSHOTS_RETAINED_BEFORE: before.count,
        keys.MAINTENANCE_SNAPSHOTS_RETAINED_AFTER: after.count,
        keys.MAINTENANCE_DATA_FILES: len(plan.data_files),
        keys.MAINTENANCE_CHANGELOG_FILES: len(plan.changelog_files),
        keys.MAINTENANCE_INDEX_FILES: len(plan.index_files),
        keys.MAINTENANCE_METADATA_FILES: len(plan.metadata_files),
        keys.MAINTENANCE_BYTES: plan.bytes,  # data, changelog and index files
        # Long-lived changelog (changelog.* retention beyond snapshot.*): kept as changelog-N, or gone.
        keys.MAINTENANCE_CHANGELOGS_KEPT: len(plan.changelogs_kept),
        keys.MAINTENANCE_LONG_LIVED_CHANGELOGS_EXPIRED: len(plan.changelogs_expired),
        # Consumers idle past consumer.expiration-time no longer pin snapshots: removed.
        keys.MAINTENANCE_STALE_CONSUMERS_REMOVED: ", ".join(plan.stale_consumers) or "-",
        keys.MAINTENANCE_OLDER_THAN: (iso(older_than_ms) if older_than_ms is not None
                                          else "now - snapshot.time-retained"),
        keys.MAINTENANCE_CONSUMERS: consumers_text(table),
        keys.MAINTENANCE_DURATION_S: round(plan.duration_s, 3),
        **auto,
        keys.MAINTENANCE_FILES: paths_md(table, deleted),
    }



@dg.op(tags={keys.OPERATION_TAG: "expire-snapshots"})
def expire_snapshots(context: dg.OpExecutionContext, config: ExpireSnapshotsConfig,
                     paimon_catalog: PaimonCatalogResource) -> dg.Output[pc.ExpiryPlan]:
    """Expire the table's old snapshots and the files only they reached; observe the table's asset."""
    table, target, older_than = maintenance_target(context, config, paimon_catalog, config.older_than)
    before = SnapshotSpan.of(table)
    # Before expiry, as maintaining writers do: the tag keeps the period's last snapshot.
    tags = table.create_automatic_tags() if not config.dry_run and automatic_tags(table) else None
    if tags is not None and (tags.created or tags.deleted):
        context.log.info(f"{table.name}: automatic tag {tags.created or '-'} created (snapshot "
                         f"{tags.snapshot_id}), {', '.join(tags.deleted) or 'none'} deleted")
    plan = table.expire_snapshots(dry_run=config.dry_run, older_than=older_than, retain_min=config.retain_min,
                                  retain_max=config.retain_max, max_deletes=config.max_deletes)
    after = SnapshotSpan.of(table)
    metadata = expiry_metadata(table, plan, before, after, older_than, tags)
    context.log.info(("dry run, nothing deleted: " if plan.dry_run else "")
                     + f"{plan.summary()}; {before.count} -> {after.count} snapshots retained"
                     + (f"; first files: {', '.join(relative(table, p) for p in plan.data_files[:3])}"
                        if plan.data_files else ""))
    # Only what changed the table is an event on its asset (an hourly run with nothing to expire
    # would fill its events); the run's output and the retention check say the rest.
    if not plan.dry_run and (plan.snapshots or (tags is not None and (tags.created or tags.deleted))):
        context.log_event(dg.AssetObservation(
            asset_key=target.asset_key, metadata=plottable(metadata, PLOTTED),
            description=(f"expired snapshots {metadata[keys.MAINTENANCE_EXPIRED_SNAPSHOTS]}, {plan.bytes:,} bytes"
                         if plan.snapshots else "snapshot expiry: automatic tags changed, no snapshot expired")))
    ended = current_ms() if not plan.dry_run else last_expiry_ms(context.instance, target.table)
    record(context, target, retention_outcome(table, target, last_expiry_ms=ended))
    return dg.Output(plan, metadata=metadata)



@dg.graph(description="Expire a Paimon table's old snapshots with its retention options (or the config's "
          "overrides), deleting the files only they reached; consumers and tags are respected.")
def snapshot_expiry() -> None:
    expire_snapshots()


def expire_job(target: TableTarget, *, retain_min: int | None = None, retain_max: int | None = None,
               max_deletes: int | None = None, resources: Mapping[str, Any] = MappingProxyType({})
               ) -> dg.JobDefinition:
    """``expire_snapshots_<db>_<table>_job``: the table's expiry, with the spec's overrides as its
    default and a dry run as the launchpad's (as ``paimon expire-snapshots`` without --execute);
    its schedule deletes."""
    return maintenance_job(
        snapshot_expiry, name=names.expire_job(target.table), target=target,
        resources=resources,
        config=launchpad_config(EXPIRY_OP, retain_min=retain_min, retain_max=retain_max,
                                max_deletes=max_deletes),
        description=f"Expire {target.table}'s snapshots beyond its retention, deleting the files only they reached. "
        f"Launched by {names.expire_schedule(target.table)}; never next to a compaction of the table.")


def expire_schedule(target: TableTarget, job: dg.JobDefinition, *, cron: str, retain_min: int | None = None,
                    retain_max: int | None = None, max_deletes: int | None = None) -> dg.ScheduleDefinition:
    """``expire_snapshots_<db>_<table>``: the table's expiry with its own retention (or the spec's overrides)."""

    def run_config(target: TableTarget) -> dict[str, Any]:
        return expire_run_config(target, retain_min=retain_min, retain_max=retain_max, max_deletes=max_deletes)

    return maintenance_schedule(
        target, name=names.expire_schedule(target.table), cron=cron, job=job, run_config=run_config,
        description=f"Expire {target.table}'s snapshots beyond its retention (snapshot.num-retained.*, "
        "snapshot.time-retained); RUNNING by default: it deletes only what the retention allows.")
