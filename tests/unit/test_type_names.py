"""Paimon / SQL type names as users write them, and tables declared with them."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.errors import SchemaError, UnsupportedFeatureError
from paimon_core.schema import create_schema
from paimon_core.type_names import PAIMON_TYPE_KEY, arrow_field_for, parse_type_name
from paimon_core.types import (
    MAX_LENGTH,
    ArrayType,
    AtomicType,
    DataField,
    MapType,
    RowType,
    atomic,
    nested_fields,
    to_arrow_type,
    type_from_json,
    type_to_json,
)

ATOMIC_SPELLINGS = [
    ("BIGINT", "BIGINT"),
    ("INT NOT NULL", "INT NOT NULL"),
    ("DECIMAL(12,2)", "DECIMAL(12, 2)"),
    ("DECIMAL(12)", "DECIMAL(12, 0)"),
    ("DECIMAL", "DECIMAL(10, 0)"),
    ("TIMESTAMP(3)", "TIMESTAMP(3)"),
    ("TIMESTAMP", "TIMESTAMP(6)"),
    ("TIMESTAMP(1)", "TIMESTAMP(1)"),
    ("TIMESTAMP(6) WITH LOCAL TIME ZONE", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("TIMESTAMP_LTZ(6)", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("TIMESTAMP_LTZ(3) NOT NULL", "TIMESTAMP(3) WITH LOCAL TIME ZONE NOT NULL"),
    ("VARCHAR(20)", "VARCHAR(20)"),
    ("CHAR(3)", "CHAR(3)"),
    ("STRING", "STRING"),
    ("BYTES", "BYTES"),
    ("BINARY(16)", "BINARY(16)"),
    ("VARBINARY(8)", "VARBINARY(8)"),
    ("DATE", "DATE"),
    ("TIME", "TIME(0)"),
    ("TIME(3)", "TIME(3)"),
    ("BOOLEAN", "BOOLEAN"),
    ("FLOAT", "FLOAT"),
    ("DOUBLE", "DOUBLE"),
    ("TINYINT", "TINYINT"),
    ("SMALLINT", "SMALLINT"),
    ("INTEGER", "INT"),
    ("DOUBLE PRECISION", "DOUBLE"),
    ("NUMERIC(4, 1)", "DECIMAL(4, 1)"),
    ("bigint not null", "BIGINT NOT NULL"),
    ("  Varchar( 20 )  NOT  NULL ", "VARCHAR(20) NOT NULL"),
    ("timestamp(6) without time zone", "TIMESTAMP(6)"),
    ("BOOLEAN NULL", "BOOLEAN"),
]


@pytest.mark.parametrize(("text", "json_form"), ATOMIC_SPELLINGS)
def test_atomic_spellings_parse_to_the_schema_json_form(text: str, json_form: str) -> None:
    data_type = parse_type_name(text)
    assert isinstance(data_type, AtomicType)
    assert type_to_json(data_type) == json_form
    assert type_from_json(type_to_json(data_type)) == data_type


def test_nested_types_parse_with_placeholder_field_ids() -> None:
    assert parse_type_name("ARRAY<STRING>") == ArrayType(atomic("VARCHAR", MAX_LENGTH))
    assert parse_type_name("MAP<STRING, BIGINT>") == MapType(atomic("VARCHAR", MAX_LENGTH), atomic("BIGINT"))
    assert parse_type_name("ROW<a INT, b ARRAY<DECIMAL(10, 2)>>") == RowType((
        DataField(0, "a", atomic("INT")),
        DataField(1, "b", ArrayType(atomic("DECIMAL", 10, 2))),
    ))
    assert parse_type_name("ROW(a INT, b STRING)") == parse_type_name("ROW<a INT, b STRING>")


NESTED_SPELLINGS = [
    ("array<int not null> not null", {"type": "ARRAY NOT NULL", "element": "INT NOT NULL"}),
    ("MAP<VARCHAR(3), ARRAY<TIMESTAMP(3)>>",
     {"type": "MAP", "key": "VARCHAR(3)", "value": {"type": "ARRAY", "element": "TIMESTAMP(3)"}}),
    ("ROW<`a b` INT NOT NULL 'first field', `we``ird` CHAR(3)> NOT NULL",
     {"type": "ROW NOT NULL", "fields": [
         {"id": 0, "name": "a b", "type": "INT NOT NULL", "description": "first field"},
         {"id": 1, "name": "we`ird", "type": "CHAR(3)"}]}),
    ("row(Outer row(Inner map<string, bigint not null> not null), n decimal(5))",
     {"type": "ROW", "fields": [
         {"id": 0, "name": "Outer", "type": {"type": "ROW", "fields": [
             {"id": 0, "name": "Inner", "type": {"type": "MAP NOT NULL", "key": "STRING",
                                                 "value": "BIGINT NOT NULL"}}]}},
         {"id": 1, "name": "n", "type": "DECIMAL(5, 0)"}]}),
    ("ARRAY<ROW<x TIMESTAMP_LTZ(9), y BYTES>>",
     {"type": "ARRAY", "element": {"type": "ROW", "fields": [
         {"id": 0, "name": "x", "type": "TIMESTAMP(9) WITH LOCAL TIME ZONE"},
         {"id": 1, "name": "y", "type": "BYTES"}]}}),
]


@pytest.mark.parametrize(("text", "json_form"), NESTED_SPELLINGS)
def test_nested_spellings_round_trip_through_schema_json(text: str, json_form: object) -> None:
    data_type = parse_type_name(text)
    assert type_to_json(data_type) == json_form
    assert type_from_json(json.loads(json.dumps(type_to_json(data_type)))) == data_type


@pytest.mark.parametrize(("text", "position", "problem"), [
    ("ROW<a INT", 9, "expected ',' or '>' but the text ended"),
    ("ROW<a INT b INT>", 10, "expected ',' or '>', found 'b'"),
    ("MAP<STRING>", 10, "expected ','"),
    ("ARRAY<>", 6, "expected a type, found '>'"),
    ("ARRAY(INT)", 5, "expected '<'"),
    ("ROW<>", 4, "expected a ROW field name"),
    ("ROW<a INT, a STRING>", 11, "duplicate ROW field name 'a'"),
    ("BIGINT BIGINT", 7, "unexpected 'BIGINT' after a complete type"),
    ("INT NOT", 7, "expected 'NULL' but the text ended"),
    ("INT $", 4, "unexpected character '$'"),
    ("", 0, "expected a type but the text ended"),
    ("FOO", 0, "'FOO' is not a known atomic type"),
    ("ARRAY<VARCHAR(x)>", 14, "expected a number as parameter of VARCHAR"),
    ("INT(3)", 0, "INT takes no parameters"),
    ("STRING(5)", 0, "STRING takes no parameters"),
    ("DECIMAL(10, 2, 1)", 0, "DECIMAL takes at most 2 parameters"),
    ("TIMESTAMP WITH TIME ZONE", 0, "TIMESTAMP WITH TIME ZONE is not a Paimon type"),
    ("DECIMAL(40,2)", 0, "DECIMAL precision must be between 1 and 38, not 40"),
    ("DECIMAL(0)", 0, "DECIMAL precision must be between 1 and 38, not 0"),
    ("DECIMAL(5, 6)", 0, "DECIMAL scale must be between 0 and the precision 5, not 6"),
    ("TIMESTAMP(10)", 0, "TIMESTAMP precision must be between 0 and 9, not 10"),
    ("TIMESTAMP_LTZ(12)", 0, "TIMESTAMP precision must be between 0 and 9, not 12"),
    ("ROW<t TIME(10)>", 6, "TIME precision must be between 0 and 9, not 10"),
    ("CHAR(0)", 0, "CHAR length must be between 1"),
    ("VARCHAR(0)", 0, "VARCHAR length must be between 1"),
    ("BINARY(0)", 0, "BINARY length must be between 1"),
    ("MAP<STRING, VARBINARY(0)>", 12, "VARBINARY length must be between 1"),
    ("VARCHAR(2147483648)", 0, "VARCHAR length must be between 1 and 2147483647"),
])
def test_errors_quote_the_text_give_the_position_and_suggest_spellings(
        text: str, position: int, problem: str) -> None:
    with pytest.raises(SchemaError) as info:
        parse_type_name(text)
    message = str(info.value)
    assert f"cannot parse type name {text!r} at position {position}: {problem}" in message
    assert "valid spellings include" in message and "DECIMAL(12, 2)" in message


@pytest.mark.parametrize("text", ["VARIANT", "MULTISET<INT>", "ARRAY<VARIANT>", "ROW<a BLOB>"])
def test_unsupported_types_raise_unsupported_feature(text: str) -> None:
    with pytest.raises(UnsupportedFeatureError, match="is not supported"):
        parse_type_name(text)


def test_arrow_field_for_carries_the_exact_type_and_description() -> None:
    field = arrow_field_for("name", "VARCHAR(20) NOT NULL", description="customer name")
    assert field.name == "name" and field.type == pa.string() and not field.nullable
    assert field.metadata == {PAIMON_TYPE_KEY: b'"VARCHAR(20) NOT NULL"', b"description": b"customer name"}
    row = arrow_field_for("r", "ROW<a INT NOT NULL, b ARRAY<DECIMAL(10, 2)>>")
    assert row.nullable and b"description" not in row.metadata
    assert row.type == pa.struct([pa.field("a", pa.int32(), False),
                                  pa.field("b", pa.list_(pa.decimal128(10, 2)))])
    parsed = type_from_json(json.loads(row.metadata[PAIMON_TYPE_KEY]))
    assert parsed == parse_type_name("ROW<a INT NOT NULL, b ARRAY<DECIMAL(10, 2)>>")
    for text in ("TIMESTAMP(1)", "TIME(3)", "CHAR(3)", "TIMESTAMP_LTZ(6)", "MAP<STRING, BIGINT>"):
        assert arrow_field_for("c", text).type == to_arrow_type(parse_type_name(text))


# ---- schemas declared with type names ------------------------------------------------------

DECLARED = [
    ("id", "BIGINT"),
    ("code", "CHAR(3)"),
    ("name", "VARCHAR(20)"),
    ("amount", "DECIMAL(12,2)"),
    ("ts", "TIMESTAMP(3)"),
    ("ltz", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("r", "ROW<a INT NOT NULL, b ARRAY<DECIMAL(10, 2)>, c ROW(x STRING, y TIME(3))>"),
    ("m", "MAP<STRING, ROW<p BIGINT>>"),
    ("tags", "ARRAY<STRING>"),
]


def declared_schema() -> pa.Schema:
    return pa.schema([arrow_field_for(name, text, description="the id" if name == "id" else None)
                      for name, text in DECLARED])


def test_create_schema_keeps_declared_types_and_numbers_nested_fields_like_arrow() -> None:
    schema = create_schema(declared_schema(), primary_keys=["id"], options={"bucket": "1"})
    types = {f.name: type_to_json(f.type) for f in schema.fields}
    assert types["id"] == "BIGINT NOT NULL"  # primary key columns become NOT NULL
    assert types["code"] == "CHAR(3)" and types["name"] == "VARCHAR(20)"
    assert types["amount"] == "DECIMAL(12, 2)" and types["ts"] == "TIMESTAMP(3)"
    assert types["ltz"] == "TIMESTAMP(6) WITH LOCAL TIME ZONE"
    assert types["r"] == {"type": "ROW", "fields": [
        {"id": 7, "name": "a", "type": "INT NOT NULL"},
        {"id": 8, "name": "b", "type": {"type": "ARRAY", "element": "DECIMAL(10, 2)"}},
        {"id": 9, "name": "c", "type": {"type": "ROW", "fields": [
            {"id": 10, "name": "x", "type": "STRING"}, {"id": 11, "name": "y", "type": "TIME(3)"}]}}]}
    assert types["m"] == {"type": "MAP", "key": "STRING", "value": {"type": "ROW", "fields": [
        {"id": 13, "name": "p", "type": "BIGINT"}]}}
    assert [f.id for f in schema.fields] == [0, 1, 2, 3, 4, 5, 6, 12, 14]
    assert schema.highest_field_id == 14
    assert schema.field("id").description == "the id"
    # The same Arrow schema without the metadata numbers every field identically.
    plain = pa.schema([pa.field(f.name, f.type, f.nullable) for f in declared_schema()])
    from_arrow = create_schema(plain, primary_keys=["id"], options={"bucket": "1"})
    assert [(f.id, f.name) for f in from_arrow.fields] == [(f.id, f.name) for f in schema.fields]
    def all_ids(fields: tuple[DataField, ...]) -> list[tuple[int, str]]:
        return [(g.id, g.name) for f in fields for g in (f, *nested_fields(f.type))]
    assert all_ids(from_arrow.fields) == all_ids(schema.fields)
    assert from_arrow.highest_field_id == schema.highest_field_id


def test_declared_types_matching_arrow_defaults_give_the_same_schema_as_plain_arrow() -> None:
    declared = pa.schema([arrow_field_for("id", "BIGINT NOT NULL"), arrow_field_for("s", "STRING"),
                          arrow_field_for("d", "DECIMAL(10, 2)"), arrow_field_for("t", "TIMESTAMP(6)"),
                          arrow_field_for("r", "ROW<x INT, y ARRAY<BYTES>>")])
    plain = pa.schema([pa.field("id", pa.int64(), False), ("s", pa.string()), ("d", pa.decimal128(10, 2)),
                       ("t", pa.timestamp("us")),
                       ("r", pa.struct([("x", pa.int32()), ("y", pa.list_(pa.binary()))]))])
    a, b = create_schema(declared), create_schema(plain)
    assert a.fields == b.fields and a.highest_field_id == b.highest_field_id


@pytest.mark.parametrize(("field", "problem"), [
    (pa.field("c", pa.int32(), metadata={PAIMON_TYPE_KEY: b'"BIGINT"'}),
     "column 'c' of table db.t declares Paimon type \"BIGINT\", stored as Arrow int64, but the Arrow "
     "field is int32"),
    (arrow_field_for("c", "INT NOT NULL").with_nullable(True),
     "stored as Arrow int32 not null, but the Arrow field is int32"),
    (pa.field("c", pa.struct([("a", pa.int32())]),
              metadata={PAIMON_TYPE_KEY: json.dumps(type_to_json(parse_type_name("ROW<a BIGINT>"))).encode()}),
     "stored as Arrow struct<a: int64>, but the Arrow field is struct<a: int32>"),
    (pa.field("c", pa.string(), metadata={PAIMON_TYPE_KEY: b"VARCHAR(20)"}), "cannot be read"),
    (pa.field("c", pa.string(), metadata={PAIMON_TYPE_KEY: b'{"type": "ARRAY"}'}), "cannot be read"),
    (pa.field("c", pa.decimal128(38, 2), metadata={PAIMON_TYPE_KEY: b'"DECIMAL(40, 2)"'}),
     "DECIMAL precision must be between 1 and 38"),
])
def test_create_schema_refuses_declared_types_that_do_not_fit(field: pa.Field, problem: str) -> None:
    with pytest.raises(SchemaError) as info:
        create_schema(pa.schema([field]), table="db.t")
    assert "column 'c' of table db.t" in str(info.value)
    assert problem in str(info.value)


def test_catalog_stores_exact_types_and_reads_back_rows(tmp_path: Path) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=declared_schema(), primary_keys=["id"],
                                 options={"bucket": "1"})
    stored = json.loads((tmp_path / "db.db" / "t" / "schema" / "schema-0").read_text())
    fields = {f["name"]: f for f in stored["fields"]}
    assert fields["id"] == {"id": 0, "name": "id", "type": "BIGINT NOT NULL", "description": "the id"}
    assert fields["code"]["type"] == "CHAR(3)" and fields["name"]["type"] == "VARCHAR(20)"
    assert fields["ts"]["type"] == "TIMESTAMP(3)"
    assert [(g["id"], g["name"]) for g in fields["r"]["type"]["fields"]] == [(7, "a"), (8, "b"), (9, "c")]
    assert [(g["id"], g["name"]) for g in fields["r"]["type"]["fields"][2]["type"]["fields"]] == [
        (10, "x"), (11, "y")]
    assert stored["highestFieldId"] == 14

    arrow = table.schema.arrow_schema()
    rows = pa.Table.from_pylist([
        {"id": 1, "code": "abc", "name": "Ada", "amount": Decimal("12.50"),
         "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 6000), "ltz": dt.datetime(2024, 1, 2, tzinfo=dt.UTC),
         "r": {"a": 7, "b": [Decimal("1.25"), None], "c": {"x": "s", "y": dt.time(1, 2, 3)}},
         "m": [("k", {"p": 5})], "tags": ["x", "y"]},
        {"id": 2, "code": None, "name": "Grace", "amount": None, "ts": None, "ltz": None,
         "r": {"a": 1, "b": [], "c": None}, "m": None, "tags": None},
    ], schema=arrow)
    table.write(rows)
    got = table.read().sort_by("id")
    assert got.schema.equals(arrow)
    assert got.equals(rows)

    with pytest.raises(SchemaError, match="is VARCHAR\\(20\\)"):
        table.write(rows.set_column(2, "name", pa.array(["x" * 21, "ok"])))
    with pytest.raises(SchemaError, match="is CHAR\\(3\\)"):
        table.write(rows.set_column(1, "code", pa.array(["abcd", None], pa.string())))
    assert table.read().num_rows == 2


def test_a_mismatched_declared_type_writes_nothing(tmp_path: Path) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    field = pa.field("c", pa.int32(), metadata={PAIMON_TYPE_KEY: b'"VARCHAR(20)"'})
    with pytest.raises(SchemaError, match="column 'c' of table db.t declares Paimon type"):
        catalog.create_table("db.t", schema=pa.schema([field]))
    assert not (tmp_path / "db.db" / "t").exists()


def test_public_api_exports() -> None:
    assert pc.parse_type_name is parse_type_name and pc.arrow_field_for is arrow_field_for
    assert {"parse_type_name", "arrow_field_for"} <= set(pc.__all__)
