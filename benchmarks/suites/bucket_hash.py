"""Bucket hash: Paimon's hash of key columns, columnar (ours) against per-row encoding and hashing.

The columnar path builds BinaryRow bytes as matrices and runs MurmurHash3 word-column by
word-column; the per-row path is the straightforward encode-one-row-then-hash loop over the first
50k rows. Both must give identical hashes on every key shape (else ``CORRECTNESS FAILURE``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from benchmarks.harness.measure import measure, report
from benchmarks.harness.report import markdown, pressure_note
from benchmarks.harness.runner import Outcome, Rep, run_phases
from benchmarks.harness.suite import Result, SuiteRun

ENGINES = ("ours",)
WORK_DIRS = ()
DEFAULT_REPS = 1
PER_ROW_SAMPLE = 50_000


class BucketHashEngine(Protocol):
    def columnar(self, columns: list[pa.Array], types: list[Any]) -> Any: ...

    def per_row(self, columns: list[pa.Array], types: list[Any], rows: int) -> list[int]: ...

    def key_types(self) -> dict[str, Any]:
        """The engine's types of BIGINT, INT and STRING keys."""


def key_shapes(rows: int, types: dict[str, Any]) -> dict[str, tuple[list[pa.Array], list[Any]]]:
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 2**40, rows)
    short = pa.array([f"u{i % 100000}" for i in ids])
    long = pa.array([f"user-{i}-{'x' * int(i % 24)}" for i in ids])
    return {
        "BIGINT": ([pa.array(ids)], [types["BIGINT"]]),
        "STRING <= 7 bytes": ([short], [types["STRING"]]),
        "STRING 8-40 bytes": ([long], [types["STRING"]]),
        "INT, STRING": ([pa.array((ids % 2**31).astype(np.int32)), long], [types["INT"], types["STRING"]]),
    }


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _hash(engine: BucketHashEngine, args: argparse.Namespace) -> None:
    """Every key shape: columnar rows/s over all rows, per-row rows/s over the sample, same hashes."""
    shapes = key_shapes(args.rows, engine.key_types())

    def run_all() -> dict[str, Any]:
        figures = {}
        for name, (columns, types) in shapes.items():
            columnar_s, hashes = _timed(partial(engine.columnar, columns, types))
            sample = min(PER_ROW_SAMPLE, args.rows)
            row_s, expected = _timed(partial(engine.per_row, columns, types, sample))
            if list(hashes[:sample]) != expected:
                raise SystemExit(f"CORRECTNESS FAILURE: columnar and per-row hashes differ for {name}")
            figures[name] = {"columnar_rows_per_s": args.rows / columnar_s, "per_row_rows_per_s": sample / row_s,
                             "sample": sample}
        return figures

    figures, timing = measure(run_all, args.profile)
    report(timing, figures)


STEPS = {"hash": _hash}


def add_step_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, required=True)


def run(run: SuiteRun) -> Result:
    args = run.args
    steps = run.steps(Path())
    reps: list[dict[str, Any]] = []

    def run_rep(step: Any) -> tuple[Rep, dict[str, Any]]:
        rep, check = steps.measured("ours", "hash", Path(), "--rows", str(args.rows))
        reps.append(check)
        return rep, check

    outcomes: list[Outcome[Any]] = run_phases([[HashStep()]], run_rep, reps=lambda step: args.reps,
                                              describe=lambda step: "ours bucket hash")
    rows = []
    for name in reps[0]:
        columnar = statistics.median(r[name]["columnar_rows_per_s"] for r in reps)
        per_row = statistics.median(r[name]["per_row_rows_per_s"] for r in reps)
        rows.append([name, f"{columnar / 1e6:.2f} M", f"{per_row / 1e6:.3f} M", f"{columnar / per_row:.0f}x"])
    sample = min(PER_ROW_SAMPLE, args.rows)
    header = ("key", f"columnar rows/s ({args.rows:,} rows)", f"per-row rows/s ({sample:,} rows)", "speed-up")
    report_text = "\n\n".join(p for p in (markdown(header, rows), pressure_note(outcomes)) if p)
    return Result(f"Bucket-hash benchmark: {args.reps} process(es), median rows/s", report_text,
                  {"rows": args.rows, "reps": reps})


@dataclass(frozen=True, slots=True)
class HashStep:
    """The suite's one step: every key shape, in one process."""

    engine: str = "ours"
    name: str = "bucket hash"
    key: str = "hash"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000)


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.rows = 20_000
