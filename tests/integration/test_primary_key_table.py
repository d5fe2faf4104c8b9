"""Primary-key tables end to end on real files: the LSM write path, row kinds and merge-on-read."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from paimon_core.binary_row import deserialize_with_arity
from paimon_core.errors import RowKindError, SchemaError
from paimon_core.keyvalue import SEQUENCE_NUMBER, VALUE_KIND
from tests.integration.conftest import files_under

ORDERS = pa.schema([pa.field("id", pa.int64(), nullable=False), ("status", pa.string()),
                    ("amount", pa.float64()), ("version", pa.int64())])


def orders(ids: list[int], status: str = "new", version: int = 0) -> pa.Table:
    return pa.table({"id": ids, "status": [status] * len(ids), "amount": [float(i) for i in ids],
                     "version": [version] * len(ids)}, schema=ORDERS)


def pk_table(catalog: pc.Catalog, name: str = "db.orders", **options: str) -> pc.Table:
    return catalog.create_table(name, schema=ORDERS, primary_keys=["id"],
                                options={"bucket": "2", **options})


def data_file(table: pc.Table, name: str) -> Path:
    return next(Path(table.path).rglob(name))


def test_file_layout_and_metadata(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    table.write(orders([5, 1, 3, 9]))
    table.write(pa.concat_tables([orders([3], "paid")]), row_kind="+U")
    table.delete(pa.table({"id": [9]}))
    files = {f.file_name: f for f in table.files()}
    entries = [e for s in table.plan() for e in s.files]
    assert len(entries) == len(files) and all(f.level == 0 for f in files.values())
    first = min(entries, key=lambda m: m.min_sequence_number)
    arrow = pq.read_table(data_file(table, first.file_name))
    assert arrow.column_names == ["_KEY_id", SEQUENCE_NUMBER, VALUE_KIND, "id", "status", "amount", "version"]
    assert arrow.schema.field("_KEY_id").metadata[b"PARQUET:field_id"] == str(1073741823).encode()
    keys = arrow.column("_KEY_id").to_pylist()
    assert keys == sorted(keys) and deserialize_with_arity(first.min_key, [table.schema.field("id").type]) == (
        keys[0],)
    delete_file = next(m for m in entries if m.delete_row_count)
    assert delete_file.delete_row_count == 1 and delete_file.row_count == 1
    assert sorted(table.read().column("id").to_pylist()) == [1, 3, 5]


def test_sequence_numbers_increase_per_bucket_across_writers(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    for version in range(3):
        table.write(orders(list(range(20)), version=version))
    for split in table.plan():
        ranges = sorted((f.min_sequence_number, f.max_sequence_number) for f in split.files)
        for (_, high), (low, _) in itertools.pairwise(ranges):
            assert low == high + 1, ranges
    assert set(table.read().column("version").to_pylist()) == {2}


def test_one_write_numbers_each_bucket_in_arrival_order(catalog: pc.Catalog) -> None:
    """Rows of one write call, duplicate keys included, are sorted per bucket as they are
    routed: each bucket's rows still get 0, 1, 2, ... in the order they arrived, and the
    newest version of a key is the one kept."""
    table = pk_table(catalog, **{"bucket": "3"})
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 400, 3000).tolist()
    table.write(pa.table({"id": ids, "status": [str(i) for i in range(len(ids))], "amount": [0.0] * len(ids),
                          "version": list(range(len(ids)))}, schema=ORDERS))
    for split in table.plan():
        (meta,) = split.files
        stored = pq.read_table(data_file(table, meta.file_name))
        keys = stored.column("id").to_pylist()
        assert keys == sorted(set(keys))
        in_bucket = set(keys)
        arrivals = [i for i in ids if i in in_bucket]  # this bucket's rows, in arrival order
        last = {key: rank for rank, key in enumerate(arrivals)}
        assert stored.column(SEQUENCE_NUMBER).to_pylist() == [last[k] for k in keys]
        assert (meta.min_sequence_number, meta.max_sequence_number) == (min(last.values()), len(arrivals) - 1)
    newest = {key: position for position, key in enumerate(ids)}
    result = table.read()
    assert dict(zip(result.column("id").to_pylist(), result.column("version").to_pylist())) == newest


def test_sequence_field_orders_versions_within_one_write(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"sequence.field": "version"})
    table.write(pa.concat_tables([orders([1, 2], "late", version=5), orders([1], "stale", version=3),
                                  orders([2], "newer", version=6)]))
    assert {r["id"]: r["status"] for r in table.read().to_pylist()} == {1: "late", 2: "newer"}


def test_spilled_commit_is_one_sorted_run_and_bounded(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"write-buffer-size": "64 kb", "bucket": "1"})
    rng = np.random.default_rng(1)
    spills_before = set(Path("/tmp").glob("paimon-spill-*"))
    with table.new_write() as writer:
        peak = 0
        expected: dict[int, int] = {}
        for version in range(30):
            ids = rng.choice(5000, 800, replace=False).tolist()
            writer.write(orders(ids, version=version))
            expected.update(dict.fromkeys(ids, version))
            peak = max(peak, writer.buffered_bytes)
        writer.commit()
    assert peak <= 64 * 1024 + orders(list(range(800))).nbytes
    result = table.read()
    assert dict(zip(result.column("id").to_pylist(), result.column("version").to_pylist())) == expected
    files = table.files()
    bounds = sorted((m.min_key, m.max_key) for s in table.plan() for m in s.files)
    assert len(files) >= 1 and len(bounds) == len(files)
    assert set(Path("/tmp").glob("paimon-spill-*")) <= spills_before, "spill files left behind"


def test_without_spilling_each_buffer_flush_is_a_level0_file(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"write-buffer-size": "32 kb", "write-buffer-spillable": "false", "bucket": "1",
                                 "write-only": "true"})
    with table.new_write() as writer:
        for version in range(10):
            writer.write(orders(list(range(1000)), version=version))
        writer.commit()
    assert len(table.files()) > 1
    assert set(table.read().column("version").to_pylist()) == {9}


def test_sequence_field_orders_updates(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"sequence.field": "version"})
    table.write(orders([1, 2], "late", version=5))
    table.write(orders([1], "stale", version=3))  # written later, but an older version
    table.write(orders([2], "newer", version=6))
    assert {r["id"]: r["status"] for r in table.read().to_pylist()} == {1: "late", 2: "newer"}


def test_rowkind_field_and_errors(catalog: pc.Catalog) -> None:
    schema = pa.schema([*ORDERS, ("op", pa.string())])
    table = catalog.create_table("db.cdc", schema=schema, primary_keys=["id"],
                                 options={"bucket": "2", "rowkind.field": "op"})
    base = orders([1, 2, 3]).append_column("op", pa.array(["+I", "+I", "+I"]))
    table.write(base)
    table.write(orders([2, 2, 3]).append_column("op", pa.array(["-U", "+U", "-D"])))
    assert sorted(table.read().column("id").to_pylist()) == [1, 2]
    before = files_under(Path(table.path))
    with pytest.raises(SchemaError, match="'op'.*'upsert'"):
        table.write(orders([4]).append_column("op", pa.array(["upsert"])))
    assert files_under(Path(table.path)) == before


def test_value_filters_apply_after_the_merge(catalog: pc.Catalog) -> None:
    table = pk_table(catalog)
    table.write(orders([1, 2], "old"))
    table.write(orders([1], "new"))
    assert table.read(filter=[("status", "=", "old")]).column("id").to_pylist() == [2]
    assert table.read(filter=[("status", "=", "new")]).column("id").to_pylist() == [1]
    assert table.read(columns=["status"], filter=[("id", "=", 1)]).to_pylist() == [{"status": "new"}]


def test_key_filters_prune_files(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, bucket="1")
    table.write(orders(list(range(0, 100))))
    table.write(orders(list(range(200, 300))))
    assert sum(len(s.files) for s in table.plan(filter=[("id", ">=", 200)])) == 1
    assert sum(len(s.files) for s in table.plan(filter=[("amount", ">=", 200.0)])) == 2


@pytest.mark.parametrize(("options", "kind", "text"), [
    ({"merge-engine": "partial-update"}, "-D", "partial-update"),
    ({"merge-engine": "first-row"}, "-D", "first-row"),
    ({"merge-engine": "aggregation", "fields.amount.aggregate-function": "max"}, "-U", "'amount'"),
    # lookup changelog wraps the engine (LookupMerge): the refusal must still come from it
    ({"merge-engine": "partial-update", "changelog-producer": "lookup"}, "-U", "partial-update"),
    ({"merge-engine": "aggregation", "fields.amount.aggregate-function": "max", "changelog-producer": "lookup"},
     "-D", "'amount'"),
    ({"merge-engine": "first-row", "changelog-producer": "lookup"}, "-D", "first-row"),
])
def test_retractions_a_merge_engine_refuses_write_nothing(catalog: pc.Catalog, options: dict[str, str],
                                                          kind: str, text: str) -> None:
    table = pk_table(catalog, **options)
    table.write(orders([1]))
    before = files_under(Path(table.path))
    with pytest.raises(RowKindError, match=text):
        table.write(orders([1]), row_kind=kind)
    assert files_under(Path(table.path)) == before


def test_ignore_delete_drops_retractions(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, **{"ignore-delete": "true"})
    table.write(orders([1, 2]))
    assert table.delete(pa.table({"id": [1]})) is None  # nothing left to commit
    assert sorted(table.read().column("id").to_pylist()) == [1, 2]


def test_partition_keys_must_be_in_the_primary_key(catalog: pc.Catalog) -> None:
    schema = pa.schema([*ORDERS, pa.field("dt", pa.string(), nullable=False)])
    with pytest.raises(SchemaError, match="must include the partition keys"):
        catalog.create_table("db.bad", schema=schema, primary_keys=["id"], partition_keys=["dt"])


def test_random_cdc_history_matches_a_dictionary(catalog: pc.Catalog) -> None:
    """Random upserts and deletes over several commits read back exactly as a dict model."""
    table = pk_table(catalog, **{"write-buffer-size": "16 kb"})
    rng = np.random.default_rng(7)
    model: dict[int, tuple[str, int]] = {}
    for commit in range(12):
        with table.new_write() as writer:
            for _ in range(3):
                ids = rng.integers(0, 400, 120).tolist()
                deletes = rng.integers(0, 400, 15).tolist()
                status = f"s{commit}"
                writer.write(orders(ids, status, version=commit))
                model.update(dict.fromkeys(ids, (status, commit)))
                writer.delete(pa.table({"id": deletes}))
                for key in deletes:
                    model.pop(key, None)
            writer.commit()
        got = {r["id"]: (r["status"], r["version"]) for r in table.read().to_pylist()}
        assert got == model, f"after commit {commit}"


@pytest.mark.parametrize("options", [{}, {"changelog-producer": "lookup"}, {"sequence.field": "version"}])
def test_level0_files_merged_by_file_order_match_a_dictionary(catalog: pc.Catalog, options: dict[str, str]) -> None:
    """A deduplicating table's level-0 files are merged by file order (sequence numbers are
    not read), deletes included; ``sequence.field`` takes the full merge. Every state reads
    back as the dict model."""
    table = pk_table(catalog, **{"write-only": "true", **options})
    rng = np.random.default_rng(11)
    model: dict[int, tuple[str, int]] = {}
    for commit in range(8):
        ids = rng.integers(0, 300, 90).tolist()
        table.write(orders(ids, f"s{commit}", version=commit))
        model.update(dict.fromkeys(ids, (f"s{commit}", commit)))
        if commit == 6:
            deletes = rng.integers(0, 300, 20).tolist()
            table.delete(orders(deletes, version=commit))  # whole rows: sequence.field orders them too
            for key in deletes:
                model.pop(key, None)
        got = {r["id"]: (r["status"], r["version"]) for r in table.read().to_pylist()}
        assert got == model, f"after commit {commit}"
        assert len(table.read(filter=[("id", "<", 100)])) == sum(1 for k in model if k < 100)


def test_only_and_ed_key_conditions_are_applied_before_the_merge(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, bucket="1")
    table.write(orders([1, 2, 3], "old"))
    table.write(orders([2], "new"))
    mixed = [[("id", "=", 2), ("status", "=", "old")], [("id", "=", 3)]]
    assert sorted(table.read(filter=mixed).column("id").to_pylist()) == [3]
    assert table.read(filter=[("id", ">=", 2), ("status", "=", "new")]).column("id").to_pylist() == [2]


@pytest.mark.parametrize("options", [
    {"merge-engine": "partial-update"},
    {"merge-engine": "aggregation", "fields.b.aggregate-function": "sum"},
], ids=["partial-update", "aggregation"])
def test_projections_of_lookup_changelog_tables_merge_whole_rows(catalog: pc.Catalog, options: dict[str, str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Engines that combine fields merge whole rows and project after the merge; the lookup
    changelog wraps the engine, so the reader must ask the engine, not its type."""
    from paimon_core.cli.main import main

    schema = pa.schema([pa.field("k", pa.string(), False), ("s", pa.string()), ("b", pa.float64())])
    table = catalog.create_table("db.t", schema=schema, primary_keys=["k"],
                                 options={"bucket": "1", "changelog-producer": "lookup", "write-only": "true",
                                          **options})
    table.write(pa.table({"k": ["a"], "s": ["x"], "b": [1.0]}, schema=schema))
    table.write(pa.table({"k": ["a"], "s": ["y"], "b": [5.0]}, schema=schema))
    b = 6.0 if options["merge-engine"] == "aggregation" else 5.0
    assert table.read().to_pylist() == [{"k": "a", "s": "y", "b": b}]
    assert table.read(columns=["k"]).to_pylist() == [{"k": "a"}]
    assert table.read(columns=["b", "k"]).to_pylist() == [{"b": b, "k": "a"}]
    assert table.to_batches(columns=["s"]).read_all().to_pylist() == [{"s": "y"}]
    assert table.lookup(pa.table({"k": ["a"]}), columns=["b"]).to_pylist() == [{"b": b}]
    warehouse = catalog.warehouse.removeprefix("file://")
    assert main(["--warehouse", warehouse, "read", "db.t", "--columns", "k", "--format", "json"]) == 0
    assert '"a"' in capsys.readouterr().out


def test_sequence_groups_with_remove_record_on_delete_are_refused_as_java_refuses_them(catalog: pc.Catalog) -> None:
    """Java Paimon 0.9 cannot open such a table (its merge function factory refuses it)."""
    with pytest.raises(pc.PaimonError, match="sequence groups and 'partial-update.remove-record-on-delete' conflict"):
        pk_table(catalog, **{"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true",
                             "fields.version.sequence-group": "amount"})
    assert not catalog.table_exists("db.orders")
