"""The pure decisions of primary-key lookups against brute-force references.

Which partition and bucket a key goes to must be the writers' choice; which files and row groups
are read must never leave out one that holds a key (and should leave out the ones that cannot);
the in-memory key indexes must find exactly the rows holding the keys; the cache must stay within
its byte bound, evict least recently used entries first and expire unused ones.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.binary_row import arrow_scalar_to_internal, serialize_with_arity
from paimon_core.manifest import ManifestFileMeta, SimpleStats
from paimon_core.options import TableOptions
from paimon_core.read import lookup_cache
from paimon_core.read.lookup import buckets_for, files_for_keys, manifest_may_hold, route_keys, row_groups_for_keys
from paimon_core.read.lookup_cache import HashKeyIndex, LookupCache, SortedKeyIndex, build_index, key_ranges
from paimon_core.schema import TableSchema, create_schema
from paimon_core.types import AtomicType
from paimon_core.write.routing import Router

ARROW = pa.schema([pa.field("dt", pa.string(), False), pa.field("a", pa.int32(), False),
                   pa.field("b", pa.string(), False), pa.field("v", pa.float64())])


def schema_of(bucket: str) -> TableSchema:
    return create_schema(ARROW, partition_keys=["dt"], primary_keys=["dt", "a", "b"], options={"bucket": bucket})


def atomic_types(schema: TableSchema, names: list[str]) -> list[AtomicType]:
    out = []
    for name in names:
        data_type = schema.field(name).type
        assert isinstance(data_type, AtomicType)
        out.append(data_type)
    return out


def internal_rows(table: pa.Table, names: list[str], schema: TableSchema) -> list[tuple[Any, ...]]:
    """The reference form: every row as a tuple of internal values (row at a time, on purpose)."""
    types = [schema.field(n).type for n in names]
    return [tuple(arrow_scalar_to_internal(table.column(n)[i], t) for n, t in zip(names, types))
            for i in range(table.num_rows)]


keys_strategy = st.lists(st.tuples(st.sampled_from(["d1", "d2", "d3"]), st.integers(-20, 20),
                                   st.sampled_from(["", "a", "ab", "b", "zzzzzzzzzz", "é"])), min_size=1, max_size=60)


def key_table(rows: list[tuple[str, int, str]]) -> pa.Table:
    distinct = sorted(set(rows))
    return pa.table({"dt": [r[0] for r in distinct], "a": pa.array([r[1] for r in distinct], pa.int32()),
                     "b": [r[2] for r in distinct]}, schema=pa.schema(list(ARROW)[:3]))


# ---- routing ---------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(keys_strategy, st.integers(1, 7))
def test_keys_go_to_the_partition_and_bucket_the_writers_route_them_to(rows: list[tuple[str, int, str]],
                                                                         buckets: int) -> None:
    schema = schema_of(str(buckets))
    options = TableOptions.from_map(schema.options)
    keys = key_table(rows)
    writers = Router(schema, options)  # the write path's router, fixed buckets
    written = {}
    for partition, bucket, part in writers.route(keys.append_column("v", pa.nulls(keys.num_rows, pa.float64()))):
        for row in internal_rows(part, ["a", "b"], schema):
            written[(partition.values, row)] = bucket
    lookups = Router(schema, TableOptions.from_map({**options.raw, "bucket": "-1"}))
    found = {}
    for route in route_keys(keys, lookups):
        chosen = buckets_for(route.keys, ["a", "b"], [schema.field("a").type, schema.field("b").type],
                             buckets, range(buckets))
        for bucket, part in chosen:
            for row in internal_rows(part, ["a", "b"], schema):
                assert (route.partition, row) not in found, "a key was routed to two buckets"
                found[(route.partition, row)] = bucket
    assert found == written


def test_without_a_bucket_count_every_present_bucket_gets_every_key() -> None:
    keys = key_table([("d1", 1, "x"), ("d1", 2, "y")])
    chosen = buckets_for(keys, ["a", "b"], [], None, {5, 0, 3})
    assert [b for b, _ in chosen] == [0, 3, 5] and all(part.num_rows == 2 for _, part in chosen)
    # a hash bucket absent from the partition is not searched at all
    assert buckets_for(keys, ["a", "b"], [schema_of("4").field(n).type for n in "ab"], 4, set()) == []


# ---- files by key range --------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None, derandomize=True)
@given(keys_strategy, st.lists(st.tuples(st.tuples(st.integers(-25, 25), st.sampled_from(["", "a", "b", "zz"])),
                                         st.tuples(st.integers(-25, 25), st.sampled_from(["", "a", "b", "zz"]))),
                               max_size=8))
def test_files_get_exactly_the_keys_their_key_range_holds(rows: list[tuple[str, int, str]],
                                                          files: list[tuple[tuple[int, str], tuple[int, str]]]) -> None:
    schema = schema_of("2")
    keys = key_table(rows)
    keys = keys.sort_by([("a", "ascending"), ("b", "ascending")])
    names = ["a", "b"]
    bounds: list[tuple[tuple[Any, ...], tuple[Any, ...]] | None] = [(min(f), max(f)) for f in files]
    bounds.append(None)  # unknown bounds: every key
    reference = internal_rows(keys, names, schema)
    got = {index: (start, stop) for index, start, stop in
           files_for_keys(keys, names, [schema.field(n).type for n in names], bounds)}
    for index, bound in enumerate(bounds):
        inside = [i for i, key in enumerate(reference) if bound is None or bound[0] <= key <= bound[1]]
        if not inside:
            assert index not in got
        else:
            assert got[index] == (inside[0], inside[-1] + 1), (index, bound)
            assert inside == list(range(inside[0], inside[-1] + 1))  # sorted keys: one slice


def test_string_bounds_compare_as_utf8_bytes_like_arrow_sorts_them() -> None:
    schema = schema_of("1")
    keys = key_table([("d", 1, "a"), ("d", 1, "z"), ("d", 1, "é"), ("d", 1, "😀")]).sort_by(
        [("a", "ascending"), ("b", "ascending")])
    assert keys.column("b").to_pylist() == ["a", "z", "é", "😀"]
    [(_, start, stop)] = files_for_keys(keys, ["a", "b"], [schema.field("a").type, schema.field("b").type],
                                        [((1, "b"), (1, "ö"))])
    assert keys.column("b").to_pylist()[start:stop] == ["z", "é"]


# ---- row groups by statistics --------------------------------------------------------------------------------


def parquet_metadata(table: pa.Table, row_group_size: int) -> pq.FileMetaData:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size, write_statistics=True)
    return pq.ParquetFile(io.BytesIO(sink.getvalue())).metadata


@pytest.mark.parametrize("seed", range(6))
def test_row_groups_read_are_those_that_can_hold_a_key(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 2000
    a = np.sort(rng.choice(10_000, n, replace=False)).astype(np.int32)
    b = np.array([f"s{x:05d}" for x in rng.integers(0, 99_999, n)])
    data = pa.table({"a": a, "b": b, "v": rng.random(n)})
    group_rows = int(rng.integers(50, 400))
    metadata = parquet_metadata(data, group_rows)
    ranges = key_ranges(metadata, ["a", "b"], [pa.int32(), pa.string()])
    assert len(ranges) == metadata.num_row_groups > 1
    edges = np.arange(0, n, group_rows)  # each group's first and last row: the statistics' bounds
    lasts = np.minimum(edges + group_rows, n) - 1
    present = np.unique(np.concatenate([rng.choice(n, 15, replace=False), edges, lasts]))
    absent_a = np.setdiff1d(np.arange(-50, 10_050), a)[rng.choice(10_000 - n + 100, 15, replace=False)]
    keys = pa.table({"a": pa.array(np.concatenate([a[present], absent_a]).astype(np.int32)),
                     "b": pa.array(np.concatenate([b[present], b[:15]]))})
    assert row_groups_for_keys([keys.column("a").slice(0, 1), keys.column("b").slice(0, 1)], ranges) == [0]
    chosen = set(row_groups_for_keys([keys.column("a"), keys.column("b")], ranges))
    for row in present:  # no false negatives
        assert row // group_rows in chosen
    for group, columns in enumerate(ranges):  # and each choice is justified by the reference box test
        bounds = [(known[0].as_py(), known[1].as_py()) for known in columns if known is not None]
        assert len(bounds) == 2
        fits = any(all(low <= value <= high for value, (low, high) in zip(key, bounds))
                   for key in zip(keys.column("a").to_pylist(), keys.column("b").to_pylist()))
        assert (group in chosen) == fits


def test_only_exact_statistics_are_trusted() -> None:
    data = pa.table({"i": pa.array([3, 9], pa.int64()), "s": ["b", "q"], "d": pa.array([1, 2], pa.date32()),
                     "t": pa.array([5, 7], pa.timestamp("ns")), "f": [1.5, 2.5],
                     "m": pa.array([1, 2], pa.decimal128(10, 2)), "x": ["no", "stats"]})
    metadata = parquet_metadata(data, 10)
    types = [data.schema.field(n).type for n in ["i", "s", "d", "t", "f", "m"]]
    [(i, s, d, t, f, m)] = key_ranges(metadata, ["i", "s", "d", "t", "f", "m"], types)
    assert i is not None and s is not None and d is not None and t is not None
    assert [v.as_py() for v in i] == [3, 9] and [v.as_py() for v in s] == ["b", "q"]
    assert d == (pa.scalar(1, pa.int32()).cast(pa.date32()), pa.scalar(2, pa.int32()).cast(pa.date32()))
    assert t[0].value == 5 and t[1].value == 7  # nanoseconds kept exactly, not rounded through datetime
    assert f is None and m is None  # floats and decimals: no pruning rather than a converted bound
    # a column stored with another type than the key's now (schema evolution) is not trusted either
    [(widened,)] = key_ranges(metadata, ["i"], [pa.int32()])
    assert widened is None
    assert row_groups_for_keys([pa.array([1])], [(None,)]) == [0]


# ---- manifests by partition ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["a", "b", "c"])), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["a", "b", "c"])), min_size=1, max_size=4))
def test_manifests_are_skipped_only_when_their_partition_range_excludes_every_wanted_partition(
        held: list[tuple[int, str]], wanted: list[tuple[int, str]]) -> None:
    types = [create_schema(pa.schema([pa.field("p", pa.int32(), False), pa.field("q", pa.string(), False),
                                      ("k", pa.int64())]), partition_keys=["p", "q"]).field(n).type for n in "pq"]
    lows = (min(h[0] for h in held), min(h[1] for h in held))
    highs = (max(h[0] for h in held), max(h[1] for h in held))
    meta = ManifestFileMeta("m", 1, 1, 0, SimpleStats(serialize_with_arity(lows, types),
                                                      serialize_with_arity(highs, types), (0, 0)), 0)
    expected = any(lows[0] <= p <= highs[0] and lows[1] <= q <= highs[1] for p, q in wanted)
    assert manifest_may_hold(meta, wanted, types) == expected
    assert manifest_may_hold(meta, held[:1], types)  # a held partition is never skipped


# ---- key indexes ---------------------------------------------------------------------------------------------


def reference_find(block: pa.Table, keys: pa.Table, names: list[str]) -> list[int]:
    wanted = set(zip(*(keys.column(n).to_pylist() for n in names)))
    return [i for i, row in enumerate(zip(*(block.column(n).to_pylist() for n in names))) if row in wanted]


@pytest.mark.parametrize("seed", range(4))
def test_key_indexes_find_exactly_the_rows_of_the_keys(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    schema = schema_of("1")
    types = atomic_types(schema, ["a", "b"])
    a = np.sort(rng.choice(100_000, 3000, replace=False)).astype(np.int32)
    block = lookup_cache.Block(pa.table({"a": a, "b": [f"k{x % 97}" for x in a]}), 0)
    probe_rows = rng.choice(3000, 40, replace=False)
    keys = pa.table({"a": pa.array(np.concatenate([a[probe_rows], rng.integers(0, 100_000, 40)]).astype(np.int32)),
                     "b": [f"k{x % 97}" for x in a[probe_rows]] + ["nope"] * 20 + [f"k{x % 97}" for x in a[:20]]})
    expected = reference_find(block.rows, keys, ["a", "b"])
    assert sorted(block.find(keys, ["a", "b"], types).tolist()) == expected  # one-off probe, no index
    block.index = build_index([block.rows.column("a"), block.rows.column("b")], types)
    assert isinstance(block.index, HashKeyIndex)
    assert block.find(keys, ["a", "b"], types).tolist() == expected
    one = pa.table({"a": keys.column("a")})
    single = lookup_cache.Block(block.rows.select(["a"]), 0, build_index([block.rows.column("a")], types[:1]))
    assert isinstance(single.index, SortedKeyIndex)
    assert single.find(one, ["a"], types[:1]).tolist() == reference_find(single.rows, one, ["a"])
    # colliding hashes (here: only 3 distinct) must still give exact matches
    real = lookup_cache.hash_arrow_rows
    monkeypatch.setattr(lookup_cache, "hash_arrow_rows", lambda columns, ts: real(columns, ts) % 3)
    colliding = build_index([block.rows.column("a"), block.rows.column("b")], types)
    rows, _ = colliding.find([keys.column("a"), keys.column("b")])
    assert sorted(rows.tolist()) == expected


def test_an_unsorted_integer_key_falls_back_to_the_hash_index() -> None:
    schema = schema_of("1")
    index = build_index([pa.array([5, 3, 9], pa.int32())], atomic_types(schema, ["a"]))
    assert isinstance(index, HashKeyIndex)
    rows, _ = index.find([pa.array([9, 4, 3], pa.int32())])
    assert sorted(rows.tolist()) == [1, 2]


# ---- the cache ------------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_cache_stays_within_its_bound_and_evicts_least_recently_used_first() -> None:
    cache = LookupCache(10_000, None)
    for i in range(5):
        assert cache.put(i, f"v{i}", 1500)
        assert cache.bytes <= 10_000
    assert cache.get(0) == "v0"  # 0 is now the most recently used
    cache.put(5, "v5", 1500)
    assert cache.get(1) is None and cache.get(0) == "v0" and cache.get(5) == "v5"
    assert cache.stats.evictions >= 1 and cache.bytes <= 10_000
    assert not cache.put("huge", "x", 20_000) and cache.stats.oversized == 1 and cache.get("huge") is None
    assert not cache.accepts(10_000) and cache.accepts(100)
    off = LookupCache(0, None)
    assert not off.put("k", "v", 1) and off.bytes == 0


def test_cache_entries_expire_after_the_retention_without_use() -> None:
    clock = FakeClock()
    cache = LookupCache(1 << 20, 60.0, clock=clock)
    cache.put("a", 1, 10)
    cache.put("b", 2, 10)
    clock.now = 50
    assert cache.get("a") == 1  # used: its retention starts again
    clock.now = 100
    assert cache.get("b") is None and cache.get("a") == 1
    assert cache.stats.expirations == 1 and len(cache) == 1
    clock.now = 1000
    assert cache.get("a") is None and cache.bytes == 0
