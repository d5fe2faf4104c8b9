"""Schema creation, validation, JSON and pure evolution."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from paimon_core.errors import InvalidNameError, OptionError, SchemaError
from paimon_core.schema import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SetOption,
    TableSchema,
    UpdateColumnType,
    apply_changes,
    create_schema,
)

ARROW = pa.schema([("id", pa.int64()), ("name", pa.string()), ("dt", pa.string()),
                   ("r", pa.struct([("x", pa.int32()), ("y", pa.string())]))])

PYPAIMON_SCHEMA = """{
  "version": 3, "id": 0,
  "fields": [{"id": 0, "name": "dt", "type": "STRING NOT NULL"}, {"id": 1, "name": "id", "type": "BIGINT NOT NULL"},
             {"id": 2, "name": "v", "type": "STRING"}, {"id": 3, "name": "n", "type": "INT"},
             {"id": 4, "name": "rk", "type": "STRING"}],
  "highestFieldId": 4, "partitionKeys": ["dt"], "primaryKeys": ["dt", "id"],
  "options": {"bucket": "2", "metadata.stats-mode": "full", "rowkind.field": "rk"},
  "comment": null, "timeMillis": 1795946705603
}"""


def test_reads_pypaimon_schema_file_and_writes_the_same_document() -> None:
    schema = TableSchema.from_json(PYPAIMON_SCHEMA)
    assert schema.partition_keys == ("dt",) and schema.primary_keys == ("dt", "id")
    assert schema.trimmed_primary_keys == ["id"]
    written = json.loads(PYPAIMON_SCHEMA)
    del written["comment"]  # no comment is no key, as Java writes it (Java 0.9 reads a null as "null")
    assert json.loads(schema.to_json()) == written


def test_create_assigns_ids_depth_first_and_highest_field_id() -> None:
    schema = create_schema(ARROW, partition_keys=["dt"])
    assert [f.id for f in schema.fields] == [0, 1, 2, 3]
    assert schema.highest_field_id == 5  # r.x = 4, r.y = 5
    assert schema.to_json().startswith('{\n  "version": 3,')


def test_old_schema_versions_imply_bucket_and_format() -> None:
    doc = json.loads(PYPAIMON_SCHEMA)
    doc["version"], doc["options"] = 1, {}
    options = TableSchema.from_json(json.dumps(doc)).table_options()
    assert options.bucket == 1 and options.file_format == "orc"


@pytest.mark.parametrize(("kwargs", "error", "text"), [
    ({"partition_keys": ["nope"]}, SchemaError, "partition key 'nope'"),
    ({"partition_keys": ["r"]}, SchemaError, "atomic type"),
    ({"options": {"bucket": "4"}}, OptionError, "bucket-key"),
    ({"options": {"bucket": "4", "bucket-key": "zz"}}, OptionError, "'zz'"),
    ({"options": {"bucket": "2", "bucket-key": "dt"}, "partition_keys": ["dt"]}, OptionError, "partition key"),
    ({"options": {"bucket": "-2"}}, OptionError, "postpone"),
])
def test_invalid_schemas_are_refused(kwargs: dict, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        create_schema(ARROW, table="db.t", **kwargs)


def test_bad_column_names() -> None:
    with pytest.raises(InvalidNameError, match="control character"):
        create_schema(pa.schema([("a\x01", pa.int32())]), table="db.t")
    with pytest.raises(SchemaError, match="duplicate"):
        create_schema(pa.schema([("a", pa.int32()), ("a", pa.int64())]), table="db.t")


def test_evolution_keeps_ids_and_bumps_version() -> None:
    base = create_schema(ARROW, partition_keys=["dt"], options={"k": "v"})
    evolved = apply_changes(base, [
        RenameColumn("name", "title"), AddColumn("score", pa.float64(), after="id"),
        UpdateColumnType("id", pa.int64()), SetOption("snapshot.num-retained.min", "5"),
        RemoveOption("k"), DropColumn("r")])
    assert evolved.id == 1
    assert evolved.field_names == ["id", "score", "title", "dt"]
    assert evolved.field("title").id == 1 and evolved.field("score").id == 6
    assert evolved.highest_field_id == 6
    assert evolved.options == {"snapshot.num-retained.min": "5"}


@pytest.mark.parametrize(("change", "text"), [
    (DropColumn("dt"), "key column"), (RenameColumn("dt", "day"), "key column"),
    (UpdateColumnType("name", pa.int64()), "only widening"), (AddColumn("id", pa.int32()), "exists"),
    (SetOption("bucket", "3"), "cannot be changed"), (SetOption("write-buffer-size", "huge"), "write-buffer-size"),
    (DropColumn("missing"), "no column"),
])
def test_refused_changes(change: object, text: str) -> None:
    base = create_schema(ARROW, partition_keys=["dt"])
    with pytest.raises((SchemaError, OptionError), match=text):
        apply_changes(base, [change], table="db.t")  # type: ignore[list-item]
