"""Tables on S3 (SeaweedFS on 127.0.0.1) round-trip with pypaimon 2.1.0, which reaches the same
bucket through pyarrow's own S3 client: what we write it reads at every snapshot, and what it
writes we read."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.interop.conftest import Oracle
from tests.support.s3.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.support.s3.store import Store

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int64()),
                    pa.field("dt", pa.string(), nullable=False)])


def pypaimon_options(server: S3Server) -> dict[str, str]:
    return {"fs.s3.endpoint": server.endpoint, "fs.s3.accessKeyId": ACCESS_KEY,
            "fs.s3.accessKeySecret": SECRET_KEY, "fs.s3.region": REGION, "fs.s3.path-style-access": "true"}


def batch(ids: range, qty: int, dt: str = "2024-01-01") -> pa.Table:
    return pa.table({"id": list(ids), "qty": [qty] * len(ids), "dt": [dt] * len(ids)}, schema=SCHEMA)


def canonical(table: pa.Table) -> list[dict[str, object]]:
    return table.sort_by([("dt", "ascending"), ("id", "ascending")]).to_pylist()


@pytest.fixture
def seaweed(s3_servers: dict[str, S3Server]) -> Store:
    return Store.on(s3_servers["seaweed"])


def test_pypaimon_reads_our_s3_tables(seaweed: Store, oracle: Oracle) -> None:
    catalog = seaweed.catalog()
    catalog.create_database("db")
    pk = catalog.create_table("db.pk", schema=SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                              options={"bucket": "2", "num-sorted-run.compaction-trigger": "3"})
    logs = catalog.create_table("db.logs", schema=SCHEMA, partition_keys=["dt"])
    for i in range(4):
        pk.write(batch(range(i * 5, i * 5 + 20), i, ("2024-01-01", "2024-01-02")[i % 2]))
        logs.write(batch(range(i * 10, i * 10 + 10), i))
    pk.delete(batch(range(3), 0).select(["id", "dt"]))
    pk.compact(full=True)
    logs.compact(full=True)
    for table in (pk, logs):
        ids = [s.id for s in table.snapshots()]
        theirs = oracle.read_snapshots(seaweed.warehouse, table.name, ids, pypaimon_options(seaweed.server))
        for sid in ids:
            assert canonical(table.read(snapshot_id=sid)) == canonical(theirs[sid]), f"{table.name}@{sid}"


def test_we_read_pypaimon_s3_tables(seaweed: Store, oracle: Oracle) -> None:
    options = pypaimon_options(seaweed.server)
    data = [batch(range(i * 4, i * 4 + 8), i) for i in range(3)]
    oracle.run(seaweed.warehouse, [
        {"op": "create_database", "name": "db"},
        {"op": "create_table", "table": "db.pk", "schema": oracle.save(SCHEMA.empty_table()),
         "primary_keys": ["dt", "id"], "partition_keys": ["dt"], "options": {"bucket": "2"}},
        *({"op": "write", "table": "db.pk", "data": oracle.save(d)} for d in data)], options)
    table = seaweed.catalog().get_table("db.pk")
    expected = {r: q for d in data for r, q in zip(d["id"].to_pylist(), d["qty"].to_pylist())}
    assert {r["id"]: r["qty"] for r in table.read().to_pylist()} == expected
    assert [s.id for s in table.snapshots()] == [1, 2, 3]
    assert table.write(batch(range(2), 9)) == 4  # and we commit on top of it
