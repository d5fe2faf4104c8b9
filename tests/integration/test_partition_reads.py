"""Reads of partitioned tables (append, and primary-key merged reads) whose filter and projection
touch partition columns.

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


def picks(rng: np.random.Generator, n: int, values: list, nulls: float = 0.0) -> list:
    """``n`` values drawn from ``values``, each null with probability ``nulls``."""
    return [None if rng.random() < nulls else values[int(rng.integers(len(values)))] for _ in range(n)]


def rows(seed: int, n: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"v": picks(rng, n, list(range(-5, 6)), 0.1), "s": picks(rng, n, ["a", "b", "c"], 0.1),
                     "dt": picks(rng, n, DAYS, 0.15), "h": picks(rng, n, HOURS, 0.15),
                     "ts": picks(rng, n, STAMPS, 0.1)}, schema=SCHEMA)


def warehouse(tmp_path_factory: pytest.TempPathFactory) -> pc.Catalog:
    catalog = pc.Catalog(str(tmp_path_factory.mktemp("warehouse")))
    catalog.create_database("db")
    return catalog


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[pc.Table, pa.Table]]:
    catalog = warehouse(tmp_path_factory)
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


# ---- primary-key tables: the same settling in merged reads -------------------------------------------

PK_SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.int64()), ("s", pa.string()),
                       pa.field("dt", pa.date32(), nullable=False), pa.field("h", pa.int32(), nullable=False),
                       pa.field("ts", pa.timestamp("ms"), nullable=False), ("rk", pa.string())])
PK_LAYOUTS = {"deduplicate": {"bucket": "2", "rowkind.field": "rk"},
              "partial-update": {"bucket": "1", "merge-engine": "partial-update"},
              "sequence-field": {"bucket": "1", "sequence.field": "v", "file.format": "orc"}}
PK_KEY = ["dt", "h", "ts", "k"]


def pk_rows(seed: int, n: int, layout: str) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = rng.choice(40, size=n, replace=False)
    deletes = layout == "deduplicate" and seed > 0
    return pa.table({"k": keys, "v": picks(rng, n, list(range(-5, 6)), 0.1), "s": picks(rng, n, ["a", "b", "c"], 0.2),
                     "dt": picks(rng, n, DAYS), "h": picks(rng, n, HOURS), "ts": picks(rng, n, STAMPS),
                     "rk": ["-D" if deletes and rng.random() < 0.2 else "+I" for _ in range(n)]}, schema=PK_SCHEMA)


def merged_model(commits: list[pa.Table], layout: str) -> pa.Table:
    """Each key's row after the commits, one record at a time (the merge engines' rules)."""
    current: dict[tuple, dict] = {}
    for commit in commits:
        for row in commit.to_pylist():
            key = tuple(row[c] for c in PK_KEY)
            old = current.get(key)
            if layout == "deduplicate":
                current[key] = row
            elif layout == "partial-update":
                current[key] = row if old is None else {c: old[c] if row[c] is None else row[c] for c in row}
            elif old is None or (row["v"] is not None and (old["v"] is None or row["v"] >= old["v"])):
                current[key] = row  # sequence.field: the larger v wins, a null v is the smallest
    kept = [r for r in current.values() if r["rk"] != "-D"]
    return pa.Table.from_pylist(kept, schema=PK_SCHEMA)


@pytest.fixture(scope="module")
def pk_tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[pc.Table, pa.Table]]:
    catalog = warehouse(tmp_path_factory)
    out = {}
    for name, options in PK_LAYOUTS.items():
        table = catalog.create_table(f"db.{name}", schema=PK_SCHEMA, primary_keys=PK_KEY,
                                     partition_keys=PARTITION_KEYS, options={**options, "write-only": "true"})
        written = [pk_rows(seed, 30, name) for seed in range(5)]
        for seed, part in enumerate(written):
            table.write(part)
            if seed == 2:  # compacted files (read without a merge) below level-0 ones
                table.compact(full=True)
        out[name] = (table, merged_model(written, name))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=st.sampled_from(sorted(PK_LAYOUTS)), filters=st.one_of(st.none(), FILTERS),
       columns=st.one_of(st.none(), st.lists(st.sampled_from(PK_SCHEMA.names[:-1]), min_size=1, max_size=5,
                                             unique=True)))
def test_partition_conditions_settled_in_merged_reads(pk_tables: dict, layout: str, filters: list | None,
                                                      columns: list[str] | None) -> None:
    table, merged = pk_tables[layout]
    predicate = parse_filter(filters, table.schema, table.name) if filters else None
    want = (merged if predicate is None else merged.filter(predicate.to_expression())).select(
        columns or PK_SCHEMA.names)
    got = table.read(columns=columns, filter=filters)
    assert got.schema.names == want.schema.names
    assert canonical(got).equals(canonical(want.cast(got.schema)))
    streamed = pa.Table.from_batches(list(table.to_batches(columns=columns, filter=filters)), schema=got.schema)
    assert canonical(streamed).equals(canonical(got))
