"""Reads of partitioned append tables whose filter and projection touch partition columns.

Within a split every row has the split's partition values, so the reader settles the filter's
partition conditions once per partition, reads partition columns only where the rest of the
filter needs them and fills the output's from the value. Every combination must return what
the whole filter, applied to the full table, keeps: null partitions, several partition keys of
several types, ORs that mix partition and value conditions, projections of partition columns
only, Parquet and ORC, bucketed and not, whole reads and streamed batches.
"""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paimon_core as pc
from paimon_core.read.predicate import parse_filter

SCHEMA = pa.schema([("v", pa.int64()), ("s", pa.string()), ("dt", pa.date32()), ("h", pa.int32()),
                    ("ts", pa.timestamp("ms"))])
PARTITION_KEYS = ["dt", "h", "ts"]
DAYS = [datetime.date(2024, 1, d) for d in (1, 2, 3)]
HOURS = [0, 7]
STAMPS = [datetime.datetime(2024, 1, 1, 0, 0, 0, 123000), datetime.datetime(2024, 1, 2)]
LAYOUTS = {"parquet": {"bucket": "-1"}, "orc": {"bucket": "-1", "file.format": "orc"},
           "bucketed": {"bucket": "2", "bucket-key": "v"}}


def rows(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)

    def pick(values: list, nulls: float) -> list:
        return [None if rng.random() < nulls else values[int(rng.integers(len(values)))] for _ in range(n)]

    return pa.table({"v": pick(list(range(-5, 6)), 0.1), "s": pick(["a", "b", "c"], 0.1),
                     "dt": pick(DAYS, 0.15), "h": pick(HOURS, 0.15), "ts": pick(STAMPS, 0.1)}, schema=SCHEMA)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[pc.Table, pa.Table]]:
    catalog = pc.Catalog(str(tmp_path_factory.mktemp("warehouse")))
    catalog.create_database("db")
    out = {}
    for name, options in LAYOUTS.items():
        table = catalog.create_table(f"db.{name}", schema=SCHEMA, partition_keys=PARTITION_KEYS, options=options)
        written = [rows(seed, 300) for seed in range(3)]  # three commits: several files per partition
        for part in written:
            table.write(part)
        out[name] = (table, pa.concat_tables(written))
    return out


def _term(column: str, op: str, pick: int) -> tuple:
    values = {"v": list(range(-6, 7)), "s": ["a", "b", "z"], "dt": [*DAYS, datetime.date(2024, 2, 1)],
              "h": [0, 3, 7], "ts": STAMPS}[column]
    if op.startswith("is"):
        return (column, op)
    if op in ("in", "not in"):
        return (column, op, [values[pick % len(values)], values[(pick + 1) % len(values)]])
    return (column, op, values[pick % len(values)])


OPS = ["=", "!=", "<", "<=", ">", ">=", "in", "not in", "is null", "is not null"]
TERMS = st.builds(_term, st.sampled_from(["v", "s", "dt", "h", "dt", "h", "ts"]), st.sampled_from(OPS),
                  st.integers(0, 12))
FILTERS = st.one_of(st.lists(TERMS, min_size=1, max_size=3),
                    st.lists(st.lists(TERMS, min_size=1, max_size=3), min_size=2, max_size=3))
COLUMNS = st.one_of(st.none(), st.lists(st.sampled_from(SCHEMA.names), min_size=1, max_size=5, unique=True))


def canonical(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=st.sampled_from(sorted(LAYOUTS)), filters=FILTERS, columns=COLUMNS)
def test_partition_conditions_settled_per_partition(tables: dict, layout: str, filters: list,
                                                    columns: list[str] | None) -> None:
    table, data = tables[layout]
    predicate = parse_filter(filters, table.schema, table.name)
    assert predicate is not None
    want = data.filter(predicate.to_expression()).select(columns or SCHEMA.names)
    got = table.read(columns=columns, filter=filters)
    assert got.schema.names == want.schema.names
    assert got.schema.types == want.schema.types
    assert canonical(got).equals(canonical(want.cast(got.schema)))
    streamed = pa.Table.from_batches(list(table.to_batches(columns=columns, filter=filters)), schema=got.schema)
    assert canonical(streamed).equals(canonical(got))


def test_a_projection_of_partition_columns_counts_every_row(tables: dict) -> None:
    for table, data in tables.values():
        got = table.read(columns=["h", "dt"])
        assert got.num_rows == data.num_rows
        assert canonical(got).equals(canonical(data.select(["h", "dt"]).cast(got.schema)))
        assert sum(b.num_rows for b in table.to_batches(columns=["dt"])) == data.num_rows
