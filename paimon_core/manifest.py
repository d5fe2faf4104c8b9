"""Manifest files, manifest lists and index manifests: the Avro metadata of a snapshot.

Record and field names follow what pypaimon writes; readers resolve fields by name only, so
manifests written by Java (whose record names differ) read the same way.
"""

from __future__ import annotations

import datetime
import io
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import fastavro

from paimon_core.binary_row import EMPTY_ROW, deserialize_with_arity, serialize_with_arity
from paimon_core.errors import CorruptMetadataError, MissingFileError
from paimon_core.fileio import FileIO
from paimon_core.types import DataType

Item = TypeVar("Item")

ADD, DELETE = 0, 1
FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT = 0, 1
_CODECS = {"zstd": "zstandard", "null": "null", "deflate": "deflate", "snappy": "snappy",
           "bzip2": "bzip2", "xz": "xz"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class SimpleStats:
    """Min/max rows (BinaryRow with arity prefix) and per-column null counts."""

    min_values: bytes = EMPTY_ROW
    max_values: bytes = EMPTY_ROW
    null_counts: tuple[int | None, ...] | None = ()

    def to_avro(self) -> dict[str, Any]:
        counts = list(self.null_counts) if self.null_counts is not None else None
        return {"_MIN_VALUES": self.min_values, "_MAX_VALUES": self.max_values, "_NULL_COUNTS": counts}

    @staticmethod
    def from_avro(record: dict[str, Any]) -> SimpleStats:
        counts = record.get("_NULL_COUNTS")
        return SimpleStats(record["_MIN_VALUES"], record["_MAX_VALUES"],
                           tuple(counts) if counts is not None else None)


EMPTY_STATS = SimpleStats()


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    """One data file as recorded in a manifest entry."""

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes = EMPTY_ROW
    max_key: bytes = EMPTY_ROW
    key_stats: SimpleStats = EMPTY_STATS
    value_stats: SimpleStats = EMPTY_STATS
    min_sequence_number: int = 0
    max_sequence_number: int = 0
    schema_id: int = 0
    level: int = 0
    extra_files: tuple[str, ...] = ()
    creation_time_ms: int | None = None
    delete_row_count: int | None = 0
    embedded_index: bytes | None = None
    file_source: int | None = FILE_SOURCE_APPEND
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None
    write_cols_sequences: tuple[int, ...] | None = None

    def to_avro(self) -> dict[str, Any]:
        return {
            "_FILE_NAME": self.file_name, "_FILE_SIZE": self.file_size,
            "_ROW_COUNT": self.row_count, "_MIN_KEY": self.min_key, "_MAX_KEY": self.max_key,
            "_KEY_STATS": self.key_stats.to_avro(), "_VALUE_STATS": self.value_stats.to_avro(),
            "_MIN_SEQUENCE_NUMBER": self.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": self.max_sequence_number, "_SCHEMA_ID": self.schema_id,
            "_LEVEL": self.level, "_EXTRA_FILES": list(self.extra_files),
            "_CREATION_TIME": self.creation_time_ms, "_DELETE_ROW_COUNT": self.delete_row_count,
            "_EMBEDDED_FILE_INDEX": self.embedded_index, "_FILE_SOURCE": self.file_source,
            "_VALUE_STATS_COLS": _list_or_none(self.value_stats_cols),
            "_EXTERNAL_PATH": self.external_path, "_FIRST_ROW_ID": self.first_row_id,
            "_WRITE_COLS": _list_or_none(self.write_cols),
            "_WRITE_COLS_SEQUENCES": _list_or_none(self.write_cols_sequences),
        }

    @staticmethod
    def from_avro(record: dict[str, Any]) -> DataFileMeta:
        created = record.get("_CREATION_TIME")
        if isinstance(created, datetime.datetime):
            if created.tzinfo is None:
                created = created.replace(tzinfo=datetime.UTC)
            created = (created - _EPOCH) // datetime.timedelta(milliseconds=1)
        return DataFileMeta(
            file_name=record["_FILE_NAME"], file_size=record["_FILE_SIZE"],
            row_count=record["_ROW_COUNT"], min_key=record["_MIN_KEY"], max_key=record["_MAX_KEY"],
            key_stats=SimpleStats.from_avro(record["_KEY_STATS"]),
            value_stats=SimpleStats.from_avro(record["_VALUE_STATS"]),
            min_sequence_number=record["_MIN_SEQUENCE_NUMBER"],
            max_sequence_number=record["_MAX_SEQUENCE_NUMBER"], schema_id=record["_SCHEMA_ID"],
            level=record["_LEVEL"], extra_files=tuple(record.get("_EXTRA_FILES") or ()),
            creation_time_ms=created, delete_row_count=record.get("_DELETE_ROW_COUNT"),
            embedded_index=record.get("_EMBEDDED_FILE_INDEX"), file_source=record.get("_FILE_SOURCE"),
            value_stats_cols=_tuple_or_none(record.get("_VALUE_STATS_COLS")),
            external_path=record.get("_EXTERNAL_PATH"), first_row_id=record.get("_FIRST_ROW_ID"),
            write_cols=_tuple_or_none(record.get("_WRITE_COLS")),
            write_cols_sequences=_tuple_or_none(record.get("_WRITE_COLS_SEQUENCES")),
        )


def _list_or_none(values: Sequence[Any] | None) -> list[Any] | None:
    return list(values) if values is not None else None


def _tuple_or_none(values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return tuple(values) if values is not None else None


FileIdentifier = tuple[bytes, int, int, str, tuple[str, ...], bytes | None, str | None]


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """ADD or DELETE of one data file in one (partition, bucket)."""

    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> FileIdentifier:
        """Identity of a file in manifests; a level change is a different identifier."""
        f = self.file
        return (self.partition, self.bucket, f.level, f.file_name, f.extra_files,
                f.embedded_index, f.external_path)

    def to_avro(self) -> dict[str, Any]:
        return {"_VERSION": 2, "_KIND": self.kind, "_PARTITION": self.partition,
                "_BUCKET": self.bucket, "_TOTAL_BUCKETS": self.total_buckets,
                "_FILE": self.file.to_avro()}

    @staticmethod
    def from_avro(record: dict[str, Any]) -> ManifestEntry:
        return ManifestEntry(record["_KIND"], record["_PARTITION"], record["_BUCKET"],
                             record["_TOTAL_BUCKETS"], DataFileMeta.from_avro(record["_FILE"]))


@dataclass(frozen=True, slots=True)
class ManifestFileMeta:
    """One manifest file as listed in a manifest list."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None
    total_buckets: int | None = None
    extra_files: tuple[str, ...] | None = None

    def to_avro(self) -> dict[str, Any]:
        return {"_VERSION": 2, "_FILE_NAME": self.file_name, "_FILE_SIZE": self.file_size,
                "_NUM_ADDED_FILES": self.num_added_files,
                "_NUM_DELETED_FILES": self.num_deleted_files,
                "_PARTITION_STATS": self.partition_stats.to_avro(), "_SCHEMA_ID": self.schema_id,
                "_MIN_BUCKET": self.min_bucket, "_MAX_BUCKET": self.max_bucket,
                "_MIN_LEVEL": self.min_level, "_MAX_LEVEL": self.max_level,
                "_MIN_ROW_ID": self.min_row_id, "_MAX_ROW_ID": self.max_row_id,
                "_TOTAL_BUCKETS": self.total_buckets,
                "_EXTRA_FILES": _list_or_none(self.extra_files)}

    @staticmethod
    def from_avro(record: dict[str, Any]) -> ManifestFileMeta:
        return ManifestFileMeta(
            record["_FILE_NAME"], record["_FILE_SIZE"], record["_NUM_ADDED_FILES"],
            record["_NUM_DELETED_FILES"], SimpleStats.from_avro(record["_PARTITION_STATS"]),
            record["_SCHEMA_ID"], record.get("_MIN_BUCKET"), record.get("_MAX_BUCKET"),
            record.get("_MIN_LEVEL"), record.get("_MAX_LEVEL"), record.get("_MIN_ROW_ID"),
            record.get("_MAX_ROW_ID"), record.get("_TOTAL_BUCKETS"),
            _tuple_or_none(record.get("_EXTRA_FILES")))


@dataclass(frozen=True, slots=True)
class DeletionVectorRange:
    """Where one data file's deletion vector sits inside an index file."""

    data_file: str
    offset: int
    length: int
    cardinality: int | None


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    """One bucket index file (HASH or DELETION_VECTORS) of a (partition, bucket)."""

    kind: int
    partition: bytes
    bucket: int
    index_type: str
    file_name: str
    file_size: int
    row_count: int
    dv_ranges: tuple[DeletionVectorRange, ...] | None = None
    external_path: str | None = None
    global_index: dict[str, Any] | None = field(default=None)

    def to_avro(self) -> dict[str, Any]:
        ranges = None if self.dv_ranges is None else [
            {"f0": r.data_file, "f1": r.offset, "f2": r.length, "_CARDINALITY": r.cardinality}
            for r in self.dv_ranges]
        return {"_VERSION": 1, "_KIND": self.kind, "_PARTITION": self.partition,
                "_BUCKET": self.bucket, "_INDEX_TYPE": self.index_type,
                "_FILE_NAME": self.file_name, "_FILE_SIZE": self.file_size,
                "_ROW_COUNT": self.row_count, "_DELETIONS_VECTORS_RANGES": ranges,
                "_EXTERNAL_PATH": self.external_path, "_GLOBAL_INDEX": self.global_index}

    @staticmethod
    def from_avro(record: dict[str, Any]) -> IndexManifestEntry:
        raw_ranges = record.get("_DELETIONS_VECTORS_RANGES")
        ranges = None if raw_ranges is None else tuple(
            DeletionVectorRange(r["f0"], r["f1"], r["f2"], r.get("_CARDINALITY")) for r in raw_ranges)
        return IndexManifestEntry(record["_KIND"], record["_PARTITION"], record["_BUCKET"],
                                  record["_INDEX_TYPE"], record["_FILE_NAME"], record["_FILE_SIZE"],
                                  record["_ROW_COUNT"], ranges, record.get("_EXTERNAL_PATH"),
                                  record.get("_GLOBAL_INDEX"))


# ------------------------------------------------------------------------------------------
# Avro schemas
# ------------------------------------------------------------------------------------------


def _stats_record(name: str) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [
        {"name": "_MIN_VALUES", "type": "bytes"}, {"name": "_MAX_VALUES", "type": "bytes"},
        {"name": "_NULL_COUNTS", "type": ["null", {"type": "array", "items": ["null", "long"]}],
         "default": None}]}


def _optional(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None}


_STRING_ARRAY = {"type": "array", "items": "string"}
DATA_FILE_META_SCHEMA: dict[str, Any] = {"type": "record", "name": "DataFileMeta", "fields": [
    {"name": "_FILE_NAME", "type": "string"}, {"name": "_FILE_SIZE", "type": "long"},
    {"name": "_ROW_COUNT", "type": "long"}, {"name": "_MIN_KEY", "type": "bytes"},
    {"name": "_MAX_KEY", "type": "bytes"}, {"name": "_KEY_STATS", "type": _stats_record("record_KEY_STATS")},
    {"name": "_VALUE_STATS", "type": _stats_record("record_VALUE_STATS")},
    {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"}, {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
    {"name": "_SCHEMA_ID", "type": "long"}, {"name": "_LEVEL", "type": "int"},
    {"name": "_EXTRA_FILES", "type": _STRING_ARRAY},
    _optional("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
    _optional("_DELETE_ROW_COUNT", "long"), _optional("_EMBEDDED_FILE_INDEX", "bytes"),
    _optional("_FILE_SOURCE", "int"), _optional("_VALUE_STATS_COLS", _STRING_ARRAY),
    _optional("_EXTERNAL_PATH", "string"), _optional("_FIRST_ROW_ID", "long"),
    _optional("_WRITE_COLS", _STRING_ARRAY),
    _optional("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
]}
MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema({"type": "record", "name": "ManifestEntry", "fields": [
    {"name": "_VERSION", "type": "int"}, {"name": "_KIND", "type": "int"},
    {"name": "_PARTITION", "type": "bytes"}, {"name": "_BUCKET", "type": "int"},
    {"name": "_TOTAL_BUCKETS", "type": "int"}, {"name": "_FILE", "type": DATA_FILE_META_SCHEMA}]})
MANIFEST_FILE_META_SCHEMA = fastavro.parse_schema({
    "type": "record", "name": "ManifestFileMeta", "fields": [
        {"name": "_VERSION", "type": "int"}, {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"}, {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": _stats_record("record_PARTITION_STATS")},
        {"name": "_SCHEMA_ID", "type": "long"}, _optional("_MIN_BUCKET", "int"),
        _optional("_MAX_BUCKET", "int"), _optional("_MIN_LEVEL", "int"),
        _optional("_MAX_LEVEL", "int"), _optional("_MIN_ROW_ID", "long"),
        _optional("_MAX_ROW_ID", "long"), _optional("_TOTAL_BUCKETS", "int"),
        _optional("_EXTRA_FILES", _STRING_ARRAY)]})

INDEX_MANIFEST_ENTRY_RECORD: dict[str, Any] = {
    "type": "record", "name": "IndexManifestEntry", "fields": [
        {"name": "_VERSION", "type": "int"}, {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"}, {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"}, {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"}, {"name": "_ROW_COUNT", "type": "long"},
        _optional("_DELETIONS_VECTORS_RANGES", {"type": "array", "items": {
            "type": "record", "name": "record_DELETIONS_VECTORS_RANGES", "fields": [
                {"name": "f0", "type": "string"}, {"name": "f1", "type": "int"},
                {"name": "f2", "type": "int"}, _optional("_CARDINALITY", "long")]}}),
        _optional("_EXTERNAL_PATH", "string"),
        _optional("_GLOBAL_INDEX", {"type": "record", "name": "record_GLOBAL_INDEX", "fields": [
            {"name": "_ROW_RANGE_START", "type": "long"}, {"name": "_ROW_RANGE_END", "type": "long"},
            {"name": "_INDEX_FIELD_ID", "type": "int"},
            _optional("_EXTRA_FIELD_IDS", {"type": "array", "items": "int"}),
            _optional("_INDEX_META", "bytes"), _optional("_SOURCE_META", "bytes")]})]}
INDEX_MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema(INDEX_MANIFEST_ENTRY_RECORD)


# ------------------------------------------------------------------------------------------
# reading and writing
# ------------------------------------------------------------------------------------------


def _read_records(file_io: FileIO, path: str) -> Iterator[dict[str, Any]]:
    try:
        data = file_io.read_bytes(path)
    except FileNotFoundError:
        raise MissingFileError(f"metadata file {path} is missing") from None
    try:
        for record in fastavro.reader(io.BytesIO(data)):
            if not isinstance(record, dict):
                raise CorruptMetadataError(f"Avro file {path} holds a non-record value")
            yield record
    except (ValueError, EOFError, KeyError, TypeError) as exc:
        raise CorruptMetadataError(f"cannot decode Avro file {path}: {exc}") from exc


def _write_records(file_io: FileIO, path: str, schema: Any, records: Iterable[dict[str, Any]],
                   compression: str) -> int:
    buffer = io.BytesIO()
    fastavro.writer(buffer, schema, records, codec=_CODECS[compression], sync_interval=16000)
    data = buffer.getvalue()
    file_io.write_bytes(path, data)
    return len(data)


def _read_cached(file_io: FileIO, path: str, decode: Callable[[dict[str, Any]], Item], what: str) -> list[Item]:
    """Entries of an immutable metadata file, from the FileIO's cache when it was read before."""
    def load() -> list[Item]:
        try:
            return [decode(r) for r in _read_records(file_io, path)]
        except KeyError as exc:
            raise CorruptMetadataError(f"{what} {path} lacks field {exc}") from exc
    return file_io.metadata_cache.get(path, load)


def read_manifest(file_io: FileIO, path: str) -> list[ManifestEntry]:
    return _read_cached(file_io, path, ManifestEntry.from_avro, "manifest")


def read_manifest_list(file_io: FileIO, path: str) -> list[ManifestFileMeta]:
    return _read_cached(file_io, path, ManifestFileMeta.from_avro, "manifest list")


def read_index_manifest(file_io: FileIO, path: str) -> list[IndexManifestEntry]:
    return _read_cached(file_io, path, IndexManifestEntry.from_avro, "index manifest")


def write_manifest_list(file_io: FileIO, path: str, metas: Sequence[ManifestFileMeta],
                        compression: str) -> int:
    """Write a manifest list; returns its size in bytes."""
    return _write_records(file_io, path, MANIFEST_FILE_META_SCHEMA,
                          (m.to_avro() for m in metas), compression)


def write_index_manifest(file_io: FileIO, path: str, entries: Sequence[IndexManifestEntry],
                         compression: str) -> int:
    return _write_records(file_io, path, INDEX_MANIFEST_ENTRY_SCHEMA,
                          (e.to_avro() for e in entries), compression)


def write_manifest(file_io: FileIO, path: str, entries: Sequence[ManifestEntry],
                   partition_types: Sequence[DataType], compression: str) -> ManifestFileMeta:
    """Write one manifest file and describe it for the manifest list."""
    size = _write_records(file_io, path, MANIFEST_ENTRY_SCHEMA, (e.to_avro() for e in entries),
                          compression)
    return describe_manifest(path.rsplit("/", 1)[-1], size, entries, partition_types)


def describe_manifest(name: str, size: int, entries: Sequence[ManifestEntry],
                      partition_types: Sequence[DataType]) -> ManifestFileMeta:
    """Manifest-list record of a manifest: counts, partition min/max, bucket and level ranges."""
    totals = {e.total_buckets for e in entries}
    total_buckets = totals.pop() if len(totals) == 1 else None
    return ManifestFileMeta(
        file_name=name, file_size=size,
        num_added_files=sum(1 for e in entries if e.kind == ADD),
        num_deleted_files=sum(1 for e in entries if e.kind == DELETE),
        partition_stats=partition_stats([e.partition for e in entries], partition_types),
        schema_id=max((e.file.schema_id for e in entries), default=0),
        min_bucket=min((e.bucket for e in entries), default=None),
        max_bucket=max((e.bucket for e in entries), default=None),
        min_level=min((e.file.level for e in entries), default=None),
        max_level=max((e.file.level for e in entries), default=None),
        total_buckets=total_buckets if total_buckets is not None and total_buckets > 0 else None)


def partition_stats(partitions: Iterable[bytes], types: Sequence[DataType]) -> SimpleStats:
    """Per partition column min, max and null count over the entries' partition rows."""
    counts = Counter(partitions)
    rows = {p: deserialize_with_arity(p, types) for p in counts}
    mins: list[Any] = []
    maxs: list[Any] = []
    nulls: list[int | None] = []
    for i in range(len(types)):
        present = [r[i] for r in rows.values() if r[i] is not None]
        mins.append(min(present) if present else None)
        maxs.append(max(present) if present else None)
        nulls.append(sum(n for p, n in counts.items() if rows[p][i] is None))
    return SimpleStats(serialize_with_arity(mins, types), serialize_with_arity(maxs, types),
                       tuple(nulls))
