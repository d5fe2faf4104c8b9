"""Paimon type strings (as Java writes them) and the Arrow mapping."""

from __future__ import annotations

import pyarrow as pa
import pytest

from paimon_core.errors import SchemaError, UnsupportedFeatureError
from paimon_core.types import (
    ArrayType,
    AtomicType,
    MapType,
    RowType,
    atomic,
    can_widen,
    from_arrow_type,
    parse_type_string,
    to_arrow_type,
    type_from_json,
    type_to_json,
)

JAVA_SPELLINGS = [
    "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10, 2)",
    "DECIMAL(38, 18)", "CHAR(5)", "VARCHAR(20)", "STRING", "BINARY(4)", "VARBINARY(9)", "BYTES",
    "DATE", "TIME(0)", "TIME(3)", "TIMESTAMP(3)", "TIMESTAMP(6)", "TIMESTAMP(9)",
    "TIMESTAMP(3) WITH LOCAL TIME ZONE", "TIMESTAMP(6) WITH LOCAL TIME ZONE",
    "BIGINT NOT NULL", "STRING NOT NULL", "DECIMAL(5, 0) NOT NULL",
]


@pytest.mark.parametrize("text", JAVA_SPELLINGS)
def test_type_strings_round_trip_exactly(text: str) -> None:
    assert type_to_json(parse_type_string(text)) == text


@pytest.mark.parametrize(("alias", "canonical"), [
    ("INTEGER", "INT"), ("TIMESTAMP_LTZ(3)", "TIMESTAMP(3) WITH LOCAL TIME ZONE"),
    ("TIMESTAMP", "TIMESTAMP(6)"), ("DECIMAL", "DECIMAL(10, 0)"), ("NUMERIC(4, 1)", "DECIMAL(4, 1)"),
    ("TIMESTAMP(6) WITHOUT TIME ZONE", "TIMESTAMP(6)"), ("double precision", "DOUBLE"),
    ("int not null", "INT NOT NULL"), ("VARCHAR(2147483647)", "STRING"),
])
def test_aliases_parse_to_canonical_form(alias: str, canonical: str) -> None:
    assert type_to_json(parse_type_string(alias)) == canonical


def test_nested_types_json_round_trip() -> None:
    doc = {"type": "ROW NOT NULL", "fields": [
        {"id": 5, "name": "a", "type": {"type": "ARRAY", "element": "INT NOT NULL"}},
        {"id": 6, "name": "m", "type": {"type": "MAP", "key": "STRING NOT NULL", "value": "BIGINT"}},
        {"id": 7, "name": "c", "type": "STRING", "description": "comment"}]}
    parsed = type_from_json(doc)
    assert isinstance(parsed, RowType) and not parsed.nullable
    assert isinstance(parsed.fields[0].type, ArrayType) and isinstance(parsed.fields[1].type, MapType)
    assert type_to_json(parsed) == doc


@pytest.mark.parametrize("text", ["VARIANT", "BLOB", "MULTISET<INT>"])
def test_unsupported_types_are_refused(text: str) -> None:
    with pytest.raises((UnsupportedFeatureError, SchemaError)):
        parse_type_string(text)


@pytest.mark.parametrize("text", ["BIGGINT", "DECIMAL(a, b)", ""])
def test_garbage_is_a_schema_error(text: str) -> None:
    with pytest.raises(SchemaError):
        parse_type_string(text)


@pytest.mark.parametrize(("arrow", "text"), [
    (pa.int8(), "TINYINT"), (pa.int16(), "SMALLINT"), (pa.int32(), "INT"), (pa.int64(), "BIGINT"),
    (pa.float32(), "FLOAT"), (pa.float64(), "DOUBLE"), (pa.bool_(), "BOOLEAN"),
    (pa.string(), "STRING"), (pa.large_string(), "STRING"), (pa.binary(), "BYTES"),
    (pa.binary(4), "BINARY(4)"), (pa.decimal128(12, 3), "DECIMAL(12, 3)"), (pa.date32(), "DATE"),
    (pa.time32("ms"), "TIME(3)"), (pa.timestamp("ms"), "TIMESTAMP(3)"),
    (pa.timestamp("us"), "TIMESTAMP(6)"), (pa.timestamp("ns"), "TIMESTAMP(9)"),
    (pa.timestamp("us", tz="UTC"), "TIMESTAMP(6) WITH LOCAL TIME ZONE"), (pa.uint16(), "INT"),
])
def test_arrow_to_paimon(arrow: pa.DataType, text: str) -> None:
    assert type_to_json(from_arrow_type(arrow, True, [0])) == text


def test_arrow_round_trip_of_storage_types() -> None:
    for arrow in (pa.int64(), pa.string(), pa.decimal128(10, 2), pa.timestamp("us"),
                  pa.timestamp("ms", tz="UTC"), pa.date32(), pa.binary()):
        assert to_arrow_type(from_arrow_type(arrow, True, [0])) == arrow


def test_struct_fields_get_ids_from_the_counter() -> None:
    counter = [10]
    row = from_arrow_type(pa.struct([("a", pa.int32()), ("b", pa.list_(pa.struct([("c", pa.string())])))]),
                          True, counter)
    assert isinstance(row, RowType)
    assert [f.id for f in row.fields] == [10, 11]
    assert counter == [13]


@pytest.mark.parametrize(("old", "new", "ok"), [
    ("INT", "BIGINT", True), ("BIGINT", "INT", False), ("INT", "DOUBLE", True),
    ("FLOAT", "DOUBLE", True), ("DOUBLE", "FLOAT", False), ("DECIMAL(10, 2)", "DECIMAL(12, 2)", True),
    ("DECIMAL(10, 2)", "DECIMAL(10, 3)", False), ("VARCHAR(5)", "STRING", True),
    ("STRING", "VARCHAR(5)", False), ("TIMESTAMP(3)", "TIMESTAMP(6)", True), ("INT", "STRING", False),
])
def test_widening_rules(old: str, new: str, ok: bool) -> None:
    assert can_widen(parse_type_string(old), parse_type_string(new)) is ok


def test_atomic_defaults() -> None:
    assert atomic("TIMESTAMP") == AtomicType("TIMESTAMP", (6,))
    assert atomic("integer") == AtomicType("INT", ())
