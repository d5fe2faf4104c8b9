"""Writing batches into one atomic commit (:meth:`paimon_core.Table.new_write`).

A writer takes the table's schema and options once, when it opens (:class:`TableContext`), and
keeps them until it commits: every batch is conformed to that schema, and the commit is checked
against it. Maintenance around the write (the stall before, the compaction, automatic tags and
expiry after) lives in :mod:`paimon_core.maintenance`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.binary_row import internal_to_arrow_scalar
from paimon_core.commit import FileStoreCommit, IndexUpdate, Overwrite, new_commit_user
from paimon_core.compaction.compactor import CompactionResult
from paimon_core.errors import InvalidArgumentError, SchemaError, UnsupportedFeatureError, WriterClosedError
from paimon_core.maintenance.after_commit import maintain_after_commit
from paimon_core.maintenance.write_stall import stall_while_over_stop_trigger
from paimon_core.manifest import IndexManifestEntry, ManifestEntry, read_index_manifest
from paimon_core.read.scan import live_entries
from paimon_core.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot
from paimon_core.table_context import TableContext
from paimon_core.write.append_writer import AppendWriter
from paimon_core.write.conform import check_partition_values, conform, internal_partition_spec, iter_input
from paimon_core.write.input_slice import InputSlice, as_slice
from paimon_core.write.message import CommitMessage
from paimon_core.write.prepared import PreparedCommit
from paimon_core.write.primary_key_sink import IndexState, PrimaryKeySink
from paimon_core.write.shard import Shard, as_shard

log = logging.getLogger(__name__)

OverwriteArg = bool | Mapping[str, Any]
"""``overwrite=`` of a write: False appends, True overwrites dynamically, a map names a partition."""


class TableWrite:
    """Streams batches into data files and commits them atomically (see :meth:`Table.new_write`).

    Used as a context manager, leaving the block without :meth:`commit` (or with an
    exception) aborts: every file written is deleted and the table is unchanged.
    """

    def __init__(self, table: TableContext, *, commit_user: str | None, commit_identifier: int | None,
                 overwrite: OverwriteArg, properties: Mapping[str, str] | None,
                 shard: Shard | tuple[int, int] | None = None,
                 input_slice: InputSlice | tuple[int, int] | None = None) -> None:
        self.table = table
        self.schema = table.schema
        self.options = table.options
        for key in ("row-tracking.enabled", "data-evolution.enabled"):
            if self.schema.options.get(key, "false").lower() == "true":
                raise UnsupportedFeatureError(f"writing table {table.name} with {key}=true is not "
                                              "supported (row ids would not be assigned)")
        self.commit_user = commit_user or new_commit_user(self.options)
        self.commit_identifier = BATCH_COMMIT_IDENTIFIER if commit_identifier is None else commit_identifier
        self.overwrite = overwrite_spec(table, overwrite)
        self.properties = properties
        self.shard = as_shard(shard)
        self.slice = as_slice(input_slice)
        if self.shard is not None and not self.schema.primary_keys and self.options.bucket < 0:
            raise UnsupportedFeatureError(
                f"table {table.name} has no buckets (bucket = -1), so its writers are not sharded: give each "
                "writer its own slice of the input and no shard")
        if self.slice is not None:
            self._check_sliceable()
        self._static = self._static_filter()
        # Writers of tables without write-only compact what they wrote after each commit, and
        # stall (compact first) while a bucket has more sorted runs than the stop trigger.
        self.compacts = not self.options.write_only
        self.compaction: CompactionResult | None = None
        self.stall_seconds = 0.0
        if self.compacts and self.schema.primary_keys and self.shard is None and self.slice is None:
            # a sharded or sliced writer leaves the stall to its committer, which compacts after the commit
            self.stall_seconds = stall_while_over_stop_trigger(table)
        self._sink: PrimaryKeySink | None = None
        self._appender: AppendWriter | None = None
        # bucket-unaware append files carry no state of earlier files: nothing to restore
        latest = table.snapshots.latest() if self.schema.primary_keys or self.options.bucket > 0 else None
        self._restored = self._restore_sequence(latest) if self.schema.primary_keys or self.options.bucket > 0 \
            else None
        numbering = self.slice.numbering(self._restored) if self.slice is not None and self._restored else \
            self._restored
        if self.schema.primary_keys:
            assert numbering is not None
            index_entries = read_index_manifest(table.file_io, table.paths.manifest_file(latest.index_manifest)) \
                if latest is not None and latest.index_manifest else []
            self._sink = PrimaryKeySink(table.file_io, table.paths, self.schema, self.options, table=table.name,
                                        next_sequence=numbering,
                                        index=IndexState(latest.index_manifest if latest else None, index_entries),
                                        shard=self.shard)
        else:
            self._appender = AppendWriter(table.file_io, table.paths, self.schema, self.options,
                                          next_sequence=numbering, shard=self.shard)
        self._closed = False

    def _check_sliceable(self) -> None:
        """Slices keep a single writer's sequence order per bucket: fixed-bucket tables only."""
        if self.shard is not None:
            raise InvalidArgumentError(f"a writer of table {self.table.name} takes a shard (the buckets it owns) "
                                       "or a slice (its part of the input), not both")
        if self.options.bucket < 0:
            kind = "a dynamic-bucket table, whose buckets one assigner per partition hands out: shard its " \
                "writers by partition" if self.schema.primary_keys else \
                "an append table without buckets, with no sequence to keep: give each writer its input and no slice"
            raise UnsupportedFeatureError(f"table {self.table.name} is {kind}")

    def _static_filter(self) -> pc.Expression | None:
        if self.overwrite is None or self.overwrite.mode != "static" or not self.overwrite.partition:
            return None
        arrow = self.schema.arrow_schema()
        expression = None
        for key, value in self.overwrite.partition.items():
            term = pc.field(key) == internal_to_arrow_scalar(value, arrow.field(key).type)
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
        # A slice past its range would interleave with the next slice's rows: refused before the
        # commit (its files, never committed, go to orphan cleanup as any prepared commit's would).
        if self.slice is not None and self._restored is not None:
            for message in messages:
                restored = self._restored(message.partition.row, message.bucket)
                for file in message.new_files:
                    self.slice.check_range(self.table.name, restored, file.max_sequence_number)
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


def overwrite_spec(table: TableContext, overwrite: OverwriteArg) -> Overwrite | None:
    """What an OVERWRITE replaces: False/None append, True dynamic (or table), a map static."""
    schema, options = table.schema, table.options
    if overwrite is False or overwrite is None:
        return None
    if overwrite is True:
        dynamic = options.dynamic_partition_overwrite and schema.partition_keys
        return Overwrite("dynamic" if dynamic else "table")
    spec = dict(overwrite)
    if not spec:
        return Overwrite("table")
    return Overwrite("static", internal_partition_spec(spec, schema, table=table.name))
