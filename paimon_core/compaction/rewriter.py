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
from paimon_core.compaction.intervals import section_runs, sections
from paimon_core.compaction.merge_tree import Rewrite, TaskPlan, Upgrade
from paimon_core.fileio import FileIO
from paimon_core.keyvalue import DELETE, UPDATE_BEFORE, VALUE_KIND, KeyValueLayout
from paimon_core.layout import TablePaths
from paimon_core.manifest import FILE_SOURCE_COMPACT, DataFileMeta
from paimon_core.merge import engine_for
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
               level: int, primary_key: bool) -> RollingFileWriter:
        return RollingFileWriter(
            self.file_io, self.paths.bucket_dir(partition.path, bucket), file_schema=file_schema,
            stats_fields=self.schema.fields, content=content,  # type: ignore[arg-type]
            schema_id=self.schema.id, options=self.options,
            target_size=self.options.target_file_size_for(primary_key=primary_key),
            prefix=self.options.data_file_prefix, level=level, file_source=FILE_SOURCE_COMPACT)


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
        try:
            for action in task.actions:
                if isinstance(action, Upgrade):
                    if action.check_deletes and self.reader.holds_retractions(split, action.file):
                        action = Rewrite((action.file,))
                    else:
                        before.append(action.file)
                        after.append(replace(action.file, level=task.output_level))
                        continue
                before += action.files
                after += self._rewrite(partition, split, action.files, task, output, deletions)
        except BaseException:
            output.abort()
            raise
        return CompactIncrement(partition, bucket, total_buckets, tuple(before), tuple(after)), deletions

    def _rewrite(self, partition: Partition, split: DataSplit, files: Sequence[DataFileMeta], task: TaskPlan,
                 output: _Output, deletions: Deletions) -> list[DataFileMeta]:
        key_fields = self.layout.key_fields()
        writer = output.track(self.writer(
            partition, split.bucket,
            file_schema=self.layout.file_schema(), content=lambda: KeyValueContent(key_fields),
            level=task.output_level, primary_key=True))
        merged: Iterator[pa.Table] = itertools.chain.from_iterable(
            self._merge_section(split, section) for section in sections(files, self.bounds))
        deeper = self._overlapping(files, task.lookup_files)
        written_keys: list[pa.Table] = []
        if task.lookup_mode == "delete-old" and deeper:
            merged = _tee_keys(merged, self.keys, written_keys)  # retractions too: they delete older rows
        if task.drop_delete:
            merged = (_without_retractions(chunk) for chunk in merged)
        if task.lookup_mode == "drop-new" and deeper:
            known = pa.concat_tables([self.reader.read_keys(split, meta) for meta in deeper])
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

    def _merge_section(self, split: DataSplit, section: list[DataFileMeta]) -> Iterator[pa.Table]:
        runs = section_runs(section, self.bounds)
        share = max(_MIN_CHUNK_BYTES, self.memory_budget // (2 * len(runs)))
        streams = [itertools.chain.from_iterable(self.reader.iter_key_values(split, meta, batch_bytes=share)
                                                 for meta in run) for run in runs]
        if len(streams) == 1:
            return streams[0]  # one run holds each key once: nothing to merge
        options = self.options
        return merge_sorted_runs(streams, keys=self.keys, engine=self.engine,
                                 sequence_fields=options.sequence_field,
                                 descending_sequence=options.sequence_descending, in_sequence=False)


class AppendRewriter(_TableFiles):
    """Concatenates small files of an append table, in order, into files of the target size."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schemas: SchemaStore, schema: TableSchema,
                 options: TableOptions, *, table: str) -> None:
        super().__init__(file_io, paths, schema, options)
        self.reader = SplitReader(file_io, paths, schemas, schema, table=table)

    def run(self, partition: Partition, bucket: int, total_buckets: int,
            groups: Sequence[Sequence[DataFileMeta]]) -> CompactIncrement:
        before: list[DataFileMeta] = []
        after: list[DataFileMeta] = []
        output = _Output()
        try:
            for files in groups:
                # Rows are renumbered from the first file's first sequence number, as Paimon does.
                counter = SequenceCounter(files[0].min_sequence_number)
                writer = output.track(self.writer(
                    partition, bucket, file_schema=arrow_schema(self.schema.fields, with_ids=True),
                    content=lambda counter=counter: AppendContent(counter), level=0, primary_key=False))
                split = replace(self.split(partition, bucket), files=tuple(files))
                batches = self.reader.iter_batches([split], batch_size=262144)
                write_coalesced(writer, prefetched(pa.Table.from_batches([b]) for b in batches))
                before += files
                after += writer.close()
        except BaseException:
            output.abort()
            raise
        return CompactIncrement(partition, bucket, total_buckets, tuple(before), tuple(after))


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
