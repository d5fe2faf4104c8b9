"""The maintenance checks of a table: snapshots within retention, no orphan files, judged by its schedules.

Both WARN when maintenance lags behind its schedule rather than whenever there is work, since
between two runs there always is. Each is two steps: gathering the facts (dry runs of the
engine's expiry and cleanup, reads only) and a pure verdict on them, tested on plain values;
the maintenance jobs record the verdicts again after each run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

import paimon_core as pc
from pipelines import names
from pipelines.cron import DEFAULT_EXPIRE_CRON, DEFAULT_ORPHANS_CRON, age_text, current_ms, iso, scheduled_ticks
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


def paths_md(table: pc.Table, paths: Sequence[str]) -> dg.MetadataValue:
    """The first ``PATHS_SHOWN`` paths as a markdown list below the table's directory."""
    return relative_paths_md([relative(table, p) for p in paths[:PATHS_SHOWN]], total=len(paths))


def relative_paths_md(paths: Sequence[str], *, total: int | None = None) -> dg.MetadataValue:
    """The first ``PATHS_SHOWN`` of ``paths`` as a markdown list, saying how many more there are."""
    lines = [f"- `{p}`" for p in paths[:PATHS_SHOWN]]
    count = len(paths) if total is None else total
    if count > PATHS_SHOWN:
        lines.append(f"- ... and {count - PATHS_SHOWN} more")
    return dg.MetadataValue.md("\n".join(lines) or "(none)")


def unread(next_snapshot: int, latest: int | None) -> int:
    """Snapshots a consumer resuming at ``next_snapshot`` has not read yet (its lag)."""
    return 0 if latest is None else max(0, latest - next_snapshot + 1)


def consumers_text(table: pc.Table) -> str:
    """``id@next (N unread), ...``: where each consumer resumes (expiry keeps its unread snapshots)
    and how far behind the latest snapshot it is."""
    latest = table.snapshot_store.latest_id()
    return ", ".join(f"{c.consumer_id}@{c.next_snapshot} ({unread(c.next_snapshot, latest)} unread)"
                     for c in table.consumers()) or "-"


def max_consumer_lag(table: pc.Table) -> int:
    """The most snapshots any consumer of the table has not read yet (0 without consumers)."""
    latest = table.snapshot_store.latest_id()
    return max((unread(c.next_snapshot, latest) for c in table.consumers()), default=0)


@dataclass(frozen=True, slots=True)
class RetentionFacts:
    """What the retention verdict is judged on, as read from the table and its schedule."""

    table: str
    schedule: str
    previous_tick_ms: int  # the run before the last tick could already have expired these
    last_tick_ms: int
    overdue: tuple[int, ...]  # snapshots that run could expire
    due: int  # snapshots expirable now, and their files and bytes
    due_files: int
    due_bytes: int
    span: SnapshotSpan
    retain_min: int
    retain_max: int
    time_retained_ms: int
    consumers: str
    max_consumer_lag: int  # snapshots the furthest-behind consumer has not read
    at_ms: int  # when the facts were read
    last_expiry_ms: int | None  # when the last expiry that could delete (not a dry run) ended; None: unknown
    holder: str | None = None  # the run holding the table's compaction slot, which expiry waits for


def retention_facts(table: pc.Table, target: TableTarget, *, at_ms: int | None = None,
                    last_expiry_ms: int | None = None, holder: str | None = None) -> RetentionFacts:
    """Reads what :func:`retention_verdict` judges: the last two ticks of the expiry schedule
    before ``at_ms`` (default now) and dry runs of the table's expiry as of each; the consumers'
    positions; ``last_expiry_ms`` as the caller knows it (from the instance's runs)."""
    at = current_ms() if at_ms is None else at_ms
    options = table.options
    cron = expire_cron(target)
    previous, last = scheduled_ticks(cron, at)
    overdue = table.expire_snapshots(dry_run=True, older_than=previous - options.snapshot_time_retained_ms)
    due = table.expire_snapshots(dry_run=True, older_than=at - options.snapshot_time_retained_ms)
    return RetentionFacts(target.table, cron, previous, last, tuple(overdue.snapshots), len(due.snapshots), due.files,
                          due.bytes, SnapshotSpan.of(table), options.snapshot_num_retained_min,
                          options.snapshot_num_retained_max, options.snapshot_time_retained_ms, consumers_text(table),
                          max_consumer_lag(table), at, last_expiry_ms, holder)


def retention_verdict(facts: RetentionFacts) -> CheckOutcome:
    """``snapshots_within_retention``.

    Overdue: snapshots the expiry run at the tick before the last one could already expire
    (the table's retention with the time window ending then), so a run that is late, slow or
    stopped by its count limit still has a whole period before the check warns. Expirable now
    is what the next run will take; it is information, not a failure.
    """
    span, overdue = facts.span, facts.overdue
    over_max = span.count > facts.retain_max
    if overdue:
        description = (f"{len(overdue)} snapshot(s) ({overdue[0]}..{overdue[-1]}) were due for expiry by the run "
                       f"at {iso(facts.previous_tick_ms)} and are still there; "
                       + (f"{facts.holder}: expiry waits for it" if facts.holder else
                          f"is the schedule {names.expire_schedule(facts.table)} running?"))
    elif over_max:
        description = (f"{span.count} snapshots retained, more than snapshot.num-retained.max "
                       f"{facts.retain_max}; consumers ({facts.consumers}) may hold them")
    else:
        description = (f"{span.count} snapshot(s) retained, none overdue; {facts.due} expirable now "
                       f"({facts.due_bytes:,} bytes), left to the next run")
    if facts.last_expiry_ms is not None:
        description += (f"; last expiry at {iso(facts.last_expiry_ms)} ({age_text(facts.at_ms - facts.last_expiry_ms)} "
                        "before this check)")
    else:
        description += "; no expiry run recorded"
    if facts.max_consumer_lag and not over_max:
        description += f"; consumers {facts.consumers}"
    last_expiry = ({"last_expiry": dg.MetadataValue.timestamp(facts.last_expiry_ms / 1000)}
                   if facts.last_expiry_ms is not None else {})
    return CheckOutcome(RETENTION_CHECK, not overdue and not over_max, dg.AssetCheckSeverity.WARN, description, {
        "snapshots_retained": span.count,
        "earliest_snapshot": span.earliest if span.earliest is not None else -1,
        "latest_snapshot": span.latest if span.latest is not None else -1,
        "overdue_snapshots": len(overdue),
        "expirable_now": facts.due,
        "expirable_now_files": facts.due_files,
        "expirable_now_bytes": facts.due_bytes,
        "retain_min": facts.retain_min,
        "retain_max": facts.retain_max,
        "time_retained_s": facts.time_retained_ms // 1000,
        "due_by_run_at": iso(facts.previous_tick_ms),
        "last_scheduled_run": iso(facts.last_tick_ms),
        "schedule": facts.schedule,
        **last_expiry,
        "consumers": facts.consumers,
        "max_consumer_lag": facts.max_consumer_lag,
    }, charted=frozenset({"snapshots_retained", "overdue_snapshots", "expirable_now", "expirable_now_bytes",
                          "max_consumer_lag"}))


def retention_outcome(table: pc.Table, target: TableTarget, *, at_ms: int | None = None,
                      last_expiry_ms: int | None = None, holder: str | None = None) -> CheckOutcome:
    """``snapshots_within_retention`` of the table as of ``at_ms`` (default now)."""
    return retention_verdict(retention_facts(table, target, at_ms=at_ms, last_expiry_ms=last_expiry_ms,
                                             holder=holder))


@dataclass(frozen=True, slots=True)
class OrphanFacts:
    """What the orphan verdict is judged on: the dry run of the cleanup the run before the last
    tick could have done (paths relative to the table)."""

    table: str
    schedule: str
    previous_tick_ms: int
    last_tick_ms: int
    orphans: tuple[str, ...]
    kinds: tuple[str, ...]  # of each orphan: data, manifest, index, statistics or temp
    orphan_bytes: int
    candidates: int  # files older than the window, referenced or not
    older_than_ms: int


def orphan_facts(table: pc.Table, target: TableTarget, *, at_ms: int | None = None) -> OrphanFacts:
    """Reads what :func:`orphans_verdict` judges: orphans older than a day before the cleanup
    schedule's tick before the last one (younger ones wait for the next run by design)."""
    at = current_ms() if at_ms is None else at_ms
    cron = orphans_cron(target)
    previous, last = scheduled_ticks(cron, at)
    found = table.remove_orphan_files(dry_run=True, older_than=previous - pc.DAY_MS)
    return OrphanFacts(target.table, cron, previous, last, tuple(relative(table, p) for p in found.orphans),
                       tuple(kind_of(table, p) for p in found.orphans), found.bytes, found.candidates,
                       found.older_than_ms)


def orphans_verdict(facts: OrphanFacts) -> CheckOutcome:
    """``no_orphan_files``: WARN when the cleanup run could have deleted an orphan and did not."""
    kinds = Counter(facts.kinds)
    count = len(facts.orphans)
    if count:
        description = (f"{count} orphan file(s) ({facts.orphan_bytes:,} bytes) older than "
                       f"{iso(facts.older_than_ms)}, which the cleanup at {iso(facts.previous_tick_ms)} could have "
                       f"deleted; is the schedule {names.orphans_schedule(facts.table)} running?")
    else:
        description = (f"no orphan file older than {iso(facts.older_than_ms)} ({facts.candidates} file(s) that old, "
                       "all referenced)")
    return CheckOutcome(ORPHANS_CHECK, not count, dg.AssetCheckSeverity.WARN, description, {
        "orphan_files": count,
        "orphan_bytes": facts.orphan_bytes,
        "orphan_data_files": kinds.get("data", 0),
        "orphan_metadata_files": count - kinds.get("data", 0),
        "files_older_than_window": facts.candidates,
        "older_than": iso(facts.older_than_ms),
        "last_scheduled_run": iso(facts.last_tick_ms),
        "schedule": facts.schedule,
        "orphans": relative_paths_md(facts.orphans),
    }, charted=frozenset({"orphan_files", "orphan_bytes"}))


def orphans_outcome(table: pc.Table, target: TableTarget, *, at_ms: int | None = None) -> CheckOutcome:
    """``no_orphan_files`` of the table as of ``at_ms`` (default now)."""
    return orphans_verdict(orphan_facts(table, target, at_ms=at_ms))
