"""Reading landed files (Parquet, CSV, JSON lines) into record batches of a table's schema.

A landed file is the boundary with the upstream world, so everything that is not data of the
table is refused, naming the file, the column and the value: an empty file (an upload that died,
a placeholder: not even a CSV header), a CSV whose first row names none of the table's columns
(a file without a header row), columns the table does not have (unless the table's policy is
``ignore``), a file that does not parse (truncated), a value that does not convert, a missing
or null NOT NULL column. I/O failures (``OSError``) are left as they are: retrying them may
help, retrying bad data does not.

Memory is one block or row group plus one output batch of the file being read; files are opened
one after the other, only when the previous one is exhausted.
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
import lzma
import re
import typing
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import IO, Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pj
import pyarrow.parquet as pq

from paimon_core.errors import SchemaError

log = logging.getLogger(__name__)

EXTRA_COLUMNS = ("refuse", "ignore")
"""What a table does with input columns it does not have: refuse the input (the default, naming
the columns: upstream schema drift is noticed), or ignore them."""
# CSV and JSON are parsed in blocks of this many bytes: it bounds their memory per file, and a
# single CSV row or JSON line must fit in one block.
BLOCK_BYTES = 4 << 20
# A timestamp string that carries its own zone: a time of day followed by Z or a +hh[:mm] offset.
_ZONED = r"\d:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$"
_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)
# What the decompressors raise on a stream that ends early or is damaged (not I/O failures).
_TRUNCATED_STREAM = (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError)
_MAX_VALUE_CHARS = 120
_NAMES = {"parquet": "Parquet", "csv": "CSV", "jsonl": "JSON lines"}


class LandingError(SchemaError):
    """Landed files that cannot be found, parsed or shaped into the table schema, or a bad landing declaration.

    The message names the table (where known), the file, the column and the offending value, so
    the upstream delivery or the declaration can be fixed without reading the data.
    """


@dataclass(frozen=True, slots=True)
class Reading:
    """How one delivery's files become rows of a table.

    Attributes:
        table: the table name, for messages.
        schema: the table's Arrow schema; every batch has exactly its columns, in its order.
        constants: columns set to one value in every row whatever the files hold (the Paimon
            partition columns).
        csv_delimiter: the CSV field separator.
        batch_size: the most rows of any batch.
        extra_columns: ``refuse`` or ``ignore`` columns the table does not have.
    """

    table: str
    schema: pa.Schema
    constants: Mapping[str, pa.Scalar]
    csv_delimiter: str = ","
    batch_size: int = 65_536
    extra_columns: str = "refuse"


@dataclass(frozen=True, slots=True)
class FileToRead:
    """A landed file and how it is stored: ``format`` one of parquet, csv, jsonl;
    ``compression`` fsspec's name (gzip, bz2, ...) or None."""

    path: str
    format: str
    compression: str | None = None


def read_files(fs: fsspec.AbstractFileSystem, files: Sequence[FileToRead], reading: Reading
               ) -> Iterator[pa.RecordBatch]:
    """Every file's rows, in order, as batches of ``reading.schema`` (see the module docstring)."""
    rows = 0
    for landed in files:
        source = _Source(reading.table, landed.path)
        with fsspec.core.OpenFile(fs, landed.path, "rb", compression=landed.compression) as handle:
            if not handle.read(1):
                raise LandingError(f"{source}: the file is empty (0 bytes), so it is not a "
                                   f"{_NAMES[landed.format]} file of this table (an upload cut short, or a "
                                   "placeholder); replace it with the complete file, or remove it")
            handle.seek(0)
            done = 0
            text = None if landed.format == "parquet" else _Tail(handle)
            reader = {"parquet": _parquet, "csv": _csv, "jsonl": _jsonl}[landed.format]
            stream = handle if text is None else typing.cast(IO[bytes], text)
            for raw in _guarded(reader(stream, reading, source), source, landed.format, reading):
                shaped = _shape(raw, reading, source, first_row=done + 1)
                done += raw.num_rows
                for offset in range(0, shaped.num_rows, reading.batch_size):
                    yield shaped.slice(offset, reading.batch_size)
            if text is not None and text.last not in (b"\n", b"\r"):
                raise LandingError(f"{source}: the file does not end with a line break, so its last row may be "
                                   f"cut short (an upload that died); {_NAMES[landed.format]} files end every row "
                                   "with one: replace it with the complete file")
        log.debug("read %d rows from %s", done, landed.path)
        rows += done
    log.info("read %d rows from %d landed files of table %s", rows, len(files), reading.table)


def fill_scalars(schema: pa.Schema, fill: Mapping[str, str], table: str) -> dict[str, pa.Scalar]:
    """Column name -> value (as text, e.g. ``"2024-01-01"`` for a DATE column) as typed scalars.

    Raises:
        LandingError: a column the table does not have, or a value that does not convert.
    """
    constants = {}
    for name, value in fill.items():
        if name not in schema.names:
            raise LandingError(f"table {table}: fill column {name!r} is not a column of the table "
                               f"({', '.join(schema.names)})")
        target = schema.field(name).type
        try:
            constants[name] = _convert(pa.array([value], pa.string()), target)[0]
        except _CONVERT_ERRORS as exc:
            raise LandingError(f"table {table}: partition value {value!r} of column {name!r} does not convert "
                               f"to {target}: {exc}") from None
    return constants


# ---- formats -----------------------------------------------------------------------------------


def _parquet(handle: IO[bytes], reading: Reading, source: _Source) -> Iterator[pa.RecordBatch]:
    with pq.ParquetFile(handle) as parquet:
        wanted = _present(reading, parquet.schema_arrow.names, source)
        yield from parquet.iter_batches(batch_size=reading.batch_size, columns=wanted)


def _csv(handle: IO[bytes], reading: Reading, source: _Source) -> Iterator[pa.RecordBatch]:
    header = _csv_header(handle, reading.csv_delimiter)
    source.header = header
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise LandingError(f"{source}: the header names column(s) {repeated} more than once")
    readable = [f.name for f in reading.schema if f.name not in reading.constants]
    if readable and not set(readable) & set(header):
        raise LandingError(f"{source}: its first row {_shown_list(header)} names none of the table's columns "
                           f"({', '.join(readable)}): a file without a header row? CSV files need a first row "
                           "naming their columns")
    wanted = _present(reading, header, source)
    types = {name: _reader_type(reading.schema.field(name).type, "csv") for name in wanted}
    # An unquoted empty field is null in every column, "" is the empty string; no other null marker
    # (pyarrow's default list would turn the text "NA" or "null" of a STRING column into null).
    convert = pcsv.ConvertOptions(column_types=types, include_columns=wanted or header[:1], null_values=[""],
                                  strings_can_be_null=True, quoted_strings_can_be_null=False)
    reader = pcsv.open_csv(handle, read_options=pcsv.ReadOptions(block_size=BLOCK_BYTES),
                           parse_options=pcsv.ParseOptions(delimiter=reading.csv_delimiter),
                           convert_options=convert)
    for batch in reader:
        yield batch if wanted else batch.select([])


def _jsonl(handle: IO[bytes], reading: Reading, source: _Source) -> Iterator[pa.RecordBatch]:
    fields = [pa.field(f.name, _reader_type(f.type, "jsonl")) for f in reading.schema
              if f.name not in reading.constants]
    # Refusing extra fields needs their names, which only inference gives ("error" does not say).
    behaviour = "ignore" if reading.extra_columns == "ignore" else "infer"
    options = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior=behaviour)
    for batch in pj.open_json(handle, read_options=pj.ReadOptions(block_size=BLOCK_BYTES), parse_options=options):
        _refuse_extra(reading, batch.schema.names, source)
        yield batch


def _present(reading: Reading, names: Sequence[str], source: _Source) -> list[str]:
    """The schema columns to read from a file with columns ``names``: a NOT NULL one it lacks is
    an error, and so are columns the table does not have unless the policy ignores them."""
    have = set(names)
    constants = reading.constants
    for f in reading.schema:
        if f.name not in constants and f.name not in have and not f.nullable:
            raise LandingError(f"{source}: has no column {f.name!r}, which the table declares NOT NULL "
                               f"(the file has {', '.join(names) or 'no columns'})")
    _refuse_extra(reading, names, source)
    return [f.name for f in reading.schema if f.name not in constants and f.name in have]


def _refuse_extra(reading: Reading, names: Sequence[str], source: _Source) -> None:
    extra = [name for name in names if name not in reading.schema.names]
    if not extra:
        return
    if reading.extra_columns == "ignore":
        if not source.ignored:
            log.info("%s: ignoring column(s) the table does not have: %s", source, ", ".join(extra))
            source.ignored = True
        return
    raise LandingError(f"{source}: has column(s) {extra} that table {reading.table} does not have "
                       f"(its columns: {', '.join(reading.schema.names)}); add them to the table, fix the "
                       "delivery, or declare the table's ingestion with extra_columns: ignore to drop them")


def _csv_header(handle: IO[bytes], delimiter: str) -> list[str]:
    """The header row (the file is not empty); ``handle`` is rewound for pyarrow."""
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
    try:
        header = next(csv.reader(text, delimiter=delimiter), [])
    finally:
        text.detach()
    handle.seek(0)
    return header


@dataclass(slots=True)
class _Source:
    """The file being read, for messages; ``header`` maps CSV column numbers to names."""

    table: str
    path: str
    header: list[str] | None = None
    ignored: bool = False  # its extra columns were logged

    def __str__(self) -> str:
        return f"table {self.table}: {self.path}"


class _Tail(io.RawIOBase):
    """A landed text file read through, remembering its last byte (which must end a row)."""

    def __init__(self, inner: IO[bytes]) -> None:
        super().__init__()
        self.inner = inner
        self.last = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self.inner.seek(offset, whence)

    def tell(self) -> int:
        return self.inner.tell()

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(len(buffer))
        buffer[:len(data)] = data
        if data:
            self.last = data[-1:]
        return len(data)


def _guarded(batches: Iterator[pa.RecordBatch], source: _Source, fmt: str,
             reading: Reading) -> Iterator[pa.RecordBatch]:
    """``batches`` with pyarrow's parse errors, and a compressed stream that ends early, turned
    into LandingErrors naming the file (and column)."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except _CONVERT_ERRORS as exc:
            raise LandingError(f"{source}: {_parse_failure(str(exc), source, fmt, reading)}") from None
        except _TRUNCATED_STREAM as exc:
            raise LandingError(f"{source}: the compressed stream is cut short or damaged ({exc}); replace it with "
                               "the complete file") from None
        yield batch


def _parse_failure(message: str, source: _Source, fmt: str, reading: Reading) -> str:
    column = None
    if fmt == "csv" and source.header and (m := re.search(r"CSV column #(\d+)", message)):
        index = int(m.group(1))
        column = source.header[index] if index < len(source.header) else None
    elif fmt == "jsonl" and (m := re.search(r"Column\(/([^)]*)\)", message)):
        column = m.group(1)
        if column not in reading.schema.names:  # a field inference could not type: not the table's
            return (f"has field {column!r}, which table {reading.table} does not have (and whose values do "
                    f"not parse: {message}); fix the delivery, or declare the table's ingestion with "
                    "extra_columns: ignore to drop such fields")
    what = {"parquet": "not a readable Parquet file", "csv": "CSV cannot be parsed",
            "jsonl": "JSON lines cannot be parsed"}[fmt]
    return f"{what}" + (f" (column {column!r})" if column else "") + f" (truncated or not {_NAMES[fmt]}?): {message}"


# ---- shaping -----------------------------------------------------------------------------------


def _reader_type(target: pa.DataType, fmt: str) -> pa.DataType:
    """The type a CSV/JSON parser reads a column as, before the checked cast to ``target``.

    Integers and floats are parsed wide and decimals with every digit the target allows before
    the point, so narrowing and rounding are found by the cast, which names the value. Types a
    parser cannot read from text (JSON dates and times, CSV zoned timestamps and nested types) are
    read as strings.
    """
    if pa.types.is_integer(target):
        return pa.uint64() if pa.types.is_unsigned_integer(target) else pa.int64()
    if pa.types.is_floating(target):
        return pa.float64()
    if pa.types.is_decimal(target):
        return pa.decimal128(38, 38 - (target.precision - target.scale))
    if fmt == "jsonl" and (pa.types.is_date(target) or pa.types.is_time(target)):
        return pa.string()
    if fmt == "csv" and ((pa.types.is_timestamp(target) and target.tz is not None) or pa.types.is_nested(target)):
        return pa.string()
    return target


def _shape(batch: pa.RecordBatch, reading: Reading, source: _Source, *, first_row: int) -> pa.RecordBatch:
    """``batch`` as the schema: selected and ordered by name, cast safely, nulls checked, constants set."""
    columns = []
    for f in reading.schema:
        if f.name in reading.constants:
            columns.append(pa.repeat(reading.constants[f.name], batch.num_rows))
            continue
        if f.name in batch.schema.names:
            column = _checked_cast(batch.column(f.name), f, source, first_row)
        else:
            column = pa.nulls(batch.num_rows, f.type)
        if not f.nullable and column.null_count:
            row = first_row + pc.index(column.is_null(), True).as_py()
            raise LandingError(f"{source}: column {f.name!r} is null or missing in row {row}, and the table "
                               "declares it NOT NULL")
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=reading.schema)


def _checked_cast(column: pa.Array, target: pa.Field, source: _Source, first_row: int) -> pa.Array:
    """A safe cast, or a LandingError naming the file, the column and the first value that does not fit."""
    if column.type == target.type:
        return column
    try:
        return _convert(column, target.type)
    except _CONVERT_ERRORS as exc:
        index = _first_failure(column, lambda part: _convert(part, target.type))
        if index is None:  # the types themselves do not cast
            raise LandingError(f"{source}: column {target.name!r} has type {column.type}, which does not "
                               f"convert to {target.type}: {exc}") from None
        value = _shown(column[index].as_py())
        raise LandingError(f"{source}: column {target.name!r} value {value} in row {first_row + index} does not "
                           f"convert to {target.type}: {exc}") from None


def _convert(column: pa.Array, target: pa.DataType) -> pa.Array:
    """``pc.cast(safe=True)``, except that zoneless timestamp strings of a zoned column are taken as UTC."""
    if pa.types.is_timestamp(target) and target.tz is not None and pa.types.is_string(column.type):
        zoned = pc.match_substring_regex(column, _ZONED)
        empty = pa.scalar(None, column.type)
        with_zone = pc.cast(pc.if_else(zoned, column, empty), target)
        naive = pc.cast(pc.if_else(zoned, empty, column), pa.timestamp(target.unit))
        return pc.coalesce(with_zone, pc.cast(naive, target))
    if pa.types.is_time(target) and pa.types.is_string(column.type):
        moments = pc.binary_join_element_wise("1970-01-01T", column, "")
        return pc.cast(pc.cast(moments, pa.timestamp("ns")), target)
    return pc.cast(column, target, safe=True)


def _first_failure(column: pa.Array, convert: Callable[[pa.Array], pa.Array]) -> int | None:
    """Index of the first value ``convert`` refuses, halving the range: about two casts of the column.

    None when ``convert`` refuses even an empty array (the types do not cast at all).
    """

    def fails(offset: int, length: int) -> bool:
        try:
            convert(column.slice(offset, length))
        except _CONVERT_ERRORS:
            return True
        return False

    if fails(0, 0):
        return None
    lo, hi = 0, len(column)  # a refused value lies in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(lo, mid - lo):
            hi = mid
        else:
            lo = mid
    return lo


def _shown(value: object) -> str:
    """A value for a message: text quoted (so blanks show), decimals without the reader's padding zeros."""
    if isinstance(value, Decimal):
        text = format(value, "f")
        text = text.rstrip("0").rstrip(".") if "." in text else text
    elif isinstance(value, str | bytes):
        text = repr(value)
    else:
        text = str(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS] + "..."


def _shown_list(values: Sequence[str]) -> str:
    shown = ", ".join(_shown(v) for v in values[:8])
    return f"[{shown}{', ...' if len(values) > 8 else ''}]"
