"""Reading the files of splits as Arrow, in the read schema.

Columns are matched by field id through each file's own schema version, so renamed columns are
found under their old names, widened types are cast and added columns read as nulls. Deletion
vectors drop their rows; filters are then applied exactly.

A split holds one partition, so its partition values settle the filter's conditions on partition
columns once per partition (:class:`PartitionRead`): the files are then scanned with the rest of
the filter only, and partition columns are read only where that rest needs them; the output's
are filled with the split's value (as a Hive-partitioned Parquet dataset fills them from its
directory names).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import orc

from paimon_core.binary_row import internal_to_arrow_scalar
from paimon_core.deletion_vectors import read_deletion_vector
from paimon_core.errors import (
    CorruptDataFileError,
    CorruptMetadataError,
    FileIOError,
    MissingFileError,
    PaimonError,
    SchemaError,
)
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths, partition_path, partition_value_string
from paimon_core.manifest import DataFileMeta
from paimon_core.options import TableOptions
from paimon_core.prefetch import mapped_in_order
from paimon_core.read.predicate import Leaf, Predicate, residual
from paimon_core.read.scan import DataSplit, DeletionFile
from paimon_core.schema import TableSchema
from paimon_core.schema_store import SchemaStore
from paimon_core.types import DataField, arrow_schema, to_arrow_type

READ_THREADS = 4


@dataclass(frozen=True, slots=True)
class PartitionRead:
    """How the files of one partition are read: what the filter leaves once the partition's
    values have settled its conditions on partition columns."""

    filter: pc.Expression | None  # the rest of the filter, for the rows
    read_fields: list[DataField]  # the columns read from the files
    fill: dict[str, pa.Scalar] = field(default_factory=dict)  # output columns that are the partition's value
    empty: bool = False  # the filter rules out every row of the partition
    predicate: Predicate | None = None  # the rest of the filter as a predicate (None: no filter, or not one)


class SplitReader:
    """Turns splits into Arrow tables of the projected read schema."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schemas: SchemaStore,
                 read_schema: TableSchema, *, columns: Sequence[str] | None = None,
                 predicate: Predicate | None = None, expression: pc.Expression | None = None,
                 table: str = "") -> None:
        self.file_io = file_io
        self.paths = paths
        self.schemas = schemas
        self.schema = read_schema
        self.options = TableOptions.from_map(read_schema.effective_options(), table=table)
        self.table = table
        names = read_schema.field_names
        if isinstance(columns, str | bytes):  # a bare string would be read as one column per character
            raise SchemaError(f"columns of a read of table {table} must be a list of column names, "
                              f"not the string {columns!r}")
        for name in columns or ():
            if name not in names:
                raise SchemaError(f"column {name!r} is not in table {table}; columns are {names}")
        self.output_fields = [read_schema.field(c) for c in columns] if columns else list(read_schema.fields)
        needed = {f.name for f in self.output_fields}
        if predicate is not None:
            needed |= predicate.columns()
        if expression is not None:
            needed = set(names)
        self.read_fields = [f for f in read_schema.fields if f.name in needed]
        self.predicate = predicate
        self.filter = _combine(predicate.to_expression() if predicate else None, expression)
        self.output_schema = arrow_schema(self.output_fields)
        self.settles_partitions = bool(read_schema.partition_keys) and expression is None
        self._partition_reads: dict[bytes, PartitionRead] = {}

    # ---- public ------------------------------------------------------------------------------

    def read_splits(self, splits: Sequence[DataSplit]) -> Iterator[pa.Table]:
        """One table per data file, in split order; files are read a few at a time in parallel."""
        tasks = [(split, meta) for split in splits for meta in split.files]
        return mapped_in_order(lambda task: self.read_file(*task), tasks, READ_THREADS)

    def iter_batches(self, splits: Sequence[DataSplit], batch_size: int = 65536) -> Iterator[pa.RecordBatch]:
        """Stream record batches, holding at most one row group of one file at a time."""
        for split in splits:
            for meta in split.files:
                yield from self._file_batches(split, meta, batch_size)

    def read_file(self, split: DataSplit, meta: DataFileMeta) -> pa.Table:
        plan = self.partition_read(split)
        if plan.empty:
            return self.output_schema.empty_table()
        path = self.file_path(split, meta)
        file_fields = self._file_fields(meta, plan.read_fields)
        deletion = split.deletion_files.get(meta.file_name)
        pushed = self._pushdown(path, file_fields, deletion, plan)
        data, rows = self._read_physical(path, [f.name for f in file_fields.values()], pushed,
                                         physical_schema(file_fields), size=meta.file_size)
        table = self._to_read_schema(data, file_fields, rows, plan.read_fields)
        if deletion is not None:
            table = table.filter(self._keep_mask(deletion, 0, table.num_rows))
        return self._finish(table, filtered=pushed is not None, plan=plan)

    def partition_read(self, split: DataSplit) -> PartitionRead:
        """How the split's files are read (worked out once per partition)."""
        plan = self._partition_reads.get(split.partition)
        if plan is None:
            plan = self._partition_reads[split.partition] = self._plan_partition(split)
        return plan

    def _plan_partition(self, split: DataSplit) -> PartitionRead:
        if not self.settles_partitions:
            return PartitionRead(self.filter, self.read_fields, predicate=self.predicate)
        values = {key: internal_to_arrow_scalar(value, to_arrow_type(self.schema.field(key).type))
                  for key, value in zip(self.schema.partition_keys, split.partition_values)}
        rest: Predicate | bool = True
        if self.predicate is not None:
            rest = residual(self.predicate, lambda leaf: _settled(leaf, values))
            if rest is False:
                return PartitionRead(None, [], empty=True)
        needed = set() if isinstance(rest, bool) else rest.columns()
        read_fields = [f for f in self.read_fields if f.name not in values or f.name in needed]
        fill = {f.name: values[f.name] for f in self.output_fields if f.name in values and f.name not in needed}
        if isinstance(rest, bool):
            return PartitionRead(None, read_fields, fill)
        return PartitionRead(rest.to_expression(), read_fields, fill, predicate=rest)

    # ---- helpers -----------------------------------------------------------------------------

    def _read_physical(self, path: str, columns: list[str], pushed: pc.Expression | None,
                       schema: pa.Schema | None = None, *, size: int | None = None) -> tuple[pa.Table, int]:
        """A file's columns (filtered by ``pushed`` in the scan when given, the file read as
        ``schema``: see :meth:`_dataset`) and row count; ``size`` is the file's, from its
        manifest entry (an object store is then not asked for it)."""
        with self._decoding(path), self.file_io.open_input(path, size) as source:
            if pushed is not None:
                data = self._dataset(source, schema).to_table(columns=columns, filter=pushed, use_threads=True)
                return data, data.num_rows
            return read_all(source, path, columns)

    def _stream_physical(self, path: str, columns: list[str], batch_size: int,
                         batch_bytes: int | None = None, *, size: int | None = None) -> Iterator[pa.RecordBatch]:
        """A file's columns in record batches of at most ``batch_size`` rows (or about ``batch_bytes``)."""
        with self._decoding(path), self.file_io.open_input(path, size) as source:
            yield from _iter_batches(source, path, columns, batch_size, batch_bytes)

    @contextmanager
    def _decoding(self, path: str) -> Iterator[None]:
        """Typed errors naming the data file and table for everything a file read can raise:
        missing, undecodable (truncated, garbage, columns it should have but lacks), or a storage
        failure (kept apart from corruption: a failed read is worth retrying, a corrupt file is not)."""
        try:
            yield
        except PaimonError:
            raise
        except FileNotFoundError:
            raise MissingFileError(f"data file {path} of table {self.table} is missing") from None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowSerializationError,
                KeyError, pa.ArrowIndexError, EOFError) as exc:  # KeyError: a column the file lacks
            reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # KeyError's str() adds quotes
            raise CorruptDataFileError(f"data file {path} of table {self.table} cannot be decoded: {reason}") from exc
        except OSError as exc:
            raise FileIOError(f"reading data file {path} of table {self.table} failed: {exc}") from exc

    def file_path(self, split: DataSplit, meta: DataFileMeta) -> str:
        if meta.external_path:
            return self.file_io.to_path(meta.external_path)
        texts = [partition_value_string(v, t, legacy=self.options.partition_legacy_name)
                 for v, t in zip(split.partition_values, self.schema.partition_types)]
        relative = partition_path(self.schema.partition_keys, texts, self.options.partition_default_name)
        return self.paths.data_file(relative, split.bucket, meta.file_name)

    def _file_fields(self, meta: DataFileMeta, fields: Sequence[DataField] | None = None) -> dict[int, DataField]:
        """Read-schema field id → the field as named and typed in the file's schema, for
        ``fields`` (default: the reader's read fields)."""
        file_schema = self.schemas.schema(meta.schema_id)
        by_id = file_schema.field_by_id()
        return {f.id: by_id[f.id] for f in (self.read_fields if fields is None else fields) if f.id in by_id}

    def _to_read_schema(self, data: pa.Table, file_fields: dict[int, DataField],
                        rows: int, fields: Sequence[DataField] | None = None) -> pa.Table:
        fields = self.read_fields if fields is None else fields
        columns = []
        for data_field in fields:
            target = to_arrow_type(data_field.type)
            old = file_fields.get(data_field.id)
            if old is None:
                columns.append(pa.nulls(rows, target))
                continue
            column = data.column(old.name)
            if column.type != target:
                column = _cast(column, target, data_field.name, self.table)
            columns.append(column)
        if not columns:  # no column is read (the output is partition values): the rows still count
            return pa.Table.from_batches([_rows_only(rows)])
        return pa.Table.from_arrays(columns, schema=arrow_schema(list(fields)))

    def _keep_mask(self, deletion: DeletionFile, start: int, count: int) -> pa.Array:
        positions = load_deletion_vector(self.file_io, deletion)
        keep = np.ones(count, dtype=bool)
        local = positions[(positions >= start) & (positions < start + count)] - start
        keep[local.astype(np.int64)] = False
        return pa.array(keep)


    def _finish(self, table: pa.Table, *, filtered: bool = False, plan: PartitionRead | None = None) -> pa.Table:
        """The rows the filter keeps (unless the scan ``filtered`` them), as the output columns."""
        row_filter = self.filter if plan is None else plan.filter
        if row_filter is not None and not filtered:
            table = table.filter(row_filter)
        if plan is not None and plan.fill:
            columns = [pa.repeat(plan.fill[f.name], table.num_rows) if f.name in plan.fill else table.column(f.name)
                       for f in self.output_fields]
            return pa.Table.from_arrays(columns, schema=self.output_schema)
        if table.column_names != [f.name for f in self.output_fields]:
            table = table.select([f.name for f in self.output_fields])
        return table

    def _pushdown(self, path: str, file_fields: dict[int, DataField], deletion: DeletionFile | None,
                  plan: PartitionRead) -> pc.Expression | None:
        """The partition's filter, when the Parquet scan can evaluate it directly (pruning row groups).

        That needs every read column stored under its current name and type, and no deletion
        vector (whose row positions a filtered scan would lose).
        """
        if plan.filter is None or deletion is not None or _format_of(path) != "parquet":
            return None
        for data_field in plan.read_fields:
            old = file_fields.get(data_field.id)
            if old is None or old.name != data_field.name or (
                    to_arrow_type(old.type) != to_arrow_type(data_field.type)):
                return None
        return plan.filter

    def _dataset(self, source: pa.NativeFile, schema: pa.Schema | None) -> ds.Dataset:
        """An open Parquet file for a filtered scan, its ``schema`` columns read as their own
        Arrow types: the scan casts what the file stores otherwise (INT96 timestamps come back
        without their time zone) before the filter compares. A file lacking one of them is refused."""
        parquet = ds.ParquetFileFormat()
        fragment = parquet.make_fragment(source)
        stored = fragment.physical_schema
        if schema is None:
            return ds.FileSystemDataset([fragment], stored, parquet)
        _require_columns(stored.names, schema.names)
        wanted = {f.name: f for f in schema}
        if all(stored.field(name).type == f.type for name, f in wanted.items()):
            return ds.FileSystemDataset([fragment], stored, parquet)
        return ds.FileSystemDataset([fragment], pa.schema([wanted.get(f.name, f) for f in stored]), parquet)

    def _pushed_batches(self, path: str, file_fields: dict[int, DataField], pushed: pc.Expression,
                        batch_size: int, size: int | None) -> Iterator[pa.RecordBatch]:
        columns = [f.name for f in file_fields.values()]
        with self._decoding(path), self.file_io.open_input(path, size) as source:
            yield from self._dataset(source, physical_schema(file_fields)).to_batches(
                columns=columns, filter=pushed, batch_size=batch_size)

    def _file_batches(self, split: DataSplit, meta: DataFileMeta,
                      batch_size: int) -> Iterator[pa.RecordBatch]:
        plan = self.partition_read(split)
        if plan.empty:
            return
        path = self.file_path(split, meta)
        file_fields = self._file_fields(meta, plan.read_fields)
        physical = [f.name for f in file_fields.values()]
        deletion = split.deletion_files.get(meta.file_name)
        pushed = self._pushdown(path, file_fields, deletion, plan)
        if pushed is not None:
            for batch in self._pushed_batches(path, file_fields, pushed, batch_size, meta.file_size):
                if batch.num_rows:
                    table = self._to_read_schema(pa.Table.from_batches([batch]), file_fields, batch.num_rows,
                                                 plan.read_fields)
                    yield from self._finish(table, filtered=True, plan=plan).to_batches()
            return
        offset = 0
        for batch in self._stream_physical(path, physical, batch_size, size=meta.file_size):
            table = self._to_read_schema(pa.Table.from_batches([batch]), file_fields, batch.num_rows,
                                         plan.read_fields)
            if deletion is not None:
                table = table.filter(self._keep_mask(deletion, offset, table.num_rows))
            offset += batch.num_rows
            yield from self._finish(table, plan=plan).to_batches()


def _settled(leaf: Leaf, values: dict[str, pa.Scalar]) -> bool | None:
    """A condition's outcome on every row of a partition with ``values``, when it is on a
    partition column: the condition evaluated on that one value, as the row filter would."""
    if leaf.column not in values:
        return None
    outcome = pa.table({leaf.column: pa.repeat(values[leaf.column], 1)}).filter(leaf.to_expression())
    return outcome.num_rows == 1


def physical_schema(file_fields: dict[int, DataField], extra: Sequence[pa.Field] = ()) -> pa.Schema:
    """The Arrow schema of a data file's columns as its own schema version names and types them."""
    return pa.schema([*(pa.field(f.name, to_arrow_type(f.type)) for f in file_fields.values()), *extra])


def load_deletion_vector(file_io: FileIO, deletion: DeletionFile) -> np.ndarray:
    """The deleted row positions of one data file."""
    with file_io.open_input(deletion.index_file) as source:
        source.seek(deletion.offset)
        blob = bytes(source.read(deletion.length + 8))
    return read_deletion_vector(blob, source=f"deletion vector in {deletion.index_file}")


def _combine(first: pc.Expression | None, second: pc.Expression | None) -> pc.Expression | None:
    if first is None:
        return second
    return first if second is None else first & second


def _cast(column: pa.ChunkedArray, target: pa.DataType, name: str, table: str) -> pa.ChunkedArray:
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"column {name!r} of table {table} cannot be read as {target}: {exc}") from None


def _format_of(path: str) -> str:
    return path.rsplit(".", 1)[-1].lower()


def read_all(source: pa.NativeFile, path: str, columns: list[str]) -> tuple[pa.Table, int]:
    """The file's chosen columns and its row count (also known when no column is chosen)."""
    fmt = _format_of(path)
    if fmt == "parquet":
        parquet = pq.ParquetFile(source)
        _require_columns(parquet.schema_arrow.names, columns)
        return parquet.read(columns=columns, use_threads=True), parquet.metadata.num_rows
    if fmt == "orc":
        reader = orc.ORCFile(source)
        _require_columns(reader.schema.names, columns)
        return reader.read(columns=columns), reader.nrows
    raise CorruptMetadataError(f"data file {path} has an unsupported format {fmt!r}")


def _require_columns(present: Sequence[str], columns: Sequence[str]) -> None:
    """A file lacking a column its schema version has is not this table's file (readers would
    otherwise skip the column silently); the caller reports it as a corrupt data file."""
    missing = [c for c in columns if c not in present]
    if missing:
        raise KeyError(f"the file has no column {missing[0]!r} (it has {list(present)})")


def _rows_only(rows: int) -> pa.RecordBatch:
    """A batch of ``rows`` rows and no column: what a read of no column yields, so counts hold."""
    return pa.record_batch({"": pa.nulls(rows)}).select([])


def _iter_batches(source: pa.NativeFile, path: str, columns: list[str], batch_size: int,
                  batch_bytes: int | None = None) -> Iterator[pa.RecordBatch]:
    fmt = _format_of(path)
    if fmt == "parquet":
        parquet = pq.ParquetFile(source)
        _require_columns(parquet.schema_arrow.names, columns)
        if batch_bytes is not None:  # rows per batch from the decoded size the footer records
            meta = parquet.metadata
            decoded = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
            batch_size = max(1024, int(batch_bytes / max(decoded / max(meta.num_rows, 1), 1.0)))
        yield from parquet.iter_batches(batch_size=batch_size, columns=columns)
    elif fmt == "orc":
        reader = orc.ORCFile(source)
        _require_columns(reader.schema.names, columns)
        if not columns:  # a stripe read of no column has no rows: count them from the file
            for start in range(0, reader.nrows, batch_size):
                yield _rows_only(min(batch_size, reader.nrows - start))
            return
        for stripe in range(reader.nstripes):
            stripe_batch = reader.read_stripe(stripe, columns=columns)
            yield from pa.Table.from_batches([stripe_batch]).to_batches(batch_size)
    else:
        raise CorruptMetadataError(f"data file {path} has an unsupported format {fmt!r}")
