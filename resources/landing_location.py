"""Where an upstream system lands a table's files, declared as a path template, and how they are read.

A :class:`LandingLocation` says, per Paimon table, which files belong to one Dagster partition,
e.g. ``s3://raw/events/dt={partition}/*.parquet``. ``{partition}`` is the Dagster partition key
and ``{<column>}`` a Paimon partition column's value; glob patterns (``*``, ``**``, ``?``) are
expanded after the substitution. Paths are local, ``file://`` or any fsspec URL.

Reading streams each file as record batches shaped to the table's Arrow schema
(:mod:`resources.landed_files`, which refuses what is not data of the table).
"""

# No `from __future__ import annotations`: LandingLocation is a Dagster Resolvable, its annotations real types.

import hashlib
import json
import logging
import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Annotated, Any

import dagster as dg
import fsspec
import pyarrow as pa
from fsspec.utils import infer_compression

from resources.landed_files import EXTRA_COLUMNS, FileToRead, LandingError, Reading, fill_scalars, read_files

log = logging.getLogger(__name__)

FORMATS = ("parquet", "csv", "jsonl")
# Name suffixes (after any compression suffix is removed) that tell a file's format.
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv",
            ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
# Protocols whose listings fsspec would cache per filesystem instance: a cached listing would hide
# files that landed after the first look (as paimon_core.fileio does for the warehouse).
OBJECT_STORE_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "abfs", "az")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_GLOB_CHARS = ("*", "?", "[")
_EMPTY: Mapping[str, str] = MappingProxyType({})


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
class LandingLocation(dg.Resolvable):
    """The files one table's partitions land in, and how to read them.

    Names starting with ``.`` or ``_`` below the template's fixed prefix (``_SUCCESS``, writers'
    hidden temporary files, ``_temporary/`` folders) are never part of a delivery. CSV files
    have a header row; an unquoted empty field is null, a quoted one (``""``) the empty string.
    """

    path: Annotated[str, dg.Resolver.default(description=(
        "Template of the files of one partition, local or s3://: {partition} is the Dagster partition key and "
        "{<column>} the value of a Paimon partition column; globs (*, **, ?, [...]) are expanded after "
        "substitution."))]
    format: Annotated[str | None, dg.Resolver.default(description=(
        "parquet, csv or jsonl for every file; unset infers it per file from the suffix (.parquet/.pq, .csv, "
        ".jsonl/.ndjson/.json), after any compression suffix (.gz, .bz2, .xz, .zst)."))] = None
    storage_options: Annotated[Mapping[str, Any], dg.Resolver.default(description=(
        "fsspec options of the store (key, secret, client_kwargs: {endpoint_url: ...} for S3)."))] = \
        field(default_factory=dict)
    csv_delimiter: Annotated[str, dg.Resolver.default(description="The CSV field separator (one "
                                                                  "character).")] = ","
    batch_size: Annotated[int, dg.Resolver.default(description=(
        "The most rows of any batch a read yields (Parquet reads that many rows at a time; CSV and JSON "
        "blocks are sliced to it)."))] = 65_536

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
             only: Collection[str] | None = None, extra_columns: str = "refuse") -> Iterator[pa.RecordBatch]:
        """Stream every file of the partition (or the ``only`` paths of it) as batches shaped to ``schema``.

        Each batch has exactly ``schema``'s columns, in its order: a column the file lacks is null
        (an error if the field is NOT NULL), columns the table does not know are refused (or,
        with ``extra_columns="ignore"``, not read), and values are cast safely (no truncation or
        overflow). ``fill`` columns, the Paimon partition columns, are set to their value in
        every row whatever the files hold. An empty file, or a CSV file without a header row, is
        refused: it is not a file of the table.

        The files are listed (and ``fill`` checked) when this is called; each file is opened only
        when the batches before it are consumed.

        Args:
            partition_key: the Dagster partition key (None for an unpartitioned asset).
            schema: the table's Arrow schema (``Table.arrow_schema``).
            table: the table name, for messages.
            values: the template's ``{<column>}`` values.
            fill: column name -> value (as text, e.g. ``"2024-01-01"`` for a DATE column).
            extra_columns: ``refuse`` or ``ignore`` columns the table does not have.

        Raises:
            LandingError: no file matches; and, while iterating, an empty file, a file that does
                not parse, a CSV file whose first row names none of the table's columns, a column
                the table does not have (unless ignored), a missing NOT NULL column, a null in
                one, or a value that does not convert.
        """
        if extra_columns not in EXTRA_COLUMNS:
            raise LandingError(f"table {table}: extra_columns {extra_columns!r} is not one of "
                               f"{', '.join(EXTRA_COLUMNS)}")
        reading = Reading(table=table, schema=schema, constants=fill_scalars(schema, fill, table),
                          csv_delimiter=self.csv_delimiter, batch_size=self.batch_size, extra_columns=extra_columns)
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
        files = [FileToRead(f.path, *self._format_of(f.path, table)) for f in landed]  # a stray file fails first
        return read_files(fs, files, reading)

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
