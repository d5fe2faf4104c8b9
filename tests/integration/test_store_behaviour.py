"""Every table operation behaves the same on the local disk, SeaweedFS and moto (locked).

One ``store`` fixture (tests/conftest.py) parametrises each test over the three; the S3 servers
are real processes on 127.0.0.1.
"""

from __future__ import annotations

import datetime as dt
import logging
import time

import pyarrow as pa
import pyarrow.compute as pc_compute
import pytest
import s3fs

import paimon_core as pc
from paimon_core.compaction.compactor import TableCompactor
from paimon_core.errors import (
    CommitConflictError,
    DatabaseExistsError,
    SnapshotNotFoundError,
    UnsupportedFeatureError,
)
from paimon_core.fileio import FileIO
from tests.support.s3.servers import SECRET_KEY
from tests.support.s3.store import Store

ORDERS = pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("dt", pa.string())])
FUTURE = dt.datetime.now(dt.UTC) + dt.timedelta(days=1)


def orders(ids: range | list[int], qty: int, day: str = "2024-01-01") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "qty": [qty] * len(ids), "dt": [day] * len(ids)}, schema=ORDERS)


def sorted_rows(table: pa.Table) -> list[dict[str, object]]:
    return table.sort_by([(c, "ascending") for c in table.column_names]).to_pylist()


def pk_table(catalog: pc.Catalog, name: str = "db.orders", **options: str) -> pc.Table:
    catalog.create_database("db", exist_ok=True)
    return catalog.create_table(name, schema=ORDERS, primary_keys=["dt", "id"], partition_keys=["dt"],
                                options={"bucket": "2", **options})


def test_catalog_lifecycle(store: Store) -> None:
    catalog = store.catalog()
    catalog.create_database("db")
    assert catalog.list_databases() == ["db"] and catalog.database_exists("db")
    with pytest.raises(DatabaseExistsError):
        catalog.create_database("db")
    catalog.create_table("db.logs", schema=ORDERS)
    assert catalog.list_tables("db") == ["logs"]
    catalog.drop_database("db", cascade=True)
    assert catalog.list_databases() == [] and not catalog.database_exists("db")
    catalog.create_database("db")  # a dropped database can be created again
    assert catalog.list_tables("db") == []


def test_write_read_overwrite_time_travel(store: Store) -> None:
    catalog = store.catalog()
    catalog.create_database("db")
    table = catalog.create_table("db.logs", schema=ORDERS, partition_keys=["dt"])
    first = table.write(pa.concat_tables([orders(range(100), 1), orders(range(50), 2, "2024-01-02")]))
    table.write(orders(range(100, 150), 3))
    table.write(orders(range(10), 9, "2024-01-02"), overwrite=True)
    latest = table.read()
    assert latest.num_rows == 160
    assert pc_compute.sum(latest["qty"]).as_py() == 100 + 150 + 90
    assert table.read(snapshot_id=first).num_rows == 150
    assert table.read(filter=[("dt", "=", "2024-01-02")]).num_rows == 10
    assert [s.commit_kind for s in table.snapshots()] == ["APPEND", "APPEND", "OVERWRITE"]


def test_primary_key_updates_compaction_and_changelog(store: Store) -> None:
    table = pk_table(store.catalog(), **{"changelog-producer": "lookup", "write-only": "true"})
    table.write(orders(range(200), 1))
    table.write(orders(range(100, 300), 2))
    table.delete(orders(range(0, 50), 0).select(["id", "dt"]))
    expected = {i: 2 if i >= 100 else 1 for i in range(50, 300)}
    assert dict(zip(*table.read(["id", "qty"]).to_pydict().values())) == expected
    before = table.latest_snapshot()
    assert before is not None
    result = table.compact(full=True)
    assert result.snapshot_id is not None
    assert dict(zip(*table.read(["id", "qty"]).to_pydict().values())) == expected
    changes = table.read_changes(before.id)
    kinds = pc_compute.value_counts(changes["_row_kind"]).to_pylist()
    assert {k["values"]: k["counts"] for k in kinds} == {"+I": 250}
    assert all(level > 0 for level in {f.level for f in table.files()})


def test_expiry_orphans_and_tags(store: Store) -> None:
    table = pk_table(store.catalog(), **{"snapshot.num-retained.min": "1", "write-only": "true"})
    for round_ in range(5):
        table.write(orders(range(round_ * 10, round_ * 10 + 40), round_))
    table.create_tag("before-compaction", 3)
    table.compact(full=True)
    expected = table.read()
    plan = table.expire_snapshots(dry_run=False, older_than=FUTURE, retain_max=1)
    assert plan.snapshots and table.snapshot_store.earliest_id() == table.latest_snapshot().id  # type: ignore[union-attr]
    assert sorted_rows(table.read()) == sorted_rows(expected)
    assert table.read(tag="before-compaction").num_rows == 60
    store.write("db.db/orders/dt=2024-01-01/bucket-0/data-leftover-of-a-crash.parquet", b"junk")
    orphans = table.remove_orphan_files(older_than=FUTURE, dry_run=False, force=True)
    assert [p.rsplit("/", 1)[-1] for p in orphans.orphans] == ["data-leftover-of-a-crash.parquet"]
    assert table.delete_tag("before-compaction")
    kept = store.files("db.db/orders")
    swept = table.remove_orphan_files(older_than=FUTURE, dry_run=False, force=True)
    assert swept.orphans, "files only the tag kept are reclaimed once it is gone"
    assert len(store.files("db.db/orders")) == len(kept) - len(swept.orphans)
    assert sorted_rows(table.read()) == sorted_rows(expected)


def test_rollback(store: Store) -> None:
    table = pk_table(store.catalog())
    table.write(orders(range(10), 1))
    table.create_tag("good")
    table.write(orders(range(10), 666))
    table.rollback_to("good")
    assert set(table.read()["qty"].to_pylist()) == {1}
    assert table.write(orders(range(3), 2)) == 2


def test_racing_writers_both_land(store: Store) -> None:
    catalog = store.catalog()
    catalog.create_database("db")
    table = catalog.create_table("db.logs", schema=ORDERS)
    table.write(orders(range(5), 0))
    first, second = table.new_write(), catalog.get_table("db.logs").new_write()
    first.write(orders(range(10, 20), 1))
    second.write(orders(range(20, 30), 2))
    ids = [first.commit(), second.commit()]  # the second's base is stale: it must retry, not overwrite
    assert ids == [2, 3]
    assert table.read().num_rows == 25
    assert [s.id for s in table.snapshots()] == [1, 2, 3]


def test_compaction_losing_to_an_overwrite_changes_nothing(store: Store) -> None:
    table = pk_table(store.catalog(), **{"write-only": "true"})
    for qty in range(3):
        table.write(orders(range(20), qty))
    compactor = TableCompactor(store.catalog().get_table("db.orders").context())
    prepared = compactor.prepare(full=True)
    table.write(orders(range(5), 7), overwrite=True)  # replaces the files the compaction read
    files_before = store.files()
    with pytest.raises(CommitConflictError):
        compactor.commit(prepared)
    assert sorted(table.read()["qty"].to_pylist()) == [7] * 5
    written = {f"{b.partition.path}/bucket-{b.bucket}/{f.file_name}"
               for b in prepared.increments for f in b.new_files}
    assert written and not [p for p in store.files() if any(p.endswith(w) for w in written)]
    assert len(store.files()) < len(files_before), "the losing compaction's files are removed"


def test_snapshot_create_is_exclusive_and_idempotent(store: Store) -> None:
    file_io, root = FileIO.for_uri(store.warehouse, store.storage_options)
    path = f"{root}/snapshot-probe"
    assert file_io.create_if_absent(path, b"ours")
    assert not file_io.create_if_absent(path, b"theirs")
    # A create retried after its response was lost finds its own bytes: that is a win.
    assert file_io.create_if_absent(path, b"ours")
    assert file_io.read_bytes(path) == b"ours"


def test_latest_hint_is_probed_forward(store: Store) -> None:
    catalog = store.catalog()
    catalog.create_database("db")
    table = catalog.create_table("db.logs", schema=ORDERS)
    for i in range(4):
        table.write(orders([i], i))
    store.write("db.db/logs/snapshot/LATEST", b"2")  # a stale hint (its writer died after commit)
    assert table.snapshot_store.latest_id() == 4
    assert table.write(orders([9], 9)) == 5


def test_missing_snapshot_is_a_typed_error(store: Store) -> None:
    catalog = store.catalog()
    catalog.create_database("db")
    table = catalog.create_table("db.logs", schema=ORDERS)
    table.write(orders([1], 1))
    with pytest.raises(SnapshotNotFoundError, match="snapshot 7 of table db.logs"):
        table.read(snapshot_id=7)


class _OverwritingS3(s3fs.S3FileSystem):  # type: ignore[misc]
    """An S3 client for a store that ignores If-None-Match (as s3rver does): create overwrites."""

    async def _pipe_file(self, path: str, data: bytes, *args: object, mode: str = "overwrite",
                         **kwargs: object) -> object:
        return await super()._pipe_file(path, data, *args, mode="overwrite", **kwargs)


def test_store_without_conditional_writes_is_refused(s3_store: Store) -> None:
    options = dict(s3_store.storage_options or {})
    fs = _OverwritingS3(skip_instance_cache=True, use_listings_cache=False, **options)
    file_io = FileIO(fs)
    with pytest.raises(UnsupportedFeatureError, match="does not honour conditional writes"):
        file_io.create_if_absent(f"{s3_store.root}/db.db/t/snapshot/snapshot-1", b"{}")
    assert not s3_store.files(), "the probe cleans up and nothing is committed"


def test_credentials_never_logged(s3_store: Store, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    table = pk_table(s3_store.catalog(), **{"snapshot.num-retained.min": "1"})
    table.write(orders(range(10), 1))
    table.compact(full=True)
    table.expire_snapshots(dry_run=False, older_than=FUTURE, retain_max=1)
    table.remove_orphan_files(older_than=FUTURE, dry_run=False, force=True)
    assert caplog.records, "debug logging ran"
    leaked = [r.getMessage() for r in caplog.records if SECRET_KEY in r.getMessage()]
    assert not leaked
    assert SECRET_KEY not in repr(s3_store.catalog()) and SECRET_KEY not in repr(table)


def test_wrong_credentials_fail_cleanly(s3_store: Store) -> None:
    if s3_store.kind == "moto":
        pytest.skip("moto does not verify request signatures")
    pk_table(s3_store.catalog()).write(orders(range(3), 1))
    before = s3_store.files()
    options = {**(s3_store.storage_options or {}), "secret": "not-the-secret"}
    bad = pc.Catalog(s3_store.warehouse, storage_options=options)
    started = time.monotonic()
    with pytest.raises(PermissionError) as info:
        bad.get_table("db.orders").write(orders(range(3), 2))
    assert "not-the-secret" not in str(info.value)
    assert time.monotonic() - started < 30
    assert s3_store.files() == before


def test_credentials_from_the_environment(s3_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key in the storage options: botocore takes it from the environment, as on AWS."""
    if s3_store.kind == "moto":
        pytest.skip("moto does not verify request signatures")
    options = dict(s3_store.storage_options or {})
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", options.pop("key"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", options.pop("secret"))
    catalog = pc.Catalog(s3_store.warehouse, storage_options=options)
    catalog.create_database("db")
    table = catalog.create_table("db.logs", schema=ORDERS)
    table.write(orders(range(4), 1))
    assert table.read().num_rows == 4
