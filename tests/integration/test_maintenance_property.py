"""Random sequences of writes, overwrites, compactions, tags, expiries, rollbacks and orphan-file
cleanups: after each step every retained snapshot and every tag reads exactly as a reference
model says, no file they reach is missing, and after a cleanup nothing unreferenced is left."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paimon_core as pc
from tests.integration.test_maintenance import SCHEMA, now_ms, on_disk, reachable

pytestmark = pytest.mark.slow

Rows = dict[tuple[str, int], str]
OPS = ("write", "write", "write", "overwrite", "compact", "tag", "untag", "expire", "expire", "rollback",
       "orphans")
_names = itertools.count()


def contents(table: pc.Table, **where: Any) -> Rows:
    return {(r["dt"], r["k"]): r["v"] for r in table.read(**where).to_pylist()}


def batch(step: int, salt: int) -> tuple[pa.Table, str]:
    dt = f"2024-01-0{1 + salt % 3}"
    keys = [(salt * 7 + i * 3) % 20 for i in range(1 + salt % 6)]
    return pa.table({"k": keys, "v": [f"s{step}-{k}" for k in keys], "dt": [dt] * len(keys)}, schema=SCHEMA), dt


class Model:
    """What each snapshot and tag must hold, kept from the operations alone."""

    def __init__(self) -> None:
        self.current: Rows = {}
        self.snapshots: dict[int, Rows] = {}
        self.tags: dict[str, Rows] = {}

    def committed(self, table: pc.Table, before: int) -> None:
        """Snapshots after ``before`` hold the current state (a compaction changes no row)."""
        latest = table.latest_snapshot()
        for snapshot_id in range(before + 1, (latest.id if latest else 0) + 1):
            self.snapshots[snapshot_id] = dict(self.current)


def step(table: pc.Table, model: Model, number: int, op: str, salt: int) -> None:
    latest = table.latest_snapshot()
    before = latest.id if latest else 0
    if op == "write":
        data, _ = batch(number, salt)
        table.write(data)
        model.current.update({(r["dt"], r["k"]): r["v"] for r in data.to_pylist()})
    elif op == "overwrite":
        data, dt = batch(number, salt)
        table.write(data, overwrite={"dt": dt})
        model.current = {k: v for k, v in model.current.items() if k[0] != dt}
        model.current.update({(r["dt"], r["k"]): r["v"] for r in data.to_pylist()})
    elif op == "compact":
        table.compact(full=True)
    elif op == "tag" and latest is not None:
        name = f"tag{next(_names)}"
        table.create_tag(name)
        model.tags[name] = model.snapshots[latest.id]
    elif op == "untag" and model.tags:
        name = sorted(model.tags)[salt % len(model.tags)]
        table.delete_tag(name)
        del model.tags[name]
    elif op == "expire":
        done = table.expire_snapshots(dry_run=False, older_than=now_ms(), retain_min=1 + salt % 4)
        for snapshot_id in done.snapshots:
            del model.snapshots[snapshot_id]
    elif op == "orphans":
        table.remove_orphan_files(older_than=now_ms(), dry_run=False, force=True)
        leaked = on_disk(table) - reachable(table)
        assert not leaked, f"orphan cleanup left unreferenced files: {sorted(leaked)[:5]}"
    elif op == "rollback" and model.snapshots:
        targets = sorted(model.snapshots) + sorted(model.tags)
        target = targets[salt % len(targets)]
        table.rollback_to(target)
        snapshot_id = table.latest_snapshot().id
        model.current = dict(model.snapshots.get(snapshot_id) or model.tags[str(target)])
        model.snapshots = {i: rows for i, rows in model.snapshots.items() if i <= snapshot_id}
        model.snapshots[snapshot_id] = dict(model.current)
        model.tags = {n: rows for n, rows in model.tags.items() if table_has_tag(table, n)}
        return
    model.committed(table, before)


def table_has_tag(table: pc.Table, name: str) -> bool:
    return any(t.name == name for t in table.list_tags())


def check(table: pc.Table, model: Model) -> None:
    assert sorted(s.id for s in table.snapshots()) == sorted(model.snapshots)
    for snapshot_id, expected in model.snapshots.items():
        assert contents(table, snapshot_id=snapshot_id) == expected, f"snapshot {snapshot_id}"
    assert sorted(t.name for t in table.list_tags()) == sorted(model.tags)
    for name, expected in model.tags.items():
        assert contents(table, tag=name) == expected, f"tag {name}"
    missing = reachable(table) - on_disk(table) - {"snapshot/EARLIEST", "snapshot/LATEST"}
    assert not missing, f"files reachable from retained snapshots or tags are gone: {sorted(missing)[:5]}"


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 1000)), min_size=4, max_size=14))
def test_maintenance_never_loses_a_reachable_file(tmp_path_factory: Any, ops: list[tuple[str, int]]) -> None:
    catalog = pc.Catalog(str(tmp_path_factory.mktemp("wh")))
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, primary_keys=["dt", "k"], partition_keys=["dt"],
                                 options={"bucket": "2", "num-sorted-run.compaction-trigger": "2",
                                          "changelog-producer": "input"})
    model = Model()
    for number, (op, salt) in enumerate(ops):
        step(table, model, number, op, salt)
        check(table, model)
    assert Path(table.path).exists()
