"""Minimal, deterministic reproductions of what the torture test found (single process, local disk).

1. A commit attempt that is slow between reading the latest snapshot and publishing the next one
   can re-create a snapshot id that was committed *and expired* meanwhile: the create-if-absent
   succeeds because the file is gone. The commit is reported ok, the table's latest snapshot
   moves backwards to it, and the commits in between vanish from the latest state (the torture
   reports this as "duplicate snapshot ids", "successful commit not visible exactly once", and
   expiry / orphan cleanup failing on the resurrected snapshot's deleted manifests).
2. Two writers opened on the same base of a primary-key table take their sequence numbers from
   that base, so for a key both write, the merge keeps the row with the higher sequence number,
   not the one of the later commit. That is Paimon's semantics (Java numbers the same way); the
   torture checks it as such, and ``sequence.field`` is the way to order concurrent writers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

import paimon_core as pc
from paimon_core.fileio import FileIO

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def rows(ids: list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids)}, schema=SCHEMA)


class _BeforeFirstPublish(FileIO):
    """Local storage that runs ``meanwhile`` just before the first snapshot create: what other
    writers and the expiry job do while this commit attempt is slow (network, GC pause)."""

    def __init__(self, base: FileIO, meanwhile: Callable[[], None]) -> None:
        super().__init__(base.fs)
        self.meanwhile: Callable[[], None] | None = meanwhile

    def create_if_absent(self, path: str, data: bytes) -> bool:
        if "/snapshot/snapshot-" in path and self.meanwhile is not None:
            meanwhile, self.meanwhile = self.meanwhile, None
            meanwhile()
        return super().create_if_absent(path, data)


def test_a_slow_commit_does_not_resurrect_an_expired_snapshot_id(tmp_path: Path) -> None:
    catalog = pc.Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, options={"write-only": "true"})
    table.write(rows([0]))  # snapshot 1

    def others() -> None:  # snapshots 2..5 land and 1..4 expire while the slow attempt is paused
        for i in range(1, 5):
            table.write(rows([i]))
        table.expire_snapshots(dry_run=False, older_than=dt.datetime.now(dt.UTC), retain_min=1, retain_max=1)

    slow = pc.Table(_BeforeFirstPublish(table.file_io, others), table.identifier, table.path)
    sid = slow.write(rows([100], "slow"), commit_user="slow", commit_identifier=1)
    # Today: sid == 2 (an id already used and expired), the latest snapshot is 2 and ids 1..4 are gone.
    assert sid is not None and sid > 5, f"the slow commit claimed snapshot {sid}, an id committed and expired before"
    assert table.latest_snapshot().id == sid  # type: ignore[union-attr]
    assert sorted(table.read()["id"].to_pylist()) == [0, 1, 2, 3, 4, 100]


def test_concurrent_writers_of_a_key_are_ordered_by_sequence_field(tmp_path: Path) -> None:
    """Two writers opened on the same base number their rows from that base, so which of two
    concurrent commits wins a key both wrote is not commit order (Paimon's semantics too); a
    ``sequence.field`` orders them by the data instead, whatever the commit order."""
    catalog = pc.Catalog(str(tmp_path / "warehouse"))
    catalog.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("ts", pa.int64())])
    table = catalog.create_table("db.t", schema=schema, primary_keys=["id"],
                                 options={"bucket": "1", "write-only": "true", "sequence.field": "ts"})
    table.write(pa.table({"id": [0], "v": ["base"], "ts": [0]}, schema=schema))
    first = table.new_write(commit_user="first", commit_identifier=1)
    second = table.new_write(commit_user="second", commit_identifier=1)  # same base as ``first``
    first.write(pa.table({"id": [1, 2, 7], "v": ["first"] * 3, "ts": [5, 5, 20]}, schema=schema))
    second.write(pa.table({"id": [7], "v": ["second"], "ts": [10]}, schema=schema))
    assert (first.commit(), second.commit()) == (2, 3)
    values = dict(zip(table.read()["id"].to_pylist(), table.read()["v"].to_pylist()))
    assert values[7] == "first", "the row with the higher sequence.field wins, not the later commit"
