"""The append-table writer: buffers routed rows within ``write-buffer-size`` and rolls files.

Rows of every (partition, bucket) are buffered together; when the buffered bytes pass the
budget the largest buffers are written out as row groups of their open file, so memory stays
bounded however much one commit carries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema
from paimon_core.threads import worker_threads
from paimon_core.types import arrow_schema
from paimon_core.write.data_file import AppendContent, RollingFileWriter, SequenceCounter
from paimon_core.write.flusher import Flusher, release_freed_memory
from paimon_core.write.message import CommitMessage
from paimon_core.write.routing import Partition, Router
from paimon_core.write.shard import Shard

log = logging.getLogger(__name__)

SequenceRestore = Callable[[bytes, int], int]
# Rows are routed in slices of about this many bytes so one huge input table is not copied whole.
_ROUTE_CHUNK_BYTES = 64 * 1024 * 1024
# Files of different (partition, bucket)s are encoded concurrently (pyarrow releases the GIL).
_ENCODE_THREADS = worker_threads()


@dataclass(slots=True)
class _Buffer:
    partition: Partition
    bucket: int
    chunks: list[pa.Table] = field(default_factory=list)
    nbytes: int = 0


class AppendWriter:
    """Writes conformed Arrow tables of an append-only table into data files.

    Buffered bytes plus bytes waiting to be encoded stay within ``write-buffer-size`` (give or
    take one routed chunk): when they pass it, the largest buffers are handed to background
    encoding and the writer waits until enough of that work is done.
    """

    def __init__(self, file_io: FileIO, paths: TablePaths, schema: TableSchema,
                 options: TableOptions, *, next_sequence: SequenceRestore | None = None,
                 shard: Shard | None = None) -> None:
        self.file_io = file_io
        self.paths = paths
        self.schema = schema
        self.options = options
        self.router = Router(schema, options)
        self.shard = shard
        self.total_buckets = options.bucket
        self._next_sequence = next_sequence
        self._buffers: dict[tuple[bytes, int], _Buffer] = {}
        self._writers: dict[tuple[bytes, int], tuple[Partition, RollingFileWriter]] = {}
        self._buffered = 0
        self._flusher = Flusher(_ENCODE_THREADS)
        self.rows_written = 0

    def write(self, table: pa.Table) -> None:
        """Buffer a table already conformed to the schema; may flush to files."""
        if table.num_rows == 0:
            return
        rows_per_chunk = max(1, int(table.num_rows * _ROUTE_CHUNK_BYTES / max(table.nbytes, 1)))
        for offset in range(0, table.num_rows, rows_per_chunk):
            self._buffer(table.slice(offset, rows_per_chunk))
        release_freed_memory()  # the caller's batch and this thread's routing copies, just freed

    def _buffer(self, table: pa.Table) -> None:
        for partition, bucket, rows in self.router.route(table):
            key = (partition.row, bucket)
            if self.shard is not None and not self.shard.owns(partition.row, bucket):
                continue
            self.rows_written += rows.num_rows
            buffer = self._buffers.get(key)
            if buffer is None:
                buffer = self._buffers[key] = _Buffer(partition, bucket)
            buffer.chunks.append(rows)
            buffer.nbytes += rows.nbytes
            self._buffered += rows.nbytes
        limit = self.options.write_buffer_size
        if self._buffered + self._flusher.inflight_bytes > limit:
            chosen = []
            remaining = self._buffered
            for key in sorted(self._buffers, key=lambda k: -self._buffers[k].nbytes):
                chosen.append(key)
                remaining -= self._buffers[key].nbytes
                if remaining <= limit // 2:
                    break
            self._flush(chosen)
            self._flusher.wait_below(limit - self._buffered)

    def _flush(self, keys: list[tuple[bytes, int]]) -> None:
        """Hand the chosen buffers to background encoding, one row group each."""
        for key in keys:
            buffer = self._buffers.pop(key, None)
            if buffer is None or not buffer.chunks:
                continue
            data = pa.concat_tables(buffer.chunks) if len(buffer.chunks) > 1 else buffer.chunks[0]
            self._buffered -= buffer.nbytes
            self._flusher.submit(key, self._writer(buffer.partition, buffer.bucket).write, data)

    def _writer(self, partition: Partition, bucket: int) -> RollingFileWriter:
        key = (partition.row, bucket)
        entry = self._writers.get(key)
        if entry is None:
            counter = SequenceCounter(self._next_sequence(partition.row, bucket) if self._next_sequence else 0)
            writer = RollingFileWriter(
                self.file_io, self.paths.bucket_dir(partition.path, bucket),
                file_schema=arrow_schema(self.schema.fields, with_ids=True), stats_fields=self.schema.fields,
                content=lambda: AppendContent(counter), schema_id=self.schema.id, options=self.options,
                target_size=self.options.target_file_size_for(primary_key=False),
                prefix=self.options.data_file_prefix)
            entry = self._writers[key] = (partition, writer)
        return entry[1]

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush everything and close all files; the writer can be reused afterwards."""
        self._flush(list(self._buffers))
        self._flusher.wait_all()
        messages = []
        for (_, bucket), (partition, writer) in self._writers.items():
            files = writer.close()
            if files:
                messages.append(CommitMessage(partition, bucket, self.total_buckets, tuple(files)))
        self._writers.clear()
        return messages

    def abort(self) -> None:
        """Delete every file written since the last prepare_commit and drop buffers."""
        self._flusher.close()
        for _, writer in self._writers.values():
            writer.abort()
        self._writers.clear()
        self._buffers.clear()
        self._buffered = 0

    def close(self) -> None:
        """Stop the background encoding threads."""
        self._flusher.close()

    @property
    def buffered_bytes(self) -> int:
        """Bytes buffered or waiting to be encoded."""
        return self._buffered + self._flusher.inflight_bytes
