"""Rolling a table back to a snapshot or tag (Paimon's ``rollback_to``).

The snapshot files newer than the target go, newest first, so a crash leaves a shorter but
whole history; so do the tags of those snapshots. Their data and manifests are left to
orphan-file cleanup: nothing the target (or an older tag) reaches is ever deleted. A tag
whose snapshot has expired is written back as that snapshot, and the table then starts there.
Writers must be stopped: a commit that lands during the rollback is reported, not hidden.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from paimon_core.errors import CommitConflictError
from paimon_core.tags import TagStore

if TYPE_CHECKING:
    from paimon_core.table import Table

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Rollback:
    """What a rollback removed."""

    table: str
    snapshot_id: int
    removed_snapshots: tuple[int, ...]
    removed_tags: tuple[str, ...]
    restored_from_tag: str | None = None


def rollback_to(table: Table, target: int | str) -> Rollback:
    """Make ``target`` (a snapshot id, or a tag name) the table's latest snapshot."""
    store, tags = table.snapshot_store, TagStore(table.file_io, table.paths, table.name)
    restored = None
    if isinstance(target, str):
        snapshot = tags.get(target).snapshot
        if not store.exists(snapshot.id):
            plain = replace(snapshot, extra={k: v for k, v in snapshot.extra.items()
                                             if k not in ("tagCreateTime", "tagTimeRetained")})
            table.file_io.create_if_absent(table.paths.snapshot_file(snapshot.id), plain.to_json().encode("utf-8"))
            restored = target
    else:
        snapshot = store.snapshot(target)  # raises for an expired or unknown id
    removed_tags = tuple(t.name for t in tags.tags() if t.snapshot_id > snapshot.id)
    for name in removed_tags:
        tags.delete(name)
    removed = tuple(sorted((i for i in store.snapshot_ids() if i > snapshot.id), reverse=True))
    for snapshot_id in removed:
        table.file_io.delete(table.paths.snapshot_file(snapshot_id))
    store.write_latest_hint(snapshot.id)
    if restored is not None:  # every snapshot left was newer than the tag: the table starts at it
        store.write_earliest_hint(snapshot.id)
    if store.exists(snapshot.id + 1):
        raise CommitConflictError(f"a commit to table {table.name} landed as snapshot {snapshot.id + 1} during the "
                                  f"rollback to snapshot {snapshot.id}; stop its writers and roll back again",
                                  snapshot_id=snapshot.id + 1)
    log.info("rolled %s back to snapshot %d (removed snapshots %s, tags %s)", table.name, snapshot.id,
             list(reversed(removed)), list(removed_tags))
    return Rollback(table.name, snapshot.id, tuple(reversed(removed)), removed_tags, restored)
