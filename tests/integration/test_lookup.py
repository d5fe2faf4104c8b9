"""Primary-key lookups against the full merged read, on real tables.

Every case builds a table from a seeded RNG (upserts with partial rows, deletes), then looks up
random keys (present, absent, repeated, in missing partitions) and requires exactly the rows a
full ``table.read()`` holds for those keys: every merge engine, partitioned or not, fixed and
dynamic buckets, level-0 runs not compacted, fully compacted, and compacted with level-0 runs on
top; deletion vectors; time travel; the cache (reuse, new commits, the memory bound, expiry);
file and row-group pruning; and the errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from paimon_core.errors import OptionError, SchemaError, SnapshotNotFoundError, UnsupportedFeatureError
from paimon_core.read.lookup import TableLookup
from paimon_core.schema import AddColumn, RenameColumn, SetOption

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False),
                    ("name", pa.string()), ("qty", pa.int64()), ("price", pa.float64())])
PK = ["dt", "id"]
DAYS = ["2024-01-01", "2024-01-02"]
ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
    "aggregation": {"merge-engine": "aggregation", "fields.qty.aggregate-function": "sum",
                    "fields.price.aggregate-function": "max", "fields.name.aggregate-function": "last_non_null_value",
                    "aggregation.remove-record-on-delete": "true"},
    "first-row": {"merge-engine": "first-row", "ignore-delete": "true"},
}
KEY_SPACE = 600


class Case:
    """A table and the RNG that fills it, with the helpers every comparison needs."""

    def __init__(self, catalog: pc.Catalog, name: str, *, engine: str = "deduplicate", partitioned: bool = True,
                 bucket: str = "3", seed: int = 0, extra: dict[str, str] | None = None) -> None:
        self.partitioned = partitioned
        self.rng = np.random.default_rng(seed)
        options = {"bucket": bucket, "write-only": "true", "dynamic-bucket.target-row-num": "120",
                   **ENGINES[engine], **(extra or {})}
        self.table = catalog.create_table(f"db.{name}", schema=SCHEMA, primary_keys=PK,
                                          partition_keys=["dt"] if partitioned else [], options=options)

    def days(self, n: int) -> list[str]:
        return list(self.rng.choice(DAYS, n)) if self.partitioned else [DAYS[0]] * n

    def upsert(self, n: int) -> int | None:
        """``n`` rows of random keys; some values null so partial-update and aggregation merge."""
        ids = self.rng.choice(KEY_SPACE, n, replace=False)
        null = self.rng.random(n) < 0.3
        data = pa.table({"dt": self.days(n), "id": ids,
                         "name": pa.array([f"n{int(i)}-{self.rng.integers(99)}" for i in ids], mask=null),
                         "qty": pa.array(self.rng.integers(0, 50, n), mask=self.rng.random(n) < 0.2),
                         "price": self.rng.random(n).round(3)}, schema=SCHEMA)
        return self.table.write(data)

    def delete(self, n: int) -> int | None:
        ids = self.rng.choice(KEY_SPACE, n, replace=False)
        return self.table.delete(pa.table({"dt": self.days(n), "id": ids}))

    def random_keys(self, n: int) -> pa.Table:
        """Present and absent keys, repeated ones and one of a partition that does not exist."""
        ids = self.rng.integers(-5, KEY_SPACE + 5, n)
        days = self.days(n)
        days[0] = "2030-12-31" if self.partitioned else days[0]
        repeat = self.rng.integers(0, n, n // 4)
        return pa.table({"dt": days + [days[i] for i in repeat], "id": np.concatenate([ids, ids[repeat]]),
                         "extra": pa.nulls(n + len(repeat), pa.int8())})  # other columns are ignored


def key_of(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in PK)


def expected(table: pc.Table, keys: pa.Table, *, snapshot_id: int | None = None,
             columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The full read's rows of those keys (row at a time: the reference, not the code under test)."""
    wanted = {key_of(r) for r in keys.select(PK).to_pylist()}
    rows = [r for r in table.read(snapshot_id=snapshot_id).to_pylist() if key_of(r) in wanted]
    rows.sort(key=key_of)
    return [{c: r[c] for c in columns} for r in rows] if columns else rows


def rows_of(result: pa.Table) -> list[dict[str, Any]]:
    rows = result.to_pylist()
    if set(PK) <= set(result.column_names):
        assert len({key_of(r) for r in rows}) == len(rows), "a key came back twice"
        rows.sort(key=key_of)
    return rows


def check(table: pc.Table, lookup: TableLookup | None, keys: pa.Table, **kwargs: Any) -> int:
    """Lookups (one-shot, and through ``lookup``) equal the full read; returns the rows found."""
    want = expected(table, keys, **kwargs)
    columns = kwargs.get("columns")
    one_shot = table.lookup(keys, **kwargs)
    assert one_shot.schema == table.read(columns, snapshot_id=kwargs.get("snapshot_id")).schema
    assert rows_of(one_shot) == want
    if lookup is not None:
        assert rows_of(lookup.lookup(keys, snapshot_id=kwargs.get("snapshot_id"))) == want
    return len(want)


def build(case: Case, shape: str) -> None:
    """``level0``: 5 commits, no compaction; ``compacted``: then one full compaction;
    ``mixed``: a full compaction, then level-0 commits (and deletes) on top."""
    for _ in range(3):
        case.upsert(250)
    case.delete(60)
    if shape == "mixed":
        case.table.compact(full=True)
    case.upsert(200)
    case.delete(40)
    if shape == "compacted":
        case.table.compact(full=True)
    levels = {f.level for f in case.table.files()}
    assert (levels == {0}) if shape == "level0" else (levels - {0} and (shape == "compacted") == (0 not in levels))


# ---- every engine and layout against the full read -----------------------------------------------------


@pytest.mark.parametrize("shape", ["level0", "compacted", "mixed"])
@pytest.mark.parametrize("bucket", ["3", "-1"])
@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_lookups_equal_the_full_read(catalog: pc.Catalog, engine: str, partitioned: bool, bucket: str,
                                     shape: str) -> None:
    seed = [*ENGINES].index(engine) * 100 + partitioned * 10 + len(shape) + int(bucket)
    case = Case(catalog, "t", engine=engine, partitioned=partitioned, bucket=bucket, seed=seed)
    build(case, shape)
    if bucket == "-1":
        assert len({f.bucket for f in case.table.files()}) > 1  # the partition's buckets are all searched
    lookup = case.table.new_lookup()
    found = 0
    for size in (1, 7, 150):
        for _ in range(2):
            found += check(case.table, lookup, case.random_keys(size))
    everything = pa.table({"dt": case.table.read()["dt"], "id": case.table.read()["id"]})
    found += check(case.table, lookup, everything)
    assert found > 0 or (engine == "first-row" and shape == "level0")  # first-row reads skip level 0


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation"])
def test_deletion_vectors(catalog: pc.Catalog, engine: str) -> None:
    case = Case(catalog, "dv", engine=engine, seed=7,
                extra={"deletion-vectors.enabled": "true", "write-only": "false"})
    for _ in range(3):
        case.upsert(250)
    case.table.compact(full=True)
    case.upsert(200)
    case.delete(50)
    # each commit compacts: level 0 goes up, marking replaced rows in the deeper files deleted
    case.table.alter([SetOption("write-only", "true")])
    case.upsert(100)  # not compacted: stays at level 0, which deletion-vector reads leave out
    if engine == "deduplicate":  # the others merge the deeper row into the new one and rewrite it
        assert any(s.deletion_files for s in case.table.plan()), "the table should have deletion vectors"
    assert any(f.level == 0 for f in case.table.files())  # written, not yet visible to reads
    lookup = case.table.new_lookup()
    for size in (1, 20, 300):
        check(case.table, lookup, case.random_keys(size))


def test_time_travel(catalog: pc.Catalog) -> None:
    case = Case(catalog, "tt", engine="partial-update", seed=3)
    snapshots = []
    for step in range(5):
        case.upsert(200) if step != 3 else case.delete(100)
        latest = case.table.latest_snapshot()
        assert latest is not None
        snapshots.append(latest.id)
    case.table.compact(full=True)
    lookup = case.table.new_lookup()
    keys = case.random_keys(200)
    for snapshot_id in snapshots:
        check(case.table, lookup, keys, snapshot_id=snapshot_id)
    check(case.table, lookup, keys)
    with pytest.raises(SnapshotNotFoundError):
        case.table.lookup(keys, snapshot_id=999)


def test_projection_and_key_input_forms(catalog: pc.Catalog) -> None:
    case = Case(catalog, "forms", seed=5)
    build(case, "mixed")
    keys = case.random_keys(40)
    want = expected(case.table, keys, columns=["id", "dt", "qty"])
    assert rows_of(case.table.lookup(keys, columns=["id", "dt", "qty"])) == want
    as_dict = {"dt": keys["dt"].to_pylist(), "id": keys["id"].to_pylist()}
    assert rows_of(case.table.lookup(as_dict, columns=["id", "dt", "qty"])) == want
    assert rows_of(case.table.lookup(keys.to_pandas(), columns=["id", "dt", "qty"])) == want
    assert rows_of(case.table.lookup(keys.to_batches()[0], columns=["id", "dt", "qty"])) == want
    narrow = pa.table({"dt": keys["dt"], "id": keys["id"].cast(pa.int32())})  # castable types are fine
    assert rows_of(case.table.lookup(narrow, columns=["id", "dt", "qty"])) == want
    with_null = pa.table({"dt": ["2024-01-01", None], "id": pa.array([None, 1], pa.int64())})
    assert case.table.lookup(with_null).num_rows == 0  # a null key column matches nothing
    assert case.table.lookup({"dt": [], "id": []}).num_rows == 0


def test_composite_string_and_timestamp_keys(catalog: pc.Catalog) -> None:
    schema = pa.schema([pa.field("region", pa.string(), False), pa.field("at", pa.timestamp("ns"), False),
                        pa.field("user", pa.string(), False), ("v", pa.int64())])
    table = catalog.create_table("db.composite", schema=schema, primary_keys=["region", "at", "user"],
                                 options={"bucket": "2", "write-only": "true"})
    rng = np.random.default_rng(11)
    for _ in range(3):
        n = 300
        table.write(pa.table({"region": rng.choice(["eu", "us", "ápac"], n),
                              "at": pa.array(rng.integers(0, 40, n) * 1_000_000_001, pa.timestamp("ns")),
                              "user": [f"u{x}" for x in rng.integers(0, 30, n)], "v": rng.integers(0, 9, n)},
                             schema=schema))
    pk = ["region", "at", "user"]
    full = table.read()
    lookup = table.new_lookup()
    for size in (1, 50, 400):
        picks = rng.integers(0, full.num_rows, size)
        keys = full.select(pk).take(picks)
        absent = pa.table({"region": ["eu"], "at": pa.array([7], pa.timestamp("ns")), "user": ["nobody"]})
        keys = pa.concat_tables([keys, absent.cast(keys.schema)])
        wanted = {tuple(r.values()) for r in keys.to_pylist()}
        want = sorted((r for r in full.to_pylist() if (r["region"], r["at"], r["user"]) in wanted),
                      key=lambda r: (r["region"], r["at"], r["user"]))
        for got in (table.lookup(keys), lookup.lookup(keys), lookup.lookup(keys)):
            assert sorted(got.to_pylist(), key=lambda r: (r["region"], r["at"], r["user"])) == want
    table.compact(full=True)
    order = [(k, "ascending") for k in pk]
    assert lookup.lookup(full.select(pk)).sort_by(order).equals(table.read().sort_by(order))


def test_schema_evolution_and_orc_files(catalog: pc.Catalog) -> None:
    case = Case(catalog, "evolved", engine="partial-update", seed=9, extra={"file.format": "orc"})
    case.upsert(200)
    case.table.alter([AddColumn("note", pa.string()), RenameColumn("qty", "quantity")])
    evolved = case.table.arrow_schema
    rng = np.random.default_rng(1)
    ids = rng.choice(KEY_SPACE, 150, replace=False)
    case.table.write(pa.table({"dt": case.days(150), "id": ids, "name": [None] * 150, "quantity": ids % 7,
                               "price": [None] * 150, "note": [f"x{i}" for i in ids]}, schema=evolved))
    keys = case.random_keys(120)
    full = case.table.read()
    wanted = {key_of(r) for r in keys.to_pylist()}
    want = sorted((r for r in full.to_pylist() if key_of(r) in wanted), key=key_of)
    assert rows_of(case.table.lookup(keys)) == want
    assert rows_of(case.table.new_lookup().lookup(keys)) == want


# ---- pruning -----------------------------------------------------------------------------------------------


def test_a_key_reads_only_the_file_and_row_group_that_can_hold_it(catalog: pc.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    table = catalog.create_table("db.pruned", schema=schema, primary_keys=["id"],
                                 options={"bucket": "1", "write-only": "true", "write-buffer-size": "256 kb"})
    for run in range(4):  # four level-0 runs over disjoint key ranges
        ids = np.arange(run * 20_000, (run + 1) * 20_000)
        table.write(pa.table({"id": ids, "v": [f"value-{i}" for i in ids]}, schema=schema))
    lookup = TableLookup(table)
    assert lookup.lookup({"id": [25_000]}).to_pylist() == [{"id": 25_000, "v": "value-25000"}]
    assert lookup.stats.files_read == 1  # 1 of 4 files bracket the key
    table.write(pa.table({"id": [0, 79_999], "v": ["new", "new"]}, schema=schema))
    table.compact(full=True)  # one file; the small write buffer makes small row groups
    [split] = table.plan()
    [meta] = split.files
    groups = pq.ParquetFile(table.paths.data_file("", 0, meta.file_name),
                            filesystem=table.file_io.arrow_fs).metadata.num_row_groups
    assert groups > 2
    before = lookup.stats.files_read
    assert lookup.lookup({"id": [79_999, 40_001]}).sort_by("id").to_pylist() == [
        {"id": 40_001, "v": "value-40001"}, {"id": 79_999, "v": "new"}]
    assert lookup.stats.files_read - before <= 2 < groups  # only the row groups of the two keys
    assert lookup.lookup({"id": [-1, 80_000]}).num_rows == 0  # outside the file's key range: nothing read
    assert lookup.stats.files_read - before <= 2


# ---- the cache ---------------------------------------------------------------------------------------------


def test_second_lookup_is_served_from_the_cache(catalog: pc.Catalog) -> None:
    case = Case(catalog, "cached", seed=21)
    build(case, "mixed")
    lookup = case.table.new_lookup()
    keys = case.random_keys(100)
    want = expected(case.table, keys)
    assert rows_of(lookup.lookup(keys)) == want
    first = lookup.stats
    assert first.files_read > 0 and first.plans == 1 and first.cache.bytes > 0
    assert rows_of(lookup.lookup(keys)) == want
    second = lookup.stats
    assert second.files_read == first.files_read and second.plans == 1
    assert second.cache.hits > first.cache.hits


def test_a_new_commit_is_seen_and_unchanged_files_stay_cached(catalog: pc.Catalog) -> None:
    case = Case(catalog, "fresh", seed=22)
    build(case, "compacted")
    lookup = case.table.new_lookup()
    keys = case.random_keys(80)
    check(case.table, lookup, keys)
    before = lookup.stats
    present = case.table.read().slice(0, 5)
    case.table.write(present.set_column(2, "name", pa.array(["changed"] * 5)))
    got = rows_of(lookup.lookup(present.select(PK)))
    assert [r["name"] for r in got] == ["changed"] * 5
    after = lookup.stats
    assert after.plans == 2 and after.snapshot_id == case.table.latest_snapshot().id  # type: ignore[union-attr]
    assert after.files_read - before.files_read <= len(present)  # the new level-0 files, not the old ones again
    case.delete(KEY_SPACE // 2)
    case.table.compact(full=True)
    check(case.table, lookup, keys)  # compaction replaced every file: planned again, still exact


def test_eviction_keeps_memory_under_the_configured_bound(catalog: pc.Catalog) -> None:
    case = Case(catalog, "bounded", seed=23)
    build(case, "level0")
    bound = 48 * 1024
    lookup = case.table.new_lookup(options={"lookup.cache-max-memory-size": "48 kb"})
    assert lookup.cache.max_bytes == bound
    for size in (1, 30, 200, 5, 120):
        check(case.table, lookup, case.random_keys(size))
        assert lookup.cache.bytes <= bound
    assert lookup.stats.cache.evictions > 0
    assert lookup.stats.cache.bytes <= bound
    unbounded = case.table.new_lookup()
    unbounded.lookup(case.random_keys(200))
    assert unbounded.cache.bytes > bound  # the small bound did bind
    tiny = case.table.new_lookup(options={"lookup.cache-max-memory-size": "1 kb"})
    check(case.table, tiny, case.random_keys(50))  # nothing fits: every block is read, none kept
    assert tiny.cache.bytes <= 1024 and tiny.stats.cache.oversized > 0


def test_one_lookup_shared_by_threads(catalog: pc.Catalog) -> None:
    case = Case(catalog, "shared", seed=25)
    build(case, "mixed")
    lookup = case.table.new_lookup(options={"lookup.cache-max-memory-size": "64 kb"})  # evicting meanwhile
    batches = [case.random_keys(40) for _ in range(12)]
    wanted = [expected(case.table, keys) for keys in batches]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda keys: rows_of(lookup.lookup(keys)), batches * 3))
    assert got == wanted * 3
    assert lookup.cache.bytes <= 64 * 1024


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_cached_data_expires_after_the_file_retention(catalog: pc.Catalog) -> None:
    case = Case(catalog, "expiring", seed=24)
    build(case, "compacted")
    clock = FakeClock()
    lookup = TableLookup(case.table, options={"lookup.cache-file-retention": "10 min"}, clock=clock)
    keys = case.random_keys(60)
    lookup.lookup(keys)
    read = lookup.stats.files_read
    clock.now = 9 * 60
    lookup.lookup(keys)
    assert lookup.stats.files_read == read  # used within the retention
    clock.now = 30 * 60
    assert rows_of(lookup.lookup(keys)) == expected(case.table, keys)
    assert lookup.stats.files_read > read and lookup.stats.cache.expirations > 0


# ---- errors -----------------------------------------------------------------------------------------------


@pytest.fixture
def keyed(catalog: pc.Catalog) -> Iterator[pc.Table]:
    case = Case(catalog, "keyed", seed=30)
    case.upsert(50)
    yield case.table


def test_an_append_table_has_no_lookups(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.logs", schema=SCHEMA)
    table.write(pa.table({"dt": ["d"], "id": [1], "name": ["x"], "qty": [1], "price": [1.0]}, schema=SCHEMA))
    for attempt in (lambda: table.lookup({"id": [1]}), table.new_lookup):
        with pytest.raises(UnsupportedFeatureError, match=r"table db\.logs has no primary key.*table\.read\(filter"):
            attempt()


def test_bad_keys_name_the_table_the_column_and_the_value(keyed: pc.Table) -> None:
    with pytest.raises(SchemaError, match=r"table db\.keyed lack primary-key column\(s\) \['dt'\]"):
        keyed.lookup({"id": [1, 2]})
    with pytest.raises(SchemaError, match=r"column 'id' of table db\.keyed .*string.*\(value 'abc'\)"):
        keyed.lookup({"dt": ["2024-01-01", "2024-01-01"], "id": [None, "abc"]})
    with pytest.raises(SchemaError, match=r"column 'id' of table db\.keyed .*3\.5"):
        keyed.lookup(pa.table({"dt": ["2024-01-01"], "id": [3.5]}))
    with pytest.raises(SchemaError, match=r"column 'dt' of table db\.keyed .*int64"):
        keyed.lookup({"dt": [20240101], "id": [1]})
    with pytest.raises(SchemaError, match=r"table db\.keyed: column 'id' holds values of mixed.*'x'"):
        keyed.lookup({"dt": ["d", "d"], "id": [1, "x"]})
    with pytest.raises(SchemaError, match=r"lookup keys for table db\.keyed must be"):
        keyed.lookup(42)
    with pytest.raises(SchemaError, match=r"column 'nope' is not in table db\.keyed"):
        keyed.lookup({"dt": ["d"], "id": [1]}, columns=["nope"])
    with pytest.raises(OptionError, match=r"lookup\.cache-max-memory-size.*db\.keyed"):
        keyed.new_lookup(options={"lookup.cache-max-memory-size": "lots"})
