"""The table facade: writes, reads, time travel and metadata of one Paimon table."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.commit import FileStoreCommit, new_commit_user
from paimon_core.commit_ledger import CommitRecord
from paimon_core.compaction.compactor import CompactionResult, PartitionSpec, TableCompactor
from paimon_core.compaction.state import LsmState
from paimon_core.consumer import Consumer, ConsumerStore
from paimon_core.errors import (
    InvalidArgumentError,
    OptionError,
    SchemaError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
)
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.maintenance.after_commit import maintain_after_commit
from paimon_core.maintenance.auto_tags import AutoTagResult, create_automatic_tags
from paimon_core.maintenance.drop_partitions import DroppedPartitions, drop_partitions
from paimon_core.maintenance.expiry import ExpiryPlan, expire
from paimon_core.maintenance.mark_done import MarkedDone, SuccessFile, mark_partitions_done, read_success_file
from paimon_core.maintenance.orphans import OrphanFiles, OrphanFilesClean
from paimon_core.maintenance.rollback import Rollback, plan_rollback, rollback_to
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
from paimon_core.table_context import OptionsCache, TableContext
from paimon_core.tags import Tag, TagStore
from paimon_core.write.input_slice import InputSlice
from paimon_core.write.prepared import CommitOutcome, PreparedCommit, commit_prepared
from paimon_core.write.shard import Shard, as_shard
from paimon_core.write.table_write import OverwriteArg, TableWrite, overwrite_spec

if TYPE_CHECKING:
    import pandas as pd

    from paimon_core.read.lookup import TableLookup

log = logging.getLogger(__name__)



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
        self.tag_store = TagStore(file_io, self.paths, self.name)
        self.consumer_store = ConsumerStore(file_io, self.paths, self.name)
        self.changelog_store = ChangelogStore(file_io, self.paths, self.name)
        self.change_history = ChangeHistory(self.snapshot_store, self.changelog_store)
        self._options = OptionsCache(self.name)

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
        return self._options.of(self.schema)

    def context(self) -> TableContext:
        """The table as one operation sees it: the latest schema and its options, read once
        (each access to :attr:`schema` lists the schema directory to find the latest)."""
        schema = self.schemas.latest()
        return TableContext(self.file_io, self.paths, self.name, schema, self._options.of(schema), self.schemas,
                            self.snapshot_store, self.tag_store, self.consumer_store, self.changelog_store)

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
        return self.snapshot_store.at_or_before(epoch_ms(moment, what=f"time travel on table {self.name}",
                                                         name="moment"))

    def snapshots(self) -> list[Snapshot]:
        """Every retained snapshot, oldest first."""
        return list(self.snapshot_store.snapshots())

    def tag(self, name: str) -> Snapshot:
        """The snapshot a tag points at (it survives the expiry of the snapshot itself)."""
        return self.tag_store.get(name).snapshot

    # ---- tags, expiry, rollback -----------------------------------------------------------------

    def create_tag(self, name: str, snapshot_id: int | None = None, *,
                   time_retained_s: float | None = None) -> Tag:
        """Tag a snapshot (default the latest): it and its files are kept until the tag is deleted."""
        snapshot = self.latest_snapshot() if snapshot_id is None else self.snapshot(snapshot_id)
        if snapshot is None:
            raise SnapshotNotFoundError(f"table {self.name} has no snapshot to tag")
        return self.tag_store.create(name, snapshot, time_retained_s=time_retained_s)

    def delete_tag(self, name: str) -> bool:
        """Remove a tag; files only it kept become orphans for :meth:`remove_orphan_files`."""
        return self.tag_store.delete(name)

    def list_tags(self) -> list[Tag]:
        """Every tag, oldest snapshot first."""
        return self.tag_store.tags()

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
        older_than_ms = epoch_ms(older_than, what=f"expiry of table {self.name}", name="older_than")
        return expire(self.context(), older_than_ms=older_than_ms, retain_min=retain_min, retain_max=retain_max,
                      limit=max_deletes, dry_run=dry_run, progress=progress)

    def create_automatic_tags(self) -> AutoTagResult:
        """``tag.automatic-creation = process-time``: tag the last finished period if it is due
        (maintaining writers do this after each commit; write-only tables need a maintenance run)."""
        return create_automatic_tags(self.context(), int(time.time() * 1000))

    def remove_orphan_files(self, *, older_than: dt.datetime | int | None = None, dry_run: bool = True,
                            force: bool = False, progress: Progress = no_progress) -> OrphanFiles:
        """Delete files no snapshot, tag or long-lived changelog references, older than
        ``older_than`` (a datetime or epoch milliseconds; default a day ago; within an hour of now
        only with ``force``, as files of commits in flight are that young). ``dry_run`` (the
        default) only lists them; ``progress`` hears of files listed and snapshots read."""
        older_than_ms = epoch_ms(older_than, what=f"orphan-file cleanup of table {self.name}",
                                  name="older_than")
        return OrphanFilesClean(self.context()).run(older_than_ms=older_than_ms, dry_run=dry_run, force=force,
                                          progress=progress)

    def rollback_to(self, target: int | str | dt.datetime, *, dry_run: bool = False) -> Rollback:
        """Make a snapshot id, a tag, or the snapshot current at a time (a datetime; naive is
        local time) the latest state; newer snapshots and tags are removed (their files are left to
        orphan-file cleanup). Stop writers first. ``dry_run`` only says what would go."""
        context = self.context()
        return plan_rollback(context, target) if dry_run else rollback_to(context, target)

    def drop_partitions(self, partitions: PartitionSpec | Sequence[PartitionSpec], *, dry_run: bool = True,
                        commit_user: str | None = None) -> DroppedPartitions:
        """Drop partitions (``{column: value}`` maps; a prefix of the partition keys matches
        every partition below it) as one OVERWRITE snapshot; ``dry_run`` (the default) only
        counts what would go. Earlier snapshots and tags keep the files until they expire."""
        specs = [partitions] if isinstance(partitions, Mapping) else list(partitions)
        return drop_partitions(self.context(), specs, dry_run=dry_run, commit_user=commit_user)

    def mark_partitions_done(self, partitions: PartitionSpec | str | Sequence[PartitionSpec | str]) -> MarkedDone:
        """Tell downstream readers these partitions are complete: write (or refresh) each one's
        ``_SUCCESS`` file as Java Paimon's ``mark_partition_done`` does. A spec is a
        ``{column: value}`` map or a ``k=v/k2=v2`` path over a leading run of the partition keys;
        the partition need not hold data yet (an hour without events is done too)."""
        specs = [partitions] if isinstance(partitions, Mapping | str) else list(partitions)
        return mark_partitions_done(self.context(), specs)

    def success_file(self, partition: PartitionSpec | str) -> SuccessFile | None:
        """The ``_SUCCESS`` file of a partition (when it was first and last marked done), or
        None if it never was."""
        return read_success_file(self.context(), partition)

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
        return TableCompactor(self.context(), commit_user=commit_user).compact(
            partitions, buckets, full=full, progress=progress, require_existing=require_existing)

    def prepare_compaction(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                           buckets: Iterable[int] | None = None, *, full: bool = False,
                           shard: Shard | tuple[int, int] | None = None) -> PreparedCommit:
        """Compact like :meth:`compact` but without committing: one task of a fanned-out compaction.

        ``shard=(index, count)`` keeps the buckets task ``index`` of ``count`` owns, so tasks
        never compact the same bucket. Commit the tasks' results together with :meth:`commit`
        (one COMPACT snapshot) or each on its own (progress survives a failed task).
        """
        context = self.context()
        compactor = TableCompactor(context)
        prepared = compactor.prepare(partitions, buckets, full=full, shard=as_shard(shard))
        return PreparedCommit(self.name, context.schema.id, compactions=prepared.increments, full=prepared.full,
                              reports=compactor.reports(prepared))

    def partition_of(self, path: str) -> dict[str, str | None]:
        """``{column: value}`` of a partition path as :meth:`lsm_state` reports it
        (``dt=2024-01-01/region=eu``); ``""`` (unpartitioned) gives ``{}``, the default
        partition name (a null value) gives None.

        Raises:
            ValueError: ``path`` is not ``k=v[/k=v]``.
        """
        return self.context().partition_of(path)

    def lsm_state(self, partitions: PartitionSpec | Sequence[PartitionSpec] | None = None,
                  buckets: Iterable[int] | None = None) -> LsmState:
        """Per bucket: level-0 files, sorted runs, files and bytes per level, compaction debt.

        Reads manifests only, never data files.
        """
        return TableCompactor(self.context()).state(partitions, buckets)

    # ---- writing ------------------------------------------------------------------------

    def find_commit(self, commit_user: str, commit_identifier: int) -> int | None:
        """The snapshot id of an earlier commit (user, identifier), if it landed.

        Lets a retried job skip producing data that is already committed.
        """
        record = self.find_commit_record(commit_user, commit_identifier)
        return None if record is None else record.snapshot_id

    def find_commit_record(self, commit_user: str, commit_identifier: int,
                           kinds: Collection[str] | None = None) -> CommitRecord | None:
        """The earlier commit (user, identifier) of one of ``kinds`` (default any), if it landed:
        its snapshot id, kind and properties, or the user's newest commit when that has a larger
        identifier. Commits whose snapshots expired are found in the commit ledger
        (:mod:`paimon_core.commit_ledger`; ``expired`` is then True), so a job retried after
        expiry still knows what it wrote."""
        context = self.context()
        committer = FileStoreCommit(self.file_io, self.paths, context.schema, context.options,
                                    table=self.name, commit_user=commit_user)
        return committer.find_record(commit_identifier, kinds)

    def new_write(self, *, commit_user: str | None = None, commit_identifier: int | None = None,
                  overwrite: OverwriteArg = False, properties: Mapping[str, str] | None = None,
                  shard: Shard | tuple[int, int] | None = None,
                  input_slice: InputSlice | tuple[int, int] | None = None) -> TableWrite:
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
            input_slice: ``(index, count)``: this writer is one of ``count`` parallel writers of one
                commit, given part ``index`` of the input (in input order), and writes every bucket
                it meets, numbering each bucket's rows from a range reserved for its part so the
                commit merges as one writer's would (later parts win). Fixed-bucket tables; more
                level-0 files than sharding, but no writer reads the others' input.
        """
        return TableWrite(self.context(), commit_user=commit_user, commit_identifier=commit_identifier,
                          overwrite=overwrite, properties=properties, shard=shard, input_slice=input_slice)

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
        context = self.context()
        options = context.options
        user = commit_user or new_commit_user(options)
        spec = overwrite_spec(context, overwrite)
        outcome = commit_prepared(context, parts, commit_user=user, commit_identifier=commit_identifier,
                                  overwrite=spec, properties=properties, started=started)
        if outcome.data_snapshot is not None and not options.write_only:
            written = {(m.partition.row, m.bucket) for p in parts for m in p.data}
            maintain_after_commit(context, written, commit_user=user,
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

        return TableLookup(self.context(), columns, cache=False).lookup(keys, snapshot_id=snapshot_id)

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

        return TableLookup(self.context(), columns, options=options)

    def to_dask(self, columns: Sequence[str] | None = None, filter: Any = None, *,
                snapshot_id: int | None = None, timestamp_ms: int | None = None, tag: str | None = None) -> Any:
        """The table as a Dask DataFrame with one partition per split (needs ``dask[dataframe]``);
        see :func:`paimon_core.read.distributed.to_dask`."""
        from paimon_core.read.distributed import to_dask

        return to_dask(self, columns, filter, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms, tag=tag)

    def write_dask(self, frame: Any, *, commit_user: str, commit_identifier: int, overwrite: OverwriteArg = False,
                   properties: Mapping[str, str] | None = None) -> CommitOutcome:
        """Write a Dask DataFrame, a writer per partition of it on the active scheduler, committed as
        one snapshot exactly once per ``commit_user`` and ``commit_identifier`` (needs ``dask``); on a
        fixed-bucket table the frame's partition order is the write's order. See
        :func:`paimon_core.write.distributed.write_dask`."""
        from paimon_core.write.distributed import write_dask

        return write_dask(self, frame, commit_user=commit_user, commit_identifier=commit_identifier,
                          overwrite=overwrite, properties=properties)

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

        The rows depend on ``changelog-producer``. ``lookup`` and ``full-compaction`` give merged
        rows with ``-U`` before-images; ``input`` the rows as written (before-images only where
        the writers wrote them); ``none`` each commit's merged delta files, without
        before-images. For partial-update, aggregation and first-row tables, ``none`` and
        ``input`` give the rows *as written* (partial rows, addends, repeated keys), not merged
        rows: this is logged as a warning naming the table, and
        :func:`paimon_core.change_feed_problem` says it before anything is read.
        """
        context = self.context()
        reader = self._change_reader(context, columns, filter)
        tables = [b.data for b in self._changes_between(context, start_snapshot, end_snapshot, reader)
                  if b.data.num_rows]
        return pa.concat_tables(tables) if tables else reader.output_schema.empty_table()

    def iter_changes(self, start_snapshot: int | None = None, end_snapshot: int | None = None, *,
                     columns: Sequence[str] | None = None, filter: Any = None) -> Iterator[ChangeBatch]:
        """:meth:`read_changes` one snapshot at a time (snapshots without changes are skipped);
        the rows are what :meth:`read_changes` says they are for the table's producer."""
        context = self.context()
        return self._changes_between(context, start_snapshot, end_snapshot,
                                     self._change_reader(context, columns, filter))

    def _changes_between(self, context: TableContext, start_snapshot: int | None, end_snapshot: int | None,
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
            batch = self._snapshot_changes(context, snapshot_id, reader)
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
        ``continuous.discovery-interval``; ``until_latest`` stops once caught up. The change rows
        are what :meth:`read_changes` says they are for the table's producer (rows as written
        for partial-update, aggregation and first-row tables without a lookup or
        full-compaction producer, with a logged warning).
        """
        context = self.context()
        reader = self._change_reader(context, columns, filter)
        store = self.snapshot_store
        consumers = self.consumer_store
        older = None
        if scan_mode == "from-timestamp":
            if timestamp_ms is None:
                raise OptionError(f"scan mode from-timestamp of table {self.name} needs timestamp_ms")
            older = store.older_than(timestamp_ms)
        start = start_position(scan_mode, latest=store.latest_id(), earliest=self.change_history.earliest_id(),
                               snapshot_id=snapshot_id, older_than_timestamp=older, table=self.name,
                               consumer_next=consumers.next_snapshot(consumer_id) if consumer_id else None)
        interval = context.options.continuous_discovery_interval_ms / 1000 if poll_interval_s is None \
            else poll_interval_s
        return ChangeStream(table=self.name, snapshots=self.change_history, start=start,
                            read_full=lambda sid: self._full_batch(context, sid, columns, filter),
                            read_changes=lambda sid: self._snapshot_changes(context, sid, reader),
                            consumers=consumers, consumer_id=consumer_id, poll_interval_s=interval,
                            until_latest=until_latest, timeout_s=timeout_s)

    def _change_reader(self, context: TableContext, columns: Sequence[str] | None, filter: Any) -> ChangeReader:
        warn_if_changes_are_inputs(context.schema, context.options, self.name)
        return ChangeReader(self._reader(context.schema, columns, filter))

    def _snapshot_changes(self, context: TableContext, snapshot_id: int,
                          reader: ChangeReader) -> ChangeBatch | None:
        snapshot = self.change_history.snapshot(snapshot_id)
        entries = change_entries(self.file_io, self.paths, snapshot, primary_key=bool(context.schema.primary_keys),
                                 producer=context.options.changelog_producer)
        if not entries:
            return None
        data = reader.read(change_splits(snapshot, context.schema, entries))
        return ChangeBatch(snapshot_id, snapshot.commit_kind, data)

    def _full_batch(self, context: TableContext, snapshot_id: int, columns: Sequence[str] | None,
                    filter: Any) -> ChangeBatch:
        """The table at ``snapshot_id`` as inserts; what a changelog will still report is left out.

        With ``lookup`` level 0 is skipped (it surfaces as changelog when compacted), with
        ``full-compaction`` everything above the max level (as Paimon's streaming reads do).
        """
        snapshot = self.snapshot_store.snapshot(snapshot_id)
        schema, options = context.schema, context.options
        reader = self._reader(schema, columns, filter)
        splits = self._splits(snapshot, schema, reader, batch=False)
        producer = options.changelog_producer
        if schema.primary_keys and producer in ("lookup", "full-compaction"):
            top = options.num_levels - 1
            keep = (lambda f: f.level > 0) if producer == "lookup" else (lambda f: f.level == top)
            splits = [replace(s, files=tuple(f for f in s.files if keep(f))) for s in splits]
        data = _read_all(reader, splits)
        data = data.add_column(0, pa.field(ROW_KIND, pa.string(), False), pa.repeat(pa.scalar("+I"), data.num_rows))
        return ChangeBatch(snapshot_id, snapshot.commit_kind, data, initial=True)

    def consumers(self) -> list[Consumer]:
        """Streaming consumers of this table and where each resumes."""
        return self.consumer_store.consumers()

    def consumer(self, consumer_id: str) -> int | None:
        """The first snapshot ``consumer_id`` has not read, or None if it never saved progress."""
        return self.consumer_store.next_snapshot(consumer_id)

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
        context = self.context()
        return carries_changes(snapshot, primary_key=bool(context.schema.primary_keys),
                               producer=context.options.changelog_producer)

    def _reader(self, schema: TableSchema, columns: Sequence[str] | None, filter: Any) -> SplitReader:
        predicate, expression = self._filters(filter, schema)
        if schema.primary_keys:
            engine = engine_for(schema, self._options.of(schema), table=self.name)
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
        skip = batch and self._options.of(schema).batch_scan_skips_level0(primary_key=bool(schema.primary_keys))
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


def _read_all(reader: SplitReader, splits: Sequence[DataSplit]) -> pa.Table:
    tables = [t for t in reader.read_splits(splits) if t.num_rows]
    return pa.concat_tables(tables) if tables else reader.output_schema.empty_table()
