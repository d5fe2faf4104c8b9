"""The binary form of prepared commit messages, for shipping them between processes and machines.

Java Paimon's ``CommitMessageSerializer`` is the wire format between Flink's writer and
committer operators: Java's ``InternalRowSerializer`` layout of ``DataFileMeta``, re-versioned
with most releases, and never stored. Ours reuses what the table format does store: a data file
is the manifest's ``DataFileMeta`` Avro record and an index file the index manifest's
``IndexManifestEntry`` record, byte for byte as in manifests, so a message names files exactly
as the commit will record them.

Layout (version 1)::

    b"PDCM"                 magic
    u8 version              1
    Avro binary (schemaless) of the record PreparedCommit below

The codec stands apart from the message, as Java's serializer does: it encodes anything with a
prepared commit's fields and decodes into :class:`PreparedFields`, from which
:meth:`PreparedCommit.from_bytes` builds the message.

Readers refuse other magics and versions with a clear error; a new version keeps the magic and
bumps the byte.
"""

from __future__ import annotations

import io
from dataclasses import asdict
from typing import Any, NamedTuple, Protocol

import fastavro

from paimon_core.compaction.compactor import BucketCompaction
from paimon_core.errors import CorruptMetadataError
from paimon_core.manifest import (
    DATA_FILE_META_SCHEMA,
    INDEX_MANIFEST_ENTRY_RECORD,
    DataFileMeta,
    IndexManifestEntry,
)
from paimon_core.write.message import CommitMessage, CompactIncrement
from paimon_core.write.routing import Partition


class PreparedFields(NamedTuple):
    """A prepared commit's fields, in the order :class:`PreparedCommit` declares them."""

    table: str
    schema_id: int
    data: tuple[CommitMessage, ...]
    compactions: tuple[CompactIncrement, ...]
    index_base: str | None
    index_files: tuple[IndexManifestEntry, ...]
    rows: int
    full: bool
    reports: tuple[BucketCompaction, ...]


class Prepared(Protocol):
    """What :func:`encode_prepared` reads of a prepared commit."""

    @property
    def table(self) -> str: ...
    @property
    def schema_id(self) -> int: ...
    @property
    def data(self) -> tuple[CommitMessage, ...]: ...
    @property
    def compactions(self) -> tuple[CompactIncrement, ...]: ...
    @property
    def index_base(self) -> str | None: ...
    @property
    def index_files(self) -> tuple[IndexManifestEntry, ...]: ...
    @property
    def rows(self) -> int: ...
    @property
    def full(self) -> bool: ...
    @property
    def reports(self) -> tuple[BucketCompaction, ...]: ...


MAGIC = b"PDCM"
VERSION = 1

_FILES = {"type": "array", "items": "DataFileMeta"}
_INDEX = {"type": "array", "items": "IndexManifestEntry"}
_WHERE = [{"name": "_PARTITION", "type": "bytes"}, {"name": "_PARTITION_PATH", "type": "string"},
          {"name": "_BUCKET", "type": "int"}, {"name": "_TOTAL_BUCKETS", "type": "int"}]
_INTS = {"type": "array", "items": "int"}

SCHEMA = fastavro.parse_schema({"type": "record", "name": "PreparedCommit", "fields": [
    {"name": "_TABLE", "type": "string"}, {"name": "_SCHEMA_ID", "type": "long"},
    # the named records are defined at their first use and referenced by name after it
    {"name": "_DATA", "type": {"type": "array", "items": {"type": "record", "name": "DataIncrement", "fields": [
        *_WHERE, {"name": "_NEW_FILES", "type": {"type": "array", "items": DATA_FILE_META_SCHEMA}},
        {"name": "_CHANGELOG_FILES", "type": _FILES}]}}},
    {"name": "_INDEX_BASE", "type": ["null", "string"], "default": None},
    {"name": "_INDEX_FILES", "type": {"type": "array", "items": INDEX_MANIFEST_ENTRY_RECORD}},
    {"name": "_COMPACTIONS", "type": {"type": "array", "items": {"type": "record", "name": "CompactIncrement",
                                                                  "fields": [
        *_WHERE, {"name": "_BEFORE", "type": _FILES}, {"name": "_AFTER", "type": _FILES},
        {"name": "_INDEX_BEFORE", "type": _INDEX}, {"name": "_INDEX_AFTER", "type": _INDEX},
        {"name": "_CHANGELOG_FILES", "type": _FILES}]}}},
    {"name": "_ROWS", "type": "long"}, {"name": "_FULL", "type": "boolean"},
    {"name": "_REPORTS", "type": {"type": "array", "items": {"type": "record", "name": "BucketCompaction", "fields": [
        {"name": "partition", "type": "string"}, {"name": "bucket", "type": "int"},
        {"name": "reason", "type": "string"}, {"name": "output_level", "type": "int"},
        {"name": "files_in", "type": "long"}, {"name": "files_out", "type": "long"},
        {"name": "files_upgraded", "type": "long"}, {"name": "bytes_in", "type": "long"},
        {"name": "bytes_out", "type": "long"}, {"name": "rows_in", "type": "long"},
        {"name": "rows_out", "type": "long"}, {"name": "level_files_before", "type": _INTS},
        {"name": "level_files_after", "type": _INTS}, {"name": "changelog_files", "type": "long"},
        {"name": "changelog_rows", "type": "long"}]}}},
]})


def _where(partition: Partition, bucket: int, total_buckets: int) -> dict[str, Any]:
    return {"_PARTITION": partition.row, "_PARTITION_PATH": partition.path, "_BUCKET": bucket,
            "_TOTAL_BUCKETS": total_buckets}


def _partition(record: dict[str, Any]) -> Partition:
    """The partition's row and path; its decoded values are the committing table's to give."""
    return Partition(record["_PARTITION"], (), record["_PARTITION_PATH"])


def _files(records: list[dict[str, Any]]) -> tuple[DataFileMeta, ...]:
    return tuple(DataFileMeta.from_avro(r) for r in records)


def _index(records: list[dict[str, Any]]) -> tuple[IndexManifestEntry, ...]:
    return tuple(IndexManifestEntry.from_avro(r) for r in records)


def encode_prepared(prepared: Prepared) -> bytes:
    record = {
        "_TABLE": prepared.table, "_SCHEMA_ID": prepared.schema_id,
        "_DATA": [{**_where(m.partition, m.bucket, m.total_buckets),
                   "_NEW_FILES": [f.to_avro() for f in m.new_files],
                   "_CHANGELOG_FILES": [f.to_avro() for f in m.changelog_files]} for m in prepared.data],
        "_INDEX_BASE": prepared.index_base, "_INDEX_FILES": [e.to_avro() for e in prepared.index_files],
        "_COMPACTIONS": [{**_where(c.partition, c.bucket, c.total_buckets),
                          "_BEFORE": [f.to_avro() for f in c.before], "_AFTER": [f.to_avro() for f in c.after],
                          "_INDEX_BEFORE": [e.to_avro() for e in c.index_before],
                          "_INDEX_AFTER": [e.to_avro() for e in c.index_after],
                          "_CHANGELOG_FILES": [f.to_avro() for f in c.changelog_files]}
                         for c in prepared.compactions],
        "_ROWS": prepared.rows, "_FULL": prepared.full,
        "_REPORTS": [{**asdict(r), "level_files_before": list(r.level_files_before),
                      "level_files_after": list(r.level_files_after)} for r in prepared.reports],
    }
    out = io.BytesIO()
    out.write(MAGIC + bytes([VERSION]))
    fastavro.schemaless_writer(out, SCHEMA, record)
    return out.getvalue()


def decode_prepared(data: bytes) -> PreparedFields:
    if not isinstance(data, bytes | bytearray | memoryview) or bytes(data[:4]) != MAGIC:
        raise CorruptMetadataError("not serialized commit messages of paimon-dagster (they start with b'PDCM'); "
                                   "pass what PreparedCommit.to_bytes() returned")
    version = data[4]
    if version != VERSION:
        raise CorruptMetadataError(f"commit messages of format version {version}; this paimon_core reads "
                                   f"version {VERSION}: commit them with the release that wrote them")
    record: Any = fastavro.schemaless_reader(io.BytesIO(bytes(data[5:])), SCHEMA, None)
    data_messages = tuple(
        CommitMessage(_partition(m), m["_BUCKET"], m["_TOTAL_BUCKETS"], _files(m["_NEW_FILES"]),
                      _files(m["_CHANGELOG_FILES"])) for m in record["_DATA"])
    compactions = tuple(
        CompactIncrement(_partition(c), c["_BUCKET"], c["_TOTAL_BUCKETS"], _files(c["_BEFORE"]),
                         _files(c["_AFTER"]), _index(c["_INDEX_BEFORE"]), _index(c["_INDEX_AFTER"]),
                         _files(c["_CHANGELOG_FILES"])) for c in record["_COMPACTIONS"])
    reports = tuple(BucketCompaction(**{**r, "level_files_before": tuple(r["level_files_before"]),
                                         "level_files_after": tuple(r["level_files_after"])})
                    for r in record["_REPORTS"])
    return PreparedFields(record["_TABLE"], record["_SCHEMA_ID"], data_messages, compactions,
                          record["_INDEX_BASE"], _index(record["_INDEX_FILES"]), record["_ROWS"],
                          record["_FULL"], reports)
