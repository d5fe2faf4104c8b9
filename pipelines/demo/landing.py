"""Reading a landing folder of Parquet / JSON-lines files, shared by every daily source.

Which files belong to a day, how each format is streamed and how a raw batch is shaped into a
table's schema do not depend on the table, so they live here once; the per-table modules
(``log_events``, ``orders``) only say which schema they read.
"""

from __future__ import annotations

import datetime as dt_
import gzip
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.json as pj
import pyarrow.parquet as pq

PARQUET_SUFFIXES = (".parquet", ".pq")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")
JSON_BLOCK_BYTES = 4 << 20


class SourceDataError(ValueError):
    """Source data that is missing, empty or cannot be shaped into the table schema."""


def parse_day(day: str) -> dt_.date:
    """``YYYY-MM-DD`` to a date; anything else is rejected before any data is produced."""
    try:
        return dt_.date.fromisoformat(day)
    except ValueError:
        raise ValueError(f"partition key {day!r} is not a YYYY-MM-DD date") from None


def landing_files(root: Path, day: str) -> list[Path]:
    """The day's readable files: ``root/<day>/**`` then ``root/*<day>*``, each group sorted."""
    parse_day(day)
    folder = root / day
    nested = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
    flat = sorted(p for p in root.iterdir() if p.is_file() and day in p.name)
    return [p for p in nested + flat if file_format(p) is not None and not p.name.startswith((".", "_"))]


def require_landing_files(root: Path, day: str) -> list[Path]:
    """``landing_files``, refusing an empty delivery so that a missing day fails the run."""
    files = landing_files(root, day)
    if not files:
        raise SourceDataError(f"no Parquet or JSON-lines files for {day} in {root} "
                              f"(looked in {root / day}/ and for names containing {day})")
    return files


def file_format(path: Path) -> str | None:
    """``parquet``, ``json`` or None (not a data file) from the file name."""
    name = path.name.lower()
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if name.endswith(JSON_SUFFIXES):
        return "json"
    return None


def read_file(path: Path, schema: pa.Schema, *, batch_size: int) -> Iterator[pa.RecordBatch]:
    """Stream one landing file; only the columns of ``schema`` are kept, others are skipped."""
    if file_format(path) == "parquet":
        return _parquet_batches(path, schema, batch_size)
    return _json_batches(path, schema)


def _parquet_batches(path: Path, schema: pa.Schema, batch_size: int) -> Iterator[pa.RecordBatch]:
    """Only the columns the table knows are read from the file."""
    parquet = pq.ParquetFile(path)
    wanted = [name for name in parquet.schema_arrow.names if name in schema.names]
    yield from parquet.iter_batches(batch_size=batch_size, columns=wanted)


def _json_batches(path: Path, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """JSON lines parsed straight into the schema's types; unknown fields are skipped."""
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    read_options = pj.ReadOptions(block_size=JSON_BLOCK_BYTES)
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as handle:
        try:
            yield from pj.open_json(handle, read_options=read_options, parse_options=options)
        except pa.ArrowInvalid as exc:
            raise SourceDataError(f"cannot parse JSON lines in {path}: {exc}") from None


def shape_batch(batch: pa.RecordBatch, schema: pa.Schema, *, partition_column: str, day: str,
                source: Path | str) -> pa.RecordBatch:
    """Select, order and safely cast ``batch`` to ``schema``.

    Missing columns become nulls and the partition column is always ``day``: the folder layout
    decides the partition, not the file.
    """
    columns = []
    for target in schema:
        if target.name == partition_column:
            columns.append(pa.repeat(pa.scalar(day, target.type), batch.num_rows))
        elif target.name not in batch.schema.names:
            columns.append(pa.nulls(batch.num_rows, target.type))
        else:
            columns.append(cast_column(batch.column(target.name), target, source))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def cast_column(column: pa.Array, target: pa.Field, source: Path | str) -> pa.Array:
    """A safe cast, or a ``SourceDataError`` naming the column and the file."""
    if column.type == target.type:
        return column
    try:
        return pac.cast(column, target.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SourceDataError(f"column {target.name!r} of {source} has type {column.type}, "
                              f"which does not cast to {target.type}: {exc}") from None
