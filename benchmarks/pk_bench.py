"""Primary-key table benchmark: paimon_core (ours) vs pypaimon 2.1.0 vs delta-rs MERGE, plus raw pyarrow.

    .venv/bin/python benchmarks/pk_bench.py [--rows 1000000] [--batch-rows 100000] [--reps 3] [--quick]

A keyed dataset (1M base rows, 20 upsert batches of 100k: half updates, half inserts) is generated
once into Arrow IPC files. Every engine then builds its table states once (after 0, 1, 5 and 20
upserts), outside any measurement. Every repetition of every step runs in its own fresh process
(bench_pk_ours.py and bench_pk_pyarrow.py in this venv, bench_pk_oracle.py in .venv-oracle,
bench_pk_delta.py in .venv-bench, which this script creates), which times only the step and reports
its peak RSS; chained steps start from a fresh copy of the state they need. Prints a Markdown
table, PASS/FAIL for the performance targets, and saves everything to .bench/pk_bench.json.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import bench_common as bc
import bench_pk_common as pk

import paimon_core

log = logging.getLogger("pk_bench")

HERE = Path(__file__).resolve().parent
SCRIPTS = {"pyarrow": "bench_pk_pyarrow.py", "ours": "bench_pk_ours.py", "pypaimon": "bench_pk_oracle.py",
           "delta": "bench_pk_delta.py"}
WRITERS = ("ours", "pypaimon", "delta")  # engines with write and upsert steps
READERS = ("pyarrow", "ours", "pypaimon", "delta")  # engines with read steps (pyarrow: the reference)
PEERS = ("pypaimon", "delta", "pyarrow")  # ratio columns: ours / peer
PROFILE_TOP = 15


@dataclass(frozen=True, slots=True)
class Step:
    """One measured step of one engine."""

    engine: str
    action: str  # write | upsert | read | range_read
    upserts: int = 0  # read: the table state read; upsert: the batch applied (onto the base)

    @property
    def key(self) -> tuple[str, int]:
        """The same step of another engine has the same key."""
        return self.action, self.upserts

    @property
    def name(self) -> str:
        if self.action in ("write", "upsert"):
            return self.action
        return f"{'range read' if self.action == 'range_read' else 'read'} after {self.upserts}"

    @property
    def label(self) -> str:
        """What the engine actually runs, where that differs from the step's name."""
        if self.engine == "delta" and self.action == "upsert":
            return "upsert (MERGE)"
        if self.engine == "pyarrow" and self.action == "read":
            return f"{self.name} (sort+dedupe)"
        return self.name


Outcome = bc.Outcome[Step]
Target = bc.Target  # bc.Target[Step] cannot be called: frozen slots dataclasses reject __orig_class__


@dataclass(slots=True)
class Context:
    """Where things are, and how to run a step of each engine."""

    data: Path
    facts: pk.Facts
    pristine: Path
    run: Path
    pythons: dict[str, Path]


def phases(read_states: list[int]) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    last = max(read_states)
    return [
        [Step(engine, "write") for engine in WRITERS],
        [Step(engine, "upsert", 1) for engine in WRITERS],
        *([Step(engine, "read", n) for engine in READERS] for n in read_states),
        [Step(engine, "range_read", last) for engine in READERS],
    ]


def targets(read_states: list[int]) -> list[Target]:
    reads = [target for n in read_states for target in (
        Target(f"merge-on-read after {n} upserts >= 5x pypaimon", Step("ours", "read", n), "pypaimon", 1 / 5),
        Target(f"merge-on-read after {n} upserts within 1.5x of raw pyarrow sort+dedupe", Step("ours", "read", n),
               "pyarrow", 1.5))]
    return [
        Target("initial write >= 10x pypaimon", Step("ours", "write"), "pypaimon", 1 / 10),
        Target("initial write faster than delta write_deltalake", Step("ours", "write"), "delta", 1.0, strict=True),
        Target("upsert >= 10x pypaimon", Step("ours", "upsert", 1), "pypaimon", 1 / 10),
        Target("upsert faster than delta MERGE", Step("ours", "upsert", 1), "delta", 1.0, strict=True),
        *reads,
    ]


# ---- running steps ------------------------------------------------------------------------------

def command(ctx: Context, engine: str, action: str, target: Path, *extra: str) -> list[str]:
    return [str(ctx.pythons[engine]), str(HERE / SCRIPTS[engine]), action, "--input", str(ctx.data),
            "--target", str(target), *extra]


def dataset(work: Path, plan: pk.Plan) -> tuple[Path, pk.Facts]:
    """The input files and expected results, generated unless a kept copy exists."""
    data = work / "data" / f"pk_{plan.rows}_{plan.batch_rows}x{plan.batches}"
    if (data / pk.FACTS_FILE).exists():
        facts = pk.load_facts(data)
        if facts.plan == plan:
            return data, facts
    log.info("generating %s rows + %d x %s upserts into %s", f"{plan.rows:,}", plan.batches,
             f"{plan.batch_rows:,}", data)
    return data, pk.generate(data, plan)


def build_states(ctx: Context, states: list[int]) -> dict[str, float]:
    """Every engine's table after each number of upserts in ``states`` (unmeasured preparation)."""
    seconds = {}
    for engine in READERS:
        result, _ = bc.run_child(command(ctx, engine, "build", ctx.pristine / engine,
                                         "--states", *map(str, states)))
        seconds[engine] = result["seconds"]
        log.info("built %-8s states %s in %.1f s", engine, states, result["seconds"])
    return seconds


def prepare_target(ctx: Context, step: Step) -> Path:
    """The step's table: fresh for a write, a copy of the base state for an upsert, else a state."""
    if step.action in ("read", "range_read"):
        return pk.state_dir(ctx.pristine / step.engine, step.upserts)  # reads leave it unchanged
    target = ctx.run / step.engine
    shutil.rmtree(target, ignore_errors=True)
    if step.action == "upsert":
        shutil.copytree(pk.state_dir(ctx.pristine / step.engine, step.upserts - 1), target)
    return target


def expected(step: Step, facts: pk.Facts) -> dict[str, int]:
    if step.action == "write":
        return {"rows": facts.plan.rows}
    if step.action == "upsert":
        return {"rows": facts.plan.batch_rows}
    if step.action == "range_read":
        return facts.key_range
    return facts.states[step.upserts]


def rows_in(step: Step, plan: pk.Plan) -> int:
    """Rows a step processes: its input for writes, every stored version for reads."""
    if step.action == "write":
        return plan.rows
    if step.action == "upsert":
        return plan.batch_rows
    return plan.stored_rows(step.upserts)


def run_rep(ctx: Context, step: Step, quiet_wait: float) -> tuple[bc.Rep, dict[str, int]]:
    """One repetition of one step in a fresh process, checked against the expected result."""
    target = prepare_target(ctx, step)
    rep, check = bc.run_measured(command(ctx, step.engine, step.action, target,
                                         "--upserts", str(step.upserts)), quiet_wait)
    want = expected(step, ctx.facts)
    if check != want:
        raise SystemExit(f"CORRECTNESS FAILURE: {step.engine} {step.name} returned {check}, expected {want}")
    return rep, check


def run_phase(ctx: Context, phase: list[Step], args: argparse.Namespace) -> list[Outcome]:
    results = [Outcome(step) for step in phase]
    bc.run_interleaved(results, lambda step: run_rep(ctx, step, args.quiet_wait),
                       reps=lambda step: args.oracle_reps if step.engine == "pypaimon" else args.reps,
                       describe=lambda step: f"{step.engine:<8} {step.name:<22}")
    return results


def profile_ours(ctx: Context, directory: Path, last: int) -> dict[str, str]:
    """cProfile of one extra (unreported) run of ours' write, upsert and read after ``last`` upserts."""
    directory.mkdir(parents=True, exist_ok=True)
    texts = {}
    for step in (Step("ours", "write"), Step("ours", "upsert", 1), Step("ours", "read", last)):
        out = directory / f"ours_{step.action}_{step.upserts}.prof"
        bc.run_child(command(ctx, "ours", step.action, prepare_target(ctx, step),
                             "--upserts", str(step.upserts), "--profile", str(out)))
        texts.update(bc.profile_texts(out, step.name, PROFILE_TOP))
    return texts


# ---- report -------------------------------------------------------------------------------------

COLUMNS = ("engine", "step", "seconds (median)", "min-max", "CPU s", "rows/s", "rows out", "peak RSS MiB",
           "RSS before step MiB", "ours/pypaimon", "ours/delta", "ours/raw-pyarrow")


def table_row(plan: pk.Plan, outcomes: list[Outcome], o: Outcome) -> list[str]:
    seconds = o.median("seconds")
    return [o.step.engine, o.step.label, f"{seconds:.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{rows_in(o.step, plan) / seconds / 1e6:.2f} M", f"{o.check.get('rows', 0):,}",
            f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            *bc.ratio_cells(outcomes, o.step, PEERS)]


def render(ctx: Context, outcomes: list[Outcome], builds: dict[str, float],
           results: list[bc.Verdict[Step]]) -> str:
    plan = ctx.facts.plan
    table = bc.markdown(COLUMNS, (table_row(plan, outcomes, o) for o in outcomes))
    notes = [
        f"rows/s counts the rows a step processes: {plan.rows:,} for the write, {plan.batch_rows:,} for "
        f"an upsert, and every stored version (base + n x batch) for reads. rows out: rows committed or "
        f"returned. Ratios below 1 mean ours is faster.",
        "Unmeasured state builds (base write + upserts + copies): "
        + ", ".join(f"{engine} {seconds:.1f} s" for engine, seconds in builds.items()) + ".",
        bc.pressure_note(outcomes),
    ]
    return f"{table}\n\n" + "\n".join(n for n in notes if n) + f"\n\n{bc.render_verdicts(results)}"


# ---- main ---------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="base rows")
    parser.add_argument("--batch-rows", type=int, default=100_000, help="rows per upsert batch")
    parser.add_argument("--read-states", type=int, nargs="+", default=[1, 5, 20],
                        help="upsert counts after which the full merge-on-read is measured")
    parser.add_argument("--oracle-reps", type=int, help="processes per pypaimon step (default --reps)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100k rows, 10k upserts, 1 rep")
    parser.add_argument("--oracle-python", type=Path, default=bc.REPO / ".venv-oracle" / "bin" / "python")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also profile ours' write, upsert and last read (cProfile, top "
                             f"{PROFILE_TOP} by cumulative time) into DIR")
    bc.add_driver_options(parser, "pk_bench", delta=True)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.batch_rows = 100_000, 10_000
    args.reps = args.reps or (1 if args.quick else 3)
    args.oracle_reps = args.oracle_reps or args.reps
    args.read_states = sorted(set(args.read_states))
    args.work = args.work.resolve()
    return args


def run(args: argparse.Namespace, ctx: Context) -> tuple[list[Outcome], dict[str, float], dict[str, str]]:
    shutil.rmtree(ctx.pristine, ignore_errors=True)
    shutil.rmtree(ctx.run, ignore_errors=True)
    builds = build_states(ctx, [0, *args.read_states])
    outcomes = [o for phase in phases(args.read_states) for o in run_phase(ctx, phase, args)]
    bc.cross_check(outcomes, {o.step.key for o in outcomes if "read" in o.step.action})
    profiles = profile_ours(ctx, args.profile, max(args.read_states)) if args.profile else {}
    return outcomes, builds, profiles


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    delta_python = bc.ensure_delta_venv(args.delta_venv)
    plan = pk.Plan(args.rows, args.batch_rows, max(args.read_states))
    versions = bc.driver_versions(paimon_core.__version__, oracle_python=args.oracle_python,
                                  delta_python=delta_python)
    meta: dict[str, Any] = {"versions": versions, "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                            "reps": args.reps, "oracle_reps": args.oracle_reps, "plan": asdict(plan)}
    try:
        data, facts = dataset(args.work, plan)
        ctx = Context(data, facts, args.work / "pristine", args.work / "run",
                      {"pyarrow": Path(sys.executable), "ours": Path(sys.executable),
                       "pypaimon": args.oracle_python, "delta": delta_python})
        outcomes, builds, profiles = run(args, ctx)
    finally:
        if not args.keep:
            bc.remove_work(args.work, ["data", "pristine", "run"])
    meta["paimon_core sources after run"] = bc.source_digest()
    results = bc.verdicts(outcomes, targets(args.read_states))
    bc.save_json(args.json, {"meta": meta, "build_seconds": builds, "steps": [o.to_json() for o in outcomes],
                             "targets": [v.to_json() for v in results]})
    title = (f"Primary-key benchmark: {plan.rows:,} rows, {plan.batches} upserts of {plan.batch_rows:,} "
             f"(half updates), bucket {pk.BUCKETS}; {args.reps} process(es) per step ({args.oracle_reps} for "
             "pypaimon), median step seconds")
    bc.print_report(title, meta, render(ctx, outcomes, builds, results), args.json, profiles,
                    f"top {PROFILE_TOP} by cumulative time")


if __name__ == "__main__":
    main()
