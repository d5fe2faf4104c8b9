"""``$snapshots``, ``$schemas``, ``$options``, ``$tags`` and ``$consumers``: tables of JSON metadata.

Each builder is pure: it takes the metadata objects paimon_core already decodes (snapshots,
schema versions, tags, consumers) and returns the Arrow table with Apache Paimon's columns, in
Paimon's order and with its types (BIGINT → int64, INT → int32, STRING → string, TIMESTAMP(3) →
zone-less ``timestamp("ms")`` holding local wall-clock time, as Paimon's ``LocalDateTime``
values do). NOT NULL columns are non-nullable Arrow fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from paimon_core.consumer import Consumer
from paimon_core.schema import TableSchema
from paimon_core.snapshot import Snapshot
from paimon_core.system.render import java_duration, local_date_time_ms, local_wall_ms
from paimon_core.tags import Tag
from paimon_core.types import field_to_json

_TIMESTAMP = pa.timestamp("ms")

SNAPSHOTS_SCHEMA = pa.schema([
    pa.field("snapshot_id", pa.int64(), False),
    pa.field("schema_id", pa.int64(), False),
    pa.field("commit_user", pa.string(), False),
    pa.field("commit_identifier", pa.int64(), False),
    pa.field("commit_kind", pa.string(), False),
    pa.field("commit_time", _TIMESTAMP, False),
    pa.field("base_manifest_list", pa.string(), False),
    pa.field("delta_manifest_list", pa.string(), False),
    pa.field("changelog_manifest_list", pa.string()),
    pa.field("total_record_count", pa.int64()),
    pa.field("delta_record_count", pa.int64()),
    pa.field("changelog_record_count", pa.int64()),
    pa.field("watermark", pa.int64()),
])
"""Paimon 0.9.0's SnapshotsTable; newer versions append ``next_row_id``, ``operation`` and
``writer_version`` (row tracking and writer bookkeeping, which 0.9.0 tables do not have)."""

SCHEMAS_SCHEMA = pa.schema([
    pa.field("schema_id", pa.int64(), False),
    pa.field("fields", pa.string(), False),
    pa.field("partition_keys", pa.string(), False),
    pa.field("primary_keys", pa.string(), False),
    pa.field("options", pa.string(), False),
    pa.field("comment", pa.string()),
    pa.field("update_time", _TIMESTAMP, False),
])
"""Paimon's SchemasTable: the JSON columns are compact (Jackson's ``toFlatJson``)."""

OPTIONS_SCHEMA = pa.schema([pa.field("key", pa.string(), False), pa.field("value", pa.string(), False)])
"""Paimon's OptionsTable: the options stored in the latest schema (not defaults)."""

TAGS_SCHEMA = pa.schema([
    pa.field("tag_name", pa.string(), False),
    pa.field("snapshot_id", pa.int64(), False),
    pa.field("schema_id", pa.int64(), False),
    pa.field("commit_time", _TIMESTAMP, False),
    pa.field("record_count", pa.int64()),
    pa.field("create_time", _TIMESTAMP),
    pa.field("time_retained", pa.string()),
])
"""Paimon's TagsTable; ``time_retained`` is ``Duration.toString()`` (``PT1H``)."""

CONSUMERS_SCHEMA = pa.schema([pa.field("consumer_id", pa.string(), False),
                              pa.field("next_snapshot_id", pa.int64(), False)])
"""Paimon's ConsumersTable."""


def _flat_json(value: Any) -> str:
    """Jackson's ``writeValueAsString``: no whitespace, non-ASCII characters as they are."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def snapshots_table(snapshots: Sequence[Snapshot]) -> pa.Table:
    """One row per retained snapshot, oldest first (Paimon lists them by id)."""
    rows = [{
        "snapshot_id": s.id, "schema_id": s.schema_id, "commit_user": s.commit_user,
        "commit_identifier": s.commit_identifier, "commit_kind": s.commit_kind,
        "commit_time": local_wall_ms(s.time_millis), "base_manifest_list": s.base_manifest_list,
        "delta_manifest_list": s.delta_manifest_list, "changelog_manifest_list": s.changelog_manifest_list,
        "total_record_count": s.total_record_count, "delta_record_count": s.delta_record_count,
        "changelog_record_count": s.changelog_record_count, "watermark": s.watermark,
    } for s in sorted(snapshots, key=lambda s: s.id)]
    return pa.Table.from_pylist(rows, schema=SNAPSHOTS_SCHEMA)


def schemas_table(schemas: Sequence[TableSchema]) -> pa.Table:
    """One row per schema version, by id; fields, keys and options as Paimon's compact JSON."""
    rows = [{
        "schema_id": s.id, "fields": _flat_json([field_to_json(f) for f in s.fields]),
        "partition_keys": _flat_json(list(s.partition_keys)), "primary_keys": _flat_json(list(s.primary_keys)),
        "options": _flat_json(dict(s.options)), "comment": s.comment, "update_time": local_wall_ms(s.time_millis),
    } for s in sorted(schemas, key=lambda s: s.id)]
    return pa.Table.from_pylist(rows, schema=SCHEMAS_SCHEMA)


def options_table(options: Mapping[str, str]) -> pa.Table:
    """The options a table was created or altered with, in the order its schema file holds them."""
    return pa.table({"key": list(options), "value": [str(v) for v in options.values()]}, schema=OPTIONS_SCHEMA)


def tags_table(tags: Sequence[Tag]) -> pa.Table:
    """One row per tag (ordered by snapshot id, then name: Java lists them in directory order).

    ``commit_time`` is the tagged snapshot's commit time, ``create_time`` when the tag was made
    (absent in tags written before Paimon recorded it), ``record_count`` the snapshot's total.
    """
    rows = []
    for tag in tags:
        s = tag.snapshot
        rows.append({
            "tag_name": tag.name, "snapshot_id": s.id, "schema_id": s.schema_id,
            "commit_time": local_wall_ms(s.time_millis), "record_count": s.total_record_count,
            "create_time": local_date_time_ms(s.extra.get("tagCreateTime")),
            "time_retained": java_duration(s.extra.get("tagTimeRetained")),
        })
    return pa.Table.from_pylist(rows, schema=TAGS_SCHEMA)


def consumers_table(consumers: Sequence[Consumer]) -> pa.Table:
    """One row per consumer id with the first snapshot it has not read yet, by id."""
    ordered = sorted(consumers, key=lambda c: c.consumer_id)
    return pa.table({"consumer_id": [c.consumer_id for c in ordered],
                     "next_snapshot_id": [c.next_snapshot for c in ordered]}, schema=CONSUMERS_SCHEMA)
