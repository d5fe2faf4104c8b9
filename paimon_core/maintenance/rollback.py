"""Rolling a table back to a snapshot or tag (Paimon's ``rollback_to``).

The snapshot files newer than the target go, newest first, so a crash leaves a shorter but
whole history; so do the tags of those snapshots. Their data and manifests are left to
orphan-file cleanup: nothing the target (or an older tag) reaches is ever deleted. A tag
whose snapshot has expired is written back as that snapshot, and the table then starts there.
Writers must be stopped: a commit that lands during the rollback is reported, not hidden.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from paimon_core.commit_ledger import CommitLedger
from paimon_core.errors import CommitConflictError
from paimon_core.snapshot import epoch_ms

if TYPE_CHECKING:
    from paimon_core.snapshot import Snapshot
    from paimon_core.table_context import TableContext

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Rollback:
    """What a rollback removed (``dry_run``: would remove)."""

    table: str
    snapshot_id: int
    removed_snapshots: tuple[int, ...]
    removed_tags: tuple[str, ...]
    restored_from_tag: str | None = None
    dry_run: bool = False

    def summary(self) -> str:
        verb = "would roll back" if self.dry_run else "rolled back"
        restored = f" (restored from tag {self.restored_from_tag})" if self.restored_from_tag else ""
        return (f"{self.table} {verb} to snapshot {self.snapshot_id}{restored}: "
                f"{'would remove' if self.dry_run else 'removed'} snapshots {list(self.removed_snapshots)}, "
                f"tags {list(self.removed_tags)}")


def _target(table: TableContext, target: int | str | dt.datetime) -> tuple[Snapshot, str | None]:
    """The snapshot to roll back to, and the tag it comes from when that tag's snapshot expired."""
    store = table.snapshots
    if isinstance(target, str):
        snapshot = table.tags.get(target).snapshot
        return snapshot, None if store.exists(snapshot.id) else target
    if isinstance(target, dt.datetime):
        return store.at_or_before(epoch_ms(target, what=f"rollback of table {table.name}", name="target")), None
    return store.snapshot(target), None  # raises for an expired or unknown id


def plan_rollback(table: TableContext, target: int | str | dt.datetime) -> Rollback:
    """What :func:`rollback_to` would remove, changing nothing."""
    snapshot, restored = _target(table, target)
    tags = table.tags
    removed_tags = tuple(t.name for t in tags.tags() if t.snapshot_id > snapshot.id)
    removed = tuple(i for i in table.snapshots.snapshot_ids() if i > snapshot.id)
    return Rollback(table.name, snapshot.id, removed, removed_tags, restored, dry_run=True)


def rollback_to(table: TableContext, target: int | str | dt.datetime) -> Rollback:
    """Make ``target`` (a snapshot id, a tag name, or the snapshot current at a time) the
    table's latest snapshot."""
    store, tags = table.snapshots, table.tags
    snapshot, restored = _target(table, target)
    if restored is not None:
        plain = replace(snapshot, extra={k: v for k, v in snapshot.extra.items()
                                         if k not in ("tagCreateTime", "tagTimeRetained")})
        table.file_io.create_if_absent(table.paths.snapshot_file(snapshot.id), plain.to_json().encode("utf-8"))
    plan = plan_rollback(table, snapshot.id)
    for name in plan.removed_tags:
        tags.delete(name)
    for snapshot_id in reversed(plan.removed_snapshots):
        table.file_io.delete(table.paths.snapshot_file(snapshot_id))
    store.write_latest_hint(snapshot.id)
    if restored is not None:  # every snapshot left was newer than the tag: the table starts at it
        store.write_earliest_hint(snapshot.id)
        CommitLedger(table.file_io, table.paths, table=table.name).forget_after(snapshot.id)
    if store.exists(snapshot.id + 1):
        raise CommitConflictError(f"a commit to table {table.name} landed as snapshot {snapshot.id + 1} during the "
                                  f"rollback to snapshot {snapshot.id}; stop its writers and roll back again",
                                  snapshot_id=snapshot.id + 1)
    log.info("rolled %s back to snapshot %d (removed snapshots %s, tags %s)", table.name, snapshot.id,
             list(plan.removed_snapshots), list(plan.removed_tags))
    return replace(plan, restored_from_tag=restored, dry_run=False)
