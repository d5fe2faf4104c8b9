"""Where an upstream system lands a table's files, declared as a path template, and how they are read.

A :class:`LandingLocation` says, per Paimon table, which files belong to one Dagster partition,
e.g. ``s3://raw/events/dt={partition}/*.parquet``. ``{partition}`` is the Dagster partition key
and ``{<column>}`` a Paimon partition column's value; glob patterns (``*``, ``**``, ``?``) are
expanded after the substitution. Paths are local, ``file://`` or any fsspec URL.

Reading streams each file as record batches shaped to the table's Arrow schema. Memory is one
block or row group plus one output batch of the file being read; files are opened one after
the other, only when the previous one is exhausted. Anything the data gets wrong (a value that
does not convert, a missing NOT NULL column, a file that does not parse) raises
:class:`LandingError` naming the file, the column and the value; I/O failures (``OSError``) are
left as they are, because retrying them may help and retrying bad data does not.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from types import MappingProxyType
from typing import IO, Any

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pj
import pyarrow.parquet as pq
from fsspec.utils import infer_compression

from paimon_core.errors import SchemaError

log = logging.getLogger(__name__)

FORMATS = ("parquet", "csv", "jsonl")
# Name suffixes (after any compression suffix is removed) that tell a file's format.
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv",
            ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
# CSV and JSON are parsed in blocks of this many bytes: it bounds their memory per file, and a
# single CSV row or JSON line must fit in one block.
BLOCK_BYTES = 4 << 20
# Protocols whose listings fsspec would cache per filesystem instance: a cached listing would hide
# files that landed after the first look (as paimon_core.fileio does for the warehouse).
OBJECT_STORE_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "abfs", "az")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_GLOB_CHARS = ("*", "?", "[")
# A timestamp string that carries its own zone: a time of day followed by Z or a +hh[:mm] offset.
_ZONED = r"\d:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$"
_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)
_EMPTY: Mapping[str, str] = MappingProxyType({})
_MAX_VALUE_CHARS = 120


class LandingError(SchemaError):
    """Landed files that cannot be found, parsed or shaped into the table schema, or a bad landing declaration.

    The message names the table (where known), the file, the column and the offending value, so
    the upstream delivery or the declaration can be fixed without reading the data.
    """


@dataclass(frozen=True, slots=True)
class LandedFile:
    """One file of a partition's delivery.

    Attributes:
        path: the file's path, a full URL when the template was one (``s3://bucket/key``).
        size: bytes, as the store reports them.
        modified: what changes when the file is rewritten: the object's ETag on object stores,
            else the modification time (ISO 8601, UTC).
    """

    path: str
    size: int
    modified: str


@dataclass(frozen=True, slots=True)
class LandingLocation:
    """The files one table's partitions land in, and how to read them.

    Attributes:
        path: template of the files of one partition; ``{partition}`` is the Dagster partition key
            and ``{<column>}`` the value of a Paimon partition column (passed as ``values``).
            Globs (``*``, ``**``, ``?``, ``[...]``) are expanded after substitution. Names starting
            with ``.`` or ``_`` below the template's fixed prefix (``_SUCCESS``, writers' hidden
            temporary files, ``_temporary/`` folders) are never part of a delivery.
        format: ``parquet``, ``csv`` or ``jsonl`` for every file; None infers it per file from the
            suffix (``.parquet``/``.pq``, ``.csv``, ``.jsonl``/``.ndjson``/``.json``), after
            any compression suffix (``.gz``, ``.bz2``, ``.xz``, ``.zst``).
        storage_options: fsspec options of the store (e.g. ``key``, ``secret``,
            ``client_kwargs: {endpoint_url: ...}`` for S3).
        csv_delimiter: the CSV field separator (one character). CSV files have a header row; an
            unquoted empty field is null, a quoted one (``""``) the empty string.
        batch_size: the most rows of any batch :meth:`read` yields (Parquet reads that many rows
            at a time; CSV and JSON blocks are sliced to it).
    """

    path: str
    format: str | None = None
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    csv_delimiter: str = ","
    batch_size: int = 65_536

    def validate(self, *, table: str, partitioned: bool, columns: Sequence[str] = ()) -> None:
        """Check the declaration when the definitions load, before any partition runs.

        Args:
            table: the Paimon table the location feeds (named in the message).
            partitioned: whether the asset has Dagster partitions; then the template must
                contain ``{partition}``, else it must not.
            columns: the Paimon partition columns a template may name as ``{<column>}``.

        Raises:
            LandingError: naming the table, the field and the fix.
        """
        where = f"table {table}: landing.path {self.path!r}"
        if not self.path.strip():
            raise LandingError(f"table {table}: landing.path is empty; give the template of a partition's "
                               "files, e.g. 'landing/events/dt={partition}/*.parquet'")
        if self.format is not None and self.format not in FORMATS:
            raise LandingError(f"table {table}: landing.format {self.format!r} is not one of {', '.join(FORMATS)}; "
                               "set one of them, or leave it unset to infer the format from each file's suffix")
        names = _PLACEHOLDER.findall(self.path)
        unknown = sorted({n for n in names if n != "partition" and n not in columns})
        if unknown:
            allowed = ", ".join("{" + n + "}" for n in ("partition", *columns))
            raise LandingError(f"{where} has unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)}; "
                               f"only {allowed} can be substituted")
        if "{" in _PLACEHOLDER.sub("", self.path) or "}" in _PLACEHOLDER.sub("", self.path):
            raise LandingError(f"{where} has an unbalanced '{{' or '}}'; placeholders are written "
                               "'{partition}' or '{<column>}'")
        if partitioned and "partition" not in names:
            raise LandingError(f"{where} has no {{partition}} placeholder, so every partition would read the "
                               "same files; put {partition} where the partition key appears in the path")
        if not partitioned and "partition" in names:
            raise LandingError(f"{where} uses {{partition}} but the asset is not partitioned; remove it or "
                               "give the asset a partitions definition")
        if not (len(self.csv_delimiter) == 1 and self.csv_delimiter not in "\r\n\""):
            raise LandingError(f"table {table}: landing.csv_delimiter {self.csv_delimiter!r} must be one "
                               "character other than a quote or a line break")
        if self.batch_size < 1:
            raise LandingError(f"table {table}: landing.batch_size {self.batch_size} must be at least 1")

    def resolve(self, partition_key: str | None, values: Mapping[str, str] = _EMPTY) -> str:
        """The template with its placeholders substituted (globs left in).

        Raises:
            LandingError: a placeholder without a value, or a value with glob characters or a
                ``..`` segment (it would match other partitions' files).
        """
        given = {**values, **({} if partition_key is None else {"partition": partition_key})}

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in given:
                what = "a partition key" if name == "partition" else f"a value for {{{name}}}"
                raise LandingError(f"landing.path {self.path!r} needs {what} to find a partition's files")
            value = str(given[name])
            if any(c in value for c in _GLOB_CHARS) or ".." in value.replace("\\", "/").split("/"):
                raise LandingError(f"landing.path {self.path!r}: {{{name}}} = {value!r} has glob characters or "
                                   "a '..' segment and would match files of other partitions")
            return value

        resolved = _PLACEHOLDER.sub(substitute, self.path)
        return resolved if "://" in resolved else os.path.expanduser(resolved)

    def files(self, partition_key: str | None, values: Mapping[str, str] = _EMPTY) -> list[LandedFile]:
        """The partition's landed files, sorted by path; ``[]`` when nothing matches."""
        return self._list(self.resolve(partition_key, values))[1]

    def fingerprint(self, partition_key: str | None, values: Mapping[str, str] = _EMPTY) -> str:
        """A stable hash of the partition's files (path, size, ETag or mtime).

        A sensor keeps it as its cursor: it changes when a file lands, is removed or rewritten,
        and stays the same otherwise (also when nothing has landed yet).
        """
        return files_fingerprint(self.files(partition_key, values))

    def landed_partitions(self) -> dict[str, list[LandedFile]]:
        """Every partition key with landed files, from one listing of the whole location.

        The template's placeholders become wildcards for the listing, and each file's path is
        matched back against the template to read its ``{partition}``. Only for templates that
        name ``{partition}`` (others cannot tell a file's key without the mapping).
        """
        if "{partition}" not in self.path:
            raise LandingError(f"landing.path {self.path!r} has no {{partition}}, so its files cannot be grouped "
                               "by partition from one listing")
        pattern = _PLACEHOLDER.sub("*", self.path)
        pattern = pattern if "://" in pattern else os.path.expanduser(pattern)
        _, landed = self._list(pattern)
        shape = template_regex(self.path if "://" in self.path else os.path.expanduser(self.path))
        grouped: dict[str, list[LandedFile]] = {}
        for landed_file in landed:
            match = shape.fullmatch(landed_file.path)
            if match is not None:
                grouped.setdefault(match.group("partition"), []).append(landed_file)
        return grouped

    def read(self, partition_key: str | None, schema: pa.Schema, *, table: str,
             values: Mapping[str, str] = _EMPTY, fill: Mapping[str, str] = _EMPTY,
             only: Collection[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Stream every file of the partition (or the ``only`` paths of it) as batches shaped to ``schema``.

        Each batch has exactly ``schema``'s columns, in its order: a column the file lacks is null
        (an error if the field is NOT NULL), columns the table does not know are not read, and
        values are cast safely (no truncation or overflow). ``fill`` columns, the Paimon partition
        columns, are set to their value in every row whatever the files hold.

        The files are listed (and ``fill`` checked) when this is called; each file is opened only
        when the batches before it are consumed.

        Args:
            partition_key: the Dagster partition key (None for an unpartitioned asset).
            schema: the table's Arrow schema (``Table.arrow_schema``).
            table: the table name, for messages.
            values: the template's ``{<column>}`` values.
            fill: column name -> value (as text, e.g. ``"2024-01-01"`` for a DATE column).

        Raises:
            LandingError: no file matches; and, while iterating, a file that does not parse, a
                missing NOT NULL column, a null in one, or a value that does not convert.
        """
        constants = _fill_scalars(schema, fill, table)
        pattern = self.resolve(partition_key, values)
        fs, landed = self._list(pattern)
        if not landed:
            hint = " (it is a folder: add /* or /**)" if fs.isdir(_strip(fs, pattern)) else ""
            raise LandingError(f"no files match {pattern}{hint} for partition {partition_key} of table {table}")
        if only is not None:  # one write step's share, as its run planned it
            gone = sorted(set(only) - {f.path for f in landed})
            if gone:
                raise LandingError(f"landed file {gone[0]} of partition {partition_key} of table {table} is gone "
                                   "since the run planned; re-run the partition")
            landed = [f for f in landed if f.path in only]
        formats = [self._format_of(f.path, table) for f in landed]  # a stray file fails before any row
        return self._batches(fs, list(zip(landed, formats)), schema, constants, table)

    # ------------------------------------------------------------------------------------------
    # listing
    # ------------------------------------------------------------------------------------------

    def _list(self, pattern: str) -> tuple[fsspec.AbstractFileSystem, list[LandedFile]]:
        options = dict(self.storage_options)
        if "://" in pattern and pattern.split("://", 1)[0] in OBJECT_STORE_PROTOCOLS:
            options.setdefault("use_listings_cache", False)
        fs, stripped = fsspec.core.url_to_fs(pattern, **options)
        fixed = _fixed_depth(stripped)
        found: dict[str, dict[str, Any]] = fs.glob(stripped, detail=True)
        landed = []
        for name, info in found.items():
            if info.get("type") != "file":
                continue
            if any(part.startswith((".", "_")) for part in name.rstrip("/").split("/")[fixed:]):
                continue
            shown = fs.unstrip_protocol(name) if "://" in pattern else name
            landed.append(LandedFile(shown, int(info.get("size") or 0), _modified(info)))
        return fs, sorted(landed, key=lambda f: f.path)

    # ------------------------------------------------------------------------------------------
    # reading
    # ------------------------------------------------------------------------------------------

    def _batches(self, fs: fsspec.AbstractFileSystem, landed: list[tuple[LandedFile, tuple[str, str | None]]],
                 schema: pa.Schema, constants: Mapping[str, pa.Scalar], table: str) -> Iterator[pa.RecordBatch]:
        readers = {"parquet": self._parquet, "csv": self._csv, "jsonl": self._jsonl}
        rows = 0
        for landed_file, (fmt, compression) in landed:
            source = _Source(table, landed_file.path)
            with fsspec.core.OpenFile(fs, landed_file.path, "rb", compression=compression) as handle:
                done = 0
                for raw in _guarded(readers[fmt](handle, schema, constants, source), source, fmt):
                    shaped = _shape(raw, schema, constants, source, first_row=done + 1)
                    done += raw.num_rows
                    for offset in range(0, shaped.num_rows, self.batch_size):
                        yield shaped.slice(offset, self.batch_size)
            log.debug("read %d rows from %s", done, landed_file.path)
            rows += done
        log.info("read %d rows from %d landed files of table %s", rows, len(landed), table)

    def _format_of(self, path: str, table: str) -> tuple[str, str | None]:
        if self.format is not None and self.format not in FORMATS:
            raise LandingError(f"table {table}: landing.format {self.format!r} is not one of {', '.join(FORMATS)}")
        compression = infer_compression(path)
        stem = path.lower()
        if compression is not None:
            stem = stem.rsplit(".", 1)[0]
        fmt = self.format or SUFFIXES.get(os.path.splitext(stem)[1])
        if fmt is None:
            raise LandingError(f"table {table}: cannot tell the format of {path} from its name; set landing.format "
                               f"({', '.join(FORMATS)}) or narrow landing.path {self.path!r} to the data files")
        if fmt == "parquet" and compression is not None:
            raise LandingError(f"table {table}: {path} is a {compression}-compressed Parquet file; Parquet is read "
                               "uncompressed (it compresses its own pages)")
        return fmt, compression

    def _parquet(self, handle: IO[bytes], schema: pa.Schema, constants: Mapping[str, pa.Scalar],
                 source: _Source) -> Iterator[pa.RecordBatch]:
        with pq.ParquetFile(handle) as parquet:
            wanted = _present(schema, constants, parquet.schema_arrow.names, source)
            yield from parquet.iter_batches(batch_size=self.batch_size, columns=wanted)

    def _csv(self, handle: IO[bytes], schema: pa.Schema, constants: Mapping[str, pa.Scalar],
             source: _Source) -> Iterator[pa.RecordBatch]:
        header = _csv_header(handle, self.csv_delimiter)
        if header is None:  # an empty file: no header, no rows
            return
        source.header = header
        wanted = _present(schema, constants, header, source)
        types = {name: _reader_type(schema.field(name).type, "csv") for name in wanted}
        # An unquoted empty field is null in every column, "" is the empty string; no other null marker
        # (pyarrow's default list would turn the text "NA" or "null" of a STRING column into null).
        convert = pcsv.ConvertOptions(column_types=types, include_columns=wanted or header[:1], null_values=[""],
                                      strings_can_be_null=True, quoted_strings_can_be_null=False)
        reader = pcsv.open_csv(handle, read_options=pcsv.ReadOptions(block_size=BLOCK_BYTES),
                               parse_options=pcsv.ParseOptions(delimiter=self.csv_delimiter),
                               convert_options=convert)
        for batch in reader:
            yield batch if wanted else batch.select([])

    def _jsonl(self, handle: IO[bytes], schema: pa.Schema, constants: Mapping[str, pa.Scalar],
               source: _Source) -> Iterator[pa.RecordBatch]:
        if not handle.read(1):  # an empty file: no rows (pyarrow refuses an empty stream)
            return
        handle.seek(0)
        fields = [pa.field(f.name, _reader_type(f.type, "jsonl")) for f in schema if f.name not in constants]
        options = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
        yield from pj.open_json(handle, read_options=pj.ReadOptions(block_size=BLOCK_BYTES), parse_options=options)


@dataclass(slots=True)
class _Source:
    """The file being read, for messages; ``header`` maps CSV column numbers to names."""

    table: str
    path: str
    header: list[str] | None = None

    def __str__(self) -> str:
        return f"table {self.table}: {self.path}"


def _guarded(batches: Iterator[pa.RecordBatch], source: _Source, fmt: str) -> Iterator[pa.RecordBatch]:
    """``batches`` with pyarrow's parse errors turned into LandingErrors naming the file and column."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except _CONVERT_ERRORS as exc:
            raise LandingError(f"{source}: {_parse_failure(str(exc), source, fmt)}") from None
        yield batch


def _parse_failure(message: str, source: _Source, fmt: str) -> str:
    column = None
    if fmt == "csv" and source.header and (m := re.search(r"CSV column #(\d+)", message)):
        index = int(m.group(1))
        column = source.header[index] if index < len(source.header) else None
    elif fmt == "jsonl" and (m := re.search(r"Column\(/([^)]*)\)", message)):
        column = m.group(1)
    what = {"parquet": "not a readable Parquet file", "csv": "CSV cannot be parsed",
            "jsonl": "JSON lines cannot be parsed"}[fmt]
    return f"{what}" + (f" (column {column!r})" if column else "") + f": {message}"


def _present(schema: pa.Schema, constants: Mapping[str, pa.Scalar], names: Sequence[str],
             source: _Source) -> list[str]:
    """The schema columns to read from a file with columns ``names``; a NOT NULL one it lacks is an error."""
    have = set(names)
    for f in schema:
        if f.name not in constants and f.name not in have and not f.nullable:
            raise LandingError(f"{source}: has no column {f.name!r}, which the table declares NOT NULL "
                               f"(the file has {', '.join(names) or 'no columns'})")
    return [f.name for f in schema if f.name not in constants and f.name in have]


def _csv_header(handle: IO[bytes], delimiter: str) -> list[str] | None:
    """The header row (None for an empty file); ``handle`` is rewound for pyarrow."""
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
    try:
        header = next(csv.reader(text, delimiter=delimiter), None)
    finally:
        text.detach()
    handle.seek(0)
    return header


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


def _fill_scalars(schema: pa.Schema, fill: Mapping[str, str], table: str) -> dict[str, pa.Scalar]:
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


def _shape(batch: pa.RecordBatch, schema: pa.Schema, constants: Mapping[str, pa.Scalar], source: _Source,
           *, first_row: int) -> pa.RecordBatch:
    """``batch`` as ``schema``: selected and ordered by name, cast safely, nulls checked, constants set."""
    columns = []
    for f in schema:
        if f.name in constants:
            columns.append(pa.repeat(constants[f.name], batch.num_rows))
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
    return pa.RecordBatch.from_arrays(columns, schema=schema)


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


def _strip(fs: fsspec.AbstractFileSystem, url: str) -> str:
    return str(fs._strip_protocol(url))


def _fixed_depth(stripped: str) -> int:
    """How many leading path parts of a glob pattern have no glob characters (chosen by the user)."""
    parts = stripped.split("/")
    for depth, part in enumerate(parts):
        if any(c in part for c in _GLOB_CHARS):
            return depth
    return len(parts)


def _modified(info: Mapping[str, Any]) -> str:
    """The ETag of an object, else its modification time in UTC (ISO 8601)."""
    etag = info.get("ETag") or info.get("etag")
    if etag:
        return str(etag).strip('"')
    stamp = info.get("LastModified") or info.get("last_modified") or info.get("mtime")
    if isinstance(stamp, datetime):
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    if isinstance(stamp, int | float):
        return datetime.fromtimestamp(stamp, tz=UTC).isoformat()
    return str(stamp or "")


def files_fingerprint(files: Sequence[LandedFile]) -> str:
    """A stable hash of files' paths, sizes and modification stamps (ETag or mtime)."""
    rows = [[f.path, f.size, f.modified] for f in sorted(files, key=lambda f: f.path)]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def template_regex(template: str) -> re.Pattern[str]:
    """A regex matching the paths a template (placeholders and globs) can list; ``{partition}``
    is captured."""
    parts: list[str] = []
    position = 0
    for match in re.finditer(r"\{(\w+)\}|\*\*|\*|\?", template):
        parts.append(re.escape(template[position:match.start()]))
        token = match.group(0)
        if match.group(1) == "partition" and "(?P<partition>" not in "".join(parts):
            parts.append("(?P<partition>[^/]+)")
        elif match.group(1):
            parts.append("[^/]+")
        else:
            parts.append({"**": ".*", "*": "[^/]*", "?": "[^/]"}[token])
        position = match.end()
    parts.append(re.escape(template[position:]))
    return re.compile("".join(parts))
