"""Data files: writing Arrow chunks as Parquet/ORC row groups, rolled at ``target-file-size``."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import orc

from paimon_core.binary_row import arrow_scalar_to_internal, serialize_with_arity
from paimon_core.columnar import int64_array
from paimon_core.errors import FileIOError, UnsupportedFeatureError
from paimon_core.fileio import FileIO
from paimon_core.keyvalue import DELETE, SEQUENCE_NUMBER, UPDATE_BEFORE, VALUE_KIND
from paimon_core.manifest import FILE_SOURCE_APPEND, DataFileMeta
from paimon_core.options import TableOptions, codec_problem
from paimon_core.stats import StatsCollector
from paimon_core.types import DataField
from paimon_core.write.encodings import dictionary_columns

log = logging.getLogger(__name__)


def local_now_millis() -> int:
    """Wall-clock local time encoded as if it were UTC, as Paimon stores creation times."""
    now = time.time()
    offset = time.localtime(now).tm_gmtoff
    return int((now + offset) * 1000)


def _timestamp_units(data_type: pa.DataType) -> set[str]:
    """Units of every timestamp inside a (nested) Arrow type."""
    if pa.types.is_timestamp(data_type):
        return {data_type.unit}
    units: set[str] = set()
    for i in range(data_type.num_fields):
        units |= _timestamp_units(data_type.field(i).type)
    return units


def parquet_int96(schema: pa.Schema) -> bool:
    """Whether a Parquet file of ``schema`` stores its timestamps as INT96, as Java does for
    TIMESTAMP(7..9) (its readers before Paimon 2.0 take nothing else there). pyarrow's INT96
    switch covers every column of a file, and those readers take INT96 for nothing else: a
    file mixing nanosecond and coarser timestamps keeps INT64 with the NANOS unit, which
    Paimon reads from 2.0 on."""
    units: set[str] = set()
    for f in schema:
        units |= _timestamp_units(f.type)
    return units == {"ns"}


class _FormatWriter:
    """One open data file of a given format."""

    def __init__(self, sink: pa.NativeFile, schema: pa.Schema, options: TableOptions) -> None:
        self.sink = sink
        self.format = options.file_format
        compression = options.file_compression
        problem = codec_problem(self.format, compression)
        if problem is not None:  # a table made elsewhere with a codec pyarrow has no writer for
            raise UnsupportedFeatureError(problem)
        if compression in ("none", "uncompressed"):
            compression = "none" if self.format == "parquet" else "uncompressed"
        if self.format == "parquet":
            self._schema = schema
            self._compression = compression
            self._level = options.file_compression_zstd_level if compression == "zstd" else None
            self._parquet: pq.ParquetWriter | None = None  # opened with the first rows
        else:
            self._time_columns = [i for i, f in enumerate(schema) if pa.types.is_time(f.type)]
            self._orc = orc.ORCWriter(sink, compression=compression.upper()
                                      if compression != "uncompressed" else "UNCOMPRESSED")

    def _open_parquet(self, first: pa.Table) -> pq.ParquetWriter:
        """The Parquet writer, dictionary-encoding the columns whose first rows repeat."""
        # DECIMAL of precision <= 9 / <= 18 as INT32 / INT64, as Java's ParquetSchemaConverter
        # writes them (its readers take those widths only as integers).
        self._parquet = pq.ParquetWriter(self.sink, self._schema, compression=self._compression,
                                         compression_level=self._level, version="2.6",
                                         use_dictionary=dictionary_columns(first), store_decimal_as_integer=True,
                                         use_deprecated_int96_timestamps=parquet_int96(self._schema),
                                         write_statistics=True, write_page_index=True)
        return self._parquet

    def write(self, table: pa.Table) -> None:
        if self.format == "parquet":
            writer = self._parquet or self._open_parquet(table)
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
        else:
            # pyarrow's ORC writer ignores the offset of sliced struct children: copy first.
            table = table.take(int64_array(np.arange(table.num_rows)))
            for i in self._time_columns:  # ORC has no TIME type: Paimon stores millis as INT
                table = table.set_column(i, table.field(i).name, table.column(i).cast(pa.int32()))
            self._orc.write(table)

    def close(self) -> int:
        """Finish the file; returns its size (the stream's position after the footer, so an
        object store is not asked for it)."""
        if self.format == "parquet":
            (self._parquet or self._open_parquet(self._schema.empty_table())).close()
        else:
            self._orc.close()
        size = int(self.sink.tell())
        self.sink.close()
        return size

    @property
    def bytes_written(self) -> int:
        return int(self.sink.tell())


class FileContent(Protocol):
    """Per-file bookkeeping beyond value stats: sequence numbers, keys, deletes."""

    def update(self, piece: pa.Table) -> None: ...

    def meta(self) -> dict[str, Any]: ...


@dataclass(slots=True)
class SequenceCounter:
    """The next sequence number of an append bucket, shared by its successive files."""

    next: int = 0


class AppendContent:
    """Append files number their rows one after another (as Java's append writer does)."""

    def __init__(self, counter: SequenceCounter) -> None:
        self.counter = counter
        self.first = counter.next

    def update(self, piece: pa.Table) -> None:
        self.counter.next += piece.num_rows

    def meta(self) -> dict[str, Any]:
        return {"min_sequence_number": self.first, "max_sequence_number": self.counter.next - 1,
                "delete_row_count": 0}


@dataclass(slots=True)
class _OpenFile:
    name: str
    path: str
    writer: _FormatWriter
    stats: StatsCollector
    content: FileContent
    rows: int = 0


class RollingFileWriter:
    """Writes the chunks of one (partition, bucket) into data files rolled at the target size.

    Chunks arrive in the file layout (``file_schema``); ``stats_fields`` are the columns whose
    value stats are kept. Each chunk becomes row groups; files are closed once they pass
    ``target_size``; :meth:`close` returns the metadata of every file written, and
    :meth:`abort` deletes them all (used when a write fails before its commit).
    """

    def __init__(self, file_io: FileIO, directory: str, *, file_schema: pa.Schema,
                 stats_fields: Sequence[DataField], content: Callable[[], FileContent],
                 schema_id: int, options: TableOptions, target_size: int, prefix: str,
                 level: int = 0, file_source: int = FILE_SOURCE_APPEND) -> None:
        self.file_io = file_io
        self.directory = directory
        self.fields = list(stats_fields)
        self.schema = file_schema
        self.new_content = content
        self.schema_id = schema_id
        self.options = options
        self.target_size = target_size
        self.prefix = f"{prefix}{uuid.uuid4()}-"
        self.level = level
        self.file_source = file_source
        self._counter = 0
        self._current: _OpenFile | None = None
        self._memory_bytes = 0  # in-memory bytes written so far (to learn the encoded ratio)
        self._file_bytes = 0
        self.files: list[DataFileMeta] = []
        self._paths: list[str] = []

    def write(self, table: pa.Table) -> None:
        """Append rows as row groups, cutting them so files end near the target size."""
        table = table.replace_schema_metadata(None).cast(self.schema)
        offset, n = 0, table.num_rows
        row_bytes = table.nbytes / max(n, 1)
        while offset < n:
            current = self._current or self._open()
            rows = self._rows_that_fit(current, row_bytes, n - offset)
            piece = table.slice(offset, rows)
            before = current.writer.bytes_written
            current.writer.write(piece)
            current.stats.update(piece)
            current.content.update(piece)
            current.rows += rows
            self._memory_bytes += piece.nbytes
            self._file_bytes += current.writer.bytes_written - before
            offset += rows
            if current.writer.bytes_written >= self.target_size:
                self._roll()

    def _rows_that_fit(self, current: _OpenFile, row_bytes: float, available: int) -> int:
        """Rows whose encoded size should fill the rest of the current file.

        The encoded size per in-memory byte is learned from what was written so far; before
        anything is written a first row group of at most 8 MiB (in memory) calibrates it.
        """
        remaining = self.target_size - current.writer.bytes_written
        if self._memory_bytes == 0:
            budget = min(remaining, 8 * 1024 * 1024)
            return max(1, min(available, int(budget / max(row_bytes, 1.0))))
        ratio = max(self._file_bytes / self._memory_bytes, 1e-3)
        return max(1, min(available, int(remaining / max(row_bytes * ratio, 1e-9)) + 1))

    def _open(self) -> _OpenFile:
        name = f"{self.prefix}{self._counter}.{self.options.file_format}"
        self._counter += 1
        path = f"{self.directory}/{name}"
        self._paths.append(path)
        try:
            sink = self.file_io.open_output(path)
        except FileIOError:
            raise
        except OSError as exc:  # e.g. no write permission on the table directory
            raise FileIOError(f"creating data file {self.file_io.uri(path)} failed: {exc}") from exc
        self._current = _OpenFile(name, path, _FormatWriter(sink, self.schema, self.options),
                                  StatsCollector(self.fields, self.options), self.new_content())
        return self._current

    def _roll(self) -> None:
        current = self._current
        if current is None:
            return
        self._current = None
        size = current.writer.close()
        value_stats, stats_cols = current.stats.result()
        self.files.append(DataFileMeta(
            file_name=current.name, file_size=size, row_count=current.rows,
            value_stats=value_stats, schema_id=self.schema_id, level=self.level, file_source=self.file_source,
            creation_time_ms=local_now_millis(), value_stats_cols=stats_cols,
            **current.content.meta()))
        log.debug("wrote %s: %d rows, %d bytes", current.path, current.rows, size)

    def roll(self) -> None:
        """Close the current file, so the next rows start a new one (a new sorted run)."""
        self._roll()

    def close(self) -> list[DataFileMeta]:
        self._roll()
        return self.files

    def abort(self) -> None:
        """Delete every file this writer created, closed or not."""
        if self._current is not None:
            try:
                self._current.writer.close()
            except (OSError, pa.ArrowException):
                pass
            self._current = None
        for path in self._paths:
            self.file_io.delete_quietly(path)
        self.files.clear()


# Chunks are gathered into row groups of about this many (in-memory) bytes.
ROW_GROUP_BYTES = 64 * 1024 * 1024


def write_coalesced(writer: RollingFileWriter, chunks: Iterable[pa.Table],
                    to_file: Callable[[pa.Table], pa.Table] = lambda t: t, group_bytes: int = ROW_GROUP_BYTES) -> int:
    """Write chunks gathered into larger row groups (small merged chunks make slow files).

    Returns the number of rows written.
    """
    pending: list[pa.Table] = []
    size = rows = 0
    for chunk in chunks:
        if not chunk.num_rows:
            continue
        pending.append(chunk)
        size += chunk.nbytes
        rows += chunk.num_rows
        if size >= group_bytes:
            writer.write(to_file(pa.concat_tables(pending)))
            pending, size = [], 0
    if pending:
        writer.write(to_file(pa.concat_tables(pending)))
    return rows


class KeyValueContent:
    """Primary-key files: min/max key rows, key stats, sequence range and retraction count.

    Requires: pieces in the file layout, sorted by key (the first row holds the minimum key).
    """

    def __init__(self, key_fields: Sequence[DataField]) -> None:
        self.key_fields = list(key_fields)
        self.key_types = [f.type for f in self.key_fields]
        self.key_stats = StatsCollector(self.key_fields, TableOptions.from_map({"metadata.stats-mode": "full",
                                                                                "metadata.stats-dense-store": "false"}))
        self.first_key: tuple[Any, ...] | None = None
        self.last_key: tuple[Any, ...] = ()
        self.min_sequence: int | None = None
        self.max_sequence = 0
        self.deletes = 0

    def _key_at(self, piece: pa.Table, row: int) -> tuple[Any, ...]:
        return tuple(arrow_scalar_to_internal(piece.column(f.name)[row], f.type) for f in self.key_fields)

    def update(self, piece: pa.Table) -> None:
        if piece.num_rows == 0:
            return
        if self.first_key is None:
            self.first_key = self._key_at(piece, 0)
        self.last_key = self._key_at(piece, piece.num_rows - 1)
        self.key_stats.update(piece)
        bounds = pc.min_max(piece.column(SEQUENCE_NUMBER))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        self.min_sequence = low if self.min_sequence is None else min(self.min_sequence, low)
        self.max_sequence = max(self.max_sequence, high)
        kinds = piece.column(VALUE_KIND)
        self.deletes += int(pc.sum(pc.or_(pc.equal(kinds, UPDATE_BEFORE), pc.equal(kinds, DELETE))).as_py() or 0)

    def meta(self) -> dict[str, Any]:
        key_stats, _ = self.key_stats.result()
        return {"min_key": serialize_with_arity(self.first_key or (), self.key_types),
                "max_key": serialize_with_arity(self.last_key, self.key_types), "key_stats": key_stats,
                "min_sequence_number": self.min_sequence or 0, "max_sequence_number": self.max_sequence,
                "delete_row_count": self.deletes}
