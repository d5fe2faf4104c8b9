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
import json
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
REPO = HERE.parent
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
        for index in range(args.reps):
            for outcome in results:
                rep, outcome.check = run_rep(outcome.step, rows, data, tables, expected, args)
                outcome.reps.append(rep)
                log.info("%s rows  %-8s %-14s rep %d/%d: %7.3f s  peak RSS %6.0f MiB", f"{rows:,}",
                         outcome.step.engine, outcome.step.name, index + 1, args.reps, rep.seconds,
                         rep.peak_rss_mib)
        outcomes.extend(results)
    if not args.keep:
        shutil.rmtree(tables, ignore_errors=True)
    return SizeRun(rows, data.stat().st_size / 2**20, outcomes)


# ---- report ------------------------------------------------------------------------------------

def ratio(outcomes: list[Outcome], step: Step, other: str) -> str:
    if step.engine != "ours":
        return ""
    peers = [o for o in outcomes if o.step.engine == other and o.step.name == step.name]
    if not peers:
        return "n/a"
    ours = next(o for o in outcomes if o.step == step)
    return f"{ours.median('seconds') / peers[0].median('seconds'):.2f}x"


COLUMNS = ("engine", "step", "seconds (median)", "min-max", "CPU s", "rows/s", "peak RSS MiB",
           "RSS before step MiB", "ours/pyarrow", "ours/pypaimon")


def table_row(rows: int, outcomes: list[Outcome], o: Outcome) -> list[str]:
    seconds = o.median("seconds")
    return [o.step.engine, o.step.name, f"{seconds:.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{rows / seconds / 1e6:.2f} M",
            f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            ratio(outcomes, o.step, "pyarrow"), ratio(outcomes, o.step, "pypaimon")]


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


def cross_check(run: SizeRun) -> None:
    """Every engine must have returned the same fingerprint for the same read."""
    for action in ("read", "filtered_read"):
        checks = {o.step.engine: o.check for o in run.outcomes if o.step.action == action}
        if len({json.dumps(c, sort_keys=True) for c in checks.values()}) != 1:
            raise SystemExit(f"CORRECTNESS FAILURE at {run.rows:,} rows: {action} results differ: {checks}")


def versions(oracle_python: Path) -> dict[str, str]:
    pypaimon, oracle_pyarrow = bc.venv_versions(oracle_python, ["pypaimon", "pyarrow"])
    host = bc.host_versions()
    return {"python": host.pop("python"), "pyarrow": host.pop("pyarrow"),
            "paimon_core": paimon_core.__version__, "pypaimon": pypaimon,
            "pyarrow (oracle venv)": oracle_pyarrow, **host}


def save(path: Path, meta: dict[str, Any], runs: list[SizeRun]) -> None:
    sizes = [{"rows": run.rows, "input_mib": round(run.input_mib, 1),
              "steps": [o.to_json() for o in run.outcomes]} for run in runs]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "sizes": sizes}, indent=1))


def render(run: SizeRun) -> str:
    notes = "\n".join(note for note in (stream_note(run.outcomes), bc.pressure_note(run.outcomes)) if note)
    return (f"### {run.rows:,} rows (input {run.input_mib:,.0f} MiB of Arrow)\n\n"
            f"{markdown(run.rows, run.outcomes)}\n\n{notes}")


# ---- main --------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--reps", type=int, help="processes per step (default 3, 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 200k rows, 1 repetition")
    parser.add_argument("--stream-buffers", nargs="+", default=["64 mb", "256 mb"],
                        help="write-buffer-size values of the streaming-ingest steps")
    parser.add_argument("--work", type=Path, default=REPO / ".bench" / "append_bench",
                        help="inputs and tables go here (deleted afterwards unless --keep)")
    parser.add_argument("--json", type=Path, default=REPO / ".bench" / "append_bench.json")
    parser.add_argument("--oracle-python", type=Path, default=REPO / ".venv-oracle" / "bin" / "python")
    parser.add_argument("--quiet-wait", type=float, default=5.0,
                        help=f"seconds to wait for CPU pressure below {bc.PSI_QUIET:.0f}%% before each step")
    parser.add_argument("--keep", action="store_true", help="keep the inputs and tables")
    args = parser.parse_args()
    if args.quick:
        args.rows = [200_000]
    args.reps = args.reps or (1 if args.quick else 3)
    args.work = args.work.resolve()
    return args


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    meta = {"versions": versions(args.oracle_python), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "reps": args.reps, "stream_buffers": args.stream_buffers}
    runs: list[SizeRun] = []
    try:
        for rows in sorted(args.rows):
            runs.append(run_size(rows, args))
            cross_check(runs[-1])
            meta["paimon_core sources after run"] = bc.source_digest()
            save(args.json, meta, runs)
    finally:
        if not args.keep:
            bc.remove_work(args.work, ["data", "tables"])
    print(f"\nAppend-table benchmark: {args.reps} process(es) per step, median step seconds; "
          + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()))
    if meta.get("paimon_core sources after run") != meta["versions"]["paimon_core sources"]:
        print("\nWARNING: paimon_core's sources changed during this run; its results mix code versions.")
    for run in runs:
        print(f"\n{render(run)}")
    print(f"\nsaved {args.json}")


if __name__ == "__main__":
    main()
