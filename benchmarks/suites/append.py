"""Append table: raw pyarrow Parquet vs paimon_core (ours) vs pypaimon 2.1.0, side by side.

For every size a log-event dataset is generated once into an Arrow IPC file. Every repetition of
every step then runs in its own fresh process in its engine's virtualenv, which times only the
step and reports its peak RSS; the engines are interleaved within each repetition. Steps: write
(one commit), full read, filtered read (0.4% of the rows), and ours' streaming ingest at two
write-buffer sizes. Every read must return the generator's fingerprint.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks import data
from benchmarks.harness.measure import measure, measure_and_report, report
from benchmarks.harness.report import (
    Target,
    cross_check,
    joined,
    markdown,
    pressure_note,
    ratio_cells,
    render_verdicts,
    verdicts,
)
from benchmarks.harness.runner import Outcome, Rep, Steps, require, run_phases
from benchmarks.harness.suite import Result, SuiteRun

log = logging.getLogger("benchmarks.append")

ENGINES = ("pyarrow", "ours", "pypaimon")
WORK_DIRS = ("data", "tables")
SEED = 20240101
CHUNK_ROWS = 1_048_576  # rows generated at a time, to bound the generator's memory
FILTER_DAY = "2024-01-03"
FILTER_LEVEL = "ERROR"
TABLE = "bench.logs"
SCHEMA = data.LOG_SCHEMA


# ---- dataset -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Expected:
    """Fingerprints of a generated dataset, and of its filtered subset, that reads must match."""

    full: dict[str, int]
    filtered: dict[str, int]


def filter_mask(table: pa.Table) -> pa.ChunkedArray:
    """The suite's filter, ``dt = FILTER_DAY AND level = FILTER_LEVEL``, evaluated directly."""
    return pc.and_(pc.equal(table["dt"], FILTER_DAY), pc.equal(table["level"], FILTER_LEVEL))


def fingerprint(table: pa.Table) -> dict[str, int]:
    """Row count and user_id sum of a table (reads compute it after their timer stops)."""
    return {"rows": table.num_rows, "sum_user_id": int(pc.sum(table["user_id"]).as_py() or 0)}


def _add(total: dict[str, int], part: dict[str, int]) -> dict[str, int]:
    return {key: total.get(key, 0) + value for key, value in part.items()}


def generate(path: Path, rows: int) -> Expected:
    """Write ``rows`` events to an uncompressed Arrow IPC file of 64k-row batches."""
    rng = np.random.default_rng(SEED)
    path.parent.mkdir(parents=True, exist_ok=True)
    full: dict[str, int] = {}
    filtered: dict[str, int] = {}
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        for start in range(0, rows, CHUNK_ROWS):
            chunk = data.log_events(rng, min(CHUNK_ROWS, rows - start))
            writer.write_table(chunk, max_chunksize=data.BATCH_ROWS)
            full = _add(full, fingerprint(chunk))
            filtered = _add(filtered, fingerprint(chunk.filter(filter_mask(chunk))))
    return Expected(full, filtered)


def dataset(work: Path, rows: int) -> tuple[Path, Expected]:
    """The size's input file and its fingerprints, generated unless a kept copy exists."""
    path, facts = work / "data" / f"logs_{rows}.arrow", work / "data" / f"logs_{rows}.json"
    if path.exists() and facts.exists():
        known = json.loads(facts.read_text())
        return path, Expected(known["full"], known["filtered"])
    log.info("generating %s rows into %s", f"{rows:,}", path)
    expected = generate(path, rows)
    facts.write_text(json.dumps({"full": expected.full, "filtered": expected.filtered}))
    return path, expected


# ---- steps (in the step process) --------------------------------------------------------------------

class AppendEngine(Protocol):
    """One engine under test. Only ``write``, ``stream`` and ``read`` run inside the timer."""

    def create(self, target: Path, buffer: str | None) -> Any:
        """The empty table partitioned by ``dt`` (Paimon: ``bucket=-1``, ``write-buffer-size`` ``buffer``)."""

    def write(self, handle: Any, rows: pa.Table) -> None:
        """Write ``rows`` as one commit."""

    def stream(self, handle: Any, batches: Iterator[pa.RecordBatch]) -> None:
        """Feed ``batches`` to one writer and commit once (ours only)."""

    def committed_rows(self, target: Path) -> int:
        """Rows the table at ``target`` holds (checked after the timer)."""

    def read(self, target: Path, filtered: bool) -> Callable[[], pa.Table]:
        """Open the table (catalog and table objects, no snapshot) and return the read to time: the
        whole table, or ``dt = FILTER_DAY AND level = FILTER_LEVEL``; it includes scan planning."""


def _write(engine: AppendEngine, args: argparse.Namespace) -> None:
    rows = data.load_mapped(args.input)
    handle = engine.create(args.target, None)
    _, timing = measure(lambda: engine.write(handle, rows), args.profile)
    report(timing, {"rows": engine.committed_rows(args.target)})


def _stream(engine: AppendEngine, args: argparse.Namespace) -> None:
    """Ingest batch by batch through one writer and commit once.

    The batches are read with plain file reads, not through the memory map: a batch is then
    resident only while it is written, so peak RSS shows the writer's own memory.
    """
    handle = engine.create(args.target, args.buffer)
    reader = pa.ipc.open_file(pa.OSFile(str(args.input)))
    batches = (reader.get_batch(index) for index in range(reader.num_record_batches))
    _, timing = measure(lambda: engine.stream(handle, batches), args.profile)
    report(timing, {"rows": engine.committed_rows(args.target)})


def _read(engine: AppendEngine, args: argparse.Namespace, filtered: bool) -> None:
    measure_and_report(engine.read(args.target, filtered), args.profile, fingerprint)


STEPS = {
    "write": _write,
    "stream": _stream,
    "read": lambda engine, args: _read(engine, args, filtered=False),
    "filtered_read": lambda engine, args: _read(engine, args, filtered=True),
}


def add_step_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--buffer", default="64 mb", help="write-buffer-size of a streaming step")


# ---- driver ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Step:
    """One measured step of one engine; ``target`` names its directory under the size's work dir."""

    engine: str
    name: str
    action: str
    target: str
    fresh: bool = False  # delete the target before every repetition
    buffer: str | None = None

    @property
    def key(self) -> str:
        """The same step of another engine has the same key."""
        return self.name


def phases(engines: tuple[str, ...], buffers: list[str]) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    return [
        [Step(engine, "write", "write", engine, fresh=True) for engine in engines],
        [Step(engine, "read", "read", engine) for engine in engines],
        [Step(engine, "filtered_read", "filtered_read", engine) for engine in engines],
        *([Step("ours", f"stream {buffer}", "stream", "stream", fresh=True, buffer=buffer)]
          for buffer in buffers),
    ]


def expected_check(step: Step, expected: Expected) -> dict[str, int]:
    if step.action == "read":
        return expected.full
    if step.action == "filtered_read":
        return expected.filtered
    return {"rows": expected.full["rows"]}


def run_rep(steps: Steps, step: Step, rows: int, tables: Path, expected: Expected) -> tuple[Rep, dict[str, Any]]:
    """One repetition of one step in a fresh process, checked against the expected fingerprint."""
    target = tables / step.target
    if step.fresh:
        shutil.rmtree(target, ignore_errors=True)
    rep, check = steps.measured(step.engine, step.action, target, *(["--buffer", step.buffer] if step.buffer else []))
    require(check, expected_check(step, expected), f"{step.engine} {step.name} at {rows:,} rows")
    return rep, check


@dataclass(slots=True)
class SizeRun:
    rows: int
    input_mib: float
    outcomes: list[Outcome[Step]]


def run_size(run: SuiteRun, rows: int) -> SizeRun:
    path, expected = dataset(run.work, rows)
    tables = run.work / "tables" / str(rows)
    shutil.rmtree(tables, ignore_errors=True)
    steps = run.steps(path)
    outcomes = run_phases(phases(run.engines, run.args.stream_buffers),
                          lambda step: run_rep(steps, step, rows, tables, expected),
                          reps=lambda step: run.args.reps,
                          describe=lambda step: f"{rows:,} rows  {step.engine:<8} {step.name:<14}")
    if not run.args.keep:
        shutil.rmtree(tables, ignore_errors=True)
    cross_check(outcomes, ("read", "filtered_read"), f" at {rows:,} rows")
    return SizeRun(rows, path.stat().st_size / 2**20, outcomes)


# ---- report ------------------------------------------------------------------------------------

PEERS = ("pyarrow", "pypaimon")  # ratio columns: ours / peer
COLUMNS = ("engine", "step", "seconds (median)", "min-max", "CPU s", "rows/s", "peak RSS MiB",
           "RSS before step MiB", "ours/pyarrow", "ours/pypaimon")


def table_row(rows: int, outcomes: list[Outcome[Step]], o: Outcome[Step]) -> list[str]:
    seconds = o.median("seconds")
    return [o.step.engine, o.step.name, f"{seconds:.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{rows / seconds / 1e6:.2f} M",
            f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            *ratio_cells(outcomes, o.step, PEERS, digits=2, missing="n/a")]


TARGETS = (
    Target("full read within 1.3x of raw pyarrow", Step("ours", "read", "read", "ours"), "pyarrow", 1.3),
    Target("filtered read within 1.3x of raw pyarrow", Step("ours", "filtered_read", "filtered_read", "ours"),
           "pyarrow", 1.3),
)
STREAM_SLACK_MIB = 150  # streamed ingest may grow by write-buffer-size plus this much
_UNITS_MIB = {"kb": 1 / 1024, "mb": 1, "gb": 1024}


def buffer_mib(text: str) -> float:
    """A ``--stream-buffers`` value (``64 mb``, ``1 gb``) in MiB; this module stays free of paimon_core."""
    number, unit = text.split()
    return float(number) * _UNITS_MIB[unit.lower()]


def stream_note(outcomes: list[Outcome[Step]]) -> str:
    """Whether streaming-ingest memory follows write-buffer-size: its growth (peak RSS minus RSS
    before it) against write-buffer-size + ``STREAM_SLACK_MIB``."""
    parts = []
    for o in outcomes:
        if o.step.buffer is not None:
            growth = o.median("peak_rss_mib") - o.median("base_rss_mib")
            bound = buffer_mib(o.step.buffer) + STREAM_SLACK_MIB
            parts.append(f"{'PASS' if growth <= bound else 'FAIL'} write-buffer-size {o.step.buffer}: peak RSS "
                         f"{o.median('peak_rss_mib'):.0f} MiB = {o.median('base_rss_mib'):.0f} before ingest + "
                         f"{growth:.0f} during it (bound {bound:.0f})")
    return "Streaming ingest (ours): " + "; ".join(parts) + "." if parts else ""


def render(size: SizeRun, engines: tuple[str, ...]) -> str:
    table = markdown(COLUMNS, (table_row(size.rows, size.outcomes, o) for o in size.outcomes))
    notes = joined((stream_note(size.outcomes), pressure_note(size.outcomes)), "\n")
    checks = render_verdicts(verdicts(size.outcomes, TARGETS, engines))
    return f"### {size.rows:,} rows (input {size.input_mib:,.0f} MiB of Arrow)\n\n{table}\n\n{notes}\n\n{checks}"


# ---- entry -------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--stream-buffers", nargs="+", default=["64 mb", "256 mb"],
                        help="write-buffer-size values of the streaming-ingest steps")


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.rows = [20_000]
    for buffer in args.stream_buffers:
        try:
            buffer_mib(buffer)
        except (ValueError, KeyError):
            parser.error(f"--stream-buffers {buffer!r}: give a number and kb, mb or gb, such as '64 mb'")


def run(run: SuiteRun) -> Result:
    run.meta["stream_buffers"] = run.args.stream_buffers
    sizes: list[SizeRun] = []
    document: dict[str, Any] = {"sizes": []}
    for rows in sorted(run.args.rows):
        sizes.append(run_size(run, rows))
        document["sizes"].append({"rows": rows, "input_mib": round(sizes[-1].input_mib, 1),
                                  "steps": [o.to_json() for o in sizes[-1].outcomes],
                                  "targets": [v.to_json() for v in verdicts(sizes[-1].outcomes, TARGETS,
                                                                            run.engines)]})
        run.checkpoint(document)  # a later size that fails leaves this one's figures
    return Result(f"Append-table benchmark: {run.args.reps} process(es) per step, median step seconds",
                  "\n\n".join(render(s, run.engines) for s in sizes), document)
