"""The read-shape matrix: generated workloads on every kind of primary-key table, every read shape
at every state, against an independent model and against the table's own full read.

Table shapes: merge engine (deduplicate with and without ``sequence.field``, first-row,
partial-update with and without a sequence group, aggregation with generated functions and
``ignore-retract``; ``ignore-delete``, remove-record-on-delete) x changelog producer x write-only
x deletion vectors x bucket mode (fixed 1 or 2, dynamic) x partitioned, with or without
retractions. States: level 0 only, mixed levels, after minor and full compactions, after schema
evolution (an added, a widened, a renamed and a dropped column) and after expiry. Read shapes:
see :mod:`tests.read_shapes.checks`.

``--read-shapes=quick`` (the default, part of ``make test``) runs a dozen workloads per engine;
``--read-shapes=deep`` hundreds, with every projection and every snapshot re-read at each state.
Hypothesis shrinks a failure to the fewest operations that still fail, and the message tells
the whole story of the table.
"""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paimon_core as pc
from tests.read_shapes.checks import Depth, check_state
from tests.read_shapes.runner import Run
from tests.read_shapes.shape import ENGINES
from tests.read_shapes.workload import ops, shapes

COVERED: Counter[str] = Counter()


def run_workload(tmp_path: Path, data: st.DataObject, engine: str, depth: Depth) -> None:
    shape = data.draw(shapes((engine,)), label="shape")
    workload = data.draw(ops(shape, max_ops=depth.max_ops), label="operations")
    rng = random.Random(data.draw(st.integers(0, 2**16), label="seed"))
    run = Run(pc.Catalog(tempfile.mkdtemp(dir=tmp_path)), shape)
    try:
        for op in workload:
            run.apply(op)
            check_state(run, depth, rng)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- the table's story ---\n{run.story()}") from exc
    COVERED["workloads"] += 1
    COVERED[f"shape {shape.engine}/{shape.producer}"] += 1
    COVERED.update(run.states)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_read_shape_agrees(engine: str, read_shapes_depth: Depth, tmp_path: Path) -> None:
    depth = read_shapes_depth
    @settings(max_examples=depth.examples, deadline=None, derandomize=depth.name == "quick",
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                     HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(data=st.data())
    def workload(data: st.DataObject) -> None:
        run_workload(tmp_path, data, engine, depth)

    COVERED.clear()
    workload()
    print(f"\nread shapes, {engine}, depth {depth.name}: " + ", ".join(f"{k} {v}" for k, v in sorted(COVERED.items())))
    assert COVERED["workloads"] >= min(depth.examples, 5), "too few workloads ran"
