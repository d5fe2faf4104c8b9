"""The table facade: writes, reads, time travel and metadata of one Paimon table."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.commit import FileStoreCommit, IndexUpdate, Overwrite, new_commit_user
from paimon_core.compaction.compactor import CompactionResult, PartitionSpec, TableCompactor
from paimon_core.compaction.state import LsmState
from paimon_core.consumer import Consumer, ConsumerStore
from paimon_core.errors import (
    InvalidArgumentError,
    OptionError,
    SchemaError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    UnsupportedFeatureError,
    WriterClosedError,
)
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths, unescape_path_name
from paimon_core.maintenance.after_commit import maintain_after_commit
from paimon_core.maintenance.auto_tags import AutoTagResult, create_automatic_tags
from paimon_core.maintenance.drop_partitions import DroppedPartitions, drop_partitions
from paimon_core.maintenance.expiry import ExpiryPlan, SnapshotExpiry
from paimon_core.maintenance.mark_done import MarkedDone, SuccessFile, mark_partitions_done, read_success_file
from paimon_core.maintenance.orphans import OrphanFiles, OrphanFilesClean
from paimon_core.maintenance.rollback import Rollback, plan_rollback, rollback_to
from paimon_core.manifest import IndexManifestEntry, ManifestEntry, read_index_manifest
from paimon_core.merge import engine_for
from paimon_core.names import Identifier
from paimon_core.options import TableOptions
from paimon_core.progress import Progress, no_progress
from paimon_core.read.changes import (
    ROW_KIND,
    ChangeReader,
    carries_changes,
    change_entries,
    change_splits,
    warn_if_changes_are_inputs,
)
from paimon_core.read.merge_read import MergeSplitReader
from paimon_core.read.predicate import Predicate, parse_filter
from paimon_core.read.scan import DataSplit, PartitionDecoder, TableScan, live_entries
from paimon_core.read.split_read import SplitReader
from paimon_core.read.stream import ChangeBatch, ChangeStream, start_position
from paimon_core.schema import SchemaChange, TableSchema, apply_changes
from paimon_core.schema_store import SchemaStore
from paimon_core.snapshot import (
    BATCH_COMMIT_IDENTIFIER,
    ChangeHistory,
    ChangelogStore,
    Snapshot,
    SnapshotStore,
    epoch_ms,
)
from paimon_core.tags import Tag, TagStore
from paimon_core.write.append_writer import AppendWriter
from paimon_core.write.conform import check_partition_values, conform, internal_partition_spec, iter_input
from paimon_core.write.message import CommitMessage
from paimon_core.write.prepared import CommitOutcome, PreparedCommit, commit_prepared
from paimon_core.write.primary_key_sink import IndexState, PrimaryKeySink
from paimon_core.write.shard import Shard, as_shard

if TYPE_CHECKING:
    import pandas as pd

    from paimon_core.read.lookup import TableLookup

log = logging.getLogger(__name__)

OverwriteArg = bool | Mapping[str, Any]
_MAX_STALL_ROUNDS = 8  # each round is a compaction; more means the picker makes no progress


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One live data file, as listed by ``paimon files``."""

    partition: str
    bucket: int
    level: int
    file_name: str
    row_count: int
    file_size: int
    schema_id: int


class Table:
    """A Paimon table in a filesystem catalog; obtain it from :class:`paimon_core.Catalog`."""

    def __init__(self, file_io: FileIO, identifier: Identifier, path: str) -> None:
        self.file_io = file_io
        self.identifier = identifier
        self.path = path
        self.paths = TablePaths(path)
        self.name = str(identifier)
        self.schemas = SchemaStore(file_io, self.paths, self.name)
        self.snapshot_store = SnapshotStore(file_io, self.paths, self.name)
        self.change_history = ChangeHistory(self.snapshot_store, ChangelogStore(file_io, self.paths, self.name))

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.file_io.uri(self.path)!r})"

    # ---- metadata ------------------------------------------------------------------------

    @property
    def schema(self) -> TableSchema:
        """The current (latest) schema version."""
        return self.schemas.latest()

    @property
    def options(self) -> TableOptions:
        """The table options of the current schema, typed (see :class:`TableOptions`)."""
        return TableOptions.from_map(self.schema.effective_options(), table=self.name)

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema reads return (the current schema's columns)."""
        return self.schema.arrow_schema()

    @property
    def uri(self) -> str:
        """Where the table lives, as a URI other engines can open."""
        return self.file_io.uri(self.path)

    def latest_snapshot(self) -> Snapshot | None:
        """The newest snapshot, or None before the first commit."""
        return self.snapshot_store.latest()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot ``snapshot_id``; raises SnapshotExpiredError / SnapshotNotFoundError if it is gone."""
        return self.snapshot_store.snapshot(snapshot_id)

    def snapshot_at(self, moment: dt.datetime | int) -> Snapshot:
        """The newest snapshot committed at or before ``moment`` (a datetime, naive meaning local
        time, or epoch milliseconds): the one a read with ``timestamp_ms`` sees.

        Raises:
            SnapshotNotFoundError: no retained snapshot is that old (names the earliest).
        """
        timestamp_ms = epoch_ms(moment, what=f"time travel on table {self.name}", name="moment")
        if timestamp_ms is None:
            raise InvalidArgumentError(f"time travel on table {self.name}: give a datetime or epoch milliseconds")
        return self.snapshot_store.at_or_before(timestamp_ms)

    def snapshots(self) -> list[Snapshot]:
        """Every retained snapshot, oldest first."""
        return list(self.snapshot_store.snapshots())

    def tag(self, name: str) -> Snapshot:
        """The snapshot a tag points at (it survives the expiry of the snapshot itself)."""
        return self._tags.get(name).snapshot

    # ---- tags, expiry, rollback -----------------------------------------------------------------

    @property
    def _tags(self) -> TagStore:
        return TagStore(self.file_io, self.paths, self.name)

    def create_tag(self, name: str, snapshot_id: int | None = None, *,
                   time_retained_s: float | None = None) -> Tag:
        """Tag a snapshot (default the latest): it and its files are kept until the tag is deleted."""
        snapshot = self.latest_snapshot() if snapshot_id is None else self.snapshot(snapshot_id)
        if snapshot is None:
            raise SnapshotNotFoundError(f"table {self.name} has no snapshot to tag")
        return self._tags.create(name, snapshot, time_retained_s=time_retained_s)

    def delete_tag(self, name: str) -> bool:
        """Remove a tag; files only it kept become orphans for :meth:`remove_orphan_files`."""
        return self._tags.delete(name)

    def list_tags(self) -> list[Tag]:
        """Every tag, oldest snapshot first."""
        return self._tags.tags()

    def expire_snapshots(self, *, dry_run: bool = True, older_than: dt.datetime | int | None = None,
                         retain_min: int | None = None, retain_max: int | None = None,
                         max_deletes: int | None = None, progress: Progress = no_progress) -> ExpiryPlan:
        """Expire old snapshots with Paimon's rule, never touching what a kept snapshot, a tag
        or a consumer's unread snapshot needs.

        Args:
            dry_run: only plan (the default): the result lists what would be deleted.
            older_than: keep snapshots (and long-lived changelogs) current at or after this time, a
                datetime or epoch milliseconds (default: now minus ``snapshot.time-retained`` /
                ``changelog.time-retained``).
            retain_min / retain_max / max_deletes: override ``snapshot.num-retained.min``,
                ``snapshot.num-retained.max`` and ``snapshot.expire.limit``.
            progress: ``(stage, done, total)`` as files are deleted (see :mod:`paimon_core.progress`).
        """
        expiry = SnapshotExpiry(self)
        older_than_ms = epoch_ms(older_than, what=f"expiry of table {self.name}", name="older_than")
        plan = expiry.plan(expiry.retention(older_than_ms=older_than_ms, retain_min=retain_min,
                                            retain_max=retain_max, limit=max_deletes),
                           changelog_older_than_ms=older_than_ms)
        return plan if dry_run else expiry.execute(plan, progress)

    def create_automatic_tags(self) -> AutoTagResult:
        """``tag.automatic-creation = process-time``: tag the last finished period if it is due
        (maintaining writers do this after each commit; write-only tables need a maintenance run)."""
        return create_automatic_tags(self, int(time.time() * 1000))

    def remove_orphan_files(self, *, older_than: dt.datetime | int | None = None, dry_run: bool = True,
                            force: bool = False, progress: Progress = no_progress) -> OrphanFiles:
        """Delete files no snapshot, tag or long-lived changelog references, older than
        ``older_than`` (a datetime or epoch milliseconds; default a day ago; within an hour of now
        only with ``force``, as files of commits in flight are that young). ``dry_run`` (the
        default) only lists them; ``progress`` hears of files listed and snapshots read."""
        older_than_ms = epoch_ms(older_than, what=f"orphan-file cleanup of table {self.name}",
                                  name="older_than")
        return OrphanFilesClean(self).run(older_than_ms=older_than_ms, dry_run=dry_run, force=force,
                                          progress=progress)

    def rollback_to(self, target: int | str | dt.datetime, *, dry_run: bool = False) -> Rollback:
        """Make a snapshot id, a tag, or the snapshot current at a time (a datetime; naive is
        local time) the latest state; newer snapshots and tags are removed (their files are left to
        orphan-file cleanup). Stop writers first. ``dry_run`` only says what would go."""
        return plan_rollback(self, target) if dry_run else rollback_to(self, target)

    def drop_partitions(self, partitions: PartitionSpec | Sequence[PartitionSpec], *, dry_run: bool = True,
                        commit_user: str | None = None) -> DroppedPartitions:
        """Drop partitions (``{column: value}`` maps; a prefix of the partition keys matches
        every partition below it) as one OVERWRITE snapshot; ``dry_run`` (the default) only
        counts what would go. Earlier snapshots and tags keep the files until they expire."""
        specs = [partitions] if isinstance(partitions, Mapping) else list(partitions)
        return drop_partitions(self, specs, dry_run=dry_run, commit_user=commit_user)

    def mark_partitions_done(self, partitions: PartitionSpec | str | Sequence[PartitionSpec | str]) -> MarkedDone:
        """Tell downstream readers these partitions are complete: write (or refresh) each one's
        ``_SUCCESS`` file as Java Paimon's ``mark_partition_done`` does. A spec is a
        ``{column: value}`` map or a ``k=v/k2=v2`` path over a leading run of the partition keys;
        the partition need not hold data yet (an hour without events is done too)."""
        specs = [partitions] if isinstance(partitions, Mapping | str) else list(partitions)
        return mark_partitions_done(self, specs)

    def success_file(self, partition: PartitionSpec | str) -> SuccessFile | None:
        """The ``_SUCCESS`` file of a partition (when it was first and last marked done), or
        None if it never was."""
        return read_success_file(self, partition)

    @contextlib.contextmanager
    def _expiry_guard(self, snapshot: Snapshot | None) -> Iterator[None]:
        """A file missing under a snapshot that is gone by now: the snapshot was expired (or
        rolled back) during the read; say so instead of failing with a bare missing file."""
        try:
            yield
        except FileNotFoundError as exc:
            if snapshot is not None and not self.snapshot_store.exists(snapshot.id):
                raise SnapshotExpiredError(
                    f"snapshot {snapshot.id} of table {self.name} was expired or rolled back while it was "
                    f"read ({exc}); read a newer snapshot, or protect this one with a tag or consumer id") from exc
            raise

    def alter(self, changes: Sequence[SchemaChange]) -> TableSchema:
        """Apply schema changes as one new schema version."""
        evolved = apply_changes(self.schema, changes, table=self.name)
        self.schemas.commit(evolved)
        log.info("table %s evolved to schema %d", self.name, evolved.id)
        return evolved

    def files(self, snapshot_id: int | None = None) -> list[FileInfo]:
        """Live data files of a snapshot (default the latest)."""
        snapshot = self._resolve_snapshot(snapshot_id, None, None)
        if snapshot is None:
            return []
        schema = self.schemas.schema(snapshot.schema_id)
        decode = PartitionDecoder(schema.partition_types)
        out = []
        for entry in live_entries(self.file_io, self.paths, snapshot):
            values = decode(entry.partition)
            partition = ",".join(f"{k}={v}" for k, v in zip(schema.partition_keys, values))
            f = entry.file
            out.append(FileInfo(partition, entry.bucket, f.level, f.file_name, f.row_count,
                                f.file_size, f.schema_id))
        return out

    # ---- compaction ---------------------------------------------------------------------

    def compact(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                buckets: Iterable[int] | None = None, *, full: bool = False,
                commit_user: str | None = None, progress: Progress = no_progress,
                require_existing: bool = True) -> CompactionResult:
        """Compact the selected partitions/buckets (default all) as one COMPACT snapshot.

        Args:
            partitions: a ``{column: value}`` spec or a partition path as :meth:`lsm_state`
                reports it (``"dt=2024-01-01"``), or several; default every partition.
            buckets: bucket numbers to compact; default every bucket.
            full: rewrite each bucket into one sorted run at the max level (append tables:
                every small file) instead of doing only what the picker asks for now.
            progress: ``(stage, done, total)`` as buckets finish (see :mod:`paimon_core.progress`).
            require_existing: refuse (``OptionError``) a named partition or bucket without files,
                as a typo; schedulers that plan from an older snapshot pass False.

        Raises:
            OptionError: ``require_existing`` and a named partition or bucket holds no files.
        """
        return TableCompactor(self, commit_user=commit_user).compact(partitions, buckets, full=full,
                                                                     progress=progress,
                                                                     require_existing=require_existing)

    def prepare_compaction(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                           buckets: Iterable[int] | None = None, *, full: bool = False,
                           shard: Shard | tuple[int, int] | None = None) -> PreparedCommit:
        """Compact like :meth:`compact` but without committing: one task of a fanned-out compaction.

        ``shard=(index, count)`` keeps the buckets task ``index`` of ``count`` owns, so tasks
        never compact the same bucket. Commit the tasks' results together with :meth:`commit`
        (one COMPACT snapshot) or each on its own (progress survives a failed task).
        """
        compactor = TableCompactor(self)
        prepared = compactor.prepare(partitions, buckets, full=full, shard=as_shard(shard))
        return PreparedCommit(self.name, self.schema.id, compactions=prepared.increments, full=prepared.full,
                              reports=compactor.reports(prepared))

    def partition_of(self, path: str) -> dict[str, str | None]:
        """``{column: value}`` of a partition path as :meth:`lsm_state` reports it
        (``dt=2024-01-01/region=eu``); ``""`` (unpartitioned) gives ``{}``, the default
        partition name (a null value) gives None.

        Raises:
            ValueError: ``path`` is not ``k=v[/k=v]``.
        """
        if not path:
            return {}
        default = self.options.partition_default_name
        spec: dict[str, str | None] = {}
        for part in path.split("/"):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"{path!r} is not a partition path of table {self.name} (want k=v[/k=v])")
            text = unescape_path_name(value)
            spec[unescape_path_name(key)] = None if text == default else text
        return spec

    def lsm_state(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                  buckets: Iterable[int] | None = None) -> LsmState:
        """Per bucket: level-0 files, sorted runs, files and bytes per level, compaction debt.

        Reads manifests only, never data files.
        """
        return TableCompactor(self).state(partitions, buckets)

    # ---- writing ------------------------------------------------------------------------

    def find_commit(self, commit_user: str, commit_identifier: int) -> int | None:
        """The snapshot id of an earlier commit (user, identifier), if it landed.

        Lets a retried job skip producing data that is already committed.
        """
        committer = FileStoreCommit(self.file_io, self.paths, self.schema, self.options,
                                    table=self.name, commit_user=commit_user)
        return committer.find_committed(commit_identifier)

    def new_write(self, *, commit_user: str | None = None, commit_identifier: int | None = None,
                  overwrite: OverwriteArg = False, properties: Mapping[str, str] | None = None,
                  shard: Shard | tuple[int, int] | None = None) -> TableWrite:
        """A writer that takes many batches into one atomic commit.

        Args:
            commit_user: stable writer identity; with ``commit_identifier`` it makes a re-run
                of the same commit (after a crash or a retried job) a no-op.
            commit_identifier: increasing id of this commit for ``commit_user``.
            overwrite: False to append, True for dynamic partition overwrite (or the whole table
                when ``dynamic-partition-overwrite`` is false), or a ``{column: value}`` map of
                the partition to replace.
            properties: string properties stored in the snapshot.
            shard: ``(index, count)``: this writer is one of ``count`` parallel writers of one
                commit and writes only the rows of the buckets it owns (Paimon's channel of a
                bucket; whole partitions for dynamic-bucket tables). Every writer sees the same
                input; hand their :meth:`TableWrite.prepare` results to :meth:`commit`.
                Append tables without buckets take no shard: give each writer its own input.
        """
        return TableWrite(self, commit_user=commit_user, commit_identifier=commit_identifier,
                          overwrite=overwrite, properties=properties, shard=shard)

    def commit(self, prepared: Iterable[PreparedCommit | bytes], *, commit_user: str | None = None,
               commit_identifier: int | None = None, overwrite: OverwriteArg = False,
               properties: Mapping[str, str] | None = None) -> CommitOutcome:
        """Commit what many writers prepared (:meth:`TableWrite.prepare`,
        :meth:`prepare_compaction`, or their ``to_bytes()``) atomically, as one snapshot.

        New files make one APPEND (or OVERWRITE) snapshot, compactions one COMPACT snapshot
        after it, under the same identifier. With ``commit_user`` and ``commit_identifier`` a
        re-run finds the commit already landed and makes nothing twice. Conflicts are checked
        and retried as for every commit; the files of a commit that provably lost are removed.
        """
        started = time.monotonic()
        parts = [p if isinstance(p, PreparedCommit) else PreparedCommit.from_bytes(p) for p in prepared]
        options = self.options
        user = commit_user or new_commit_user(options)
        spec = overwrite_spec(self, self.schema, options, overwrite)
        outcome = commit_prepared(self, parts, commit_user=user, commit_identifier=commit_identifier,
                                  overwrite=spec, properties=properties, started=started)
        if outcome.data_snapshot is not None and not options.write_only:
            written = {(m.partition.row, m.bucket) for p in parts for m in p.data}
            maintain_after_commit(self, written, commit_user=user,
                                  commit_identifier=BATCH_COMMIT_IDENTIFIER if commit_identifier is None
                                  else commit_identifier)
        return outcome

    def write(self, data: Any, *, overwrite: OverwriteArg = False, row_kind: str | None = None,
              commit_user: str | None = None, commit_identifier: int | None = None,
              properties: Mapping[str, str] | None = None) -> int | None:
        """Write ``data`` (Arrow table/batches/reader, pandas) as one atomic commit.

        Returns:
            The new snapshot id, or None when nothing was written (empty input).
        """
        with self.new_write(commit_user=commit_user, commit_identifier=commit_identifier,
                            overwrite=overwrite, properties=properties) as writer:
            writer.write(data, row_kind=row_kind)
            return writer.commit()

    def delete(self, keys: Any, *, commit_user: str | None = None, commit_identifier: int | None = None,
               properties: Mapping[str, str] | None = None) -> int | None:
        """Delete rows of a primary-key table by key, as one commit of -D rows."""
        with self.new_write(commit_user=commit_user, commit_identifier=commit_identifier,
                            properties=properties) as writer:
            writer.delete(keys)
            return writer.commit()

    # ---- reading -------------------------------------------------------------------------

    def plan(self, *, filter: Any = None, snapshot_id: int | None = None,
             timestamp_ms: int | None = None, tag: str | None = None) -> list[DataSplit]:
        """The splits a read with these arguments would read (after pruning)."""
        snapshot, schema = self._read_target(snapshot_id, timestamp_ms, tag)
        if snapshot is None:
            return []
        predicate, _ = self._filters(filter, schema)
        return self._scan(snapshot, schema, predicate)

    def to_batches(self, columns: Sequence[str] | None = None, filter: Any = None, *,
                   snapshot_id: int | None = None, timestamp_ms: int | None = None,
                   tag: str | None = None, batch_size: int = 65536) -> pa.RecordBatchReader:
        """A streaming reader: memory is bounded by one row group, whatever the table size."""
        snapshot, schema = self._read_target(snapshot_id, timestamp_ms, tag)
        reader = self._reader(schema, columns, filter)
        with self._expiry_guard(snapshot if tag is None else None):
            splits = self._splits(snapshot, schema, reader)

        def batches() -> Iterator[pa.RecordBatch]:
            with self._expiry_guard(snapshot if tag is None else None):
                yield from reader.iter_batches(splits, batch_size)

        return pa.RecordBatchReader.from_batches(reader.output_schema, batches())

    def read(self, columns: Sequence[str] | None = None, filter: Any = None, *,
             snapshot_id: int | None = None, timestamp_ms: int | None = None,
             tag: str | None = None) -> pa.Table:
        """Read the table (or a snapshot, timestamp or tag of it) as one Arrow table.

        Args:
            columns: projection; default every column.
            filter: DNF tuples ``[("dt", "=", "2024-01-01"), ("id", ">", 5)]`` (used to prune
                partitions and files, then applied exactly), or a ``pyarrow.compute.Expression``.
        """
        snapshot, schema = self._read_target(snapshot_id, timestamp_ms, tag)
        reader = self._reader(schema, columns, filter)
        with self._expiry_guard(snapshot if tag is None else None):
            return _read_all(reader, self._splits(snapshot, schema, reader))

    def read_split(self, split: DataSplit, columns: Sequence[str] | None = None, filter: Any = None) -> pa.Table:
        """Read one split from :meth:`plan` (e.g. to spread a read over workers), with the same
        ``filter`` the plan was made with to drop the rows it rules out."""
        return _read_all(self._reader(self.schemas.schema(split.schema_id), columns, filter), [split])

    def lookup(self, keys: Any, *, columns: Sequence[str] | None = None,
               snapshot_id: int | None = None) -> pa.Table:
        """The current rows of the primary keys ``keys`` at a snapshot (default the latest).

        The probe side of a lookup join: only the bucket of each key (every bucket of its
        partition for dynamic-bucket tables), the files whose key range holds it and the row
        groups whose statistics allow it are read, and the versions found are merged by the
        table's merge engine, so the result equals :meth:`read` of that snapshot filtered to the
        keys, deletes and deletion vectors included.

        Args:
            keys: a pyarrow Table or RecordBatch, a dict of column lists or a pandas DataFrame
                with every primary-key column (partition keys included: they pick the
                partition); other columns are ignored, so a batch can be passed as it is.
            columns: projection of the result; default every column.
            snapshot_id: time travel to this snapshot.

        Returns:
            One row per key found, in no particular order (join on the key columns). Keys the
            table does not hold are absent; a key given several times (or with a null key
            column, which matches nothing) is returned once (not at all).

        Raises:
            UnsupportedFeatureError: the table has no primary key (read it with a filter).
            SchemaError: ``keys`` lack a primary-key column, or hold a value that does not cast
                to its type.

        Each call plans the snapshot from its manifests; for many lookups use
        :meth:`new_lookup`, which plans once per snapshot and caches what it reads.
        """
        from paimon_core.read.lookup import TableLookup

        return TableLookup(self, columns, cache=False).lookup(keys, snapshot_id=snapshot_id)

    def new_lookup(self, columns: Sequence[str] | None = None, *,
                   options: Mapping[str, str] | None = None) -> TableLookup:
        """A :class:`paimon_core.TableLookup` for repeated :meth:`lookup` calls (a lookup join).

        It keeps decoded row groups in memory, bounded by ``lookup.cache-max-memory-size``
        (least recently used evicted) and dropped after ``lookup.cache-file-retention`` without
        use; data files never change, so cached ones stay valid when new snapshots arrive.
        Each lookup of the latest snapshot checks for a new one and then plans it (new files
        are read, dropped ones no longer consulted). ``options`` override the table's options
        for this lookup only, as Paimon's dynamic options do, e.g.
        ``{"lookup.cache-max-memory-size": "64 mb"}``.
        """
        from paimon_core.read.lookup import TableLookup

        return TableLookup(self, columns, options=options)

    def to_dask(self, columns: Sequence[str] | None = None, filter: Any = None, *,
                snapshot_id: int | None = None, timestamp_ms: int | None = None, tag: str | None = None) -> Any:
        """The table as a Dask DataFrame with one partition per split (needs ``dask[dataframe]``);
        see :func:`paimon_core.read.distributed.to_dask`."""
        from paimon_core.read.distributed import to_dask

        return to_dask(self, columns, filter, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms, tag=tag)

    def to_pandas(self, columns: Sequence[str] | None = None, filter: Any = None, *,
                  snapshot_id: int | None = None, timestamp_ms: int | None = None,
                  tag: str | None = None) -> pd.DataFrame:
        """Read as :meth:`read` does, as a pandas DataFrame."""
        return self.read(columns, filter, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms,
                         tag=tag).to_pandas()

    # ---- changes ---------------------------------------------------------------------------

    def read_changes(self, start_snapshot: int | None = None, end_snapshot: int | None = None, *,
                     columns: Sequence[str] | None = None, filter: Any = None) -> pa.Table:
        """What the snapshots after ``start_snapshot`` up to ``end_snapshot`` changed.

        Paimon's ``incremental-between`` (start, end]: rows with a ``_row_kind`` column first
        (``+I``, ``-U``, ``+U``, ``-D``), in commit order. ``start_snapshot`` defaults to before
        the earliest snapshot, ``end_snapshot`` to the latest.
        """
        reader = self._change_reader(columns, filter)
        tables = [b.data for b in self._changes_between(start_snapshot, end_snapshot, reader) if b.data.num_rows]
        return pa.concat_tables(tables) if tables else reader.output_schema.empty_table()

    def iter_changes(self, start_snapshot: int | None = None, end_snapshot: int | None = None, *,
                     columns: Sequence[str] | None = None, filter: Any = None) -> Iterator[ChangeBatch]:
        """:meth:`read_changes` one snapshot at a time (snapshots without changes are skipped)."""
        return self._changes_between(start_snapshot, end_snapshot, self._change_reader(columns, filter))

    def _changes_between(self, start_snapshot: int | None, end_snapshot: int | None,
                         reader: ChangeReader) -> Iterator[ChangeBatch]:
        history = self.change_history
        earliest, latest = history.earliest_id(), history.latest_id()
        if earliest is None or latest is None:
            return
        start = earliest - 1 if start_snapshot is None else start_snapshot
        end = latest if end_snapshot is None else min(end_snapshot, latest)
        if start + 1 < earliest and start < end:
            raise SnapshotNotFoundError(f"the changes of table {self.name} after snapshot {start} are partly "
                                        f"expired: the earliest snapshot is {earliest}")
        for snapshot_id in range(start + 1, end + 1):
            batch = self._snapshot_changes(snapshot_id, reader)
            if batch is not None:
                yield batch

    def stream(self, scan_mode: str = "latest-full", *, snapshot_id: int | None = None,
               timestamp_ms: int | None = None, consumer_id: str | None = None,
               poll_interval_s: float | None = None, until_latest: bool = False, timeout_s: float | None = None,
               columns: Sequence[str] | None = None, filter: Any = None) -> ChangeStream:
        """Follow the table: an iterator of :class:`ChangeBatch` per snapshot as they are committed.

        ``scan_mode``: ``latest-full`` (the current contents, then changes), ``latest`` (only
        new changes), ``from-snapshot`` / ``from-snapshot-full`` (``snapshot_id``),
        ``from-timestamp`` (``timestamp_ms``). A ``consumer_id`` with saved progress resumes
        there instead and saves progress as batches are handled. ``poll_interval_s`` defaults to
        ``continuous.discovery-interval``; ``until_latest`` stops once caught up.
        """
        reader = self._change_reader(columns, filter)
        store = self.snapshot_store
        consumers = ConsumerStore(self.file_io, self.paths, self.name)
        older = None
        if scan_mode == "from-timestamp":
            if timestamp_ms is None:
                raise OptionError(f"scan mode from-timestamp of table {self.name} needs timestamp_ms")
            older = store.older_than(timestamp_ms)
        start = start_position(scan_mode, latest=store.latest_id(), earliest=self.change_history.earliest_id(),
                               snapshot_id=snapshot_id, older_than_timestamp=older, table=self.name,
                               consumer_next=consumers.next_snapshot(consumer_id) if consumer_id else None)
        interval = self.options.continuous_discovery_interval_ms / 1000 if poll_interval_s is None else poll_interval_s
        return ChangeStream(table=self.name, snapshots=self.change_history, start=start,
                            read_full=lambda sid: self._full_batch(sid, columns, filter),
                            read_changes=lambda sid: self._snapshot_changes(sid, reader),
                            consumers=consumers, consumer_id=consumer_id, poll_interval_s=interval,
                            until_latest=until_latest, timeout_s=timeout_s)

    def _change_reader(self, columns: Sequence[str] | None, filter: Any) -> ChangeReader:
        warn_if_changes_are_inputs(self.schema, self.options, self.name)
        return ChangeReader(self._reader(self.schema, columns, filter))

    def _snapshot_changes(self, snapshot_id: int, reader: ChangeReader) -> ChangeBatch | None:
        snapshot = self.change_history.snapshot(snapshot_id)
        entries = change_entries(self.file_io, self.paths, snapshot, primary_key=bool(self.schema.primary_keys),
                                 producer=self.options.changelog_producer)
        if not entries:
            return None
        data = reader.read(change_splits(snapshot, self.schema, entries))
        return ChangeBatch(snapshot_id, snapshot.commit_kind, data)

    def _full_batch(self, snapshot_id: int, columns: Sequence[str] | None, filter: Any) -> ChangeBatch:
        """The table at ``snapshot_id`` as inserts; what a changelog will still report is left out.

        With ``lookup`` level 0 is skipped (it surfaces as changelog when compacted), with
        ``full-compaction`` everything above the max level (as Paimon's streaming reads do).
        """
        snapshot = self.snapshot_store.snapshot(snapshot_id)
        reader = self._reader(self.schema, columns, filter)
        splits = self._splits(snapshot, self.schema, reader, batch=False)
        producer = self.options.changelog_producer
        if self.schema.primary_keys and producer in ("lookup", "full-compaction"):
            keep = (lambda f: f.level > 0) if producer == "lookup" else (
                lambda f: f.level == self.options.num_levels - 1)
            splits = [replace(s, files=tuple(f for f in s.files if keep(f))) for s in splits]
        data = _read_all(reader, splits)
        data = data.add_column(0, pa.field(ROW_KIND, pa.string(), False), pa.repeat(pa.scalar("+I"), data.num_rows))
        return ChangeBatch(snapshot_id, snapshot.commit_kind, data, initial=True)

    def consumers(self) -> list[Consumer]:
        """Streaming consumers of this table and where each resumes."""
        return ConsumerStore(self.file_io, self.paths, self.name).consumers()

    def consumer(self, consumer_id: str) -> int | None:
        """The first snapshot ``consumer_id`` has not read, or None if it never saved progress."""
        return ConsumerStore(self.file_io, self.paths, self.name).next_snapshot(consumer_id)

    def system(self, name: str, *, snapshot_id: int | None = None) -> pa.Table:
        """One of Paimon's system tables of this table (``t$files`` in Paimon's SQL), as Arrow.

        Names (with or without the ``$``, any case): ``snapshots``, ``schemas``, ``options``,
        ``manifests``, ``files``, ``partitions``, ``buckets``, ``tags``, ``consumers``,
        ``audit_log``. Columns, order and types are Apache Paimon's (0.9.0's shape where later
        versions differ), so what Java, Flink or Spark show for a table reads the same here.
        ``snapshot_id`` travels back for the tables of one snapshot (``manifests``, ``files``,
        ``partitions``, ``buckets``, ``audit_log``; default the latest); the others list every
        snapshot, schema, tag or consumer, or the current options, and refuse it.

        Raises:
            SystemTableNotFoundError: an unknown name (the message lists the valid ones).
            OptionError: ``snapshot_id`` for a system table without time travel.
            SnapshotNotFoundError: ``snapshot_id`` does not exist.
        """
        from paimon_core.system import read_system_table

        return read_system_table(self, name, snapshot_id=snapshot_id)

    def system_batches(self, name: str, *, snapshot_id: int | None = None) -> pa.RecordBatchReader:
        """:meth:`system` as a stream of record batches: ``audit_log`` (a whole snapshot's rows)
        is read a section at a time, so taking its first rows reads only those files."""
        from paimon_core.system import system_table_reader

        return system_table_reader(self, name, snapshot_id=snapshot_id)

    def has_changes(self, snapshot: Snapshot) -> bool:
        """Whether change reads and streams find rows in ``snapshot`` (metadata only)."""
        return carries_changes(snapshot, primary_key=bool(self.schema.primary_keys),
                               producer=self.options.changelog_producer)

    def _reader(self, schema: TableSchema, columns: Sequence[str] | None, filter: Any) -> SplitReader:
        predicate, expression = self._filters(filter, schema)
        if schema.primary_keys:
            engine = engine_for(schema, TableOptions.from_map(schema.effective_options()), table=self.name)
            return MergeSplitReader(self.file_io, self.paths, self.schemas, schema, columns=columns,
                                    predicate=predicate, expression=expression, table=self.name, engine=engine)
        return SplitReader(self.file_io, self.paths, self.schemas, schema, columns=columns,
                           predicate=predicate, expression=expression, table=self.name)

    def _splits(self, snapshot: Snapshot | None, schema: TableSchema,
                reader: SplitReader, *, batch: bool = True) -> list[DataSplit]:
        if snapshot is None:
            return []
        return self._scan(snapshot, schema, reader.predicate, batch=batch)

    def _scan(self, snapshot: Snapshot, schema: TableSchema, predicate: Predicate | None, *,
              batch: bool = True) -> list[DataSplit]:
        """The splits of a snapshot; ``batch`` reads follow Java's level-0 rule
        (:meth:`TableOptions.batch_scan_skips_level0`), streams their own."""
        skip = batch and self.options.batch_scan_skips_level0(primary_key=bool(schema.primary_keys))
        return TableScan(self.file_io, self.paths, self.schemas, snapshot, schema, predicate,
                         skip_level0=skip).plan()

    def _filters(self, filter: Any, schema: TableSchema) -> tuple[Predicate | None, pc.Expression | None]:
        if isinstance(filter, pc.Expression):
            try:  # an unknown column or a non-boolean expression fails here, before any file is read
                schema.arrow_schema().empty_table().filter(filter)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise SchemaError(f"filter {filter} does not apply to table {self.name}: {reason}") from None
            return None, filter
        return parse_filter(filter, schema, self.name), None

    def _read_target(self, snapshot_id: int | None, timestamp_ms: int | None,
                     tag: str | None) -> tuple[Snapshot | None, TableSchema]:
        snapshot = self._resolve_snapshot(snapshot_id, timestamp_ms, tag)
        travelled = snapshot_id is not None or timestamp_ms is not None or tag is not None
        if snapshot is not None and travelled:
            return snapshot, self.schemas.schema(snapshot.schema_id)
        return snapshot, self.schema

    def _resolve_snapshot(self, snapshot_id: int | None, timestamp_ms: int | None,
                          tag: str | None) -> Snapshot | None:
        chosen = [x for x in (snapshot_id, timestamp_ms, tag) if x is not None]
        if len(chosen) > 1:
            raise InvalidArgumentError(f"read of table {self.name}: pass at most one of snapshot_id, timestamp_ms "
                                       "and tag")
        if snapshot_id is not None:
            return self.snapshot_store.snapshot(snapshot_id)
        if timestamp_ms is not None:
            return self.snapshot_store.at_or_before(timestamp_ms)
        if tag is not None:
            return self.tag(tag)
        return self.snapshot_store.latest()



class TableWrite:
    """Streams batches into data files and commits them atomically (see :meth:`Table.new_write`).

    Used as a context manager, leaving the block without :meth:`commit` (or with an
    exception) aborts: every file written is deleted and the table is unchanged.
    """

    def __init__(self, table: Table, *, commit_user: str | None, commit_identifier: int | None,
                 overwrite: OverwriteArg, properties: Mapping[str, str] | None,
                 shard: Shard | tuple[int, int] | None = None) -> None:
        self.table = table
        self.schema = table.schema
        self.options = TableOptions.from_map(self.schema.effective_options(), table=table.name)
        for key in ("row-tracking.enabled", "data-evolution.enabled"):
            if self.schema.options.get(key, "false").lower() == "true":
                raise UnsupportedFeatureError(f"writing table {table.name} with {key}=true is not "
                                              "supported (row ids would not be assigned)")
        self.commit_user = commit_user or new_commit_user(self.options)
        self.commit_identifier = BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier
        self.overwrite = overwrite_spec(table, self.schema, self.options, overwrite)
        self.properties = properties
        self.shard = as_shard(shard)
        if self.shard is not None and not self.schema.primary_keys and self.options.bucket < 0:
            raise UnsupportedFeatureError(
                f"table {table.name} has no buckets (bucket = -1), so its writers are not sharded: give each "
                "writer its own slice of the input and no shard")
        self._static = self._static_filter()
        # Writers of tables without write-only compact what they wrote after each commit, and
        # stall (compact first) while a bucket has more sorted runs than the stop trigger.
        self.compacts = not self.options.write_only
        self.compaction: CompactionResult | None = None
        self.stall_seconds = 0.0
        if self.compacts and self.schema.primary_keys and self.shard is None:
            # a sharded writer leaves the stall to its committer, which compacts after the commit
            self._stall_while_over_stop_trigger()
        latest = table.snapshot_store.latest()
        self._sink: PrimaryKeySink | None = None
        self._appender: AppendWriter | None = None
        if self.schema.primary_keys:
            index_entries = read_index_manifest(table.file_io, table.paths.manifest_file(latest.index_manifest)) \
                if latest is not None and latest.index_manifest else []
            self._sink = PrimaryKeySink(table.file_io, table.paths, self.schema, self.options, table=table.name,
                                        next_sequence=self._restore_sequence(latest),
                                        index=IndexState(latest.index_manifest if latest else None, index_entries),
                                        shard=self.shard)
        else:
            restore = self._restore_sequence(latest) if self.options.bucket > 0 else None
            self._appender = AppendWriter(table.file_io, table.paths, self.schema, self.options,
                                          next_sequence=restore, shard=self.shard)
        self._closed = False

    def _stall_while_over_stop_trigger(self) -> None:
        """Paimon's write stall: no new level-0 run while a bucket is over the stop trigger."""
        compactor = TableCompactor(self.table)
        stop = self.options.sorted_run_stop_trigger
        started = time.monotonic()
        stalled = False
        for _ in range(_MAX_STALL_ROUNDS):
            over = [b for b in compactor.state().buckets if b.sorted_runs > stop]
            if not over:
                break
            stalled = True
            worst = max(over, key=lambda b: b.sorted_runs)
            log.warning("write stall on %s: %d buckets over num-sorted-run.stop-trigger %d (worst: partition %r "
                        "bucket %d with %d sorted runs); compacting before writing", self.table.name, len(over),
                        stop, worst.partition, worst.bucket, worst.sorted_runs)
            result = compactor.compact(partitions=None, buckets={b.bucket for b in over})
            if result.snapshot_id is None:
                break
        if stalled:
            self.stall_seconds = time.monotonic() - started
            log.warning("write stall on %s ended after %.2fs", self.table.name, self.stall_seconds)

    def _static_filter(self) -> pc.Expression | None:
        if self.overwrite is None or self.overwrite.mode != "static" or not self.overwrite.partition:
            return None
        arrow = self.table.arrow_schema
        expression = None
        for key, value in self.overwrite.partition.items():
            term = pc.field(key) == _internal_scalar(value, arrow.field(key).type)
            expression = term if expression is None else expression & term
        return expression

    def _restore_sequence(self, latest: Snapshot | None) -> Any:
        """Next sequence number per (partition, bucket): one past the largest in its files."""
        highest: dict[tuple[bytes, int], int] = {}
        if latest is not None:
            entry: ManifestEntry
            for entry in live_entries(self.table.file_io, self.table.paths, latest):
                key = (entry.partition, entry.bucket)
                highest[key] = max(highest.get(key, -1), entry.file.max_sequence_number)
        return lambda partition, bucket: highest.get((partition, bucket), -1) + 1

    def write(self, data: Any, *, row_kind: str | None = None) -> None:
        """Add rows; they become visible only when :meth:`commit` succeeds.

        Args:
            row_kind: for primary-key tables, the kind of every row (``+I``, ``-U``, ``+U``,
                ``-D``); by default the ``rowkind.field`` column's value, else ``+I`` (upsert).
        """
        self._add(data, row_kind=row_kind)

    def delete(self, keys: Any) -> None:
        """Delete rows of a primary-key table by key (other columns may be omitted)."""
        if self._sink is None:
            raise UnsupportedFeatureError(f"table {self.table.name} has no primary key to delete by")
        self._add(keys, row_kind="-D")

    def _add(self, data: Any, *, row_kind: str | None) -> None:
        if self._closed:
            raise WriterClosedError(f"this writer of table {self.table.name} is already closed (it committed, "
                                    "prepared or aborted); open another with table.new_write()")
        if self._sink is None and row_kind not in (None, "+I"):
            raise UnsupportedFeatureError(f"append table {self.table.name} only takes +I rows, not {row_kind!r}")
        try:
            for batch in iter_input(data):
                conformed = conform(batch, self.schema, self.table.name)
                check_partition_values(conformed, self.schema, self.table.name)
                self._check_static(conformed)
                if self._sink is not None:
                    self._sink.add(conformed, self._sink.kinds_of(conformed, row_kind))
                elif self._appender is not None:
                    self._appender.write(conformed)
        except BaseException:
            self.abort()
            raise

    def _check_static(self, data: pa.Table) -> None:
        if self._static is None or data.num_rows == 0:
            return
        outside = data.filter(~self._static)
        if outside.num_rows:
            row = outside.slice(0, 1).to_pylist()[0]
            spec = {k: row[k] for k in self.schema.partition_keys}
            raise SchemaError(f"row with partition {spec} does not belong to the overwritten "
                              f"partition {self.overwrite.partition if self.overwrite else {}} "
                              f"of table {self.table.name}")

    def commit(self, *, properties: Mapping[str, str] | None = None) -> int | None:
        """Commit everything written; returns the snapshot id (None if nothing to commit).

        Args:
            properties: snapshot properties known only now (e.g. counts of what was written),
                added to those given when the writer was created.
        """
        if properties:
            self.properties = {**(self.properties or {}), **properties}
        if self._closed:
            raise WriterClosedError(f"this writer of table {self.table.name} is already closed (it committed, "
                                    "prepared or aborted); open another with table.new_write()")
        committer = FileStoreCommit(self.table.file_io, self.table.paths, self.schema, self.options,
                                    table=self.table.name, commit_user=self.commit_user)
        try:
            if self.commit_identifier != BATCH_COMMIT_IDENTIFIER:
                done = committer.find_committed(self.commit_identifier)
                if done is not None:
                    log.info("commit %d of %s by %s already landed as snapshot %d; skipping",
                             self.commit_identifier, self.table.name, self.commit_user, done)
                    self.abort()
                    return done
        except BaseException:
            self.abort()
            raise
        messages, index = self._close_files()
        snapshot_id = committer.commit(messages, commit_identifier=self.commit_identifier,
                                       overwrite=self.overwrite, properties=self.properties, index=index)
        if snapshot_id is not None and self.compacts:
            self.compaction = maintain_after_commit(self.table, {(m.partition.row, m.bucket) for m in messages},
                                                    commit_user=self.commit_user,
                                                    commit_identifier=self.commit_identifier)
        return snapshot_id

    def _close_files(self) -> tuple[list[CommitMessage], IndexUpdate | None]:
        """Flush and close every file (and the dynamic-bucket index); the writer is closed after.
        On a failure everything it wrote is deleted."""
        try:
            if self._sink is not None:
                messages, index = self._sink.prepare()
            else:
                assert self._appender is not None
                messages, index = self._appender.prepare_commit(), None
                self._appender.close()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return messages, index

    def prepare(self) -> PreparedCommit:
        """Close every file and hand over what was written, without committing (two-phase write).

        The writer is closed. Give the result (or its :meth:`PreparedCommit.to_bytes`) with
        those of the other writers to :meth:`Table.commit`; files of a prepared commit that is
        never committed are reclaimed by orphan cleanup.
        """
        if self._closed:
            raise WriterClosedError(f"this writer of table {self.table.name} is already closed (it committed, "
                                    "prepared or aborted); open another with table.new_write()")
        messages, index = self._close_files()
        index_base: str | None = None
        index_files: tuple[IndexManifestEntry, ...] = ()
        if index is not None:  # a dynamic-bucket writer's new HASH files, and the index it started from
            written = set(index.files)
            index_base = index.base_manifest
            index_files = tuple(e for e in index.entries if self.table.paths.index_file(e.file_name) in written)
        return PreparedCommit(self.table.name, self.schema.id, tuple(messages), index_base=index_base,
                              index_files=index_files, rows=self.rows_written)

    def abort(self) -> None:
        """Discard everything written and not committed."""
        if self._sink is not None:
            self._sink.abort()
        if self._appender is not None:
            self._appender.abort()
        self._closed = True

    def __enter__(self) -> TableWrite:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._closed:
            if exc_type is None:
                log.warning("writer of %s left without commit(); its files are discarded",
                            self.table.name)
            self.abort()

    @property
    def rows_written(self) -> int:
        """Rows taken by :meth:`write` / :meth:`delete` so far."""
        return self._sink.rows_written if self._sink is not None else (
            self._appender.rows_written if self._appender is not None else 0)

    @property
    def buffered_bytes(self) -> int:
        """Bytes held in the write buffer (bounded by ``write-buffer-size``)."""
        if self._sink is not None:
            return self._sink.writer.buffered_bytes
        return self._appender.buffered_bytes if self._appender is not None else 0


def overwrite_spec(table: Table, schema: TableSchema, options: TableOptions,
                   overwrite: OverwriteArg) -> Overwrite | None:
    """What an OVERWRITE replaces: False/None append, True dynamic (or table), a map static."""
    if overwrite is False or overwrite is None:
        return None
    if overwrite is True:
        dynamic = options.dynamic_partition_overwrite and schema.partition_keys
        return Overwrite("dynamic" if dynamic else "table")
    spec = dict(overwrite)
    if not spec:
        return Overwrite("table")
    return Overwrite("static", internal_partition_spec(spec, schema, table=table.name))


def _read_all(reader: SplitReader, splits: Sequence[DataSplit]) -> pa.Table:
    tables = [t for t in reader.read_splits(splits) if t.num_rows]
    return pa.concat_tables(tables) if tables else reader.output_schema.empty_table()


def _internal_scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar:
    """Arrow scalar of an internal partition value (DATE days, TIMESTAMP nanos, ...)."""
    if pa.types.is_date(arrow_type):
        return pa.scalar(value, pa.int32()).cast(arrow_type)
    if pa.types.is_timestamp(arrow_type):
        factor = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[arrow_type.unit]
        return pa.scalar(value // factor, pa.int64()).cast(arrow_type)
    if pa.types.is_time(arrow_type):
        return pa.scalar(value, pa.int32()).cast(arrow_type)
    return pa.scalar(value, arrow_type)

