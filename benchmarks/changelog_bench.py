"""Changelog benchmark: what producing a changelog adds to compaction in paimon_core (ours).

    .venv/bin/python benchmarks/changelog_bench.py [--rows 1000000] [--batch-rows 100000] [--batches 3]
        [--reps 3] [--quick] [--variants ...] [--no-delta] [--keep]

Tables with the same data and the same options except ``changelog-producer`` (none,
full-compaction, lookup), all write-only with 4 fixed buckets: a base of 1M rows, compacted fully,
then batches of 100k rows (updates, 10% new keys, 5% deletes), each followed by one compaction
(bench_changelog_common.VARIANTS). Every table state is built once, outside any measurement; every
repetition of every compaction then runs in its own fresh process on a fresh copy of its state
(bench_changelog_ours.py), which times only the compaction and reports its peak RSS, then reads the
changelog and the table for the checks. For context, delta-rs MERGEs the first batch into a 1M-row
Delta table with and without its change data feed (bench_changelog_delta.py in .venv-bench).

Prints Markdown tables, every failed check, and saves everything to .bench/changelog_bench.json.
Exits with status 1 when a check failed. See benchmarks/README.md.
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

import bench_changelog_common as cl
import bench_common as bc

import paimon_core

log = logging.getLogger("changelog_bench")

HERE = Path(__file__).resolve().parent
SCRIPTS = {"ours": "bench_changelog_ours.py", "delta": "bench_changelog_delta.py"}
ACTIONS = {"ours": "compact", "delta": "merge"}
DELTA_BATCH = 1  # the batch delta-rs MERGEs, onto the base


@dataclass(frozen=True, slots=True)
class Step:
    """One measured step: ours' compaction after batch ``batch``, or delta's MERGE of it."""

    engine: str  # ours | delta
    variant: str  # ours: a key of cl.VARIANTS; delta: plain | cdf
    batch: int

    @property
    def key(self) -> tuple[str, int]:
        return self.variant, self.batch

    @property
    def name(self) -> str:
        if self.engine == "delta":
            return f"MERGE batch {self.batch} {'with' if self.variant == 'cdf' else 'without'} change data feed"
        variant = cl.VARIANTS[self.variant]
        return f"{variant.producer}, {variant.compaction}, batch {self.batch}"


Outcome = bc.Outcome[Step]


@dataclass(slots=True)
class Context:
    """Where things are, and how to run a step of each engine."""

    data: Path
    facts: cl.Facts
    pristine: Path  # built states, copied before every repetition
    run: Path  # the copy a repetition works on
    pythons: dict[str, Path]


def phases(variants: list[str], batches: int, delta: bool) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    ours = [[Step("ours", variant, batch) for variant in variants] for batch in range(1, batches + 1)]
    return [*ours, [Step("delta", variant, DELTA_BATCH) for variant in cl.DELTA_VARIANTS]] if delta else ours


# ---- running steps ------------------------------------------------------------------------------

def command(ctx: Context, engine: str, action: str, variant: str, target: Path, *extra: str) -> list[str]:
    return [str(ctx.pythons[engine]), str(HERE / SCRIPTS[engine]), action, "--variant", variant,
            "--input", str(ctx.data), "--target", str(target), *extra]


def dataset(work: Path, plan: cl.Plan) -> tuple[Path, cl.Facts]:
    """The input files and expected results, generated unless a kept copy exists."""
    data = work / "data" / (f"cl_{plan.rows}_{plan.batch_rows}x{plan.batches}"
                            f"_i{plan.insert_share:g}_d{plan.delete_share:g}")
    if (data / cl.FACTS_FILE).exists():
        facts = cl.load_facts(data)
        if facts.plan == plan:
            return data, facts
    log.info("generating %s rows + %d batches of %s (%s updates, %s inserts, %s deletes) into %s", f"{plan.rows:,}",
             plan.batches, f"{plan.batch_rows:,}", f"{plan.updates:,}", f"{plan.inserts:,}", f"{plan.deletes:,}", data)
    return data, cl.generate(data, plan)


def build_states(ctx: Context, variants: list[str], delta: bool) -> dict[str, float]:
    """Every table's states before each compaction (unmeasured preparation)."""
    seconds = {}
    tables = [("ours", v) for v in variants] + ([("delta", v) for v in cl.DELTA_VARIANTS] if delta else [])
    for engine, variant in tables:
        extra = ["--batches", str(ctx.facts.plan.batches)] if engine == "ours" else []
        result, _ = bc.run_child(command(ctx, engine, "build", variant, ctx.pristine / engine / variant, *extra))
        seconds[f"{engine} {variant}"] = result["seconds"]
        log.info("built %-5s %-16s in %5.1f s", engine, variant, result["seconds"])
    return seconds


def prepare_target(ctx: Context, step: Step) -> Path:
    """A fresh copy of the state the step starts from (made here, before its process starts)."""
    built = ctx.pristine / step.engine / step.variant
    source = cl.state_dir(built, step.batch) if step.engine == "ours" else built
    target = ctx.run / step.engine / step.variant
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    return target


def run_rep(ctx: Context, step: Step, quiet_wait: float) -> tuple[bc.Rep, dict[str, Any]]:
    """One repetition in a fresh process. Its checks are judged after the run (:func:`failures`)."""
    target = prepare_target(ctx, step)
    return bc.run_measured(command(ctx, step.engine, ACTIONS[step.engine], step.variant, target,
                                   "--batch", str(step.batch)), quiet_wait)


def run_phase(ctx: Context, phase: list[Step], args: argparse.Namespace) -> list[Outcome]:
    results = [Outcome(step) for step in phase]
    bc.run_interleaved(results, lambda step: run_rep(ctx, step, args.quiet_wait), reps=lambda step: args.reps,
                       describe=lambda step: f"{step.engine:<5} {step.variant:<16} batch {step.batch}")
    return results


# ---- checks -------------------------------------------------------------------------------------

def _changes_problem(got: dict[str, dict[str, int]], want: dict[str, dict[str, int]]) -> str | None:
    if got == want:
        return None
    if cl.describe_changes(got) == cl.describe_changes(want):
        return (f"changelog {cl.describe_changes(got)} as expected, but with other key or v_int sums: "
                f"{got}, expected {want}")
    return f"changelog {cl.describe_changes(got)}, expected {cl.describe_changes(want)}"


def failures(o: Outcome, facts: cl.Facts) -> list[str]:
    """The checks of one step that failed, one line each."""
    step, check = o.step, o.check
    found = []
    if check["table"] != facts.tables[step.batch]:
        found.append(f"the table reads {check['table']}, expected {facts.tables[step.batch]}")
    if step.engine == "ours":
        variant = cl.VARIANTS[step.variant]
        want = facts.changes[step.batch] if variant.produces_changelog else cl.no_changes()
        problem = _changes_problem(check["changes"], want)
        if "changes_error" in check:
            found.append(f"reading the changelog failed: {check['changes_error']}")
        elif problem:
            found.append(problem)
        if variant.empties_level0 and check["level0_files"]:
            found.append(f"{check['level0_files']} level-0 files left in a bucket")
    else:
        want_rows = cl.delta_expected(facts, step.batch)
        got_rows = {k: check[k] for k in want_rows}
        if got_rows != want_rows:
            found.append(f"MERGE changed {got_rows}, expected {want_rows}")
        if "cdf" in check:
            want_cdf = {kind: facts.changes[step.batch][kind]["rows"] for kind in cl.KINDS}
            if check["cdf"] != want_cdf:
                found.append(f"change data feed {check['cdf']}, expected {want_cdf}")
    return found


def all_failures(outcomes: list[Outcome], facts: cl.Facts) -> list[str]:
    """Every failed check as ``step: problem``, including tables that differ between variants."""
    found = [f"{o.step.name}: {problem}" for o in outcomes for problem in failures(o, facts)]
    for batch in sorted({o.step.batch for o in outcomes}):
        tables = {o.step.variant: o.check["table"] for o in outcomes if o.step.batch == batch}
        if len({str(sorted(t.items())) for t in tables.values()}) > 1:
            found.append(f"batch {batch}: the tables differ between variants: {tables}")
    return found


# ---- report -------------------------------------------------------------------------------------

def _ratio(outcomes: list[Outcome], o: Outcome, baseline: str | None) -> str:
    """The step's median seconds over ``baseline``'s for the same batch."""
    if baseline is None or baseline == o.step.variant:
        return ""
    other = bc.find(outcomes, "ours", (baseline, o.step.batch))
    return "n/a" if other is None else f"{o.median('seconds') / other.median('seconds'):.2f}x"


OURS_COLUMNS = ("batch", "changelog-producer", "compaction", "seconds (median)", "min-max", "CPU s",
                "vs plain, same kind", "vs plain full", "rows in → out", "files in → out", "changelog rows",
                "checks", "peak RSS MiB", "RSS before step MiB")


def ours_row(outcomes: list[Outcome], o: Outcome, facts: cl.Facts) -> list[str]:
    variant, check = cl.VARIANTS[o.step.variant], o.check
    work = (f"{check['rows_in']:,} → {check['rows_out']:,}", f"{check['files_in']} → {check['files_out']}")
    return [str(o.step.batch), variant.producer, variant.compaction, f"{o.median('seconds'):.3f}", o.spread(),
            f"{o.median('cpu_seconds'):.2f}", _ratio(outcomes, o, variant.baseline), _ratio(outcomes, o, cl.PLAIN_FULL),
            *(work if check["compacted"] else ("nothing to compact", "")), cl.describe_changes(check["changes"]),
            "FAIL" if failures(o, facts) else "ok", f"{o.median('peak_rss_mib'):.0f}",
            f"{o.median('base_rss_mib'):.0f}"]


SUMMARY_COLUMNS = ("changelog-producer", "compaction", "seconds, sum of the batches' medians", "vs plain, same kind",
                   "vs plain full", "changelog rows", "steps with failed checks", "peak RSS MiB (max)")


def summary_rows(outcomes: list[Outcome], facts: cl.Facts) -> list[list[str]]:
    """One row per variant, over all its batches."""
    totals = {}
    for name in dict.fromkeys(o.step.variant for o in outcomes if o.step.engine == "ours"):
        totals[name] = sum(o.median("seconds") for o in outcomes if o.step.variant == name)

    def ratio(name: str, baseline: str | None) -> str:
        if baseline is None or baseline == name:
            return ""
        return f"{totals[name] / totals[baseline]:.2f}x" if baseline in totals else "n/a"

    rows = []
    for name, total in totals.items():
        variant = cl.VARIANTS[name]
        mine = [o for o in outcomes if o.step.variant == name]
        changes = sum(kind["rows"] for o in mine for kind in o.check["changes"].values())
        failed = sum(1 for o in mine if failures(o, facts))
        rows.append([variant.producer, variant.compaction, f"{total:.3f}", ratio(name, variant.baseline),
                     ratio(name, cl.PLAIN_FULL), f"{changes:,}", f"{failed} of {len(mine)}",
                     f"{max(o.median('peak_rss_mib') for o in mine):.0f}"])
    return rows


DELTA_COLUMNS = ("step", "seconds (median)", "min-max", "CPU s", "rows updated / inserted / deleted",
                 "change data feed rows", "checks", "peak RSS MiB", "RSS before step MiB")


def delta_row(o: Outcome, facts: cl.Facts) -> list[str]:
    check = o.check
    feed = " / ".join(f"{kind} {check['cdf'][kind]:,}" for kind in cl.KINDS) if "cdf" in check else ""
    return [o.step.name, f"{o.median('seconds'):.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{check['updated']:,} / {check['inserted']:,} / {check['deleted']:,}", feed,
            "FAIL" if failures(o, facts) else "ok", f"{o.median('peak_rss_mib'):.0f}",
            f"{o.median('base_rss_mib'):.0f}"]


def delta_note(outcomes: list[Outcome]) -> str:
    plain, cdf = (bc.find(outcomes, "delta", (v, DELTA_BATCH)) for v in ("plain", "cdf"))
    if plain is None or cdf is None:
        return ""
    return (f"delta-rs change data feed overhead: MERGE with CDF / without = "
            f"{cdf.median('seconds') / plain.median('seconds'):.2f}x (median seconds).")


def render(ctx: Context, outcomes: list[Outcome], builds: dict[str, float], problems: list[str]) -> str:
    facts = ctx.facts
    plan = facts.plan
    ours = [o for o in outcomes if o.step.engine == "ours"]
    delta = [o for o in outcomes if o.step.engine == "delta"]
    parts = [
        bc.markdown(OURS_COLUMNS, (ours_row(outcomes, o, facts) for o in ours)),
        f"Over the {plan.batches} batches:",
        bc.markdown(SUMMARY_COLUMNS, summary_rows(ours, facts)),
        "vs plain, same kind: this table's compaction seconds over those of the changelog-producer=none table "
        "running the same kind of compaction on the same data (full-compaction: compact(full=True); lookup: "
        "compact() with level 0 forced up). vs plain full: over the none table's compact(full=True). "
        "Ratios are of median seconds, per batch or of the sums over the batches.",
        "compact() on the none table is what the picker does by itself: with fewer than "
        "num-sorted-run.compaction-trigger (5) sorted runs in a bucket it does nothing. The lookup table's "
        "compact() pushes level 0 up at every compaction instead, and the none table with level 0 forced up "
        "runs the same plan without lookups: paimon_core has no compaction.force-up-level-0, so "
        "bench_changelog_ours.py patches the planner in that table's processes. Where level 0 only moves up a "
        "level (files in → out 0 → 0: no rewrite), the plain table does metadata work alone, while the lookup "
        "table still reads the level-0 rows and looks their keys up in the deeper levels. The two tables' "
        "later states differ in file sizes, so the picker may merge different runs (rows in → out).",
        "Unmeasured state builds (base write and full compaction, then per batch a write, a copy and the "
        "compaction): " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in builds.items()) + ".",
        bc.pressure_note(outcomes),
    ]
    if delta:
        parts += [f"Anchor, delta-rs MERGE of batch {DELTA_BATCH} ({plan.batch_rows:,} rows) into the "
                  f"{plan.rows:,}-row base:", bc.markdown(DELTA_COLUMNS, (delta_row(o, facts) for o in delta)),
                  delta_note(outcomes)]
    checked = len(outcomes)
    if problems:
        lines = "\n".join(f"FAIL  {p}" for p in problems)
        parts.append(f"Checks: {sum(1 for o in outcomes if not failures(o, facts))} of {checked} steps passed; "
                     f"failed checks:\n\n```\n{lines}\n```")
    else:
        parts.append(f"Checks: all {checked} steps passed (changelog rows per kind with key and v_int sums, "
                     "the table read back, level 0 emptied, the same table in every variant).")
    return "\n\n".join(p for p in parts if p)


# ---- main ---------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="base rows")
    parser.add_argument("--batch-rows", type=int, default=100_000, help="rows per batch")
    parser.add_argument("--batches", type=int, default=3, help="batches, each followed by one compaction")
    parser.add_argument("--insert-share", type=float, default=0.10, help="share of a batch's rows with new keys")
    parser.add_argument("--delete-share", type=float, default=0.05, help="share of a batch's rows deleting keys")
    parser.add_argument("--variants", nargs="+", choices=list(cl.VARIANTS), default=list(cl.VARIANTS),
                        help="ours' tables to run")
    parser.add_argument("--no-delta", action="store_true", help="skip the delta-rs MERGE anchor")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100k rows, batches of 10k, 1 rep")
    bc.add_driver_options(parser, "changelog_bench", delta=True)
    args = parser.parse_args()
    if args.quick:
        args.rows, args.batch_rows = 100_000, 10_000
    args.reps = args.reps or (1 if args.quick else 3)
    args.variants = [v for v in cl.VARIANTS if v in args.variants]
    args.work = args.work.resolve()
    args.plan = cl.Plan(args.rows, args.batch_rows, args.batches, args.insert_share, args.delete_share)
    try:
        args.plan.validate()
    except ValueError as error:
        parser.error(str(error))
    return args


def run(args: argparse.Namespace, ctx: Context) -> tuple[list[Outcome], dict[str, float]]:
    shutil.rmtree(ctx.pristine, ignore_errors=True)
    shutil.rmtree(ctx.run, ignore_errors=True)
    builds = build_states(ctx, args.variants, not args.no_delta)
    outcomes = [o for phase in phases(args.variants, args.batches, not args.no_delta)
                for o in run_phase(ctx, phase, args)]
    return outcomes, builds


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    args = parse_args()
    plan: cl.Plan = args.plan
    delta_python = None if args.no_delta else bc.ensure_delta_venv(args.delta_venv)
    meta: dict[str, Any] = {"versions": bc.driver_versions(paimon_core.__version__, delta_python=delta_python),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps,
                            "plan": asdict(plan), "variants": args.variants}
    pythons = {"ours": Path(sys.executable)} | ({"delta": delta_python} if delta_python else {})
    try:
        data, facts = dataset(args.work, plan)
        ctx = Context(data, facts, args.work / "pristine", args.work / "run", pythons)
        outcomes, builds = run(args, ctx)
    finally:
        if not args.keep:
            bc.remove_work(args.work, ["data", "pristine", "run"])
    meta["paimon_core sources after run"] = bc.source_digest()
    problems = all_failures(outcomes, facts)
    bc.save_json(args.json, {"meta": meta, "build_seconds": builds, "steps": [o.to_json() for o in outcomes],
                             "failed_checks": problems})
    title = (f"Changelog benchmark: {plan.rows:,} base rows, {plan.batches} batches of {plan.batch_rows:,} "
             f"({plan.updates:,} updates, {plan.inserts:,} inserts, {plan.deletes:,} deletes), bucket {cl.BUCKETS}, "
             f"write-only; {args.reps} process(es) per step, median step seconds")
    bc.print_report(title, meta, render(ctx, outcomes, builds, problems), args.json)
    if problems:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
