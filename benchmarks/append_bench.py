"""Append-table benchmark: raw pyarrow Parquet vs paimon_core (ours) vs pypaimon 2.1.0, side by side.

    .venv/bin/python benchmarks/append_bench.py [--rows 1000000 10000000] [--reps 3] [--quick]

For every size a log-event dataset is generated once into an Arrow IPC file. Every repetition of
every step then runs in its own fresh process (bench_pyarrow.py and bench_ours.py in this venv,
bench_oracle.py in .venv-oracle), which times only the step and reports its peak RSS. The engines
are interleaved within each repetition so that drifting machine load hits all of them alike.
Prints one Markdown table per size and saves everything to .bench/append_bench.json.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_common as bc

import paimon_core

log = logging.getLogger("append_bench")

HERE = Path(__file__).resolve().parent
ENGINES = ("pyarrow", "ours", "pypaimon")
# One step script per engine, so that a step process imports only its own engine.
SCRIPTS = {"pyarrow": "bench_pyarrow.py", "ours": "bench_ours.py", "pypaimon": "bench_oracle.py"}


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


Outcome = bc.Outcome[Step]


@dataclass(slots=True)
class SizeRun:
    rows: int
    input_mib: float
    outcomes: list[Outcome]


def phases(buffers: list[str]) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    return [
        [Step(engine, "write", "write", engine, fresh=True) for engine in ENGINES],
        [Step(engine, "read", "read", engine) for engine in ENGINES],
        [Step(engine, "filtered_read", "filtered_read", engine) for engine in ENGINES],
        *([Step("ours", f"stream {buffer}", "stream", "stream", fresh=True, buffer=buffer)]
          for buffer in buffers),
    ]


# ---- running one step --------------------------------------------------------------------------

def command(step: Step, data: Path, target: Path, oracle_python: Path) -> list[str]:
    python = str(oracle_python) if step.engine == "pypaimon" else sys.executable
    buffer = ["--buffer", step.buffer] if step.buffer else []
    return [python, str(HERE / SCRIPTS[step.engine]), step.action, "--input", str(data),
            "--target", str(target), *buffer]


def expected_check(step: Step, expected: bc.Expected) -> dict[str, int]:
    if step.action == "read":
        return expected.full
    if step.action == "filtered_read":
        return expected.filtered
    return {"rows": expected.full["rows"]}


def verify(step: Step, rows: int, check: dict[str, int], expected: bc.Expected) -> None:
    want = expected_check(step, expected)
    if check != want:
        raise SystemExit(f"CORRECTNESS FAILURE at {rows:,} rows: {step.engine} {step.name} "
                         f"returned {check}, expected {want}")


# ---- running one size --------------------------------------------------------------------------

def dataset(work: Path, rows: int) -> tuple[Path, bc.Expected]:
    """The size's input file and its fingerprints, generated unless a kept copy exists."""
    data, facts = work / "data" / f"logs_{rows}.arrow", work / "data" / f"logs_{rows}.json"
    if data.exists() and facts.exists():
        return data, bc.Expected.from_json(facts.read_text())
    log.info("generating %s rows into %s", f"{rows:,}", data)
    expected = bc.generate(data, rows)
    facts.write_text(expected.to_json())
    return data, expected


def run_rep(step: Step, rows: int, data: Path, tables: Path, expected: bc.Expected,
            args: argparse.Namespace) -> tuple[bc.Rep, dict[str, int]]:
    """One repetition of one step in a fresh process, checked against the expected fingerprint."""
    target = tables / step.target
    if step.fresh:
        shutil.rmtree(target, ignore_errors=True)
    rep, check = bc.run_measured(command(step, data, target, args.oracle_python), args.quiet_wait)
    verify(step, rows, check, expected)
    return rep, check


def run_size(rows: int, args: argparse.Namespace) -> SizeRun:
    data, expected = dataset(args.work, rows)
    tables = args.work / "tables" / str(rows)
    shutil.rmtree(tables, ignore_errors=True)
    outcomes = []
    for phase in phases(args.stream_buffers):
        results = [Outcome(step) for step in phase]
        bc.run_interleaved(results, lambda step: run_rep(step, rows, data, tables, expected, args),
                           reps=lambda step: args.reps,
                           describe=lambda step: f"{rows:,} rows  {step.engine:<8} {step.name:<14}")
        outcomes.extend(results)
    if not args.keep:
        shutil.rmtree(tables, ignore_errors=True)
    return SizeRun(rows, data.stat().st_size / 2**20, outcomes)


# ---- report ------------------------------------------------------------------------------------

PEERS = ("pyarrow", "pypaimon")  # ratio columns: ours / peer
COLUMNS = ("engine", "step", "seconds (median)", "min-max", "CPU s", "rows/s", "peak RSS MiB",
           "RSS before step MiB", "ours/pyarrow", "ours/pypaimon")


def table_row(rows: int, outcomes: list[Outcome], o: Outcome) -> list[str]:
    seconds = o.median("seconds")
    return [o.step.engine, o.step.name, f"{seconds:.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{rows / seconds / 1e6:.2f} M",
            f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            *bc.ratio_cells(outcomes, o.step, PEERS, digits=2, missing="n/a")]


def markdown(rows: int, outcomes: list[Outcome]) -> str:
    return bc.markdown(COLUMNS, (table_row(rows, outcomes, o) for o in outcomes))


def stream_note(outcomes: list[Outcome]) -> str:
    """Whether streaming-ingest memory follows write-buffer-size: peak RSS minus RSS before it."""
    parts = []
    for o in outcomes:
        if o.step.buffer is not None:
            growth = o.median("peak_rss_mib") - o.median("base_rss_mib")
            parts.append(f"write-buffer-size {o.step.buffer}: peak RSS {o.median('peak_rss_mib'):.0f} MiB "
                         f"= {o.median('base_rss_mib'):.0f} before ingest + {growth:.0f} during it")
    return "Streaming ingest (ours): " + "; ".join(parts) + "." if parts else ""


def save(path: Path, meta: dict[str, Any], runs: list[SizeRun]) -> None:
    sizes = [{"rows": run.rows, "input_mib": round(run.input_mib, 1),
              "steps": [o.to_json() for o in run.outcomes]} for run in runs]
    bc.save_json(path, {"meta": meta, "sizes": sizes})


def render(run: SizeRun) -> str:
    notes = "\n".join(note for note in (stream_note(run.outcomes), bc.pressure_note(run.outcomes)) if note)
    return (f"### {run.rows:,} rows (input {run.input_mib:,.0f} MiB of Arrow)\n\n"
            f"{markdown(run.rows, run.outcomes)}\n\n{notes}")


# ---- main --------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--quick", action="store_true", help="smoke run: 200k rows, 1 repetition")
    parser.add_argument("--stream-buffers", nargs="+", default=["64 mb", "256 mb"],
                        help="write-buffer-size values of the streaming-ingest steps")
    parser.add_argument("--oracle-python", type=Path, default=bc.REPO / ".venv-oracle" / "bin" / "python")
    bc.add_driver_options(parser, "append_bench")
    args = parser.parse_args()
    if args.quick:
        args.rows = [200_000]
    args.reps = args.reps or (1 if args.quick else 3)
    args.work = args.work.resolve()
    return args


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    meta = {"versions": bc.driver_versions(paimon_core.__version__, oracle_python=args.oracle_python),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps,
            "stream_buffers": args.stream_buffers}
    runs: list[SizeRun] = []
    try:
        for rows in sorted(args.rows):
            runs.append(run_size(rows, args))
            bc.cross_check(runs[-1].outcomes, ("read", "filtered_read"), f" at {rows:,} rows")
            meta["paimon_core sources after run"] = bc.source_digest()
            save(args.json, meta, runs)
    finally:
        if not args.keep:
            bc.remove_work(args.work, ["data", "tables"])
    bc.print_report(f"Append-table benchmark: {args.reps} process(es) per step, median step seconds", meta,
                    "\n\n".join(render(run) for run in runs), args.json)


if __name__ == "__main__":
    main()
