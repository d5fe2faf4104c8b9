"""Two-phase writing: writers prepare commit messages, one committer commits them all.

This is Paimon's split between ``prepareCommit()`` on many writer tasks and one committer
(Flink's writer subtasks and committer operator): each writer closes its files and hands over
what it wrote as a :class:`PreparedCommit`; the committer merges any number of them into one
snapshot with the ordinary commit protocol (atomic create-if-absent of the snapshot, conflict
checks, retries, exactly once per commit user and identifier). Until that commit lands, the
files are unreachable: a writer that dies or whose messages are never committed leaves files
that orphan cleanup reclaims once they are older than its ``older_than`` guard.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from paimon_core.commit import FileStoreCommit, IndexUpdate, Overwrite
from paimon_core.compaction.compactor import COMPACTION_PROPERTY, BucketCompaction, CompactionResult
from paimon_core.errors import CommitConflictError, SchemaError
from paimon_core.manifest import ADD, IndexManifestEntry, read_index_manifest
from paimon_core.snapshot import BATCH_COMMIT_IDENTIFIER
from paimon_core.write.dynamic_bucket import HASH_INDEX
from paimon_core.write.message import CommitMessage, CompactIncrement
from paimon_core.write.message_codec import decode_prepared, encode_prepared

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PreparedCommit:
    """What one writer (or one compaction task) prepared and nobody has committed yet.

    ``data`` are new files per (partition, bucket) (an APPEND or OVERWRITE), ``compactions``
    the rewrites of a compaction task (a COMPACT). ``index_base`` and ``index_files`` are a
    dynamic-bucket writer's new HASH index files and the index manifest it assigned buckets
    from. Serialize with :meth:`to_bytes` to ship it to the committer.
    """

    table: str
    schema_id: int
    data: tuple[CommitMessage, ...] = ()
    compactions: tuple[CompactIncrement, ...] = ()
    index_base: str | None = None
    index_files: tuple[IndexManifestEntry, ...] = ()
    rows: int = 0
    full: bool = False
    reports: tuple[BucketCompaction, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.data and not self.compactions and not self.index_files

    @property
    def files(self) -> int:
        """Data and changelog files this writer wrote."""
        return (sum(len(m.new_files) + len(m.changelog_files) for m in self.data)
                + sum(len(c.new_files) + len(c.changelog_files) for c in self.compactions))

    def to_bytes(self) -> bytes:
        """The versioned binary form (see :mod:`paimon_core.write.message_codec`)."""
        return encode_prepared(self)

    @staticmethod
    def from_bytes(data: bytes) -> PreparedCommit:
        return PreparedCommit(*decode_prepared(data))


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """Snapshots one commit of prepared messages made (or found already made)."""

    table: str
    data_snapshot: int | None
    compaction_snapshot: int | None
    compaction: CompactionResult | None

    @property
    def snapshot_id(self) -> int | None:
        """The newest snapshot of this commit."""
        return self.compaction_snapshot if self.compaction_snapshot is not None else self.data_snapshot


def commit_prepared(table: TableContext, parts: Sequence[PreparedCommit], *, commit_user: str,
                    commit_identifier: int | None, overwrite: Overwrite | None,
                    properties: Mapping[str, str] | None, started: float) -> CommitOutcome:
    """Commit what many writers prepared: data as one APPEND/OVERWRITE snapshot, then their
    compactions as one COMPACT snapshot sharing the identifier (as a compacting Paimon writer's
    two snapshots do). A commit found already landed under this user and identifier is not
    made again, and the messages' files are left for orphan cleanup."""
    schema = table.schema
    for part in parts:
        if part.table != table.name:
            raise SchemaError(f"commit messages of table {part.table} cannot be committed to table {table.name}; "
                              "hand each table's writers' messages to that table's commit()")
        if part.schema_id > schema.id:
            raise SchemaError(f"commit messages of table {table.name} were written with schema {part.schema_id}, "
                              f"newer than the latest schema {schema.id}; reload the table and commit again")
    identifier = BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier
    committer = FileStoreCommit(table.file_io, table.paths, schema, table.options, table=table.name,
                                commit_user=commit_user)
    data = [m for p in parts for m in p.data]
    compactions = [c for p in parts for c in p.compactions]
    _check_disjoint(table.name, data, compactions)
    data_snapshot = compaction_snapshot = None
    if data or overwrite is not None or any(p.index_files for p in parts):
        found = committer.find_committed(identifier) if identifier != BATCH_COMMIT_IDENTIFIER else None
        if found is not None:
            log.info("commit %d of %s by %s already landed as snapshot %d; not committing again",
                     identifier, table.name, commit_user, found)
            data_snapshot = found
        else:
            props = dict(properties or {})
            data_snapshot = committer.commit(data, commit_identifier=identifier, overwrite=overwrite,
                                             properties=props or None, index=_index_update(table, parts))
    result = None
    if compactions:
        found = committer.find_committed(identifier, "COMPACT") if identifier != BATCH_COMMIT_IDENTIFIER else None
        full = any(p.full for p in parts)
        if found is not None:
            log.info("compaction commit %d of %s by %s already landed as snapshot %d; not committing again",
                     identifier, table.name, commit_user, found)
            compaction_snapshot = found
        else:
            props = {COMPACTION_PROPERTY: "full" if full else "auto", **(properties or {})}
            compaction_snapshot = committer.commit_compaction(compactions, properties=props,
                                                              commit_identifier=identifier)
        reports = tuple(r for p in parts for r in p.reports) if compaction_snapshot is not None else ()
        result = CompactionResult(table.name, compaction_snapshot, full, reports, time.monotonic() - started)
    return CommitOutcome(table.name, data_snapshot, compaction_snapshot, result)


def _check_disjoint(table: str, data: Sequence[CommitMessage], compactions: Sequence[CompactIncrement]) -> None:
    """Two compactions of one bucket, or a file handed over twice, would corrupt the bucket."""
    seen: set[str] = set()
    for message in data:
        for meta in message.new_files + message.changelog_files:
            if meta.file_name in seen:
                raise SchemaError(f"file {meta.file_name} of table {table} is in the commit messages twice; "
                                  "give each writer's messages to commit() once")
            seen.add(meta.file_name)
    compacted: set[tuple[bytes, int]] = set()
    for increment in compactions:
        where = (increment.partition.row, increment.bucket)
        if where in compacted:
            raise SchemaError(f"partition {increment.partition.path!r} bucket {increment.bucket} of table {table} "
                              "was compacted by two tasks; give each task its own buckets")
        compacted.add(where)


def _index_update(table: TableContext, parts: Sequence[PreparedCommit]) -> IndexUpdate | None:
    """The dynamic-bucket index after every writer's new HASH files replaced their buckets' old ones.

    Writers own disjoint partitions, so their files never replace each other's; all of them
    must have assigned buckets from the same index, else keys could sit in two buckets.
    """
    writing = [p for p in parts if p.index_files]
    if not writing:
        return None
    bases = {p.index_base for p in writing}
    if len(bases) > 1:
        raise CommitConflictError(
            f"writers of dynamic-bucket table {table.name} assigned buckets from different indexes "
            f"({', '.join(sorted(str(b) for b in bases))}): another commit changed the index between their "
            "starts; their files were not committed, run the writes again", snapshot_id=None)
    base = bases.pop()
    current = read_index_manifest(table.file_io, table.paths.manifest_file(base)) if base else []
    new = [e for p in writing for e in p.index_files]
    replaced = {(e.partition, e.bucket) for e in new}
    kept = [e for e in current if e.kind == ADD and not (e.index_type == HASH_INDEX
                                                          and (e.partition, e.bucket) in replaced)]
    return IndexUpdate(kept + new, base, [table.paths.index_file(e.file_name) for e in new])
