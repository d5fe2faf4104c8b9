"""Tables written by many writers and committed once (two-phase), and compacted by many tasks, read the
same in pypaimon 2.1.0 and in Apache Paimon's Java core at every snapshot: writers sharded by bucket,
slice writers (each its part of the input into every bucket, its sequence numbers 2^32 apart from the
next slice's) equal to one writer of the same batches, and append writers with shares of the input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import paimon_core as pc
from tests.interop.conftest import JavaOracle, Oracle

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                    ("v", pa.int64()), ("s", pa.string())])


def batch(seed: int, n: int = 4_000) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 3_000, n)
    return pa.table({"dt": pa.array([f"d{d}" for d in rng.integers(0, 2, n)]), "id": pa.array(ids),
                     "v": pa.array(rng.integers(0, 1000, n)), "s": pa.array([f"s{i % 11}" for i in ids])},
                    schema=SCHEMA)


def canonical(table: pa.Table) -> list[dict[str, Any]]:
    keys = [("dt", "ascending"), ("id", "ascending"), ("v", "ascending")]
    return table.select(SCHEMA.names).sort_by(keys).to_pylist()


def sliced_and_single(catalog: pc.Catalog) -> tuple[pc.Table, pc.Table]:
    """The same three rounds of batches (keys repeating across each round's slices) written by three
    slice writers per round and by one writer, then fully compacted: equal at every snapshot."""
    options = {"bucket": "4", "write-only": "true"}
    sliced = catalog.create_table("db.sliced", schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                  options=options)
    single = catalog.create_table("db.single", schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                  options=options)
    for round_ in range(3):
        data = batch(10 + round_, 6_000)
        prepared = []
        for index in range(3):
            with sliced.new_write(input_slice=(index, 3)) as writer:
                writer.write(data.slice(index * 2_000, 2_000))
                prepared.append(writer.prepare().to_bytes())
        sliced.commit(prepared, commit_user="slices", commit_identifier=round_ + 1)
        single.write(data)
    for table in (sliced, single):
        table.compact(full=True)
    return sliced, single


def fanned_tables(warehouse: Path) -> tuple[pc.Table, ...]:
    catalog = pc.Catalog(str(warehouse))
    catalog.create_database("db")
    pk = catalog.create_table("db.pk", schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                              options={"bucket": "4", "write-only": "true"})
    for round_ in range(3):
        prepared = []
        for index in range(3):
            with pk.new_write(shard=(index, 3)) as writer:
                writer.write(batch(round_))
                prepared.append(writer.prepare().to_bytes())
        pk.commit(prepared, commit_user="fan-out", commit_identifier=round_ + 1)
    pk.commit([pk.prepare_compaction(full=True, shard=(i, 2)) for i in range(2)], commit_user="compact",
              commit_identifier=1)
    logs = catalog.create_table("db.logs", schema=SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
    data = batch(7, 9_000)
    slices = []
    for offset in range(0, data.num_rows, 3_000):
        with logs.new_write() as writer:
            writer.write(data.slice(offset, 3_000))
            slices.append(writer.prepare())
    logs.commit(slices)
    return (pk, logs, *sliced_and_single(catalog))


@pytest.mark.parametrize("reader", ["oracle", "java_oracle"])
def test_pypaimon_and_java_read_fanned_out_writes_and_compactions(tmp_path: Path, reader: str,
                                                                  request: pytest.FixtureRequest) -> None:
    oracle: Oracle | JavaOracle = request.getfixturevalue(reader)
    read: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for table in fanned_tables(tmp_path):
        ids = [s.id for s in table.snapshots()]
        theirs = oracle.read_snapshots(tmp_path, table.name, ids)
        for sid in ids:
            assert canonical(theirs[sid]) == canonical(table.read(snapshot_id=sid)), f"{table.name} snapshot {sid}"
        read[table.name] = {sid: canonical(theirs[sid]) for sid in ids}
    # Slice writers' table, as the other reader sees it, is one writer's at every snapshot (3 writes, a compaction).
    assert read["db.sliced"] == read["db.single"] and len(read["db.sliced"]) == 4
