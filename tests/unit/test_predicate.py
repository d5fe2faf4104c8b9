"""Filters: parsing errors, exact Arrow expressions, and pruning that never drops a match."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.binary_row import arrow_scalar_to_internal
from paimon_core.errors import SchemaError
from paimon_core.read.predicate import ColumnRange, Leaf, parse_filter, residual
from paimon_core.schema import create_schema

SCHEMA = create_schema(pa.schema([("id", pa.int64()), ("s", pa.string()), ("d", pa.date32()),
                                  ("ts", pa.timestamp("us"))]))


@pytest.mark.parametrize(("filters", "text"), [
    ([("nope", "=", 1)], "not a column"), ([("id", "~", 1)], "unknown filter operator"),
    ([("id", "=", "abc")], "does not fit"), ([("id", "in", 5)], "needs a list"),
    ([("id", "=", None)], "is null"), ("id = 1", "must be a list"), ([("id", "=", 1), [("id", "=", 2)]], "mixes"),
])
def test_bad_filters(filters: object, text: str) -> None:
    with pytest.raises(SchemaError, match=text):
        parse_filter(filters, SCHEMA, "db.t")


def test_expression_matches_pyarrow_semantics() -> None:
    table = pa.table({"id": [1, 2, None, 4], "s": ["a", None, "c", "d"],
                      "d": [datetime.date(2024, 1, i) for i in range(1, 5)],
                      "ts": [datetime.datetime(2024, 1, 1, i) for i in range(4)]})
    predicate = parse_filter([[("id", ">=", 2), ("s", "is not null")], [("d", "=", "2024-01-01")]],
                             SCHEMA, "db.t")
    assert predicate is not None
    assert table.filter(predicate.to_expression())["id"].to_pylist() == [1, 4]
    not_in = parse_filter([("id", "not in", [1, 4])], SCHEMA, "db.t")
    assert not_in is not None and table.filter(not_in.to_expression())["id"].to_pylist() == [2]


OPS = ["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.integers(-20, 20)), min_size=1, max_size=12),
       op=st.sampled_from(OPS), literal=st.integers(-22, 22),
       literals=st.lists(st.integers(-22, 22), min_size=1, max_size=3))
def test_pruning_never_drops_a_matching_file(values: list, op: str, literal: int, literals: list) -> None:
    value = literals if op in ("in", "not in") else literal
    term = ("id", op) if op.startswith("is") else ("id", op, value)
    predicate = parse_filter([term], SCHEMA, "db.t")
    assert predicate is not None
    column = pa.array(values, pa.int64())
    present = [v for v in values if v is not None]
    known = ColumnRange(min(present, default=None), max(present, default=None),
                        column.null_count, len(values))
    matches = pa.table({"id": column}).filter(predicate.to_expression()).num_rows
    if matches:
        assert predicate.may_match({"id": known}.get)


def test_internal_literals_for_temporal_columns() -> None:
    predicate = parse_filter([("ts", ">", datetime.datetime(2024, 1, 1, 12))], SCHEMA, "db.t")
    assert predicate is not None
    nanos = arrow_scalar_to_internal(pa.scalar(datetime.datetime(2024, 1, 1, 13), pa.timestamp("us")),
                                     SCHEMA.field("ts").type)
    assert predicate.may_match({"ts": ColumnRange(nanos, nanos, 0, 1)}.get)
    assert not predicate.may_match({"ts": ColumnRange(0, 0, 0, 1)}.get)
    day = parse_filter([("d", "=", "2024-01-02")], SCHEMA, "db.t")
    assert day is not None and day.may_match({"d": ColumnRange(19723, 19724, 0, 2)}.get)
    assert not day.may_match({"d": ColumnRange(19730, 19731, 0, 2)}.get)


def test_unknown_ranges_never_prune() -> None:
    predicate = parse_filter([("s", "=", "x")], SCHEMA, "db.t")
    assert predicate is not None
    assert predicate.may_match({}.get)
    assert predicate.may_match({"s": ColumnRange(None, None, None, None)}.get)
    assert not predicate.may_match({"s": ColumnRange(None, None, 5, 5)}.get)
    assert pc.field("s") is not None


def _term(column: str, op: str, literal: int, literals: list[int]) -> tuple:
    if op.startswith("is"):
        return (column, op)
    return (column, op, literals if op in ("in", "not in") else literal)


TERMS = st.builds(_term, st.sampled_from(["id", "p"]), st.sampled_from(OPS), st.integers(-3, 3),
                  st.lists(st.integers(-3, 3), min_size=1, max_size=3))
PARTITIONED = create_schema(pa.schema([("id", pa.int64()), ("p", pa.int64())]), partition_keys=["p"])


@settings(max_examples=400, deadline=None)
@given(part=st.one_of(st.none(), st.integers(-3, 3)),
       ids=st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=1, max_size=8),
       groups=st.lists(st.lists(TERMS, min_size=1, max_size=3), min_size=1, max_size=3))
def test_residual_keeps_the_rows_the_filter_keeps(part: int | None, ids: list, groups: list) -> None:
    """Within one partition, the filter with its partition conditions settled by the partition's
    value keeps exactly the rows the whole filter keeps (nulls, NOT IN and ORs included)."""
    predicate = parse_filter(groups, PARTITIONED, "db.t")
    assert predicate is not None
    rows = pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([part] * len(ids), pa.int64())})
    one = rows.slice(0, 1).select(["p"])

    def settle(leaf: Leaf) -> bool | None:
        return one.filter(leaf.to_expression()).num_rows == 1 if leaf.column == "p" else None

    rest = residual(predicate, settle)
    want = rows.filter(predicate.to_expression())
    if isinstance(rest, bool):
        assert want.num_rows == (rows.num_rows if rest else 0)
    else:
        assert "p" not in rest.columns()
        assert rows.filter(rest.to_expression()).equals(want)
