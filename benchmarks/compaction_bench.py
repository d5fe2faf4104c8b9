"""Full-compaction benchmark: paimon_core (ours) vs raw pyarrow vs delta-rs optimize.compact.

    .venv/bin/python benchmarks/compaction_bench.py [--reps 3] [--quick] [--keep] [--profile DIR]

Two scenarios, generated once into Arrow IPC files (one record batch per commit):

* pk: a primary-key table (4 buckets) built by 10 commits of 200k rows whose keys are drawn from
  1.3M, so later commits update earlier keys; write-only, so every commit stays a level-0 run.
* append: an append table (bucket -1) built by 200 commits of 10k log events (200 small files).

Every engine builds its table states once, outside any measurement. Every repetition of every step
then runs in its own fresh process (bench_compaction_ours.py and bench_compaction_pyarrow.py in this
venv, bench_compaction_delta.py in .venv-bench, which this script creates), which times only the
step and reports its peak RSS: a read before compaction, the full compaction of a fresh copy of the
built state, and a read after it. Prints a Markdown table, PASS/FAIL for the performance targets,
and saves everything to .bench/compaction_bench.json. See benchmarks/README.md.
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
import bench_compaction_common as cc

import paimon_core

log = logging.getLogger("compaction_bench")

HERE = Path(__file__).resolve().parent
ENGINES = ("pyarrow", "ours", "delta")
SCRIPTS = {"pyarrow": "bench_compaction_pyarrow.py", "ours": "bench_compaction_ours.py",
           "delta": "bench_compaction_delta.py"}
PEERS = ("pyarrow", "delta")  # ratio columns: ours / peer
PROFILE_TOP = 15
MIB = 2**20


@dataclass(frozen=True, slots=True)
class Step:
    """One measured step of one engine."""

    engine: str
    scenario: str  # pk | append
    action: str  # compact | read
    state: str = "after"  # read: the table before or after its full compaction

    @property
    def key(self) -> tuple[str, str, str]:
        """The same step of another engine has the same key."""
        return self.scenario, self.action, self.state

    @property
    def name(self) -> str:
        return "full compaction" if self.action == "compact" else f"read {self.state} compaction"

    @property
    def label(self) -> str:
        """The step's name, and what the engine runs for it where that is not obvious."""
        details = {
            ("pyarrow", "compact", "pk"): "read + sort + dedupe + write",
            ("pyarrow", "compact", "append"): "read + concat + write",
            ("pyarrow", "read before", "pk"): "read + sort + dedupe",
            ("pyarrow", "read before", "append"): "read + concat",
            ("pyarrow", "read after", "pk"): "pq.read_table",
            ("pyarrow", "read after", "append"): "pq.read_table",
            ("delta", "compact", "pk"): "optimize.compact, no dedupe",
            ("delta", "compact", "append"): "optimize.compact",
            ("delta", "read before", "pk"): "all versions",
            ("delta", "read after", "pk"): "all versions",
            ("ours", "compact", "pk"): "compact(full=True)",
            ("ours", "compact", "append"): "compact(full=True)",
        }
        action = self.action if self.action == "compact" else f"read {self.state}"
        detail = details.get((self.engine, action, self.scenario))
        return f"{self.name} ({detail})" if detail else self.name


Outcome = bc.Outcome[Step]
Target = bc.Target  # bc.Target[Step] cannot be called: frozen slots dataclasses reject __orig_class__

TARGETS = [target for scenario in cc.SCENARIOS for target in (
    Target(f"{scenario} full compaction: ours >= 50% of raw pyarrow's throughput", Step("ours", scenario, "compact"),
           "pyarrow", 2.0, throughput=True),
    Target(f"{scenario} full compaction: ours within 1.2x of delta-rs optimize.compact",
           Step("ours", scenario, "compact"), "delta", 1.2),
    Target(f"{scenario} read after compaction: ours within 1.3x of raw pyarrow pq.read_table",
           Step("ours", scenario, "read"), "pyarrow", 1.3),
)]


@dataclass(slots=True)
class Context:
    """Where things are, and how to run a step of each engine."""

    data: Path
    facts: cc.Facts
    pristine: Path  # built states, copied before every compaction repetition
    run: Path  # the copy a compaction repetition works on
    compacted: Path  # the last compaction repetition's result, read by the reads after compaction
    pythons: dict[str, Path]


def phases(scenarios: list[str]) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    return [phase for scenario in scenarios for phase in (
        [Step(engine, scenario, "read", "before") for engine in ENGINES],
        [Step(engine, scenario, "compact") for engine in ENGINES],
        [Step(engine, scenario, "read", "after") for engine in ENGINES],
    )]


# ---- running steps ------------------------------------------------------------------------------

def command(ctx: Context, engine: str, action: str, scenario: str, target: Path, *extra: str) -> list[str]:
    return [str(ctx.pythons[engine]), str(HERE / SCRIPTS[engine]), action, "--scenario", scenario,
            "--input", str(ctx.data), "--target", str(target), *extra]


def dataset(work: Path, plan: cc.Plan) -> tuple[Path, cc.Facts]:
    """The input files and expected results, generated unless a kept copy exists."""
    data = work / "data" / (f"pk_{plan.pk_commits}x{plan.pk_rows}_keys{plan.pk_keys}"
                            f"_append_{plan.append_commits}x{plan.append_rows}")
    if (data / cc.FACTS_FILE).exists():
        facts = cc.load_facts(data)
        if facts.plan == plan:
            return data, facts
    log.info("generating pk %d x %s rows (keys < %s) and append %d x %s rows into %s", plan.pk_commits,
             f"{plan.pk_rows:,}", f"{plan.pk_keys:,}", plan.append_commits, f"{plan.append_rows:,}", data)
    return data, cc.generate(data, plan)


def build_expected(step_engine: str, scenario: str, plan: cc.Plan) -> dict[str, int]:
    want = {"rows": plan.rows(scenario)}
    if step_engine == "ours" and scenario == "pk":
        want["max_level0_files"] = plan.pk_commits
    if scenario == "append":
        want["files"] = plan.append_commits
    return want


def build_states(ctx: Context, scenarios: list[str]) -> dict[str, dict[str, Any]]:
    """Every engine's table of every scenario, before compaction (unmeasured preparation)."""
    builds: dict[str, dict[str, Any]] = {}
    for scenario in scenarios:
        for engine in ENGINES:
            result, _ = bc.run_child(command(ctx, engine, "build", scenario, ctx.pristine / engine / scenario))
            want = build_expected(engine, scenario, ctx.facts.plan)
            got = {k: result["check"].get(k) for k in want}
            if got != want:
                raise SystemExit(f"CORRECTNESS FAILURE: {engine} built {scenario} as {result['check']}, "
                                 f"expected {want}")
            builds[f"{engine} {scenario}"] = {"seconds": result["seconds"], **result["check"]}
            log.info("built %-7s %-6s in %5.1f s: %s", engine, scenario, result["seconds"], result["check"])
    return builds


def prepare_target(ctx: Context, step: Step) -> Path:
    """A compaction works on a fresh copy of the built state; reads use a state in place."""
    if step.action == "read":
        return (ctx.pristine if step.state == "before" else ctx.compacted) / step.engine / step.scenario
    target = ctx.run / step.engine / step.scenario
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(ctx.pristine / step.engine / step.scenario, target)
    return target


def rows_after(engine: str, scenario: str, facts: cc.Facts) -> int:
    """Rows a compacted table holds: the newest row per key (Paimon, raw pyarrow pk), else all rows."""
    if scenario == "pk" and engine != "delta":
        return facts.pk_newest["rows"]
    return facts.plan.rows(scenario)


def expected(step: Step, facts: cc.Facts) -> dict[str, int]:
    if step.action == "compact":
        want = {"rows_in": facts.plan.rows(step.scenario), "rows_out": rows_after(step.engine, step.scenario, facts)}
        if step.engine == "ours" and step.scenario == "pk":
            want.update(max_level0_files=0, max_sorted_runs=1)  # one sorted run at the max level
        return want
    if step.scenario == "append":
        return facts.append_all
    return facts.pk_all if step.engine == "delta" else facts.pk_newest


def run_rep(ctx: Context, step: Step, quiet_wait: float) -> tuple[bc.Rep, dict[str, int]]:
    """One repetition of one step in a fresh process, checked against the expected result."""
    target = prepare_target(ctx, step)
    extra = ["--state", step.state] if step.action == "read" else []
    rep, check = bc.run_measured(command(ctx, step.engine, step.action, step.scenario, target, *extra), quiet_wait)
    want = expected(step, ctx.facts)
    if {k: check.get(k) for k in want} != want:
        raise SystemExit(f"CORRECTNESS FAILURE: {step.engine} {step.scenario} {step.name} returned {check}, "
                         f"expected {want}")
    return rep, check


def run_phase(ctx: Context, phase: list[Step], args: argparse.Namespace) -> list[Outcome]:
    results = [Outcome(step) for step in phase]
    bc.run_interleaved(results, lambda step: run_rep(ctx, step, args.quiet_wait), reps=lambda step: args.reps,
                       describe=lambda step: f"{step.engine:<7} {step.scenario:<6} {step.name:<22}")
    for outcome in results:
        if outcome.step.action == "compact":  # keep the last repetition's result for the reads after it
            done = ctx.compacted / outcome.step.engine / outcome.step.scenario
            shutil.rmtree(done, ignore_errors=True)
            done.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(ctx.run / outcome.step.engine / outcome.step.scenario, done)
    return results


def profile_ours(ctx: Context, directory: Path, scenarios: list[str]) -> dict[str, str]:
    """cProfile of one extra (unreported) run of ours' compactions and reads after compaction."""
    directory.mkdir(parents=True, exist_ok=True)
    texts = {}
    for scenario in scenarios:
        for step in (Step("ours", scenario, "compact"), Step("ours", scenario, "read")):
            out = directory / f"ours_{scenario}_{step.action}.prof"
            target = prepare_target(ctx, step)
            extra = ["--state", step.state] if step.action == "read" else []
            bc.run_child(command(ctx, "ours", step.action, scenario, target, *extra, "--profile", str(out)))
            if step.action == "compact":
                shutil.rmtree(target, ignore_errors=True)
            texts.update(bc.profile_texts(out, f"{scenario} {step.name}", PROFILE_TOP, ("cumulative", "tottime")))
    return texts


# ---- report -------------------------------------------------------------------------------------

def rows_in(o: Outcome, facts: cc.Facts) -> int:
    """Rows a step processes: every stored version, except for a read of a compacted table."""
    if o.step.action == "read" and o.step.state == "after":
        return rows_after(o.step.engine, o.step.scenario, facts)
    return facts.plan.rows(o.step.scenario)


COLUMNS = ("scenario", "step", "engine", "seconds (median)", "min-max", "CPU s", "rows/s in", "MiB/s in",
           "rows in → out", "files in → out", "MiB in → out", "peak RSS MiB", "RSS before step MiB",
           "ours/raw-pyarrow", "ours/delta")


def table_row(facts: cc.Facts, outcomes: list[Outcome], o: Outcome) -> list[str]:
    seconds = o.median("seconds")
    rows = rows_in(o, facts)
    check = o.check
    if o.step.action == "compact":
        throughput = f"{check['bytes_in'] / MIB / seconds:.0f}"
        files = f"{check['files_in']} → {check['files_out']}"
        size = f"{check['bytes_in'] / MIB:.1f} → {check['bytes_out'] / MIB:.1f}"
        out = check["rows_out"]
    else:
        throughput = files = size = ""
        out = check["rows"]
    return [o.step.scenario, o.step.label, o.step.engine, f"{seconds:.3f}", o.spread(),
            f"{o.median('cpu_seconds'):.2f}", f"{rows / seconds / 1e6:.2f} M", throughput, f"{rows:,} → {out:,}",
            files, size, f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            *bc.ratio_cells(outcomes, o.step, PEERS)]


def verdicts(outcomes: list[Outcome], scenarios: list[str]) -> list[bc.Verdict[Step]]:
    return bc.verdicts(outcomes, (t for t in TARGETS if t.step.scenario in scenarios))


def memory_note(outcomes: list[Outcome], facts: cc.Facts, data: Path) -> str:
    """Ours' peak RSS per step (and its growth during the step), against the rows' size as Arrow."""
    parts = []
    for scenario in dict.fromkeys(o.step.scenario for o in outcomes):
        arrow = (data / cc.FILES[scenario]).stat().st_size / MIB
        steps = [f"{o.step.name} {o.median('peak_rss_mib'):.0f} MiB "
                 f"(+{o.median('peak_rss_mib') - o.median('base_rss_mib'):.0f})"
                 for o in outcomes if o.step.engine == "ours" and o.step.scenario == scenario]
        parts.append(f"{scenario} ({facts.plan.rows(scenario):,} stored rows, {arrow:.0f} MiB as Arrow): "
                     + ", ".join(steps))
    return ("Peak RSS of ours, and in brackets its growth during the step: " + "; ".join(parts) + "."
            if parts else "")


def render(ctx: Context, outcomes: list[Outcome], builds: dict[str, dict[str, Any]],
           results: list[bc.Verdict[Step]]) -> str:
    facts = ctx.facts
    table = bc.markdown(COLUMNS, (table_row(facts, outcomes, o) for o in outcomes))
    notes = [
        "rows/s in counts the rows a step processes: every stored version for compactions and for reads "
        "before compaction, the compacted table's rows for reads after it. MiB/s in is the engine's own "
        "input files (their formats differ: Paimon's pk files add _KEY_id, _SEQUENCE_NUMBER and _VALUE_KIND, "
        "raw pyarrow's add _seq, delta-rs appends write snappy). Ratios are median seconds; below 1 means "
        "ours is faster.",
        "Delta has no primary key: its pk table keeps all "
        f"{facts.plan.rows('pk'):,} versions, which optimize.compact only bin-packs (no dedupe), and its "
        "reads of that table are checked by row count and key sum only.",
        "Correctness: every compacted read matched the generator's fingerprint (row count, key sum and a "
        f"digest of every column in key order): pk {facts.pk_newest['rows']:,} newest rows per key for ours "
        f"and raw pyarrow, append {facts.append_all['rows']:,} rows for all three engines.",
        "Unmeasured builds: " + ", ".join(f"{name} {b['seconds']:.1f} s ({b['files']} files)"
                                          for name, b in builds.items()) + ".",
        memory_note(outcomes, facts, ctx.data),
        bc.pressure_note(outcomes),
    ]
    return f"{table}\n\n" + "\n\n".join(n for n in notes if n) + f"\n\n{bc.render_verdicts(results)}"


# ---- main ---------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", choices=cc.SCENARIOS, default=list(cc.SCENARIOS))
    parser.add_argument("--pk-commits", type=int, default=10, help="pk: commits (level-0 runs per bucket)")
    parser.add_argument("--pk-rows", type=int, default=200_000, help="pk: rows per commit")
    parser.add_argument("--pk-keys", type=int, default=1_300_000, help="pk: keyspace the commits draw from")
    parser.add_argument("--append-commits", type=int, default=200, help="append: commits (small files)")
    parser.add_argument("--append-rows", type=int, default=10_000, help="append: rows per commit")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: pk 10 x 20k rows (keys < 130k), append 200 x 1k rows, 1 rep")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also profile ours' compactions and reads after compaction (cProfile, top "
                             f"{PROFILE_TOP} by cumulative and by own time) into DIR")
    bc.add_driver_options(parser, "compaction_bench", delta=True)
    args = parser.parse_args()
    if args.quick:
        args.pk_rows, args.pk_keys, args.append_rows = 20_000, 130_000, 1_000
    if args.pk_rows > args.pk_keys:
        parser.error("--pk-rows must not exceed --pk-keys (a commit holds every key once)")
    args.reps = args.reps or (1 if args.quick else 3)
    args.scenarios = [s for s in cc.SCENARIOS if s in args.scenarios]
    args.work = args.work.resolve()
    return args


def run(args: argparse.Namespace, ctx: Context) -> tuple[list[Outcome], dict[str, dict[str, Any]], dict[str, str]]:
    for directory in (ctx.pristine, ctx.run, ctx.compacted):
        shutil.rmtree(directory, ignore_errors=True)
    builds = build_states(ctx, args.scenarios)
    outcomes = [o for phase in phases(args.scenarios) for o in run_phase(ctx, phase, args)]
    profiles = profile_ours(ctx, args.profile, args.scenarios) if args.profile else {}
    return outcomes, builds, profiles


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    delta_python = bc.ensure_delta_venv(args.delta_venv)
    plan = cc.Plan(args.pk_commits, args.pk_rows, args.pk_keys, args.append_commits, args.append_rows)
    meta: dict[str, Any] = {"versions": bc.driver_versions(paimon_core.__version__, delta_python=delta_python),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps,
                            "plan": asdict(plan), "scenarios": args.scenarios}
    try:
        data, facts = dataset(args.work, plan)
        ctx = Context(data, facts, args.work / "pristine", args.work / "run", args.work / "compacted",
                      {"pyarrow": Path(sys.executable), "ours": Path(sys.executable), "delta": delta_python})
        outcomes, builds, profiles = run(args, ctx)
        results = verdicts(outcomes, args.scenarios)
        report = render(ctx, outcomes, builds, results)
    finally:
        if not args.keep:
            bc.remove_work(args.work, ["data", "pristine", "run", "compacted"])
    meta["paimon_core sources after run"] = bc.source_digest()
    bc.save_json(args.json, {"meta": meta, "builds": builds, "steps": [o.to_json() for o in outcomes],
                             "targets": [v.to_json() for v in results]})
    title = (f"Compaction benchmark: pk {plan.pk_commits} commits x {plan.pk_rows:,} rows (keys < {plan.pk_keys:,}, "
             f"bucket {cc.PK_BUCKETS}, {facts.pk_newest['rows']:,} distinct), append {plan.append_commits} commits "
             f"x {plan.append_rows:,} rows (bucket -1); {args.reps} process(es) per step, median step seconds")
    bc.print_report(title, meta, report, args.json, profiles,
                    f"top {PROFILE_TOP} by cumulative, then by own time")


if __name__ == "__main__":
    main()
