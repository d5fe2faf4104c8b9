"""The maintenance checks of a table: snapshots within retention, no orphan files, judged by its schedules.

Both WARN when maintenance lags behind its schedule rather than whenever there is work, since
between two runs there always is. Pure reads (dry runs of the engine's expiry and cleanup);
the maintenance jobs record them again after each run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import dagster as dg

import paimon_core as pc
from pipelines import names
from pipelines.cron import DEFAULT_EXPIRE_CRON, DEFAULT_ORPHANS_CRON, current_ms, iso, scheduled_ticks
from pipelines.names import ORPHANS_CHECK, RETENTION_CHECK
from pipelines.target import TableTarget
from pipelines.verdicts import CheckOutcome

# Paths listed in metadata and logs (the counts are always complete).
PATHS_SHOWN = 10
# Kinds of orphan files by the table directory they sit in: metadata directories, and the
# snapshot/changelog directories where only temp files of interrupted writes can be orphans;
# everything else lives in bucket directories.
ORPHAN_KINDS = {"manifest": "manifest", "index": "index", "statistics": "statistics", "snapshot": "temp",
                "changelog": "temp"}



def expire_cron(target: TableTarget) -> str:
    """The expiry schedule ``target`` is judged by (its own, else hourly)."""
    return target.expire_cron or DEFAULT_EXPIRE_CRON


def orphans_cron(target: TableTarget) -> str:
    """The cleanup schedule ``target`` is judged by (its own, else daily at 03:00)."""
    return target.orphans_cron or DEFAULT_ORPHANS_CRON


@dataclass(frozen=True, slots=True)
class SnapshotSpan:
    """The retained snapshots of a table: ids are contiguous from earliest to latest."""

    earliest: int | None
    latest: int | None

    @classmethod
    def of(cls, table: pc.Table) -> SnapshotSpan:
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


def retention_outcome(table: pc.Table, target: TableTarget, *, at_ms: int | None = None) -> CheckOutcome:
    """``snapshots_within_retention`` as of ``at_ms`` (default now).

    Overdue: snapshots the expiry run at the tick before the last one could already expire
    (the table's retention with the time window ending then), so a run that is late, slow or
    stopped by its count limit still has a whole period before the check warns. Expirable now
    is what the next run will take; it is information, not a failure.
    """
    at = current_ms() if at_ms is None else at_ms
    options = table.options
    cron = expire_cron(target)
    previous, last = scheduled_ticks(cron, at)
    overdue = table.expire_snapshots(dry_run=True, older_than=previous - options.snapshot_time_retained_ms)
    due = table.expire_snapshots(dry_run=True, older_than=at - options.snapshot_time_retained_ms)
    span = SnapshotSpan.of(table)
    over_max = span.count > options.snapshot_num_retained_max
    consumers = consumers_text(table)
    if overdue.snapshots:
        description = (f"{len(overdue.snapshots)} snapshot(s) ({overdue.snapshots[0]}..{overdue.snapshots[-1]}) "
                       f"were due for expiry by the run at {iso(previous)} and are still there; is the "
                       f"schedule {names.expire_schedule(target.table)} running?")
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


def orphans_outcome(table: pc.Table, target: TableTarget, *, at_ms: int | None = None) -> CheckOutcome:
    """``no_orphan_files`` as of ``at_ms`` (default now).

    Looks for orphans the cleanup run at the tick before the last one could already delete
    (older than a day before that tick): younger ones wait for the next run by design.
    """
    at = current_ms() if at_ms is None else at_ms
    cron = orphans_cron(target)
    previous, last = scheduled_ticks(cron, at)
    found = table.remove_orphan_files(dry_run=True, older_than=previous - pc.DAY_MS)
    kinds = Counter(kind_of(table, p) for p in found.orphans)
    if found.orphans:
        description = (f"{len(found.orphans)} orphan file(s) ({found.bytes:,} bytes) older than "
                       f"{iso(found.older_than_ms)}, which the cleanup at {iso(previous)} could have deleted; "
                       f"is the schedule {names.orphans_schedule(target.table)} running?")
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
