"""Snapshot JSON and manifest Avro codecs round-trip, and read what pypaimon wrote."""

from __future__ import annotations

import json

from paimon_core.binary_row import serialize_with_arity
from paimon_core.manifest import (
    ADD,
    DELETE,
    DataFileMeta,
    ManifestEntry,
    SimpleStats,
    describe_manifest,
    partition_stats,
)
from paimon_core.snapshot import Snapshot
from paimon_core.types import MAX_LENGTH, atomic

PYPAIMON_SNAPSHOT = """{
  "version": 3, "id": 2, "schemaId": 0,
  "baseManifestList": "manifest-list-5505a86c-1607-4239-86e2-4eaf707a94f9-0",
  "deltaManifestList": "manifest-list-5505a86c-1607-4239-86e2-4eaf707a94f9-1",
  "totalRecordCount": 4, "deltaRecordCount": 2, "commitUser": "b41cface-f0f8-48f6-a49f-d43d52e29fa5",
  "commitIdentifier": 9223372036854775807, "commitKind": "APPEND", "timeMillis": 1795946705862,
  "baseManifestListSize": 1338, "deltaManifestListSize": 1338,
  "changelogManifestList": "manifest-list-5505a86c-1607-4239-86e2-4eaf707a94f9-changelog",
  "changelogManifestListSize": 1348, "changelogRecordCount": 2,
  "uuid": "fce07923-0b5d-4b05-b463-5c650c84e666", "writerVersion": "python-2.1.0-3a5f",
  "operation": "WRITE"
}"""


def test_snapshot_json_round_trip_keeps_unknown_fields() -> None:
    snapshot = Snapshot.from_json(PYPAIMON_SNAPSHOT)
    assert snapshot.id == 2 and snapshot.commit_kind == "APPEND" and snapshot.changelog_record_count == 2
    assert snapshot.extra == {"operation": "WRITE"}
    assert json.loads(snapshot.to_json()) == json.loads(PYPAIMON_SNAPSHOT)


def test_optional_snapshot_fields_are_omitted() -> None:
    text = Snapshot(id=1, schema_id=0, base_manifest_list="b", delta_manifest_list="d", commit_user="u",
                    commit_identifier=1, commit_kind="APPEND", time_millis=5, total_record_count=1,
                    delta_record_count=1).to_json()
    assert "indexManifest" not in json.loads(text) and "watermark" not in json.loads(text)


def test_entry_avro_dicts_round_trip() -> None:
    meta = DataFileMeta("data-x-0.parquet", 100, 10, value_stats=SimpleStats(b"\0" * 12, b"\0" * 12, (0,)),
                        creation_time_ms=1795946705645, value_stats_cols=("a",), extra_files=("x",))
    entry = ManifestEntry(ADD, serialize_with_arity(["p"], [atomic("VARCHAR", MAX_LENGTH)]), 3, 4, meta)
    assert ManifestEntry.from_avro(entry.to_avro()) == entry


def test_manifest_description() -> None:
    string = atomic("VARCHAR", MAX_LENGTH)
    entries = [ManifestEntry(kind, serialize_with_arity([p], [string]), bucket, 4,
                             DataFileMeta(f"f{i}", 1, 1, schema_id=schema_id, level=level))
               for i, (kind, p, bucket, schema_id, level) in enumerate(
                   [(ADD, "b", 1, 0, 0), (ADD, None, 3, 2, 1), (DELETE, "a", 0, 1, 0)])]
    meta = describe_manifest("m", 99, entries, [string])
    assert (meta.num_added_files, meta.num_deleted_files, meta.schema_id) == (2, 1, 2)
    assert (meta.min_bucket, meta.max_bucket, meta.min_level, meta.max_level) == (0, 3, 0, 1)
    assert meta.total_buckets == 4
    assert meta.partition_stats == partition_stats([e.partition for e in entries], [string])
    assert meta.partition_stats.null_counts == (1,)
    assert meta.partition_stats.min_values == serialize_with_arity(["a"], [string])
