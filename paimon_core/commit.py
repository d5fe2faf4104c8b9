"""Committing: manifests and manifest lists, then an atomic create-if-absent of ``snapshot-N``.

A lost race re-reads the latest snapshot, rebuilds everything that depends on it (the base list,
the files an overwrite deletes) and retries with backoff. Idempotency comes from the commit user
and identifier stored in every snapshot. Files are cleaned up only when every attempt provably
lost; an attempt whose outcome is unknown leaves everything in place and raises
:class:`CommitStateUnknownError` if no later attempt settles it.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from paimon_core.binary_row import deserialize_with_arity
from paimon_core.commit_ledger import CommitLedger, CommitRecord, matching
from paimon_core.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    FileIOError,
    SnapshotNotFoundError,
)
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.manifest import (
    ADD,
    DELETE,
    EMPTY_STATS,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    read_manifest_list,
    write_index_manifest,
    write_manifest,
    write_manifest_list,
)
from paimon_core.manifest_merge import merge_group, plan_merge
from paimon_core.options import TableOptions
from paimon_core.read.scan import PartitionDecoder, PartitionSpecMatcher, live_entries, live_index_entries, read_entries
from paimon_core.schema import TableSchema
from paimon_core.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot, SnapshotStore
from paimon_core.version import __version__
from paimon_core.write.message import CommitMessage, CompactIncrement

log = logging.getLogger(__name__)

WRITER_VERSION = f"paimon-dagster-{__version__}"


def new_commit_user(options: TableOptions) -> str:
    """A fresh commit user: a UUID, after ``commit.user-prefix`` when the table sets one."""
    prefix = options.commit_user_prefix
    return (f"{prefix}_" if prefix else "") + str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class Overwrite:
    """What an OVERWRITE commit replaces.

    ``mode`` is ``"static"`` (partitions matching ``partition``, a map of partition column to
    internal value), ``"dynamic"`` (partitions present in the new data), ``"table"``, or
    ``"partitions"`` (those matching any map of ``partitions``: a drop of partitions).
    """

    mode: str
    partition: Mapping[str, Any] | None = None
    partitions: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class IndexUpdate:
    """A new complete index list (e.g. dynamic-bucket HASH files) to commit with the data.

    ``base_manifest`` is the index manifest the list was derived from: if another commit
    replaced it meanwhile, the update is stale and the commit fails instead of retrying.
    """

    entries: list[IndexManifestEntry]
    base_manifest: str | None
    files: list[str]


class FileStoreCommit:
    """Commits the files of one writer to one table."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schema: TableSchema,
                 options: TableOptions, *, table: str, commit_user: str,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.options = options
        self.table = table
        self.commit_user = commit_user
        self.snapshots = SnapshotStore(file_io, paths, table)
        self.sleep = sleep
        self._decode_partition = PartitionDecoder(schema.partition_types)

    # ---- idempotency ---------------------------------------------------------------------

    def find_committed(self, commit_identifier: int, kind: str | None = None,
                       *, after: int = 0) -> int | None:
        """Id of a snapshot by this commit user with this identifier (newer than ``after``);
        see :meth:`find_record`."""
        record = self.find_record(commit_identifier, None if kind is None else (kind,), after=after)
        return None if record is None else record.snapshot_id

    def find_record(self, commit_identifier: int, kinds: Collection[str] | None = None,
                    *, after: int = 0) -> CommitRecord | None:
        """The commit by this commit user with this identifier (of one of ``kinds``), or its
        newest one when that has a larger identifier (identifiers of a user only grow, so the
        asked one landed before it); None when it did not land.

        Scans back from the latest snapshot until this user's newest snapshot; when every
        retained snapshot is older than ``after`` or not the user's, the commit ledger, where
        expiry recorded the user's newest commit before deleting its snapshots, answers (not
        when ``after`` is given: those commits are newer than a snapshot that exists).
        """
        return matching(self._user_records(after), commit_identifier, kinds)

    def _user_records(self, after: int) -> Iterator[CommitRecord]:
        """This user's commits, newest first: retained snapshots, then (see :meth:`find_record`) the ledger."""
        latest = self.snapshots.latest_id()
        earliest = self.snapshots.earliest_id()
        if latest is None or earliest is None:
            return
        for snapshot_id in range(latest, max(after, earliest - 1), -1):
            try:
                snapshot = self.snapshots.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                continue
            if snapshot.commit_user == self.commit_user:
                yield CommitRecord.of(snapshot)
        if after == 0 and earliest > 1:
            yield from CommitLedger(self.file_io, self.paths, table=self.table).newest(self.commit_user)

    # ---- commit ----------------------------------------------------------------------------

    def commit(self, messages: Sequence[CommitMessage], *,
               commit_identifier: int = BATCH_COMMIT_IDENTIFIER, overwrite: Overwrite | None = None,
               properties: Mapping[str, str] | None = None, index: IndexUpdate | None = None) -> int | None:
        """Commit ``messages``; returns the new snapshot id, or None for a skipped empty commit.

        Raises:
            CommitConflictError: every allowed attempt lost its race; all files were removed.
            CommitStateUnknownError: an attempt's outcome is unknown; no file was removed.
        """
        adds = [ManifestEntry(ADD, m.partition.row, m.bucket, m.total_buckets, f)
                for m in messages for f in m.new_files]
        changelog = [ManifestEntry(ADD, m.partition.row, m.bucket, m.total_buckets, f)
                     for m in messages for f in m.changelog_files]
        kind = "OVERWRITE" if overwrite is not None else "APPEND"
        if not adds and overwrite is None and self.options.ignore_empty_commit:
            return None
        data_paths = [self.paths.bucket_dir(m.partition.path, m.bucket) + "/" + f.file_name
                      for m in messages for f in m.new_files + m.changelog_files]
        changes = _Changes(adds, [], kind, overwrite, index, None, changelog)
        return self._commit(changes, data_paths, commit_identifier, properties)

    def commit_compaction(self, increments: Sequence[CompactIncrement], *,
                          properties: Mapping[str, str] | None = None,
                          commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> int | None:
        """Commit compactions as one COMPACT snapshot; None when they changed nothing.

        ``commit_identifier``: a compacting writer's own identifier (its APPEND and COMPACT
        snapshots share it, as in Paimon).

        Raises:
            CommitConflictError: a file a compaction replaced is gone from the latest snapshot
                (another compaction or an overwrite removed it); the files it wrote are removed
                and the table is unchanged.
        """
        adds = [ManifestEntry(ADD, i.partition.row, i.bucket, i.total_buckets, f) for i in increments for f in i.after]
        deletes = [ManifestEntry(DELETE, i.partition.row, i.bucket, i.total_buckets, f)
                   for i in increments for f in i.before]
        index_before = [e for i in increments for e in i.index_before]
        index_after = [e for i in increments for e in i.index_after]
        changelog = [ManifestEntry(ADD, i.partition.row, i.bucket, i.total_buckets, f)
                     for i in increments for f in i.changelog_files]
        if not adds and not deletes and not index_before and not index_after and not changelog:
            return None
        data_paths = [self.paths.bucket_dir(i.partition.path, i.bucket) + "/" + f.file_name
                      for i in increments for f in i.new_files + i.changelog_files]
        data_paths += [self.paths.index_file(e.file_name) for e in index_after]
        swap = IndexSwap(index_before, index_after) if index_before or index_after else None
        changes = _Changes(adds, deletes, "COMPACT", None, None, swap, changelog)
        return self._commit(changes, data_paths, commit_identifier, properties)

    def _commit(self, changes: _Changes, data_paths: list[str], commit_identifier: int,
                properties: Mapping[str, str] | None) -> int | None:
        add_metas = self.write_manifests(changes.adds)
        changelog_metas = self.write_manifests(changes.changelog, "changelog-")
        attempt = _Attempt(self, changes, add_metas, commit_identifier, properties, changelog_metas)
        try:
            return attempt.run()
        except BaseException as exc:
            if not attempt.uncertain:
                self._remove_unpublished(changes, data_paths, add_metas + changelog_metas)
            elif isinstance(exc, Exception) and not isinstance(exc, CommitStateUnknownError):
                # an earlier attempt may have landed: whatever failed since, the outcome is unknown
                raise CommitStateUnknownError(
                    f"commit to table {self.table} failed after an attempt whose outcome is unknown ({exc}); "
                    "no file was removed, and re-running the same commit (commit user and identifier) finds "
                    "it if it landed") from exc
            raise

    def _remove_unpublished(self, changes: _Changes, data_paths: list[str], metas: list[ManifestFileMeta]) -> None:
        """Every attempt provably lost or never published: its files are nobody's."""
        index_files = changes.index.files if changes.index is not None else []
        manifests = [self.paths.manifest_file(m.file_name) for m in metas]
        for path in data_paths + index_files + manifests:
            self.file_io.delete_quietly(path)

    def check_replaced_files(self, latest: Snapshot | None, deletes: Sequence[ManifestEntry],
                             adds: Sequence[ManifestEntry]) -> None:
        """Every file a compaction replaces must still be live, and levels >= 1 must stay disjoint."""
        if not deletes:
            return
        touched = {(e.partition, e.bucket) for e in deletes}
        live = [] if latest is None else live_entries(
            self.file_io, self.paths, latest, entry_filter=lambda e: (e.partition, e.bucket) in touched)
        present = {e.identifier for e in live}
        missing = [e.file.file_name for e in deletes if e.identifier not in present]
        if missing:
            raise CommitConflictError(
                f"compaction of table {self.table} conflicts with a concurrent commit: {len(missing)} of the "
                f"files it replaces are gone (e.g. {missing[0]}); its output was discarded, nothing is lost",
                snapshot_id=None)
        removed = {e.identifier for e in deletes}
        self.check_level_overlaps([e for e in live if e.identifier not in removed] + list(adds))

    def check_level_overlaps(self, entries: Sequence[ManifestEntry]) -> None:
        """Files of one level >= 1 of a bucket must not overlap in keys (else reads go wrong)."""
        if not self.schema.primary_keys:
            return
        key_types = [self.schema.field(k).type for k in self.schema.trimmed_primary_keys]
        by_level: dict[tuple[bytes, int, int], list[tuple[Any, Any, str]]] = {}
        for e in entries:
            if e.file.level > 0:
                by_level.setdefault((e.partition, e.bucket, e.file.level), []).append(
                    (deserialize_with_arity(e.file.min_key, key_types),
                     deserialize_with_arity(e.file.max_key, key_types), e.file.file_name))
        for (_, bucket, level), files in by_level.items():
            files.sort()
            for (_, high, name), (low, _, other) in itertools.pairwise(files):
                if low <= high:
                    raise CommitConflictError(
                        f"compaction of table {self.table} would leave level {level} of bucket {bucket} with "
                        f"overlapping files {name} and {other}; a concurrent compaction interfered",
                        snapshot_id=None)

    def write_manifests(self, entries: Sequence[ManifestEntry], infix: str = "") -> list[ManifestFileMeta]:
        """Write entries into manifests of about ``manifest.target-file-size`` each."""
        if not entries:
            return []
        prefix = f"manifest-{uuid.uuid4()}-{infix}"
        types = self.schema.partition_types
        compression = self.options.manifest_compression
        meta = write_manifest(self.file_io, self.paths.manifest_file(prefix + "0"), entries, types,
                              compression)
        target = self.options.manifest_target_file_size
        if meta.file_size <= target or len(entries) == 1:
            return [meta]
        self.file_io.delete(self.paths.manifest_file(meta.file_name))
        parts = min(len(entries), math.ceil(meta.file_size / target))
        size = math.ceil(len(entries) / parts)
        return [write_manifest(self.file_io, self.paths.manifest_file(f"{prefix}{i}"),
                               entries[i * size:(i + 1) * size], types, compression)
                for i in range(parts) if entries[i * size:(i + 1) * size]]

    def merge_manifests(self, metas: list[ManifestFileMeta], created: list[str]) -> list[ManifestFileMeta]:
        """The base manifests after Paimon's merge (see :mod:`paimon_core.manifest_merge`); the
        paths of manifests it writes are added to ``created`` (removed if the attempt loses)."""
        options = self.options
        plan = plan_merge(metas, target_size=options.manifest_target_file_size,
                          min_count=options.manifest_merge_min_count,
                          full_threshold=options.manifest_full_compaction_threshold_size)
        if not plan.changes:
            return metas
        out: list[ManifestFileMeta] = []
        for group in plan.groups:
            if len(group) == 1 and not plan.full:
                out.append(metas[group[0]])
                continue
            entries = merge_group(read_entries(self.file_io, self.paths, [metas[i] for i in group]), full=plan.full)
            merged = self.write_manifests(entries)
            created += [self.paths.manifest_file(m.file_name) for m in merged]
            out += merged
        log.debug("merged %d manifests of %s into %d (%s)", len(metas), self.table, len(out),
                  "full" if plan.full else "minor")
        return out

    def overwrite_deletes(self, latest: Snapshot | None, overwrite: Overwrite,
                          adds: Sequence[ManifestEntry]) -> list[ManifestEntry]:
        """DELETE entries for every live file the overwrite replaces in ``latest``."""
        if latest is None:
            return []
        if overwrite.mode == "table" or not self.schema.partition_keys:
            keep: Callable[[ManifestEntry], bool] | None = None
        elif overwrite.mode == "dynamic":
            targets = {e.partition for e in adds}
            if not targets:
                return []
            keep = lambda e: e.partition in targets  # noqa: E731
        else:
            specs = overwrite.partitions if overwrite.mode == "partitions" else (dict(overwrite.partition or {}),)
            matches = PartitionSpecMatcher(specs, self.schema.partition_keys, self._decode_partition)
            keep = lambda e: matches(e.partition)  # noqa: E731
        live = live_entries(self.file_io, self.paths, latest, entry_filter=keep)
        return [replace(e, kind=DELETE) for e in live]


@dataclass(frozen=True, slots=True)
class _Changes:
    """What one commit changes: fixed adds and deletes, or the deletes an overwrite derives."""

    adds: list[ManifestEntry]
    deletes: list[ManifestEntry]
    kind: str
    overwrite: Overwrite | None
    index: IndexUpdate | None
    index_swap: IndexSwap | None
    changelog: list[ManifestEntry]


@dataclass(frozen=True, slots=True)
class IndexSwap:
    """Index files a compaction replaces (deletion vectors), applied to whatever index is latest."""

    before: list[IndexManifestEntry]
    after: list[IndexManifestEntry]

    def apply(self, current: list[IndexManifestEntry], table: str) -> list[IndexManifestEntry]:
        names = {e.file_name for e in current}
        gone = [e.file_name for e in self.before if e.file_name not in names]
        if gone:
            raise CommitConflictError(f"compaction of table {table} conflicts with a concurrent commit: the "
                                      f"deletion-vector index {gone[0]} it replaces is gone; its output was "
                                      "discarded, nothing is lost", snapshot_id=None)
        replaced = {e.file_name for e in self.before}
        return [e for e in current if e.file_name not in replaced] + self.after


class _Attempt:
    """The retry loop of one commit."""

    def __init__(self, commit: FileStoreCommit, changes: _Changes, add_metas: list[ManifestFileMeta],
                 identifier: int, properties: Mapping[str, str] | None,
                 changelog_metas: list[ManifestFileMeta]) -> None:
        self.c = commit
        self.changes = changes
        self.adds = changes.adds
        self.add_metas = add_metas
        self.changelog_metas = changelog_metas
        self.kind = changes.kind
        self.identifier = identifier
        self.overwrite = changes.overwrite
        self.properties = dict(properties) if properties else None
        self.index = changes.index
        self.uncertain = False
        self.started = time.monotonic()
        self.first_latest: int | None = None  # the latest snapshot id when the first attempt began

    def run(self) -> int | None:
        options = self.c.options
        retry = 0
        while True:
            latest = self.c.snapshots.latest()
            if self.first_latest is None:
                self.first_latest = latest.id if latest is not None else 0
            if retry and self.uncertain:
                found = self.c.find_committed(self.identifier, self.kind, after=self.first_latest)
                if found is not None:
                    log.info("commit to %s found already landed as snapshot %d", self.c.table, found)
                    return found
            outcome = self._try_once_or_lost(latest)
            if isinstance(outcome, int):
                return outcome
            if outcome == "empty":
                return None
            retry += 1
            elapsed_ms = (time.monotonic() - self.started) * 1000
            timed_out = options.commit_timeout_ms is not None and elapsed_ms > options.commit_timeout_ms
            if retry > options.commit_max_retries or timed_out:
                target = (latest.id + 1) if latest else 1
                message = (f"commit to table {self.c.table} gave up after {retry} attempts "
                           f"({elapsed_ms:.0f} ms); last raced for snapshot {target}")
                if self.uncertain:
                    raise CommitStateUnknownError(message + "; an attempt's outcome is unknown, "
                                                  "so no file was removed")
                raise CommitConflictError(message, snapshot_id=target)
            wait = min(options.commit_min_retry_wait_ms * 2 ** (retry - 1), options.commit_max_retry_wait_ms)
            self.c.sleep(wait * (1 + random.random() * 0.2) / 1000)

    def _try_once_or_lost(self, latest: Snapshot | None) -> int | str:
        """An attempt whose base was expired under it (its manifests are gone) lost its race:
        the table moved on, so the next attempt rebuilds on the new latest snapshot."""
        try:
            return self._try_once(latest)
        except (FileNotFoundError, SnapshotNotFoundError):  # MissingFileError included
            if latest is None or self.c.snapshots.exists(latest.id):
                raise
            log.info("the base snapshot %d of this commit to %s was expired while it was prepared; retrying",
                     latest.id, self.c.table)
            return "lost"

    def _try_once(self, latest: Snapshot | None) -> int | str:
        c = self.c
        if self.overwrite is not None:
            deletes = c.overwrite_deletes(latest, self.overwrite, self.adds)
        else:
            deletes = self.changes.deletes
            c.check_replaced_files(latest, deletes, self.adds)
        if not self.adds and not deletes and not self.changelog_metas and c.options.ignore_empty_commit:
            return "empty"
        created: list[str] = []
        index_manifest = latest.index_manifest if latest else None
        swap = self.changes.index_swap
        if swap is not None:
            current = live_index_entries(c.file_io, c.paths, latest) if latest is not None else []
            index_manifest = f"index-manifest-{uuid.uuid4()}-0"
            write_index_manifest(c.file_io, c.paths.manifest_file(index_manifest), swap.apply(current, c.table),
                                 c.options.manifest_compression)
            created.append(c.paths.manifest_file(index_manifest))
        if self.index is not None:
            if index_manifest != self.index.base_manifest:
                raise CommitConflictError(
                    f"the index of table {c.table} changed while this commit was prepared (another writer "
                    "of this dynamic-bucket table committed); retry the write", snapshot_id=None)
            index_manifest = f"index-manifest-{uuid.uuid4()}-0"
            write_index_manifest(c.file_io, c.paths.manifest_file(index_manifest), self.index.entries,
                                 c.options.manifest_compression)
            created.append(c.paths.manifest_file(index_manifest))
        if c.options.manifest_delete_file_drop_stats:  # DELETE entries are never pruned on
            deletes = [replace(e, file=replace(e.file, value_stats=EMPTY_STATS, value_stats_cols=()))
                       for e in deletes]
        delete_metas = c.write_manifests(deletes)
        created += [c.paths.manifest_file(m.file_name) for m in delete_metas]
        base_metas: list[ManifestFileMeta] = []
        if latest is not None:
            for name in (latest.base_manifest_list, latest.delta_manifest_list):
                base_metas += read_manifest_list(c.file_io, c.paths.manifest_file(name))
            base_metas = c.merge_manifests(base_metas, created)
        list_id = f"manifest-list-{uuid.uuid4()}"
        compression = c.options.manifest_compression
        base_size = write_manifest_list(c.file_io, c.paths.manifest_file(f"{list_id}-0"), base_metas,
                                        compression)
        delta_size = write_manifest_list(c.file_io, c.paths.manifest_file(f"{list_id}-1"),
                                         delete_metas + self.add_metas, compression)
        created += [c.paths.manifest_file(f"{list_id}-0"), c.paths.manifest_file(f"{list_id}-1")]
        changelog_list, changelog_size, changelog_rows = None, None, None
        if self.changelog_metas:
            changelog_list = f"{list_id}-changelog"
            changelog_size = write_manifest_list(c.file_io, c.paths.manifest_file(changelog_list),
                                                 self.changelog_metas, compression)
            created.append(c.paths.manifest_file(changelog_list))
            changelog_rows = sum(e.file.row_count for e in self.changes.changelog)
        delta_rows = sum(e.file.row_count for e in self.adds) - sum(e.file.row_count for e in deletes)
        snapshot = Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=max(c.schema.id, latest.schema_id if latest else 0),
            base_manifest_list=f"{list_id}-0", base_manifest_list_size=base_size,
            delta_manifest_list=f"{list_id}-1", delta_manifest_list_size=delta_size,
            changelog_manifest_list=changelog_list, changelog_manifest_list_size=changelog_size,
            changelog_record_count=changelog_rows, index_manifest=index_manifest,
            commit_user=c.commit_user, commit_identifier=self.identifier, commit_kind=self.kind,
            time_millis=int(time.time() * 1000),
            total_record_count=(latest.total_record_count if latest else 0) + delta_rows,
            delta_record_count=delta_rows, watermark=latest.watermark if latest else None,
            properties=self.properties, next_row_id=latest.next_row_id if latest else None,
            uuid=str(uuid.uuid4()), writer_version=WRITER_VERSION)
        if self._publish(snapshot):
            log.info("committed %s snapshot %d of %s: +%d files, -%d files, %+d rows",
                     self.kind, snapshot.id, c.table, len(self.adds), len(deletes), delta_rows)
            return snapshot.id
        if not self.uncertain:
            for path in created:
                c.file_io.delete_quietly(path)
        return "lost"

    def _publish(self, snapshot: Snapshot) -> bool:
        store = self.c.snapshots
        if not self._base_is_current(snapshot.id):
            return False
        settled = self.uncertain
        self.uncertain = True  # until the store answers (even if interrupted) the outcome is unknown
        try:
            created = store.try_publish(snapshot)
        except (FileIOError, OSError) as exc:
            log.warning("publishing snapshot %d of %s failed: %s", snapshot.id, self.c.table, exc)
            return self._is_ours(snapshot)
        if created and self._resurrected(snapshot):
            store.file_io.delete(store.file(snapshot.id))
            self.uncertain = settled
            return False
        self.uncertain = settled
        if created:
            store.write_latest_hint(snapshot.id)
        return created or self._is_ours(snapshot)

    def _resurrected(self, snapshot: Snapshot) -> bool:
        """Whether the id we just created had been committed and expired by others while this
        attempt was paused between its check of ``snapshot-(N-1)`` and the create: then a newer
        snapshot exists that was not built on ours (it has none of our files). Checked before the
        ``LATEST`` hint names our snapshot, so nobody builds on it; we remove it and retry."""
        store, n = self.c.snapshots, snapshot.id
        if n > 1 and store.exists(n - 1):
            return False  # expiry deletes oldest first: N was never expired
        newer = [i for i in store.snapshot_ids() if i > n]
        if not newer or not self.adds:
            return False
        try:
            following = store.snapshot(newer[0])
        except SnapshotNotFoundError:
            return False
        ours = {e.file.file_name for e in self.adds}
        entries = read_entries(self.c.file_io, self.c.paths, [
            meta for name in (following.base_manifest_list, following.delta_manifest_list)
            for meta in read_manifest_list(self.c.file_io, self.c.paths.manifest_file(name))])
        if any(e.file.file_name in ours for manifest in entries for e in manifest):
            return False
        log.warning("snapshot id %d of %s had been committed and expired while this commit was paused; "
                    "withdrawing it and retrying on snapshot %d", n, self.c.table, newer[-1])
        return True

    def _base_is_current(self, snapshot_id: int) -> bool:
        """Whether ``snapshot-(N-1)`` (or, for N = 1, no snapshot) is still there just before we
        create ``snapshot-N``. An attempt slow enough for N to be committed by another writer and
        then expired would otherwise re-create the freed id: create-if-absent succeeds, and the
        table's latest state jumps back to our commit. Expiry deletes oldest first, so while N-1
        exists N was never expired (and rollback, which deletes newer snapshots, is caught too)."""
        store = self.c.snapshots
        current = store.exists(snapshot_id - 1) if snapshot_id > 1 else store.latest_id() is None
        if not current:
            log.info("snapshot %d of %s is no longer the next one (expiry or rollback moved on); retrying",
                     snapshot_id, self.c.table)
        return current

    def _is_ours(self, snapshot: Snapshot) -> bool:
        """After a reported failure, whether ``snapshot-N`` holds exactly what we wrote.

        An object store may report a conflict for a create that actually succeeded (a retried
        request finding its own object), so the stored snapshot is compared by uuid.
        """
        store = self.c.snapshots
        try:
            stored = store.snapshot(snapshot.id)
        except SnapshotNotFoundError:
            return False
        except (FileIOError, OSError):
            self.uncertain = True
            return False
        if stored.uuid == snapshot.uuid:
            store.write_latest_hint(snapshot.id)
            return True
        return False

