"""Carrying out compactions: merging picked files into new ones, or moving them up a level.

A primary-key rewrite streams each key-range section through the table's merge engine (the
code merge-on-read uses), a chunk per sorted run at a time, so memory follows the chunk size and
the section's run count, not the bucket's size. Append rewrites concatenate files in order.
Output files keep the input's sequence numbers and are marked as compaction output.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.columnar import int64_array
from paimon_core.compaction.changelog import CompactionChangelog
from paimon_core.compaction.intervals import section_runs, sections
from paimon_core.compaction.merge_tree import Rewrite, TaskPlan, Upgrade
from paimon_core.errors import OptionError
from paimon_core.fileio import FileIO
from paimon_core.keyvalue import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, VALUE_KIND, KeyValueLayout
from paimon_core.layout import TablePaths
from paimon_core.manifest import FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT, DataFileMeta
from paimon_core.merge import engine_for
from paimon_core.merge.engine import MergeEngine
from paimon_core.merge.lookup import LookupMerge, with_level
from paimon_core.merge.sorted_runs import merge_sorted_runs
from paimon_core.options import TableOptions
from paimon_core.prefetch import prefetched
from paimon_core.read.merge_read import MergeSplitReader, key_bounds
from paimon_core.read.scan import DataSplit, DeletionFile
from paimon_core.read.split_read import SplitReader
from paimon_core.schema import TableSchema
from paimon_core.schema_store import SchemaStore
from paimon_core.types import arrow_schema
from paimon_core.write.data_file import (
    ROW_GROUP_BYTES,
    AppendContent,
    KeyValueContent,
    RollingFileWriter,
    SequenceCounter,
    write_coalesced,
)
from paimon_core.write.message import CompactIncrement
from paimon_core.write.routing import Partition

_ROW = "__paimon_row"
_MIN_CHUNK_BYTES = 1024 * 1024
Deletions = dict[str, list[np.ndarray]]  # data file name -> row positions newly deleted


class _Output:
    """Files written by one compaction task, deleted again if the task fails."""

    def __init__(self) -> None:
        self.writers: list[RollingFileWriter] = []

    def track(self, writer: RollingFileWriter) -> RollingFileWriter:
        self.writers.append(writer)
        return writer

    def abort(self) -> None:
        for writer in self.writers:
            writer.abort()


class _TableFiles:
    """What both rewriters share: the table's schema and where its files go."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schema: TableSchema, options: TableOptions) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.options = options

    def split(self, partition: Partition, bucket: int) -> DataSplit:
        return DataSplit(0, self.schema.id, partition.row, partition.values, bucket, ())

    def writer(self, partition: Partition, bucket: int, *, file_schema: pa.Schema, content: object,
               level: int, primary_key: bool, changelog: bool = False) -> RollingFileWriter:
        """Compaction output; ``changelog``: a changelog file (named and sourced as Java's)."""
        return RollingFileWriter(
            self.file_io, self.paths.bucket_dir(partition.path, bucket), file_schema=file_schema,
            stats_fields=self.schema.fields, content=content,  # type: ignore[arg-type]
            schema_id=self.schema.id, options=self.options,
            target_size=self.options.target_file_size_for(primary_key=primary_key),
            prefix=self.options.changelog_file_prefix if changelog else self.options.data_file_prefix, level=level,
            file_source=FILE_SOURCE_APPEND if changelog else FILE_SOURCE_COMPACT)


class _Changelog:
    """The changelog rows of one compaction task, gathered into row groups of changelog files.

    ``exclude``: keys whose changes are dropped (first-row keys that exist deeper).
    """

    def __init__(self, writer: RollingFileWriter, layout: KeyValueLayout, group_bytes: int) -> None:
        self.writer = writer
        self.layout = layout
        self.group_bytes = group_bytes
        self.pending: list[pa.Table] = []
        self.size = 0
        self.exclude: pa.Table | None = None

    def add(self, changes: Sequence[pa.Table]) -> None:
        for chunk in changes:
            if self.exclude is not None:
                chunk = _without_keys(chunk, self.exclude, self.layout.key_names)
            if chunk.num_rows:
                self.pending.append(chunk)
                self.size += chunk.nbytes
        if self.size >= self.group_bytes:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write(self.layout.to_file(pa.concat_tables(self.pending)))
        self.pending, self.size = [], 0

    def close(self) -> list[DataFileMeta]:
        self.flush()
        return self.writer.close()


class MergeTreeRewriter(_TableFiles):
    """Runs :class:`TaskPlan` s of a primary-key table (any schema version in, the latest out).

    ``memory_budget``: bytes one task may hold in decoded input chunks; each sorted run of a
    section gets an equal share (a chunk and its look-ahead), whatever the runs' sizes.
    """

    def __init__(self, file_io: FileIO, paths: TablePaths, schemas: SchemaStore, schema: TableSchema,
                 options: TableOptions, *, table: str, memory_budget: int) -> None:
        super().__init__(file_io, paths, schema, options)
        self.memory_budget = memory_budget
        self.engine = engine_for(schema, options, table=table)
        self.reader = MergeSplitReader(file_io, paths, schemas, schema, table=table, engine=self.engine)
        self.layout = KeyValueLayout(schema)
        self.keys = self.layout.key_names
        self.bounds = key_bounds([schema.field(k).type for k in self.keys])
        self.compare_columns = _compared_columns(schema, options, table) if options.changelog_row_deduplicate \
            else None

    def run(self, partition: Partition, bucket: int, total_buckets: int, task: TaskPlan,
            deletion_files: Mapping[str, DeletionFile] | None = None) -> tuple[CompactIncrement, Deletions]:
        """Carry out ``task``; returns the increment and the rows it deletes in deeper files.

        ``deletion_files`` are the bucket's current deletion vectors (applied to every input).
        """
        split = replace(self.split(partition, bucket), deletion_files=dict(deletion_files or {}))
        before: list[DataFileMeta] = []
        after: list[DataFileMeta] = []
        deletions: Deletions = {}
        output = _Output()
        changelog = self._changelog(partition, bucket, task, output)
        try:
            for action in task.actions:
                if isinstance(action, Upgrade):
                    if action.check_deletes and self.reader.holds_retractions(split, action.file):
                        action = Rewrite((action.file,))
                    else:
                        before.append(action.file)
                        after.append(replace(action.file, level=task.output_level))
                        if changelog is not None and task.changelog == "full":
                            self._insert_all(split, action.file, changelog)  # new at the max level
                        continue
                before += action.files
                after += self._rewrite(partition, split, action.files, task, output, deletions, changelog)
            changes = tuple(changelog.close()) if changelog is not None else ()
        except BaseException:
            output.abort()
            raise
        return CompactIncrement(partition, bucket, total_buckets, tuple(before), tuple(after),
                                changelog_files=changes), deletions

    def _changelog(self, partition: Partition, bucket: int, task: TaskPlan, output: _Output) -> _Changelog | None:
        if task.changelog is None:
            return None
        writer = output.track(self._kv_writer(partition, bucket, task.output_level, changelog=True))
        return _Changelog(writer, self.layout, min(ROW_GROUP_BYTES, self.memory_budget))

    def _kv_writer(self, partition: Partition, bucket: int, level: int, *, changelog: bool = False
                   ) -> RollingFileWriter:
        """A rolling writer of key-value files (data or changelog) at ``level``."""
        key_fields = self.layout.key_fields()
        return self.writer(partition, bucket, file_schema=self.layout.file_schema(),
                           content=lambda: KeyValueContent(key_fields), level=level, primary_key=True,
                           changelog=changelog)

    def _insert_all(self, split: DataSplit, meta: DataFileMeta, changelog: _Changelog) -> None:
        """A file moved up into the max level adds its keys (none of them was there before)."""
        for chunk in self.reader.iter_key_values(split, meta, batch_bytes=self.memory_budget // 2):
            kinds = chunk.column(VALUE_KIND)
            added = chunk.filter(pc.or_(pc.equal(kinds, INSERT), pc.equal(kinds, UPDATE_AFTER)))
            index = added.schema.get_field_index(VALUE_KIND)
            changelog.add([added.set_column(index, added.schema.field(index),
                                            pa.array(np.full(added.num_rows, INSERT, np.int8)))])

    def _rewrite(self, partition: Partition, split: DataSplit, files: Sequence[DataFileMeta], task: TaskPlan,
                 output: _Output, deletions: Deletions, changelog: _Changelog | None) -> list[DataFileMeta]:
        writer = output.track(self._kv_writer(partition, split.bucket, task.output_level))
        deeper = self._overlapping(files, task.lookup_files)
        known = None
        if task.lookup_mode == "drop-new" and deeper:
            known = pa.concat_tables([self.reader.read_keys(split, meta) for meta in deeper])
            if changelog is not None:
                changelog.exclude = known  # the older row wins: these keys did not change
        merged: Iterator[pa.Table] = itertools.chain.from_iterable(
            self._merge_section(split, section, task, changelog) for section in sections(files, self.bounds))
        written_keys: list[pa.Table] = []
        if task.lookup_mode == "delete-old" and deeper:
            merged = _tee_keys(merged, self.keys, written_keys)  # retractions too: they delete older rows
        if task.drop_delete:
            merged = (_without_retractions(chunk) for chunk in merged)
        if known is not None:
            merged = (_without_keys(chunk, known, self.keys) for chunk in merged)
        write_coalesced(writer, merged, self.layout.to_file, group_bytes=min(ROW_GROUP_BYTES, self.memory_budget))
        if written_keys:
            keys = pa.concat_tables(written_keys)
            for meta in deeper:
                positions = _positions_of(self.reader.read_keys(split, meta), keys, self.keys)
                if len(positions):
                    deletions.setdefault(meta.file_name, []).append(positions)
        return writer.close()

    def _overlapping(self, files: Sequence[DataFileMeta], deeper: Sequence[DataFileMeta]) -> list[DataFileMeta]:
        """Deeper files whose key range meets that of ``files``."""
        if not deeper:
            return []
        low = min(self.bounds(f)[0] for f in files)
        high = max(self.bounds(f)[1] for f in files)
        return [m for m in deeper if not (self.bounds(m)[1] < low or self.bounds(m)[0] > high)]

    def _merge_section(self, split: DataSplit, section: list[DataFileMeta], task: TaskPlan,
                       changelog: _Changelog | None) -> Iterator[pa.Table]:
        runs = section_runs(section, self.bounds)
        if changelog is not None and not (task.changelog == "full" and len(runs) == 1
                                          and all(m.level == task.output_level for m in section)):
            return self._merge_with_changelog(split, section, runs, task, changelog)
        share = max(_MIN_CHUNK_BYTES, self.memory_budget // (2 * len(runs)))
        if len(runs) == 1:  # one run holds each key once: nothing to merge
            return itertools.chain.from_iterable(self.reader.iter_key_values(split, meta, batch_bytes=share)
                                                 for meta in runs[0])
        return self._merge_streams([self._leveled(split, run, share) for run in runs], self.engine)

    def _merge_streams(self, streams: Sequence[Iterator[pa.Table]], engine: MergeEngine) -> Iterator[pa.Table]:
        options = self.options
        return merge_sorted_runs(streams, keys=self.keys, engine=engine, sequence_fields=options.sequence_field,
                                 descending_sequence=options.sequence_descending, in_sequence=False)

    def _merge_with_changelog(self, split: DataSplit, section: list[DataFileMeta], runs: list[list[DataFileMeta]],
                              task: TaskPlan, changelog: _Changelog) -> Iterator[pa.Table]:
        """Merge a section with every row's level, writing the changes as the merge goes."""
        assert task.changelog is not None
        deeper = self._deeper_runs(split, section, task) if task.changelog == "lookup" else []
        share = max(_MIN_CHUNK_BYTES, self.memory_budget // (2 * (len(runs) + len(deeper))))
        streams = [self._leveled(split, run, share, always=True) for run in runs]
        streams += [self._filtered(split, run, keys, share) for run, keys in deeper]
        lookup_merge = isinstance(self.engine, LookupMerge)
        engine = CompactionChangelog(self.engine.inner if isinstance(self.engine, LookupMerge) else self.engine,
                                     producer=task.changelog, output_level=task.output_level,
                                     lookup_merge=lookup_merge, compare_columns=self.compare_columns)
        for chunk in self._merge_streams(streams, engine):
            changelog.add(engine.take_changes())
            yield chunk

    def _leveled(self, split: DataSplit, run: list[DataFileMeta], share: int, *, always: bool = False
                 ) -> Iterator[pa.Table]:
        """A run's rows, with their level where the merge needs it (lookup merges, changelog)."""
        leveled = always or isinstance(self.engine, LookupMerge)
        for meta in run:
            for chunk in self.reader.iter_key_values(split, meta, batch_bytes=share):
                yield with_level(chunk, meta.level) if leveled else chunk

    def _deeper_runs(self, split: DataSplit, section: list[DataFileMeta], task: TaskPlan
                     ) -> list[tuple[list[DataFileMeta], pa.Table]]:
        """Per level below the output: its files meeting the section, and the level-0 keys to
        look up in them (first-row looks keys up by name only, in :meth:`_rewrite`)."""
        level0 = [meta for meta in section if meta.level == 0]
        if not level0 or self.options.merge_engine == "first-row":
            return []
        by_level: dict[int, list[DataFileMeta]] = {}
        for meta in self._overlapping(section, task.lookup_files):
            by_level.setdefault(meta.level, []).append(meta)
        if not by_level:
            return []
        keys = pa.concat_tables([self.reader.read_keys(split, meta) for meta in level0])
        return [(sorted(files, key=self.bounds), keys) for _, files in sorted(by_level.items())]

    def _filtered(self, split: DataSplit, run: list[DataFileMeta], keys: pa.Table, share: int) -> Iterator[pa.Table]:
        """A deeper run's rows whose key is in ``keys``, in key order, a chunk at a time."""
        for meta in run:
            for chunk in self.reader.iter_key_values(split, meta, batch_bytes=share):
                found = chunk.take(int64_array(_positions_of(chunk.select(self.keys), keys, self.keys)))
                if found.num_rows:
                    yield with_level(found, meta.level)


def _compared_columns(schema: TableSchema, options: TableOptions, table: str) -> list[str]:
    """Columns row-deduplicate compares: every column but the ignored ones (which must exist)."""
    ignored = set(options.changelog_row_deduplicate_ignore_fields)
    unknown = sorted(ignored - set(schema.field_names))
    if unknown:
        raise OptionError(f"changelog-producer.row-deduplicate-ignore-fields of table {table} names unknown "
                          f"field(s) {', '.join(unknown)}")
    return [name for name in schema.field_names if name not in ignored]


class AppendRewriter(_TableFiles):
    """Concatenates small files of an append table, in order, into files of the target size."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schemas: SchemaStore, schema: TableSchema,
                 options: TableOptions, *, table: str) -> None:
        super().__init__(file_io, paths, schema, options)
        self.reader = SplitReader(file_io, paths, schemas, schema, table=table)

    def rewrite(self, partition: Partition, bucket: int, total_buckets: int, files: Sequence[DataFileMeta],
                first_sequence: int) -> CompactIncrement:
        """``files``' rows, in order, written to new files and numbered from ``first_sequence``
        (a group's first file's first sequence number, as Paimon renumbers a rewritten group)."""
        counter = SequenceCounter(first_sequence)
        writer = self.writer(partition, bucket, file_schema=arrow_schema(self.schema.fields, with_ids=True),
                             content=lambda: AppendContent(counter), level=0, primary_key=False)
        try:
            split = replace(self.split(partition, bucket), files=tuple(files))
            batches = self.reader.iter_batches([split], batch_size=262144)
            write_coalesced(writer, prefetched(pa.Table.from_batches([b]) for b in batches))
            written = writer.close()
        except BaseException:
            writer.abort()
            raise
        return CompactIncrement(partition, bucket, total_buckets, tuple(files), tuple(written))


def _tee_keys(chunks: Iterator[pa.Table], keys: Sequence[str], sink: list[pa.Table]) -> Iterator[pa.Table]:
    for chunk in chunks:
        sink.append(chunk.select(list(keys)))
        yield chunk


def _positions_of(file_keys: pa.Table, keys: pa.Table, names: Sequence[str]) -> np.ndarray:
    """Row positions of ``file_keys`` whose key is in ``keys``."""
    if len(names) == 1:
        present = pc.is_in(file_keys.column(names[0]), value_set=keys.column(names[0]).combine_chunks())
        return np.flatnonzero(present.to_numpy(zero_copy_only=False)).astype(np.uint32)
    numbered = file_keys.append_column(_ROW, int64_array(np.arange(file_keys.num_rows)))
    found = numbered.join(keys, list(names), join_type="left semi").column(_ROW)
    return np.sort(found.to_numpy()).astype(np.uint32)


def _without_keys(chunk: pa.Table, known: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Rows of ``chunk`` whose key is not in ``known``, in their order."""
    if known.num_rows == 0 or chunk.num_rows == 0:
        return chunk
    if len(keys) == 1:
        present = pc.is_in(chunk.column(keys[0]), value_set=known.column(keys[0]).combine_chunks())
        return chunk.filter(pc.invert(present))
    numbered = chunk.select(list(keys)).append_column(_ROW, int64_array(np.arange(chunk.num_rows)))
    kept = numbered.join(known, list(keys), join_type="left anti").column(_ROW)
    return chunk.take(pc.take(kept, pc.sort_indices(kept)))


def _without_retractions(chunk: pa.Table) -> pa.Table:
    kinds = chunk.column(VALUE_KIND)
    return chunk.filter(pc.invert(pc.or_(pc.equal(kinds, UPDATE_BEFORE), pc.equal(kinds, DELETE))))
