"""The primary-key writer: per-bucket LSM level-0 runs from buffered, merged rows.

Rows of a commit get per-bucket sequence numbers as they arrive and are buffered. When the
buffers pass ``write-buffer-size`` the largest one is sorted in merge order and spilled to a
local file (``write-buffer-spillable``) or, without spilling, merged and written as a level-0
file. At commit every bucket's spilled runs and remaining buffer are merged in one streaming
pass, folded by the merge engine, and written as one sorted run of level-0 files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pyarrow as pa

from paimon_core.columnar import int8_array, int64_array
from paimon_core.fileio import FileIO
from paimon_core.keyvalue import SEQUENCE_NUMBER, VALUE_KIND, KeyValueLayout
from paimon_core.layout import TablePaths
from paimon_core.merge.engine import MergeEngine
from paimon_core.merge.sort import key_groups, merge_permutation
from paimon_core.merge.sorted_runs import merge_sorted_runs
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema
from paimon_core.threads import worker_threads
from paimon_core.write.data_file import KeyValueContent, RollingFileWriter, write_coalesced
from paimon_core.write.flusher import release_freed_memory
from paimon_core.write.message import CommitMessage
from paimon_core.write.routing import Partition, gathered
from paimon_core.write.spill import SpillFile

log = logging.getLogger(__name__)

# Buckets are merged and encoded concurrently at commit (pyarrow releases the GIL).
_ENCODE_THREADS = worker_threads()
# Batches of at least this many rows order their groups on those threads too.
_PARALLEL_ROWS = 65_536
T = TypeVar("T")
R = TypeVar("R")


def _map(work: Callable[[T], R], items: list[T], rows: int) -> list[R]:
    """``work`` over ``items``, on the encoding threads when there is enough to share."""
    if len(items) > 1 and rows >= _PARALLEL_ROWS and _ENCODE_THREADS > 1:
        with ThreadPoolExecutor(_ENCODE_THREADS, thread_name_prefix="paimon-order") as pool:
            return list(pool.map(work, items))
    return [work(item) for item in items]


class _InMemoryRun:
    """The sorted remainder of a bucket's buffer, consumed like a spilled run."""

    def __init__(self, table: pa.Table) -> None:
        self.table: pa.Table | None = table

    def chunks(self) -> Iterator[pa.Table]:
        table, self.table = self.table, None
        if table is not None:
            yield table

    def delete(self) -> None:
        self.table = None

SequenceRestore = Callable[[bytes, int], int]
# The row indices of every (partition, bucket) group of a batch, each in input order.
BucketRouter = Callable[[pa.Table], list[tuple[Partition, int, np.ndarray]]]


@dataclass(slots=True)
class _Bucket:
    partition: Partition
    bucket: int
    next_sequence: int
    chunks: list[pa.Table] = field(default_factory=list)
    nbytes: int = 0
    spills: list[SpillFile | _InMemoryRun] = field(default_factory=list)
    writer: RollingFileWriter | None = None
    changelog: RollingFileWriter | None = None  # changelog-producer=input


class KeyValueWriter:
    """Writes key-value rows of one commit into level-0 sorted runs per (partition, bucket)."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schema: TableSchema, options: TableOptions,
                 engine: MergeEngine, *, route: BucketRouter, next_sequence: SequenceRestore,
                 total_buckets: int) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.options = options
        self.engine = engine
        self.layout = KeyValueLayout(schema)
        self.keys = self.layout.key_names
        self.route = route
        self.next_sequence = next_sequence
        self.total_buckets = total_buckets
        self._buckets: dict[tuple[bytes, int], _Bucket] = {}
        self._buffered = 0
        self.rows_written = 0

    def write(self, values: pa.Table, kinds: np.ndarray) -> None:
        """Buffer conformed rows with their row kinds (0..3).

        Each group's rows are gathered once, already in merge order: a bucket written by one
        call is never sorted (or copied) again before it is encoded.
        """
        if values.num_rows == 0:
            return
        tagged = values.append_column(pa.field(VALUE_KIND, pa.int8(), False), int8_array(kinds))
        groups = self.route(tagged)
        arrival = _map(lambda group: self._merge_order(tagged, group[2]), groups, tagged.num_rows)
        taken = gathered(tagged, [int64_array(rows[order]) for (_, _, rows), order in zip(groups, arrival)])
        for (partition, bucket, _), order, rows in zip(groups, arrival, taken):
            state = self._bucket(partition, bucket)
            sequence = order + state.next_sequence  # arrival order within the bucket numbers its rows
            state.next_sequence += rows.num_rows
            kv = rows.drop_columns([VALUE_KIND]).append_column(
                pa.field(SEQUENCE_NUMBER, pa.int64(), False), int64_array(sequence)).append_column(
                pa.field(VALUE_KIND, pa.int8(), False), rows.column(VALUE_KIND))
            state.chunks.append(kv)
            state.nbytes += kv.nbytes
            self._buffered += kv.nbytes
            self.rows_written += rows.num_rows
        while self._buffered > self.options.write_buffer_size:
            self._relieve(max(self._buckets.values(), key=lambda b: b.nbytes))
        release_freed_memory()  # the caller's batch and the routing copies, just freed

    def _merge_order(self, tagged: pa.Table, rows: np.ndarray) -> np.ndarray:
        """The merge order of a group's rows (given in arrival order), as positions in it."""
        sequence_fields = self.options.sequence_field
        columns = tagged.select(list(dict.fromkeys([*self.keys, *sequence_fields])))
        if len(rows) != tagged.num_rows:
            columns = columns.take(int64_array(rows))
        if sequence_fields:
            columns = columns.append_column(SEQUENCE_NUMBER, int64_array(np.arange(len(rows), dtype=np.int64)))
        order = merge_permutation(columns, self.keys, sequence_fields,
                                  descending_sequence=self.options.sequence_descending, in_sequence=True)
        return np.asarray(order.to_numpy(zero_copy_only=False), dtype=np.int64)

    def _bucket(self, partition: Partition, bucket: int) -> _Bucket:
        key = (partition.row, bucket)
        state = self._buckets.get(key)
        if state is None:
            state = self._buckets[key] = _Bucket(partition, bucket, self.next_sequence(partition.row, bucket))
        return state

    def _take_buffer(self, state: _Bucket) -> list[pa.Table]:
        chunks = state.chunks
        self._buffered -= state.nbytes
        state.chunks, state.nbytes = [], 0
        return chunks

    def _sort(self, chunks: list[pa.Table]) -> pa.Table:
        """Buffered rows in merge order (each chunk is, and they arrived in sequence order)."""
        if len(chunks) == 1:
            return chunks[0]
        table = pa.concat_tables(chunks)
        order = merge_permutation(table, self.keys, self.options.sequence_field,
                                  descending_sequence=self.options.sequence_descending, in_sequence=True)
        return table.take(order)

    def _relieve(self, state: _Bucket) -> None:
        """Free the buffer of one bucket: spill it as a sorted run, or write it as level 0."""
        ordered = self._sort(self._take_buffer(state))
        self._write_changelog(state, ordered)
        if self.options.write_buffer_spillable:
            state.spills.append(SpillFile(ordered))
            log.debug("spilled %d rows of bucket %d (%s)", ordered.num_rows, state.bucket, state.partition.path)
        else:
            self._write_run(state, iter([self.engine.merge(ordered, key_groups(ordered, self.keys))]))

    def _file_writer(self, state: _Bucket, prefix: str) -> RollingFileWriter:
        key_fields = self.layout.key_fields()
        return RollingFileWriter(
            self.file_io, self.paths.bucket_dir(state.partition.path, state.bucket),
            file_schema=self.layout.file_schema(), stats_fields=self.schema.fields,
            content=lambda: KeyValueContent(key_fields), schema_id=self.schema.id, options=self.options,
            target_size=self.options.target_file_size_for(primary_key=True), prefix=prefix)

    def _write_changelog(self, state: _Bucket, ordered: pa.Table) -> None:
        """``changelog-producer=input``: every buffered row, unmerged, in key and sequence order."""
        if self.options.changelog_producer != "input":
            return
        if state.changelog is None:
            state.changelog = self._file_writer(state, self.options.changelog_file_prefix)
        write_coalesced(state.changelog, [ordered], self.layout.to_file)
        state.changelog.roll()

    def _write_run(self, state: _Bucket, merged: Iterator[pa.Table]) -> None:
        """Write one sorted run, coalescing small merged chunks into larger row groups."""
        if state.writer is None:
            state.writer = self._file_writer(state, self.options.data_file_prefix)
        write_coalesced(state.writer, merged, self.layout.to_file)
        state.writer.roll()

    def prepare_commit(self) -> list[CommitMessage]:
        """Merge every bucket's spilled runs and buffer into level-0 files (buckets in parallel)."""
        work = [(state, self._take_buffer(state)) for state in self._buckets.values()]
        if len(work) > 1 and _ENCODE_THREADS > 1:
            with ThreadPoolExecutor(_ENCODE_THREADS, thread_name_prefix="paimon-flush") as pool:
                results = list(pool.map(lambda item: self._finish_bucket(*item), work))
        else:
            results = [self._finish_bucket(state, chunks) for state, chunks in work]
        self._buckets.clear()
        return [message for message in results if message is not None]

    def _finish_bucket(self, state: _Bucket, buffered: list[pa.Table]) -> CommitMessage | None:
        if buffered:
            ordered = self._sort(buffered)
            self._write_changelog(state, ordered)
            state.spills.append(_InMemoryRun(ordered))
        runs = [spill.chunks() for spill in state.spills]
        if runs:
            self._write_run(state, merge_sorted_runs(
                runs, keys=self.keys, engine=self.engine, sequence_fields=self.options.sequence_field,
                descending_sequence=self.options.sequence_descending))
        for spill in state.spills:
            spill.delete()
        state.spills = []
        files = state.writer.close() if state.writer is not None else []
        changelog = state.changelog.close() if state.changelog is not None else []
        if not files and not changelog:
            return None
        return CommitMessage(state.partition, state.bucket, self.total_buckets, tuple(files), tuple(changelog))

    def abort(self) -> None:
        for state in self._buckets.values():
            for spill in state.spills:
                spill.delete()
            for writer in (state.writer, state.changelog):
                if writer is not None:
                    writer.abort()
        self._buckets.clear()
        self._buffered = 0

    @property
    def buffered_bytes(self) -> int:
        return self._buffered
