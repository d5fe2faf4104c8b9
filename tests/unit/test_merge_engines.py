"""Every merge engine agrees with a record-at-a-time reference on randomized inputs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.errors import RowKindError
from paimon_core.keyvalue import SEQUENCE_NUMBER, VALUE_KIND
from paimon_core.merge import engine_for
from paimon_core.merge.sort import key_groups, merge_order
from paimon_core.options import TableOptions
from paimon_core.schema import create_schema
from tests.unit.merge_reference import (
    Agg,
    AggregationRef,
    PartialUpdateRef,
    RefError,
    deduplicate,
    first_row,
    reduce,
)

ARROW = pa.schema([pa.field("k", pa.int64(), nullable=False), ("g", pa.int32()), ("a", pa.int64()),
                   ("b", pa.string()), ("c", pa.float64())])
COLUMNS = ["k", "g", "a", "b", "c"]


def records_strategy(retracts: bool) -> st.SearchStrategy[dict[int, list[tuple[int, dict[str, Any]]]]]:
    kinds = st.sampled_from([0, 0, 2, 1, 3]) if retracts else st.sampled_from([0, 2])
    value = st.fixed_dictionaries({
        "g": st.one_of(st.none(), st.integers(0, 4)),
        "a": st.one_of(st.none(), st.integers(-50, 50)),
        "b": st.one_of(st.none(), st.sampled_from(["", "x", "y", "zz", " "])),
        "c": st.one_of(st.none(), st.integers(-8, 8).map(float)),
    })
    return st.dictionaries(st.integers(0, 5), st.lists(st.tuples(kinds, value), min_size=1, max_size=6),
                           min_size=1, max_size=5)


def build(per_key: dict[int, list[tuple[int, dict[str, Any]]]], rng_seed: int) -> tuple[pa.Table, dict]:
    """A shuffled key-value table and, per key, its records in merge order."""
    rows, expected = [], {}
    seq = 0
    for key, records in per_key.items():
        expected[key] = []
        for kind, values in records:
            full = {"k": key, **values}
            rows.append({**full, SEQUENCE_NUMBER: seq, VALUE_KIND: kind})
            expected[key].append((kind, seq, full))
            seq += 1
    order = np.random.default_rng(rng_seed).permutation(len(rows))
    shuffled = [rows[i] for i in order]
    schema = pa.schema(list(ARROW) + [pa.field(SEQUENCE_NUMBER, pa.int64(), False),
                                      pa.field(VALUE_KIND, pa.int8(), False)])
    return pa.Table.from_pylist(shuffled, schema=schema), expected


def run_engine(options: dict[str, str], table: pa.Table) -> dict[int, tuple[int, int, dict[str, Any]]]:
    schema = create_schema(ARROW, primary_keys=["k"], options=options)
    engine = engine_for(schema, TableOptions.from_map(options), table="t")
    ordered = merge_order(table, ["k"])
    merged = engine.merge(ordered, key_groups(ordered, ["k"]))
    out = {}
    for row in merged.to_pylist():
        kind, seq = row.pop(VALUE_KIND), row.pop(SEQUENCE_NUMBER)
        out[row["k"]] = (kind, seq, row)
    return out


def assert_same(options: dict[str, str], per_key: dict, merge: Callable[[Any], Any], seed: int) -> None:
    table, expected = build(per_key, seed)
    try:
        want = {k: reduce(recs, merge) for k, recs in expected.items()}
    except RefError:
        with pytest.raises(RowKindError):
            run_engine(options, table)
        return
    got = run_engine(options, table)
    want = {k: v for k, v in want.items() if v is not None}
    assert got.keys() == want.keys()
    for key, (kind, seq, row) in want.items():
        got_kind, got_seq, got_row = got[key]
        assert (got_kind, got_seq) == (kind, seq), (key, expected[key])
        for name in COLUMNS:
            a, b = got_row[name], row[name]
            if isinstance(b, float) and isinstance(a, float):
                assert math.isclose(a, b) or (math.isnan(a) and math.isnan(b)), (key, name, expected[key])
            else:
                assert a == b, (key, name, a, b, expected[key])


SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(per_key=records_strategy(retracts=True), ignore=st.booleans(), seed=st.integers(0, 99))
def test_deduplicate(per_key: dict, ignore: bool, seed: int) -> None:
    options = {"ignore-delete": str(ignore).lower()}
    assert_same(options, per_key, lambda r: deduplicate(r, ignore_delete=ignore), seed)


@SETTINGS
@given(per_key=records_strategy(retracts=True), ignore=st.booleans(), seed=st.integers(0, 99))
def test_first_row(per_key: dict, ignore: bool, seed: int) -> None:
    options = {"merge-engine": "first-row", "ignore-delete": str(ignore).lower()}
    assert_same(options, per_key, lambda r: first_row(r, ignore_delete=ignore), seed)


@SETTINGS
@given(per_key=records_strategy(retracts=True), mode=st.sampled_from(["plain", "ignore", "remove", "groups",
                                                                      "groups-ignore"]),
       seed=st.integers(0, 99))
def test_partial_update(per_key: dict, mode: str, seed: int) -> None:
    options = {"merge-engine": "partial-update"}
    reference = PartialUpdateRef(COLUMNS, not_null={"k"})
    if "ignore" in mode:
        options["ignore-delete"] = "true"
        reference.ignore_delete = True
    if mode == "remove":
        options["partial-update.remove-record-on-delete"] = "true"
        reference.remove_on_delete = True
    if mode.startswith("groups"):
        options["fields.g.sequence-group"] = "b,c"
        reference.groups = [(("g",), ("b", "c"))]
    assert_same(options, per_key, reference, seed)


AGG_CASES = [
    ({"a": "sum", "b": "listagg", "c": "max"}, {"b"}),
    ({"a": "last_value", "b": "last_non_null_value", "c": "min"}, set()),
    ({"a": "first_value", "b": "first_non_null_value", "c": "sum"}, set()),
    ({"a": "max", "b": "listagg", "c": "last_non_null_value"}, {"a", "b"}),
    ({"a": "product", "b": "min", "c": "first_value"}, {"b", "c"}),
    ({"a": "sum", "b": "listagg", "c": "product"}, {"b"}),  # product retracts by division (Java's)
]


@SETTINGS
@given(per_key=records_strategy(retracts=True), case=st.sampled_from(AGG_CASES), remove=st.booleans(),
       seed=st.integers(0, 99))
def test_aggregation(per_key: dict, case: tuple, remove: bool, seed: int) -> None:
    functions, ignore_retract = case
    options = {"merge-engine": "aggregation", "aggregation.remove-record-on-delete": str(remove).lower(),
               "fields.g.aggregate-function": "last_non_null_value"}
    refs = {"k": Agg("primary_key"), "g": Agg("last_non_null_value")}
    for name, function in functions.items():
        options[f"fields.{name}.aggregate-function"] = function
        if name in ignore_retract:
            options[f"fields.{name}.ignore-retract"] = "true"
        refs[name] = Agg(function, ignore_retract=name in ignore_retract)
    if functions.get("a") == "product":  # keep products small and free of division
        per_key = {k: [(kind if kind in (0, 2) else 0, v) for kind, v in recs] for k, recs in per_key.items()}

    def merge(records: Any) -> Any:
        for agg in refs.values():
            agg.initialized = False
        return AggregationRef(refs, remove_on_delete=remove)(records)

    assert_same(options, per_key, merge, seed)


def test_listagg_delimiter_and_distinct() -> None:
    options = {"merge-engine": "aggregation", "fields.b.aggregate-function": "listagg",
               "fields.b.list-agg-delimiter": "|", "fields.b.distinct": "true"}
    per_key = {1: [(0, {"g": None, "a": None, "b": "x|y", "c": None}),
                   (0, {"g": None, "a": None, "b": "y|z| ", "c": None}),
                   (0, {"g": None, "a": None, "b": "x", "c": None})]}
    table, _ = build(per_key, 0)
    assert run_engine(options, table)[1][2]["b"] == "x|y|z"
    options["fields.b.distinct"] = "false"
    assert run_engine(options, table)[1][2]["b"] == "x|y|y|z| |x"


def test_collect_and_merge_map() -> None:
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("l", pa.list_(pa.int32())),
                        ("m", pa.map_(pa.string(), pa.int32()))])
    kv_schema = pa.schema(list(schema) + [pa.field(SEQUENCE_NUMBER, pa.int64(), False),
                                          pa.field(VALUE_KIND, pa.int8(), False)])
    kv = pa.table({"k": [1, 1, 1, 2], "l": [[1, 2], [2, 3], [1], None],
                   "m": [[("a", 1)], [("b", 2)], [("a", 3)], None],
                   SEQUENCE_NUMBER: [0, 1, 2, 3], VALUE_KIND: [0, 0, 1, 0]}, schema=kv_schema)
    base = {"merge-engine": "aggregation", "fields.l.aggregate-function": "collect",
            "fields.m.aggregate-function": "merge_map"}
    for distinct, expected in (("false", [2, 2, 3]), ("true", [2, 3])):
        options = {**base, "fields.l.distinct": distinct}
        table_schema = create_schema(schema, primary_keys=["k"], options=options)
        engine = engine_for(table_schema, TableOptions.from_map(options))
        merged = engine.merge(kv, key_groups(kv, ["k"])).to_pylist()
        assert merged[0]["l"] == expected and dict(merged[0]["m"]) == {"b": 2}
        assert merged[1]["l"] is None
    options = {**base}
    table_schema = create_schema(schema, primary_keys=["k"], options=options)
    adds_only = kv.set_column(4, VALUE_KIND, pa.array([0, 0, 0, 0], pa.int8()))
    merged = engine_for(table_schema, TableOptions.from_map(options)).merge(
        adds_only, key_groups(adds_only, ["k"])).to_pylist()
    assert merged[0]["l"] == [1, 2, 2, 3, 1] and dict(merged[0]["m"]) == {"a": 3, "b": 2}


def test_sum_overflow_is_refused() -> None:
    from paimon_core.errors import AggregationOverflowError

    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.int32())])
    options = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
    kv = pa.table({"k": [1, 1], "v": pa.array([2**31 - 1, 5], pa.int32()), SEQUENCE_NUMBER: [0, 1],
                   VALUE_KIND: pa.array([0, 0], pa.int8())})
    engine = engine_for(create_schema(schema, primary_keys=["k"], options=options), TableOptions.from_map(options))
    with pytest.raises(AggregationOverflowError, match="'v'"):
        engine.merge(kv, key_groups(kv, ["k"]))
