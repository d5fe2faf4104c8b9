"""Java Paimon 0.9 reads the read-shape matrix's tables at every state: generated workloads (the
same strategies as ``tests/integration/test_read_shapes.py``) on every merge engine, and Java
reads each snapshot before expiry can take it (and every tag at the end), in full and
projected to the keys and a value column; each read equals ours at that snapshot. Where the
model stops being exact (minor compactions of drop-sensitive tables), Java is the oracle.
"""

from __future__ import annotations

import random
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paimon_core as pc
from tests.interop.conftest import JavaOracle
from tests.interop.java_support import assert_same_rows
from tests.read_shapes.checks import QUICK, Depth, check_state
from tests.read_shapes.runner import TABLE, Run
from tests.read_shapes.shape import ENGINES, Shape
from tests.read_shapes.workload import Evolve, Expire, Op, Write, ops, shapes

pytestmark = pytest.mark.interop
EXAMPLES = {"quick": 10, "deep": 100}


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


def run_with_java(shape: Shape, steps: list[Op], java: JavaOracle, depth: Depth | None, folder: Path) -> int:
    """Apply ``steps`` (each snapshot checked against the model as it is made, and with a
    ``depth``, every read shape at each state); Java reads every snapshot before expiry can take
    it, and the tags at the end. Returns the reads compared."""
    warehouse = tempfile.mkdtemp(dir=folder)
    run, witness, rng = Run(pc.Catalog(warehouse), shape), JavaWitness(java), random.Random(0)
    try:
        for op in steps:
            if isinstance(op, Expire):
                witness.read_new(run, warehouse)
            run.apply(op)
            if depth is not None:
                check_state(run, depth, rng)
        witness.read_new(run, warehouse, tags=True)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- the table's story ---\n{run.story()}") from exc
    return witness.compared


def as_paimon_0_9_merges(shape: Shape) -> Shape:
    """``shape`` without what Paimon 0.9 merges otherwise than Paimon 1.x (and we): 0.9 has no
    ``aggregation.remove-record-on-delete`` (it retracts the -D), and its partial-update starts
    no row from a retraction (a key whose first rows are retractions reads as a row of nulls)."""
    if shape.engine == "aggregation" and shape.remove_on_delete:
        shape = replace(shape, remove_on_delete=False)
    if shape.engine == "partial-update" and shape.retractions:
        shape = replace(shape, retractions=False, ignore_delete=False, remove_on_delete=False)
    return shape


@pytest.mark.parametrize("engine", ENGINES)
def test_java_reads_every_state_as_we_do(engine: str, java_oracle: JavaOracle, read_shapes_depth: Depth,
                                          tmp_path: Path) -> None:
    depth, compared = read_shapes_depth, []

    @settings(max_examples=EXAMPLES[depth.name], deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                     HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(data=st.data())
    def workload(data: st.DataObject) -> None:
        shape = as_paimon_0_9_merges(data.draw(shapes((engine,)), label="shape"))
        # Java 0.9's listagg joins blank strings (Paimon 1.x skips them, and so do we): not drawn here.
        steps = data.draw(ops(shape, max_ops=depth.max_ops, blank_strings=False), label="operations")
        # The read shapes of these workloads are the matrix's own work: here Java is the oracle.
        compared.append(run_with_java(shape, steps, java_oracle, None, tmp_path))

    workload()
    print(f"\nJava read {sum(compared)} snapshot and tag reads of {len(compared)} {engine} workloads")
    assert sum(compared) > 0


def _row(kind: int, p: str, k: int, **values: object) -> tuple[int, str, int, tuple[tuple[str, object], ...]]:
    return kind, p, k, tuple((label, values.get(label)) for label in ("a", "b", "c", "s", "g", "n", "e"))


# Workloads the matrix found a difference with, kept as they were found.
FINDINGS = {
    # A lookup merge's result took the sequence number of the deeper version it folded (a newer
    # row with a smaller sequence.field sorted first): tied with it, Java's reader kept the older
    # version and lost the newer row's fields.
    "lookup-merge-ties-its-deeper-version": (
        Shape(engine="partial-update", producer="lookup", write_only=False, bucket=2, partitioned=True,
              remove_on_delete=True, sequence_field=True),
        [Write((_row(0, "x", 0, s=0), _row(0, "x", 0, s=0), _row(0, "y", 1, s=0))),
         Write((_row(0, "x", 0, s=0), _row(0, "y", 4, c=1.0, s=0), _row(0, "x", 0, s=3, n=-87),
                _row(2, "x", 4, a=-1, s=4, n=98), _row(0, "y", 1, a=2, s=2, g=2, n=9),
                _row(0, "y", 0, b="zz", s=0, n=-12, e="v"), _row(0, "x", 0, c=1.0, s=4),
                _row(0, "y", 1, s=3, e="v"))),
         Evolve("rename_n"), Evolve("drop_n"),
         Write((_row(2, "x", 3, s=0, g=0, n=-76, e="u"), _row(0, "y", 0, c=0.0, s=0),
                _row(0, "y", 1, a=3, b="x", c=3.0, s=4, e="u"), _row(0, "x", 2, b="y", c=-3.0, s=0, g=2, n=31),
                _row(2, "x", 2, a=3, b="zz", c=0.0, s=2), _row(2, "x", 5, b="", s=0, g=0),
                _row(2, "y", 1, a=0, b="y", c=-1.0, s=3, e="u"), _row(2, "x", 0, a=3, c=0.0, s=3, g=1, n=6)))]),
}


@pytest.mark.parametrize("finding", sorted(FINDINGS))
def test_java_reads_the_findings_as_we_do(finding: str, java_oracle: JavaOracle, tmp_path: Path) -> None:
    shape, steps = FINDINGS[finding]
    assert run_with_java(shape, steps, java_oracle, QUICK, tmp_path) > 0
