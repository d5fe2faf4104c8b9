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
import io
import json
import logging
import pstats
import shutil
import subprocess
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
REPO = HERE.parent
DELTALAKE_VERSION = "1.6.6"
DELTA_VENV_PACKAGES = (f"deltalake=={DELTALAKE_VERSION}", "pyarrow", "numpy")
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


@dataclass(frozen=True, slots=True)
class Target:
    """ours / peer (median seconds) of one step must not exceed ``max_ratio`` (or stay below it)."""

    label: str
    action: str
    upserts: int
    peer: str
    max_ratio: float
    strict: bool = False

    def met(self, ratio: float | None) -> bool:
        return ratio is not None and (ratio < self.max_ratio if self.strict else ratio <= self.max_ratio)


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
        Target(f"merge-on-read after {n} upserts >= 5x pypaimon", "read", n, "pypaimon", 1 / 5),
        Target(f"merge-on-read after {n} upserts within 1.5x of raw pyarrow sort+dedupe", "read", n,
               "pyarrow", 1.5))]
    return [
        Target("initial write >= 10x pypaimon", "write", 0, "pypaimon", 1 / 10),
        Target("initial write faster than delta write_deltalake", "write", 0, "delta", 1.0, strict=True),
        Target("upsert >= 10x pypaimon", "upsert", 1, "pypaimon", 1 / 10),
        Target("upsert faster than delta MERGE", "upsert", 1, "delta", 1.0, strict=True),
        *reads,
    ]


# ---- the delta-rs virtualenv ---------------------------------------------------------------------

def ensure_delta_venv(venv: Path) -> Path:
    """The python of ``venv``, created (from this interpreter's base) with deltalake if needed."""
    python = venv / "bin" / "python"
    if python.exists():
        try:
            if bc.venv_versions(python, ["deltalake"]) == [DELTALAKE_VERSION]:
                return python
        except subprocess.CalledProcessError:
            pass
    else:
        log.info("creating virtualenv %s", venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log.info("installing %s into %s", " ".join(DELTA_VENV_PACKAGES), venv)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *DELTA_VENV_PACKAGES], check=True)
    return python


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
    for index in range(max(args.reps, args.oracle_reps)):
        for outcome in results:
            reps = args.oracle_reps if outcome.step.engine == "pypaimon" else args.reps
            if index >= reps:
                continue
            rep, outcome.check = run_rep(ctx, outcome.step, args.quiet_wait)
            outcome.reps.append(rep)
            log.info("%-8s %-22s rep %d/%d: %7.3f s  peak RSS %6.0f MiB", outcome.step.engine,
                     outcome.step.name, index + 1, reps, rep.seconds, rep.peak_rss_mib)
    return results


def cross_check(outcomes: list[Outcome]) -> None:
    """Every engine must have returned the same fingerprint for the same read."""
    for step in {(o.step.action, o.step.upserts) for o in outcomes if "read" in o.step.action}:
        checks = {o.step.engine: o.check for o in outcomes if (o.step.action, o.step.upserts) == step}
        if len({json.dumps(c, sort_keys=True) for c in checks.values()}) != 1:
            raise SystemExit(f"CORRECTNESS FAILURE: {step} results differ: {checks}")


def profile_ours(ctx: Context, directory: Path, last: int) -> dict[str, str]:
    """cProfile of one extra (unreported) run of ours' write, upsert and read after ``last`` upserts."""
    directory.mkdir(parents=True, exist_ok=True)
    texts = {}
    for step in (Step("ours", "write"), Step("ours", "upsert", 1), Step("ours", "read", last)):
        out = directory / f"ours_{step.action}_{step.upserts}.prof"
        bc.run_child(command(ctx, "ours", step.action, prepare_target(ctx, step),
                             "--upserts", str(step.upserts), "--profile", str(out)))
        workers = bc.worker_profile_path(out)
        for name, path in ((step.name, out), (f"{step.name}, thread-pool work items", workers)):
            if path.exists():
                texts[name] = top_functions(path)
                path.with_suffix(".txt").write_text(texts[name])
    return texts


def top_functions(path: Path) -> str:
    buffer = io.StringIO()
    pstats.Stats(str(path), stream=buffer).sort_stats("cumulative").print_stats(PROFILE_TOP)
    return buffer.getvalue()


# ---- report -------------------------------------------------------------------------------------

def peer_ratio(outcomes: list[Outcome], step: Step, peer: str) -> float | None:
    """ours / peer median seconds of the same step, if both ran."""
    def median(engine: str) -> float | None:
        found = [o for o in outcomes
                 if (o.step.engine, o.step.action, o.step.upserts) == (engine, step.action, step.upserts)]
        return found[0].median("seconds") if found else None
    ours, other = median("ours"), median(peer)
    return None if ours is None or other is None else ours / other


COLUMNS = ("engine", "step", "seconds (median)", "min-max", "CPU s", "rows/s", "rows out", "peak RSS MiB",
           "RSS before step MiB", "ours/pypaimon", "ours/delta", "ours/raw-pyarrow")


def table_row(plan: pk.Plan, outcomes: list[Outcome], o: Outcome) -> list[str]:
    seconds = o.median("seconds")
    ratios = [peer_ratio(outcomes, o.step, peer) if o.step.engine == "ours" else None for peer in PEERS]
    return [o.step.engine, o.step.label, f"{seconds:.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{rows_in(o.step, plan) / seconds / 1e6:.2f} M", f"{o.check.get('rows', 0):,}",
            f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            *("" if r is None else f"{r:.3f}x" for r in ratios)]


def verdicts(outcomes: list[Outcome], read_states: list[int]) -> list[dict[str, Any]]:
    results = []
    for target in targets(read_states):
        ratio = peer_ratio(outcomes, Step("ours", target.action, target.upserts), target.peer)
        results.append({**asdict(target), "ratio": ratio, "passed": target.met(ratio)})
    return results


def render_verdict(verdict: dict[str, Any]) -> str:
    ratio = "n/a" if verdict["ratio"] is None else f"{verdict['ratio']:.3f}x"
    bound = "<" if verdict["strict"] else "<="
    return (f"{'PASS' if verdict['passed'] else 'FAIL'}  {verdict['label']}: ours/{verdict['peer']} = {ratio} "
            f"(target {bound} {verdict['max_ratio']:.3f}x)")


def render(ctx: Context, outcomes: list[Outcome], builds: dict[str, float],
           results: list[dict[str, Any]]) -> str:
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
    lines = "\n".join(render_verdict(v) for v in results)
    return f"{table}\n\n" + "\n".join(n for n in notes if n) + f"\n\nTargets:\n\n```\n{lines}\n```"


def save(path: Path, meta: dict[str, Any], outcomes: list[Outcome], builds: dict[str, float],
         results: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    steps = [{**o.to_json(), "name": o.step.name} for o in outcomes]
    path.write_text(json.dumps({"meta": meta, "build_seconds": builds, "steps": steps, "targets": results},
                               indent=1))


def versions(oracle_python: Path, delta_python: Path) -> dict[str, str]:
    pypaimon, oracle_pyarrow = bc.venv_versions(oracle_python, ["pypaimon", "pyarrow"])
    deltalake, delta_pyarrow = bc.venv_versions(delta_python, ["deltalake", "pyarrow"])
    host = bc.host_versions()
    return {"python": host.pop("python"), "pyarrow": host.pop("pyarrow"),
            "paimon_core": paimon_core.__version__, "pypaimon": pypaimon,
            "pyarrow (oracle venv)": oracle_pyarrow, "deltalake": deltalake,
            "pyarrow (delta venv)": delta_pyarrow, **host}


# ---- main ---------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="base rows")
    parser.add_argument("--batch-rows", type=int, default=100_000, help="rows per upsert batch")
    parser.add_argument("--read-states", type=int, nargs="+", default=[1, 5, 20],
                        help="upsert counts after which the full merge-on-read is measured")
    parser.add_argument("--reps", type=int, help="processes per step (default 3, 1 with --quick)")
    parser.add_argument("--oracle-reps", type=int, help="processes per pypaimon step (default --reps)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100k rows, 10k upserts, 1 rep")
    parser.add_argument("--work", type=Path, default=REPO / ".bench" / "pk_bench",
                        help="inputs and tables go here (deleted afterwards unless --keep)")
    parser.add_argument("--json", type=Path, default=REPO / ".bench" / "pk_bench.json")
    parser.add_argument("--oracle-python", type=Path, default=REPO / ".venv-oracle" / "bin" / "python")
    parser.add_argument("--delta-venv", type=Path, default=REPO / ".venv-bench",
                        help=f"virtualenv for deltalake {DELTALAKE_VERSION} (created when missing)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also profile ours' write, upsert and last read (cProfile, top "
                             f"{PROFILE_TOP} by cumulative time) into DIR")
    parser.add_argument("--quiet-wait", type=float, default=5.0,
                        help=f"seconds to wait for CPU pressure below {bc.PSI_QUIET:.0f}%% before each step")
    parser.add_argument("--keep", action="store_true", help="keep the inputs and tables")
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
    cross_check(outcomes)
    profiles = profile_ours(ctx, args.profile, max(args.read_states)) if args.profile else {}
    return outcomes, builds, profiles


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    delta_python = ensure_delta_venv(args.delta_venv)
    plan = pk.Plan(args.rows, args.batch_rows, max(args.read_states))
    meta: dict[str, Any] = {"versions": versions(args.oracle_python, delta_python),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps,
                            "oracle_reps": args.oracle_reps, "plan": asdict(plan)}
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
    results = verdicts(outcomes, args.read_states)
    save(args.json, meta, outcomes, builds, results)
    print(f"\nPrimary-key benchmark: {plan.rows:,} rows, {plan.batches} upserts of {plan.batch_rows:,} "
          f"(half updates), bucket {pk.BUCKETS}; {args.reps} process(es) per step ({args.oracle_reps} for "
          "pypaimon), median step seconds; " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()))
    if meta["paimon_core sources after run"] != meta["versions"]["paimon_core sources"]:
        print("\nWARNING: paimon_core's sources changed during this run; its results mix code versions.")
    print(f"\n{render(ctx, outcomes, builds, results)}")
    for name, text in profiles.items():
        print(f"\ncProfile of ours, {name} (top {PROFILE_TOP} by cumulative time):\n{text}")
    print(f"\nsaved {args.json}")


if __name__ == "__main__":
    main()
