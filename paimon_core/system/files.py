"""``$manifests``, ``$files``, ``$partitions`` and ``$buckets``: tables of manifest metadata.

The builders are pure: they take what paimon_core's scan already decoded (manifest-list records,
manifest entries, planned splits, schema versions) and return Arrow tables with Apache Paimon's
columns. Partitions print as Paimon 0.9.0 prints them, ``Arrays.toString`` of the partition's
internal values (``[2024-01-01, 3]``, ``[]`` for an unpartitioned table). Newer Paimon prints
``$files`` partitions as a cast row (``{2024-01-01, 3}``) and ``$partitions`` as a path
(``dt=2024-01-01/hr=3``); we keep 0.9.0's form everywhere (the Java version tested against), so
``$files``, ``$partitions`` and ``$buckets`` join on the ``partition`` column.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa

from paimon_core.binary_row import deserialize_with_arity
from paimon_core.errors import CorruptMetadataError, UnsupportedFeatureError
from paimon_core.manifest import DELETE, DataFileMeta, ManifestEntry, ManifestFileMeta
from paimon_core.read.scan import DataSplit, PartitionDecoder
from paimon_core.schema import TableSchema
from paimon_core.system.render import java_array, java_text, java_tree_map
from paimon_core.types import DataType

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)

_TIMESTAMP = pa.timestamp("ms")
_DECODE_ERRORS = (CorruptMetadataError, UnsupportedFeatureError, struct.error, IndexError,
                  UnicodeDecodeError, ValueError)

MANIFESTS_SCHEMA = pa.schema([
    pa.field("file_name", pa.string(), False),
    pa.field("file_size", pa.int64(), False),
    pa.field("num_added_files", pa.int64(), False),
    pa.field("num_deleted_files", pa.int64(), False),
    pa.field("schema_id", pa.int64(), False),
])
"""Paimon 0.9.0's ManifestsTable; newer versions add partition-stat and row-id columns."""

FILES_SCHEMA = pa.schema([
    pa.field("partition", pa.string()),
    pa.field("bucket", pa.int32(), False),
    pa.field("file_path", pa.string(), False),
    pa.field("file_format", pa.string(), False),
    pa.field("schema_id", pa.int64(), False),
    pa.field("level", pa.int32(), False),
    pa.field("record_count", pa.int64(), False),
    pa.field("file_size_in_bytes", pa.int64(), False),
    pa.field("min_key", pa.string()),
    pa.field("max_key", pa.string()),
    pa.field("null_value_counts", pa.string(), False),
    pa.field("min_value_stats", pa.string(), False),
    pa.field("max_value_stats", pa.string(), False),
    pa.field("min_sequence_number", pa.int64()),
    pa.field("max_sequence_number", pa.int64()),
    pa.field("creation_time", _TIMESTAMP),
])
"""Paimon 0.9.0's FilesTable. ``file_path`` is the file name, as 0.9.0 gives it (newer versions
give the bucket path joined with it, and add ``deleteRowCount``, ``file_source``,
``first_row_id`` and ``write_cols``)."""

_ENTRY_COLUMNS = [
    pa.field("record_count", pa.int64(), False),
    pa.field("file_size_in_bytes", pa.int64(), False),
    pa.field("file_count", pa.int64(), False),
    pa.field("last_update_time", _TIMESTAMP),
]
PARTITIONS_SCHEMA = pa.schema([pa.field("partition", pa.string()), *_ENTRY_COLUMNS])
"""Paimon 0.9.0's PartitionsTable (newer versions add creation/ownership/``done`` columns)."""

BUCKETS_SCHEMA = pa.schema([pa.field("partition", pa.string()), pa.field("bucket", pa.int32(), False),
                            *_ENTRY_COLUMNS])
"""Newer Paimon's BucketsTable (0.9.0 has no ``$buckets`` for users: its BucketsTable is the
compaction source's internal one): the per-bucket form of ``$partitions``."""


@dataclass(slots=True)
class EntryTotals:
    """Net totals of manifest entries: ADD counts up, DELETE counts down (Paimon's PartitionEntry)."""

    record_count: int = 0
    file_size_in_bytes: int = 0
    file_count: int = 0
    last_update_ms: int | None = None

    def add(self, entry: ManifestEntry) -> None:
        sign = -1 if entry.kind == DELETE else 1
        f = entry.file
        self.record_count += sign * f.row_count
        self.file_size_in_bytes += sign * f.file_size
        self.file_count += sign
        if f.creation_time_ms is not None:  # Paimon takes the newest creation time of every entry, deletes too
            self.last_update_ms = f.creation_time_ms if self.last_update_ms is None else max(
                self.last_update_ms, f.creation_time_ms)


def fold_entries(entries: Iterable[ManifestEntry], key: Callable[[ManifestEntry], K]) -> dict[K, EntryTotals]:
    """Totals per key over every entry of a snapshot's manifests, keeping keys that still have
    files: what Paimon's ``readPartitionEntries`` / ``readBucketEntries`` compute (no merge of
    ADD/DELETE pairs is needed, the signed sums cancel)."""
    totals: dict[K, EntryTotals] = {}
    for entry in entries:
        totals.setdefault(key(entry), EntryTotals()).add(entry)
    return {k: t for k, t in totals.items() if t.file_count > 0}


def manifests_table(metas: Sequence[ManifestFileMeta]) -> pa.Table:
    """One row per manifest of the snapshot (base list, then delta list)."""
    return pa.table({
        "file_name": [m.file_name for m in metas], "file_size": [m.file_size for m in metas],
        "num_added_files": [m.num_added_files for m in metas],
        "num_deleted_files": [m.num_deleted_files for m in metas], "schema_id": [m.schema_id for m in metas],
    }, schema=MANIFESTS_SCHEMA)


def partitions_table(entries: Iterable[ManifestEntry], partition_types: Sequence[DataType]) -> pa.Table:
    """Per partition with files: net record count, bytes and files, newest file creation time."""
    decode = PartitionDecoder(partition_types)
    totals = fold_entries(entries, lambda e: e.partition)
    rows = sorted(((java_array(decode(p), partition_types), t) for p, t in totals.items()), key=lambda r: r[0])
    return pa.table({"partition": [r[0] for r in rows], **_totals_columns([r[1] for r in rows])},
                    schema=PARTITIONS_SCHEMA)


def buckets_table(entries: Iterable[ManifestEntry], partition_types: Sequence[DataType]) -> pa.Table:
    """:func:`partitions_table` per (partition, bucket), ordered by partition then bucket."""
    decode = PartitionDecoder(partition_types)
    totals = fold_entries(entries, lambda e: (e.partition, e.bucket))
    rows = sorted(((java_array(decode(p), partition_types), b, t) for (p, b), t in totals.items()),
                  key=lambda r: (r[0], r[1]))
    return pa.table({"partition": [r[0] for r in rows], "bucket": [r[1] for r in rows],
                     **_totals_columns([r[2] for r in rows])}, schema=BUCKETS_SCHEMA)


def _totals_columns(totals: Sequence[EntryTotals]) -> dict[str, list[int | None]]:
    return {"record_count": [t.record_count for t in totals],
            "file_size_in_bytes": [t.file_size_in_bytes for t in totals],
            "file_count": [t.file_count for t in totals],
            "last_update_time": [t.last_update_ms for t in totals]}


def files_table(splits: Sequence[DataSplit], table_schema: TableSchema,
                file_schemas: Mapping[int, TableSchema]) -> pa.Table:
    """One row per data file of the planned splits (a batch scan's files, as Paimon's ``$files``).

    Keys print in the file's own schema (its trimmed primary key); value statistics are mapped
    by field id onto ``table_schema``, as Paimon evolves them: a column added after the file was
    written has no bounds and a null count equal to the file's row count.
    """
    partition_types = table_schema.partition_types
    columns: dict[str, list[object]] = {f.name: [] for f in FILES_SCHEMA}
    for split in splits:
        partition = java_array(split.partition_values, partition_types)
        for meta in split.files:
            file_schema = file_schemas[meta.schema_id]
            nulls, lows, highs = file_stats(meta, file_schema, table_schema)
            values = {
                "partition": partition, "bucket": split.bucket, "file_path": meta.file_name,
                "file_format": meta.file_name.rsplit(".", 1)[-1], "schema_id": meta.schema_id,
                "level": meta.level, "record_count": meta.row_count, "file_size_in_bytes": meta.file_size,
                "min_key": _key_text(meta.min_key, file_schema), "max_key": _key_text(meta.max_key, file_schema),
                "null_value_counts": nulls, "min_value_stats": lows, "max_value_stats": highs,
                "min_sequence_number": meta.min_sequence_number, "max_sequence_number": meta.max_sequence_number,
                "creation_time": meta.creation_time_ms,  # already local wall-clock time, as Paimon stores it
            }
            for name, value in values.items():
                columns[name].append(value)
    return pa.table(columns, schema=FILES_SCHEMA)


def _key_text(key: bytes, file_schema: TableSchema) -> str | None:
    """A file's min/max key as ``[k1, k2]``; None for files without keys (append tables)."""
    if len(key) < 4 or struct.unpack(">i", key[:4])[0] <= 0:
        return None
    types = [file_schema.field(k).type for k in file_schema.trimmed_primary_keys]
    try:
        return java_array(deserialize_with_arity(key, types), types)
    except _DECODE_ERRORS as exc:
        log.debug("undecodable key of a file of schema %d: %s", file_schema.id, exc)
        return None


def file_stats(meta: DataFileMeta, file_schema: TableSchema, table_schema: TableSchema) -> tuple[str, str, str]:
    """``null_value_counts``, ``min_value_stats`` and ``max_value_stats`` of one file.

    Columns are the table schema's, found in the file by field id and printed with the table's
    type (as Paimon casts evolved statistics). Columns the file's dense statistics
    (``value_stats_cols``) leave out, and statistics that cannot be decoded, print ``null``.
    """
    file_ids = {f.id for f in file_schema.fields}
    by_name = {f.name: f for f in file_schema.fields}
    covered = list(file_schema.fields) if meta.value_stats_cols is None else [
        by_name[n] for n in meta.value_stats_cols if n in by_name]
    stats = meta.value_stats
    known: dict[int, tuple[object, object, int | None]] = {}
    decoded = True
    try:
        lows = deserialize_with_arity(stats.min_values, [f.type for f in covered])
        highs = deserialize_with_arity(stats.max_values, [f.type for f in covered])
        counts = stats.null_counts if stats.null_counts is not None else (None,) * len(covered)
        known = {f.id: (lo, hi, n) for f, lo, hi, n in zip(covered, lows, highs, counts)}
    except _DECODE_ERRORS as exc:
        log.debug("undecodable value stats of data file %s: %s", meta.file_name, exc)
        decoded = False
    nulls: dict[str, str] = {}
    lows_text: dict[str, str] = {}
    highs_text: dict[str, str] = {}
    for f in table_schema.fields:
        if f.id in known:
            low, high, count = known[f.id]
        else:  # added after the file was written: every row null (when the stats could be read at all)
            low = high = None
            count = meta.row_count if decoded and f.id not in file_ids else None
        nulls[f.name] = "null" if count is None else str(count)
        lows_text[f.name] = java_text(low, f.type)
        highs_text[f.name] = java_text(high, f.type)
    return java_tree_map(nulls), java_tree_map(lows_text), java_tree_map(highs_text)
