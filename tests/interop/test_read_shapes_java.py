"""Java Paimon 0.9 reads the read-shape matrix's tables at every state: generated workloads (the
same strategies as ``tests/integration/test_read_shapes.py``) on every merge engine, and Java
reads each snapshot before expiry can take it (and every tag at the end), in full and
projected to the keys and a value column; each read equals ours at that snapshot. Where the
model stops being exact (minor compactions of drop-sensitive tables), Java is the oracle.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paimon_core as pc
from tests.integration.test_read_shapes import depth  # noqa: F401  (the --read-shapes fixture)
from tests.interop.conftest import JavaOracle
from tests.interop.java_support import assert_same_rows
from tests.read_shapes.checks import Depth, check_state
from tests.read_shapes.runner import TABLE, Run
from tests.read_shapes.shape import ENGINES
from tests.read_shapes.workload import Expire, ops, shapes

pytestmark = pytest.mark.interop
EXAMPLES = {"quick": 6, "deep": 60}


class JavaWitness:
    """Has Java read every snapshot of a run once, while it exists."""

    def __init__(self, java: JavaOracle) -> None:
        self.java = java
        self.read: set[int] = set()
        self.compared = 0

    def read_new(self, run: Run, warehouse: str, *, tags: bool = False) -> None:
        table = run.table
        snapshots = [s.id for s in table.snapshots() if s.id not in self.read]
        targets: list[tuple[str, int | str]] = [("snapshot_id", sid) for sid in snapshots]
        if tags:
            targets += [("tag", t.name) for t in table.list_tags()]
        steps, expected = [], []
        for key, value in targets:
            ours = table.read(snapshot_id=value) if key == "snapshot_id" else table.read(tag=str(value))
            projected = [c for c in ours.column_names if c in ("k", "p")] + ours.column_names[-1:]
            for columns in (None, projected):
                out = str(self.java.workdir / f"shape-{len(self.read)}-{value}-{len(steps)}.arrow")
                steps.append({"op": "read", "table": TABLE, key: value, "out": out,
                              **({"columns": columns} if columns else {})})
                expected.append((ours if columns is None else ours.select(columns), out, f"{key} {value}"))
        if not steps:
            return
        self.java.run(warehouse, steps)
        for ours, out, what in expected:
            assert_same_rows(ours, self.java.load(out), f"Java reading {TABLE} at {what}")
            self.compared += 1
        self.read |= set(snapshots)


@pytest.mark.parametrize("engine", ENGINES)
def test_java_reads_every_state_as_we_do(engine: str, java_oracle: JavaOracle, depth: Depth,  # noqa: F811
                                          tmp_path: Path) -> None:
    compared = []

    @settings(max_examples=EXAMPLES[depth.name], deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                     HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(data=st.data())
    def workload(data: st.DataObject) -> None:
        shape = data.draw(shapes((engine,)), label="shape")
        steps = data.draw(ops(shape, max_ops=depth.max_ops), label="operations")
        warehouse = tempfile.mkdtemp(dir=tmp_path)
        run, witness, rng = Run(pc.Catalog(warehouse), shape), JavaWitness(java_oracle), random.Random(0)
        try:
            for op in steps:
                if isinstance(op, Expire):
                    witness.read_new(run, warehouse)
                run.apply(op)
                check_state(run, depth, rng)
            witness.read_new(run, warehouse, tags=True)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- the table's story ---\n{run.story()}") from exc
        compared.append(witness.compared)

    workload()
    print(f"\nJava read {sum(compared)} snapshot and tag reads of {len(compared)} {engine} workloads")
    assert sum(compared) > 0
