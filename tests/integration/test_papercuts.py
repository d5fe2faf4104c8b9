"""What a new user runs into first: each used to be accepted silently, mislabelled or surprising;
each now works or gets a typed error naming the fix, and a refusal changes nothing."""

from __future__ import annotations

import datetime as dt
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import paimon_core as paimon
from paimon_core.errors import (
    DatabaseNotFoundError,
    ExpiredStartWarning,
    InvalidArgumentError,
    InvalidNameError,
    InvalidURIError,
    OptionError,
    SchemaError,
    SnapshotExpiredError,
    TableExistsError,
    WarehouseNotFoundError,
    WriterClosedError,
)
from tests.integration.test_bad_input_catalogue import tree_digest

KV = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("dt", pa.string())])


@pytest.fixture
def pk(catalog: paimon.Catalog) -> paimon.Table:
    table = catalog.create_table("db.pk", schema=KV, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "2"})
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"], "dt": ["d1", "d1"]}, schema=KV))
    return table


def test_writes_after_add_column_fill_the_new_nullable_columns(pk: paimon.Table) -> None:
    pk.alter([paimon.AddColumn("note", pa.string()), paimon.AddColumn("score", pa.int32())])
    pk.write(pa.table({"id": [3], "v": ["c"], "dt": ["d1"]}, schema=KV))  # a writer that predates the change
    rows = {r["id"]: r for r in pk.read().to_pylist()}
    assert rows[3] == {"id": 3, "v": "c", "dt": "d1", "note": None, "score": None}
    pk.write(pa.table({"id": [3], "dt": ["d1"], "score": pa.array([7], pa.int32())}))
    assert pk.read(filter=[("id", "=", 3)]).to_pylist() == [{"id": 3, "v": None, "dt": "d1", "note": None,
                                                             "score": 7}]
    before = tree_digest(pk.path)
    with pytest.raises(SchemaError) as raised:
        pk.write(pa.table({"v": ["x"], "dt": ["d1"]}))
    assert "missing ['id']" in str(raised.value) and "db.pk" in str(raised.value)
    assert tree_digest(pk.path) == before


def test_exist_ok_accepts_an_evolved_table_and_refuses_a_real_conflict(catalog: paimon.Catalog,
                                                                       pk: paimon.Table) -> None:
    pk.alter([paimon.AddColumn("note", pa.string())])
    again = catalog.create_table("db.pk", schema=KV, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "2"}, exist_ok=True)
    assert again.schema.field_names == ["id", "v", "dt", "note"]
    other = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64()), ("dt", pa.string())])
    with pytest.raises(TableExistsError) as raised:
        catalog.create_table("db.pk", schema=other, primary_keys=["dt", "id"], partition_keys=["dt"], exist_ok=True)
    assert "v is string, not int64" in str(raised.value) and "alter it" in str(raised.value)
    with pytest.raises(TableExistsError, match="partition keys"):
        catalog.create_table("db.pk", schema=KV, primary_keys=["dt", "id"], exist_ok=True)


def test_a_warehouse_that_does_not_exist_is_named(tmp_path: Path) -> None:
    catalog = paimon.Catalog(str(tmp_path / "typo"))
    with pytest.raises(WarehouseNotFoundError, match="typo does not exist"):
        catalog.list_databases()
    with pytest.raises(DatabaseNotFoundError, match="typo does not exist"):
        catalog.get_table("db.t")
    assert not (tmp_path / "typo").exists()
    catalog.create_database("db")  # a new warehouse still starts with its first database
    assert catalog.list_databases() == ["db"]


@pytest.mark.parametrize(("uri", "words"), [
    ("s3:/bucket/warehouse", ["one slash", "s3://bucket/warehouse"]),
    ("file:/tmp/warehouse", ["one slash", "file://tmp/warehouse"]),
    ("nosuchfs://bucket/warehouse", ["'nosuchfs'", "protocol"]),
])
def test_warehouse_uri_typos(uri: str, words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidURIError) as raised:
        paimon.Catalog(uri)
    for word in words:
        assert word in str(raised.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("name", "words"), [
    ("db.a.b", ["'a.b' contains '.'"]),
    ("db.t$snapshots", ["reserved", ".system('snapshots')"]),
])
def test_names_java_refuses(catalog: paimon.Catalog, name: str, words: list[str]) -> None:
    before = tree_digest(catalog.warehouse_path)
    with pytest.raises(InvalidNameError) as raised:
        catalog.create_table(name, schema=KV)
    for word in words:
        assert word in str(raised.value)
    assert tree_digest(catalog.warehouse_path) == before


def test_compacting_a_partition_or_bucket_without_files_is_refused(pk: paimon.Table) -> None:
    pk.write(pa.table({"id": [1], "v": ["a2"], "dt": ["d1"]}, schema=KV))
    before = tree_digest(pk.path)
    with pytest.raises(OptionError, match=r"partitions \[\{'dt': 'd9'\}\] hold no files"):
        pk.compact({"dt": "d9"})
    with pytest.raises(OptionError, match=r"partitions \['dt=d7'\]"):
        pk.compact("dt=d7")
    with pytest.raises(OptionError) as raised:
        pk.compact({"dt": "d1"}, buckets=[5])
    assert "buckets [5]" in str(raised.value) and "buckets with files: [" in str(raised.value)
    assert tree_digest(pk.path) == before
    assert pk.compact({"dt": "d1"}, full=True).snapshot_id is not None


def test_expired_snapshots_say_so(catalog: paimon.Catalog) -> None:
    table = catalog.create_table("db.e", schema=KV, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "1", "write-only": "true"})
    for i in range(4):
        table.write(pa.table({"id": [i], "v": ["x"], "dt": ["d1"]}, schema=KV))
    table.expire_snapshots(dry_run=False, retain_min=2, older_than=2 ** 62)
    with pytest.raises(SnapshotExpiredError, match="snapshot 1 of table db.e has expired"):
        table.read(snapshot_id=1)
    with pytest.raises(paimon.errors.SnapshotNotFoundError, match="the latest is 4") as raised:
        table.read(snapshot_id=9)
    assert not isinstance(raised.value, SnapshotExpiredError)
    with pytest.warns(ExpiredStartWarning, match=r"from snapshot 1 starts at 3.*1\.\.2 have expired"):
        batches = list(table.stream("from-snapshot", snapshot_id=1, until_latest=True))
    assert [b.snapshot_id for b in batches] == [3, 4]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(table.stream("from-snapshot", snapshot_id=3, until_latest=True))


def test_argument_and_closed_writer_errors_are_labelled(pk: paimon.Table) -> None:
    with pytest.raises(InvalidArgumentError, match="at most one of"):
        pk.read(snapshot_id=1, tag="x")
    writer = pk.new_write()
    writer.write(pa.table({"id": [5], "v": ["e"], "dt": ["d2"]}, schema=KV))
    writer.commit()
    with pytest.raises(WriterClosedError, match="new_write"):
        writer.write(pa.table({"id": [6], "v": ["f"], "dt": ["d2"]}, schema=KV))
    assert not isinstance(WriterClosedError("x"), SchemaError)


def test_a_named_pandas_index_is_written_as_its_column(pk: paimon.Table) -> None:
    frame = pd.DataFrame({"id": [7, 8], "v": ["g", "h"], "dt": ["d3", "d3"]}).set_index("id")
    pk.write(frame)
    assert sorted(pk.read(filter=[("dt", "=", "d3")]).column("id").to_pylist()) == [7, 8]
    stray = pd.DataFrame({"id": [9], "v": ["i"], "dt": ["d3"]}).set_index(pd.Index(["r1"], name="row"))
    before = tree_digest(pk.path)
    with pytest.raises(SchemaError) as raised:
        pk.write(stray)
    assert "unexpected ['row']" in str(raised.value) and "reset_index(drop=True)" in str(raised.value)
    assert tree_digest(pk.path) == before
    pk.write(pd.DataFrame({"id": [9], "v": ["i"], "dt": ["d3"]}))  # an unnamed index is only row numbers
    assert pk.read(filter=[("id", "=", 9)]).num_rows == 1


def test_reprs_and_summaries_read_like_a_listing(pk: paimon.Table) -> None:
    pk.create_tag("t1")
    shown = repr(pk.list_tags()[0])
    assert shown == "Tag('t1', snapshot_id=1, commit_kind='APPEND')"
    assert repr(pk.latest_snapshot()).startswith("Snapshot(id=1, commit_kind='APPEND', committed='")
    summary = pk.remove_orphan_files(older_than=10 ** 12).summary()
    assert "files older than 2001-09-09 01:46:40 UTC" in summary


def test_public_methods_have_docstrings() -> None:
    import inspect

    undocumented = [f"{cls.__name__}.{name}" for cls in (paimon.Catalog, paimon.Table, paimon.TableWrite)
                    for name, member in vars(cls).items() if not name.startswith("_")
                    and (inspect.isfunction(member) or isinstance(member, property))
                    and not inspect.getdoc(member)]
    assert undocumented == []


def test_snapshot_at_a_time_and_rollback_to_a_naive_time_mean_local_time(pk: paimon.Table) -> None:
    pk.write(pa.table({"id": [3], "v": ["c"], "dt": ["d2"]}, schema=KV))
    first, second = pk.snapshot(1), pk.snapshot(2)
    at_first = dt.datetime.fromtimestamp(first.time_millis / 1000)  # naive, local
    assert pk.snapshot_at(first.time_millis).id == 1
    assert pk.snapshot_at(at_first).id == 1
    assert pk.snapshot_at(at_first.astimezone(dt.UTC)).id == 1
    assert pk.snapshot_at(dt.datetime.fromtimestamp(second.time_millis / 1000)).id == 2
    with pytest.raises(InvalidArgumentError, match="moment must be a datetime or epoch milliseconds"):
        pk.snapshot_at("2024-01-01")  # type: ignore[arg-type]
    assert pk.rollback_to(at_first, dry_run=True).removed_snapshots == (2,)
    with pytest.raises(InvalidArgumentError, match="older_than must be"):
        pk.expire_snapshots(older_than="yesterday")  # type: ignore[arg-type]
