"""Maintenance of the write-only tables: snapshot expiry and orphan-file cleanup, as jobs and schedules.

The pipeline tables are ``write-only``: their writers never compact and never expire, so every
commit's snapshot, manifests and every file a compaction or overwrite replaced would stay
forever. Two jobs do what a maintaining Paimon writer (or Paimon's procedures) would:

- ``paimon_expire_snapshots_job`` (op ``expire_snapshots``; config ``table``, ``dry_run`` default
  false, optional ``older_than`` ("now" or an ISO-8601 time, UTC unless it says), ``retain_min``,
  ``retain_max``, ``max_deletes``): ``Table.expire_snapshots`` with the table's retention
  (``snapshot.num-retained.min`` 10, ``snapshot.num-retained.max``, ``snapshot.time-retained``
  1 h, ``snapshot.expire.limit`` 50) unless overridden; consumers' unread snapshots and tagged
  snapshots are kept by the engine. A table with ``tag.automatic-creation = process-time`` first
  gets its due automatic tag (and loses those beyond ``tag.num-retained-max``), as a maintaining
  writer does before it expires: write-only writers do neither.
- ``paimon_remove_orphan_files_job`` (op ``remove_orphan_files``; config ``table``, ``dry_run``,
  optional ``older_than``, ``force``): ``Table.remove_orphan_files``, files no snapshot or tag
  references and older than a day (crash leftovers, files of failed commits, of rolled-back
  snapshots, of deleted tags). A window closer than an hour to now needs ``force``, and a forced
  run refuses to start while the instance shows another run writing the table (its files in
  flight would look like orphans).

Each run logs one line of what it deleted, returns the engine's result, attaches counts (files
per kind, bytes, snapshots, a sample of paths) as output metadata and, unless it was a dry run,
as an ``AssetObservation`` on the table's asset, and records the matching check (below) as of
after the run.

**Concurrency.** Maintenance runs carry ``paimon/compaction=<db.table>``, the tag
``dagster_home/dagster.yaml`` already limits to one run per table: so an expiry or a cleanup
never runs next to a compaction of the same table (or next to each other), while ingestion goes
on (expiry next to appends is what every maintaining Paimon writer does, and the cleanup's
one-day window keeps files of a commit in flight). Sharing the key, rather than adding one,
is what makes the exclusion work: Dagster limits runs per tag value, so two kinds of runs
exclude each other only through a tag they both carry. Why exclude: a compaction plans from the
latest snapshot and then reads and replaces its files, and its new files stay unreferenced until
it commits; an expiry with overrides, or a forced cleanup, could delete from under it. The
compaction sensors count only runs of the compaction jobs as pending compactions.

**Schedules** (``pipelines.schedules``), per table of ``COMPACTED_TABLES``:
``expire_snapshots_<db>_<table>`` (default ``0 * * * *``, hourly) and
``remove_orphan_files_<db>_<table>`` (default ``0 3 * * *``, daily after the 01:00/01:15
ingestion and its compactions), UTC. Change them per table in ``COMPACTED_TABLES``
(``expire_cron``, ``remove_orphan_files_cron``) or for all with ``$PAIMON_EXPIRE_SNAPSHOTS_CRON``
and ``$PAIMON_REMOVE_ORPHAN_FILES_CRON`` (read when the code location loads; a bad cron fails
the load naming the variable). A tick skips while the table does not exist yet.

Both start RUNNING. Expiry deletes only what the table's own retention options allow, exactly
what Paimon's writers do after every commit when they are not write-only; left off, the
metadata and every replaced file pile up while the checks warn. The cleanup deletes only files
that no snapshot, tag or long-lived changelog references and that are older than a day, so
it changes nothing any reader can see, and a day is far longer than any commit of these
pipelines takes. Stop either in the UI (Automation) or with ``dagster schedule stop``; the state
is kept. (The ingestion schedules stay stopped: they write data.)

**Checks** (``pipelines.checks``), on each table's asset, WARN when maintenance lags behind its
schedule rather than whenever there is work, since between two runs there always is:

- ``snapshots_within_retention``: no snapshot that the expiry run before the last tick could
  already have expired (``Table.expire_snapshots(dry_run=True)`` as of that tick), and no more
  snapshots than ``snapshot.num-retained.max``. Metadata: snapshots retained, overdue, expirable
  now (and their bytes), retention, consumers.
- ``no_orphan_files``: no orphan older than the cleanup window as of the run before the last
  tick (a day before it), from ``Table.remove_orphan_files(dry_run=True)``. Metadata: orphans,
  bytes, files older than the window, a sample of paths. It lists the table's directories and
  reads every retained snapshot's manifests, so it is the dearer of the two; like every check of
  an asset it also runs after each ingestion (leaving it out of the ingestion jobs would make
  them fail to resolve wherever the check is not defined).
"""

# No `from __future__ import annotations`: Dagster reads the context, config and resource
# annotations of decorated functions as real types when the decorator runs.

import datetime as dt_
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import dagster as dg
from pydantic import Field

import paimon_core as pc
from paimon_core.errors import DatabaseNotFoundError, TableNotFoundError
from paimon_core.maintenance.auto_tags import AutoTagResult
from paimon_core.maintenance.expiry import ExpiryPlan
from paimon_core.maintenance.orphans import DAY_MS, OrphanFiles
from pipelines.assets import TABLE_TAG
from pipelines.lsm import COMPACTED_TABLES, COMPACTION_TAG, CheckOutcome, CompactedTable, compacted_table
from resources import PaimonCatalogResource

EXPIRE_JOB = "paimon_expire_snapshots_job"
ORPHANS_JOB = "paimon_remove_orphan_files_job"
EXPIRE_CRON_ENV = "PAIMON_EXPIRE_SNAPSHOTS_CRON"
ORPHANS_CRON_ENV = "PAIMON_REMOVE_ORPHAN_FILES_CRON"
DEFAULT_EXPIRE_CRON = "0 * * * *"
DEFAULT_ORPHANS_CRON = "0 3 * * *"
RETENTION_CHECK = "snapshots_within_retention"
ORPHANS_CHECK = "no_orphan_files"
# Paths listed in metadata and logs (the counts are always complete).
PATHS_SHOWN = 10
# Runs that may have files in flight: a forced cleanup refuses to run next to them.
ACTIVE = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
# Kinds of orphan files by the table directory they sit in: metadata directories, and the
# snapshot/changelog directories where only temp files of interrupted writes can be orphans;
# everything else lives in bucket directories.
ORPHAN_KINDS = {"manifest": "manifest", "index": "index", "statistics": "statistics", "snapshot": "temp",
                "changelog": "temp"}


# ---- configuration --------------------------------------------------------------------------


class MaintenanceConfig(dg.Config):
    """What both maintenance jobs take: the table, and whether to only list what would go."""

    table: str = Field(description="The table, as db.table (e.g. shop.orders).")
    dry_run: bool = Field(default=False, description="Only list what would be deleted, delete nothing.")


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


def env_cron(name: str, default: str) -> str:
    return os.environ.get(name, "").strip() or default


def checked_cron(cron: str, source: str) -> str:
    """``cron`` if Dagster accepts it (five fields, or @hourly/@daily ...), else a load error naming ``source``."""
    try:
        scheduled_ticks(cron, current_ms())
    except dg.DagsterInvalidDefinitionError:
        raise dg.DagsterInvariantViolationError(
            f"{source} must be a cron schedule of five fields (e.g. '0 * * * *'), got {cron!r}") from None
    return cron


def expire_cron(spec: CompactedTable) -> str:
    """When ``spec``'s expiry schedule ticks: its entry, else ``$PAIMON_EXPIRE_SNAPSHOTS_CRON``, else hourly."""
    if spec.expire_cron:
        return checked_cron(spec.expire_cron, f"expire_cron of {spec.table} in COMPACTED_TABLES")
    return checked_cron(env_cron(EXPIRE_CRON_ENV, DEFAULT_EXPIRE_CRON), f"${EXPIRE_CRON_ENV}")


def orphans_cron(spec: CompactedTable) -> str:
    """When ``spec``'s cleanup ticks: its entry, else ``$PAIMON_REMOVE_ORPHAN_FILES_CRON``, else 03:00."""
    if spec.remove_orphan_files_cron:
        return checked_cron(spec.remove_orphan_files_cron,
                            f"remove_orphan_files_cron of {spec.table} in COMPACTED_TABLES")
    return checked_cron(env_cron(ORPHANS_CRON_ENV, DEFAULT_ORPHANS_CRON), f"${ORPHANS_CRON_ENV}")


def scheduled_ticks(cron: str, now_ms: int) -> tuple[int, int]:
    """The last two ticks of ``cron`` (UTC) at or before ``now_ms``: (previous, last), in ms."""
    windows = dg.TimeWindowPartitionsDefinition(cron_schedule=cron, start=dt_.datetime(2000, 1, 1),
                                                fmt="%Y-%m-%dT%H:%M", timezone="UTC")
    now = dt_.datetime.fromtimestamp(now_ms / 1000, tz=dt_.UTC)
    window = windows.get_prev_partition_window(now, respect_bounds=False)
    if window is None:  # only before 2000
        return now_ms, now_ms
    return int(window.start.timestamp() * 1000), int(window.end.timestamp() * 1000)


def parse_time(value: str | None, *, now_ms: int, field: str) -> int | None:
    """``value`` ('now' or ISO-8601, naive means UTC) in epoch ms; None when unset."""
    text = (value or "").strip()
    if not text:
        return None
    if text.lower() == "now":
        return now_ms
    try:
        moment = dt_.datetime.fromisoformat(text)
    except ValueError:
        raise dg.Failure(description=f"{field} must be 'now' or an ISO-8601 time such as "
                         f"'2024-01-02T03:00:00', got {value!r}", allow_retries=False) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt_.UTC)
    return int(moment.timestamp() * 1000)


def iso(ms: int) -> str:
    return dt_.datetime.fromtimestamp(ms / 1000, tz=dt_.UTC).isoformat(timespec="seconds")


def current_ms() -> int:
    return int(time.time() * 1000)


def expire_run_config(table: str, *, dry_run: bool = False, older_than: str | None = None,
                      retain_min: int | None = None, retain_max: int | None = None,
                      max_deletes: int | None = None) -> dict[str, Any]:
    """Run config of ``paimon_expire_snapshots_job`` (unset overrides left out)."""
    overrides = {"older_than": older_than, "retain_min": retain_min, "retain_max": retain_max,
                 "max_deletes": max_deletes}
    config = {"table": table, "dry_run": dry_run, **{k: v for k, v in overrides.items() if v is not None}}
    return {"ops": {"expire_snapshots": {"config": config}}}


def orphans_run_config(table: str, *, dry_run: bool = False, older_than: str | None = None,
                       force: bool = False) -> dict[str, Any]:
    """Run config of ``paimon_remove_orphan_files_job``."""
    config: dict[str, Any] = {"table": table, "dry_run": dry_run, "force": force}
    if older_than is not None:
        config["older_than"] = older_than
    return {"ops": {"remove_orphan_files": {"config": config}}}


def maintenance_tags(table: str) -> dict[str, str]:
    """Tags of a maintenance run: the per-table limit it shares with compaction."""
    return {COMPACTION_TAG: table}


def table_or_none(catalog: PaimonCatalogResource, table: str) -> pc.Table | None:
    try:
        return catalog.table(table)
    except (DatabaseNotFoundError, TableNotFoundError):
        return None


def is_maintained(table: str) -> bool:
    return any(spec.table == table for spec in COMPACTED_TABLES)


# ---- what a table holds ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotSpan:
    """The retained snapshots of a table: ids are contiguous from earliest to latest."""

    earliest: int | None
    latest: int | None

    @classmethod
    def of(cls, table: pc.Table) -> "SnapshotSpan":
        store = table.snapshot_store
        return cls(store.earliest_id(), store.latest_id())

    @property
    def count(self) -> int:
        return 0 if self.earliest is None or self.latest is None else self.latest - self.earliest + 1


def relative(table: pc.Table, path: str) -> str:
    """``path`` below the table's directory (what metadata and logs show)."""
    return path.removeprefix(table.paths.root).lstrip("/")


def kind_of(table: pc.Table, path: str) -> str:
    """``data`` for files in bucket directories, else ``manifest``, ``index``, ``statistics`` or ``temp``."""
    return ORPHAN_KINDS.get(relative(table, path).split("/", 1)[0], "data")


def paths_md(table: pc.Table, paths: tuple[str, ...] | list[str]) -> dg.MetadataValue:
    """The first ``PATHS_SHOWN`` paths as a markdown list, saying how many more there are."""
    lines = [f"- `{relative(table, p)}`" for p in paths[:PATHS_SHOWN]]
    if len(paths) > PATHS_SHOWN:
        lines.append(f"- ... and {len(paths) - PATHS_SHOWN} more")
    return dg.MetadataValue.md("\n".join(lines) or "(none)")


def consumers_text(table: pc.Table) -> str:
    """``id@next, ...``: where each consumer resumes (expiry keeps its unread snapshots)."""
    return ", ".join(f"{c.consumer_id}@{c.next_snapshot}" for c in table.consumers()) or "-"


# ---- checks ---------------------------------------------------------------------------------


def retention_outcome(table: pc.Table, spec: CompactedTable, *, at_ms: int | None = None) -> CheckOutcome:
    """``snapshots_within_retention`` as of ``at_ms`` (default now).

    Overdue: snapshots the expiry run at the tick before the last one could already expire
    (the table's retention with the time window ending then), so a run that is late, slow or
    stopped by its count limit still has a whole period before the check warns. Expirable now
    is what the next run will take; it is information, not a failure.
    """
    at = current_ms() if at_ms is None else at_ms
    options = table.options
    cron = expire_cron(spec)
    previous, last = scheduled_ticks(cron, at)
    overdue = table.expire_snapshots(dry_run=True, older_than=previous - options.snapshot_time_retained_ms)
    due = table.expire_snapshots(dry_run=True, older_than=at - options.snapshot_time_retained_ms)
    span = SnapshotSpan.of(table)
    over_max = span.count > options.snapshot_num_retained_max
    consumers = consumers_text(table)
    if overdue.snapshots:
        description = (f"{len(overdue.snapshots)} snapshot(s) ({overdue.snapshots[0]}..{overdue.snapshots[-1]}) "
                       f"were due for expiry by the run at {iso(previous)} and are still there; is the "
                       f"schedule expire_snapshots_{spec.name} running?")
    elif over_max:
        description = (f"{span.count} snapshots retained, more than snapshot.num-retained.max "
                       f"{options.snapshot_num_retained_max}; consumers ({consumers}) may hold them")
    else:
        description = (f"{span.count} snapshot(s) retained, none overdue; {len(due.snapshots)} expirable now "
                       f"({due.bytes:,} bytes), left to the next run")
    return CheckOutcome(RETENTION_CHECK, not overdue.snapshots and not over_max, dg.AssetCheckSeverity.WARN,
                        description, {
                            "snapshots_retained": span.count,
                            "earliest_snapshot": span.earliest if span.earliest is not None else -1,
                            "latest_snapshot": span.latest if span.latest is not None else -1,
                            "overdue_snapshots": len(overdue.snapshots),
                            "expirable_now": len(due.snapshots),
                            "expirable_now_files": due.files,
                            "expirable_now_bytes": due.bytes,
                            "retain_min": options.snapshot_num_retained_min,
                            "retain_max": options.snapshot_num_retained_max,
                            "time_retained_s": options.snapshot_time_retained_ms // 1000,
                            "due_by_run_at": iso(previous),
                            "last_scheduled_run": iso(last),
                            "schedule": cron,
                            "consumers": consumers,
                        })


def orphans_outcome(table: pc.Table, spec: CompactedTable, *, at_ms: int | None = None) -> CheckOutcome:
    """``no_orphan_files`` as of ``at_ms`` (default now).

    Looks for orphans the cleanup run at the tick before the last one could already delete
    (older than a day before that tick): younger ones wait for the next run by design.
    """
    at = current_ms() if at_ms is None else at_ms
    cron = orphans_cron(spec)
    previous, last = scheduled_ticks(cron, at)
    found = table.remove_orphan_files(dry_run=True, older_than=previous - DAY_MS)
    kinds = Counter(kind_of(table, p) for p in found.orphans)
    if found.orphans:
        description = (f"{len(found.orphans)} orphan file(s) ({found.bytes:,} bytes) older than "
                       f"{iso(found.older_than_ms)}, which the cleanup at {iso(previous)} could have deleted; "
                       f"is the schedule remove_orphan_files_{spec.name} running?")
    else:
        description = (f"no orphan file older than {iso(found.older_than_ms)} ({found.candidates} file(s) that old, "
                       "all referenced)")
    return CheckOutcome(ORPHANS_CHECK, not found.orphans, dg.AssetCheckSeverity.WARN, description, {
        "orphan_files": len(found.orphans),
        "orphan_bytes": found.bytes,
        "orphan_data_files": kinds.get("data", 0),
        "orphan_metadata_files": len(found.orphans) - kinds.get("data", 0),
        "files_older_than_window": found.candidates,
        "older_than": iso(found.older_than_ms),
        "last_scheduled_run": iso(last),
        "schedule": cron,
        "orphans": paths_md(table, found.orphans),
    })


def record(context: dg.OpExecutionContext, spec: CompactedTable, outcome: CheckOutcome) -> None:
    """Record a check's verdict on the table's asset from inside a run (as report_compaction does)."""
    context.log_event(cast(Any, outcome.evaluation(spec.asset_key)))


def check_maintenance_tag(context: dg.OpExecutionContext, table: str) -> None:
    """Warn when the run escapes the per-table limit it shares with compaction."""
    if context.run.tags.get(COMPACTION_TAG) != table:
        context.log.warning(f"run has no tag {COMPACTION_TAG}={table}, so it may run next to a compaction of "
                            "the table; launch it from its schedule or add the tag")


# ---- expiry ---------------------------------------------------------------------------------


def automatic_tags(table: pc.Table) -> bool:
    """Whether the table tags finished periods itself (``tag.automatic-creation = process-time``)."""
    return table.options.tag_automatic_creation == "process-time"


def expiry_metadata(table: pc.Table, plan: ExpiryPlan, before: SnapshotSpan, after: SnapshotSpan,
                    older_than_ms: int | None, tags: AutoTagResult | None = None) -> dict[str, Any]:
    deleted = [*plan.data_files, *plan.changelog_files, *plan.index_files, *plan.metadata_files]
    auto = {} if tags is None else {"automatic_tag_created": tags.created or "-",
                                    "automatic_tags_deleted": ", ".join(tags.deleted) or "-"}
    return {
        "table": table.name,
        "dry_run": plan.dry_run,
        "snapshots_expired": len(plan.snapshots),
        "expired_snapshots": f"{plan.snapshots[0]}..{plan.snapshots[-1]}" if plan.snapshots else "-",
        "earliest_snapshot_before": before.earliest if before.earliest is not None else -1,
        "earliest_snapshot_after": plan.earliest_after if plan.earliest_after is not None else -1,
        "latest_snapshot": after.latest if after.latest is not None else -1,
        "snapshots_retained_before": before.count,
        "snapshots_retained_after": after.count,
        "data_files": len(plan.data_files),
        "changelog_files": len(plan.changelog_files),
        "index_files": len(plan.index_files),
        "metadata_files": len(plan.metadata_files),
        "bytes": plan.bytes,  # data, changelog and index files
        # Long-lived changelog (changelog.* retention beyond snapshot.*): kept as changelog-N, or gone.
        "changelogs_kept": len(plan.changelogs_kept),
        "long_lived_changelogs_expired": len(plan.changelogs_expired),
        # Consumers idle past consumer.expiration-time no longer pin snapshots: removed.
        "stale_consumers_removed": ", ".join(plan.stale_consumers) or "-",
        "older_than": iso(older_than_ms) if older_than_ms is not None else "now - snapshot.time-retained",
        "consumers": consumers_text(table),
        "duration_s": round(plan.duration_s, 3),
        **auto,
        "files": paths_md(table, deleted),
    }


def maintenance_target(context: dg.OpExecutionContext, config: ExpireSnapshotsConfig | RemoveOrphanFilesConfig,
                       catalog: PaimonCatalogResource) -> tuple[pc.Table, int | None]:
    """The table a maintenance run works on, after checking the run carries its tag, and the
    configured ``older_than`` as epoch milliseconds (None: the table's own window)."""
    check_maintenance_tag(context, config.table)
    return catalog.table(config.table), parse_time(config.older_than, now_ms=current_ms(), field="older_than")


@dg.op(tags={"paimon/operation": "expire-snapshots"})
def expire_snapshots(context: dg.OpExecutionContext, config: ExpireSnapshotsConfig,
                     catalog: PaimonCatalogResource) -> dg.Output[ExpiryPlan]:
    """Expire the table's old snapshots and the files only they reached; observe the table's asset."""
    table, older_than = maintenance_target(context, config, catalog)
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
    context.log.info(f"{plan.summary()}; {before.count} -> {after.count} snapshots retained"
                     + (f"; first files: {', '.join(relative(table, p) for p in plan.data_files[:3])}"
                        if plan.data_files else ""))
    if is_maintained(config.table):
        spec = compacted_table(config.table)
        if not plan.dry_run:
            context.log_event(dg.AssetObservation(
                asset_key=spec.asset_key, metadata=metadata,
                description=(f"expired snapshots {metadata['expired_snapshots']}, {plan.bytes:,} bytes"
                             if plan.snapshots else "snapshot expiry: no snapshot to expire")))
        record(context, spec, retention_outcome(table, spec))
    return dg.Output(plan, metadata=metadata)


# ---- orphan files ---------------------------------------------------------------------------


def writers_running(instance: dg.DagsterInstance, table: str, *, own_run_id: str) -> list[str]:
    """Other runs in progress tagged as writing ``table`` (ingestion or compaction): ``job (run id)``."""
    found: dict[str, str] = {}
    for key in (TABLE_TAG, COMPACTION_TAG):
        for run in instance.get_runs(filters=dg.RunsFilter(tags={key: table}, statuses=ACTIVE), limit=20):
            if run.run_id != own_run_id:
                found[run.run_id] = f"{run.job_name} ({run.run_id})"
    return sorted(found.values())


def orphans_metadata(table: pc.Table, result: OrphanFiles, *, forced: bool) -> dict[str, Any]:
    kinds = Counter(kind_of(table, p) for p in result.orphans)
    return {
        "table": table.name,
        "dry_run": result.dry_run,
        "orphan_files": len(result.orphans),
        "bytes": result.bytes,
        **{f"{kind}_files": kinds.get(kind, 0) for kind in ("data", *sorted(set(ORPHAN_KINDS.values())))},
        "files_older_than_window": result.candidates,
        "older_than": iso(result.older_than_ms),
        "forced": forced,
        "duration_s": round(result.duration_s, 3),
        "orphans": paths_md(table, result.orphans),
    }


@dg.op(tags={"paimon/operation": "remove-orphan-files"})
def remove_orphan_files(context: dg.OpExecutionContext, config: RemoveOrphanFilesConfig,
                        catalog: PaimonCatalogResource) -> dg.Output[OrphanFiles]:
    """Delete the table's files that nothing references and that are older than the window."""
    table, older_than = maintenance_target(context, config, catalog)
    if config.force and not config.dry_run:
        busy = writers_running(context.instance, config.table, own_run_id=context.run_id)
        if busy:
            raise dg.Failure(description=f"a forced orphan cleanup of {config.table} would delete the files of "
                             f"commits in flight; runs in progress: {', '.join(busy)}", allow_retries=False)
    result = table.remove_orphan_files(older_than=older_than, dry_run=config.dry_run, force=config.force)
    metadata = orphans_metadata(table, result, forced=config.force)
    verb = "would delete" if result.dry_run else "deleted"
    context.log.info(f"{table.name}: {verb} {len(result.orphans)} orphan file(s) ({result.bytes:,} bytes) of "
                     f"{result.candidates} file(s) older than {iso(result.older_than_ms)}"
                     + (f": {', '.join(relative(table, p) for p in result.orphans[:PATHS_SHOWN])}"
                        if result.orphans else ""))
    if is_maintained(config.table):
        spec = compacted_table(config.table)
        if not result.dry_run:
            context.log_event(dg.AssetObservation(
                asset_key=spec.asset_key, metadata=metadata,
                description=f"removed {len(result.orphans)} orphan file(s), {result.bytes:,} bytes"))
        record(context, spec, orphans_outcome(table, spec))
    return dg.Output(result, metadata=metadata)


# ---- jobs -----------------------------------------------------------------------------------


@dg.job(name=EXPIRE_JOB, executor_def=dg.in_process_executor, tags={"paimon/operation": "expire-snapshots"},
        description="Expire one Paimon table's old snapshots with its retention options (or the config's "
        "overrides), deleting the files only they reached; consumers and tags are respected. Launched by "
        "the expire_snapshots_<db>_<table> schedules with paimon/compaction=<db.table>.")
def paimon_expire_snapshots_job() -> None:
    expire_snapshots()


@dg.job(name=ORPHANS_JOB, executor_def=dg.in_process_executor, tags={"paimon/operation": "remove-orphan-files"},
        description="Delete one Paimon table's orphan files (referenced by no snapshot or tag) older than a "
        "day, or the configured window. Launched by the remove_orphan_files_<db>_<table> schedules with "
        "paimon/compaction=<db.table>.")
def paimon_remove_orphan_files_job() -> None:
    remove_orphan_files()


# ---- schedules ------------------------------------------------------------------------------


def _maintenance_schedule(spec: CompactedTable, *, name: str, cron: str, job: dg.JobDefinition,
                          run_config: Callable[[str], dict[str, Any]], description: str) -> dg.ScheduleDefinition:
    """A RUNNING schedule of one maintenance job for ``spec``'s table (skipped until it exists)."""

    @dg.schedule(name=name, cron_schedule=cron, job=job, execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.RUNNING, description=description)
    def _schedule(context: dg.ScheduleEvaluationContext,
                  catalog: PaimonCatalogResource) -> dg.RunRequest | dg.SkipReason:
        if table_or_none(catalog, spec.table) is None:
            return dg.SkipReason(f"{spec.table} does not exist yet")
        return dg.RunRequest(run_config=run_config(spec.table), tags=maintenance_tags(spec.table))

    return _schedule


def expire_schedule(spec: CompactedTable) -> dg.ScheduleDefinition:
    """``expire_snapshots_<db>_<table>``: the table's expiry with its own retention."""
    return _maintenance_schedule(
        spec, name=f"expire_snapshots_{spec.name}", cron=expire_cron(spec), job=paimon_expire_snapshots_job,
        run_config=expire_run_config,
        description=f"Expire {spec.table}'s snapshots beyond its retention (snapshot.num-retained.*, "
        "snapshot.time-retained); RUNNING by default: it deletes only what the retention allows.")


def orphans_schedule(spec: CompactedTable) -> dg.ScheduleDefinition:
    """``remove_orphan_files_<db>_<table>``: the table's orphan cleanup with the one-day window."""
    return _maintenance_schedule(
        spec, name=f"remove_orphan_files_{spec.name}", cron=orphans_cron(spec), job=paimon_remove_orphan_files_job,
        run_config=orphans_run_config,
        description=f"Delete {spec.table}'s files that no snapshot or tag references and that are older than a "
        "day; RUNNING by default: it changes nothing a reader sees.")
