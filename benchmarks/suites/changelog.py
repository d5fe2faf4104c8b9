"""Changelog producers: what producing a changelog adds to compaction in paimon_core (ours).

Tables with the same data and the same options except ``changelog-producer`` (none,
full-compaction, lookup), all write-only with 4 fixed buckets: a base of 1M rows, compacted fully,
then batches of 100k rows (updates, 10% new keys, 5% deletes), each followed by one compaction
(:data:`VARIANTS`). Every table state is built once, outside any measurement; every repetition of
every compaction then runs in its own fresh process on a fresh copy of its state, which times only
the compaction, then reads the changelog and the table for the checks. For context, delta-rs
MERGEs the first batch into a 1M-row Delta table with and without its change data feed.
A failed check is listed under the tables and makes the run exit with status 1.
"""

from __future__ import annotations

import argparse
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from benchmarks.harness.measure import measure, report
from benchmarks.harness.report import joined, markdown, pressure_note
from benchmarks.harness.runner import Rep, Steps, find, run_phases
from benchmarks.harness.suite import Result, SuiteRun
from benchmarks.suites.changelog_workload import (
    BUCKETS,
    DELTA_BATCH,
    DELTA_VARIANTS,
    KINDS,
    PLAIN_FULL,
    VARIANTS,
    Facts,
    Plan,
    StepOutcome,
    all_failures,
    dataset,
    describe_changes,
    failures,
    state_dir,
)

log = logging.getLogger("benchmarks.changelog")

ENGINES = ("ours", "delta")
WORK_DIRS = ("data", "pristine", "run")


# ---- steps (in the step process) --------------------------------------------------------------------

class ChangelogEngine(Protocol):
    """One engine under test: ours compacts a variant's table, delta-rs MERGEs a batch into a
    plain or a change-data-feed table. Only ``apply`` runs inside the timer."""

    def build(self, target: Path, variant: str, directory: Path, batches: int) -> None:
        """The variant's table states (``state_dir(target, n)``, or the Delta base at ``target``)."""

    def open(self, target: Path, variant: str, directory: Path, batch: int) -> Any:
        """Everything ``apply`` needs: the table (and for delta-rs the MERGE source of ``batch``)."""

    def apply(self, handle: Any) -> Any:
        """The measured step: the variant's compaction, or the MERGE."""

    def checks(self, handle: Any, result: Any) -> dict[str, Any]:
        """What the step did and what the table reads back, for the driver's checks (after the timer)."""


def _build(engine: ChangelogEngine, args: argparse.Namespace) -> None:
    """Not a measured step: it prepares the table states that the repetitions copy."""
    shutil.rmtree(args.target, ignore_errors=True)
    _, timing = measure(lambda: engine.build(args.target, args.variant, args.input, args.batches))
    report(timing, {"states": args.batches})


def _measured(engine: ChangelogEngine, args: argparse.Namespace) -> None:
    handle = engine.open(args.target, args.variant, args.input, args.batch)
    result, timing = measure(lambda: engine.apply(handle), args.profile)
    report(timing, engine.checks(handle, result))


STEPS = {"build": _build, "compact": _measured, "merge": _measured}


def add_step_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True,
                        help=f"the table: one of ours' {', '.join(VARIANTS)}, or delta's {' or '.join(DELTA_VARIANTS)}")
    parser.add_argument("--batch", type=int, default=1, help="compact or merge: the batch (1-based)")
    parser.add_argument("--batches", type=int, default=1, help="build: batches to write and compact")


# ---- driver ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Step:
    """One measured step: ours' compaction after batch ``batch``, or delta's MERGE of it."""

    engine: str  # ours | delta
    variant: str  # ours: a key of VARIANTS; delta: plain | cdf
    batch: int

    @property
    def key(self) -> tuple[str, int]:
        return self.variant, self.batch

    @property
    def name(self) -> str:
        if self.engine == "delta":
            return f"MERGE batch {self.batch} {'with' if self.variant == 'cdf' else 'without'} change data feed"
        variant = VARIANTS[self.variant]
        return f"{variant.producer}, {variant.compaction}, batch {self.batch}"

    @property
    def action(self) -> str:
        return "compact" if self.engine == "ours" else "merge"


def phases(variants: list[str], batches: int, delta: bool) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    ours = [[Step("ours", variant, batch) for variant in variants] for batch in range(1, batches + 1)]
    return [*ours, [Step("delta", variant, DELTA_BATCH) for variant in DELTA_VARIANTS]] if delta else ours


@dataclass(frozen=True, slots=True)
class Context:
    """Where the run's tables are, and how to start a step of each engine."""

    steps: Steps
    facts: Facts
    pristine: Path  # built states, copied before every repetition
    scratch: Path  # the copy a repetition works on

    def build(self, tables: list[tuple[str, str]]) -> dict[str, float]:
        """Every table's states before each compaction (unmeasured preparation)."""
        seconds = {}
        for engine, variant in tables:
            result = self.steps.prepare(engine, "build", self.pristine / engine / variant, "--variant", variant,
                                        "--batches", str(self.facts.plan.batches))
            seconds[f"{engine} {variant}"] = result["seconds"]
            log.info("built %-5s %-16s in %5.1f s", engine, variant, result["seconds"])
        return seconds

    def run_rep(self, step: Step) -> tuple[Rep, dict[str, Any]]:
        """One repetition on a fresh copy of its state (made here, before its process starts).
        Its checks are judged after the run (:func:`failures`)."""
        built = self.pristine / step.engine / step.variant
        source = state_dir(built, step.batch) if step.engine == "ours" else built
        target = self.scratch / step.engine / step.variant
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        return self.steps.measured(step.engine, step.action, target, "--variant", step.variant,
                                   "--batch", str(step.batch))


# ---- tables -------------------------------------------------------------------------------------

def _ratio(outcomes: list[StepOutcome], o: StepOutcome, baseline: str | None) -> str:
    """The step's median seconds over ``baseline``'s for the same batch."""
    if baseline is None or baseline == o.step.variant:
        return ""
    other = find(outcomes, "ours", (baseline, o.step.batch))
    return "n/a" if other is None else f"{o.median('seconds') / other.median('seconds'):.2f}x"


OURS_COLUMNS = ("batch", "changelog-producer", "compaction", "seconds (median)", "min-max", "CPU s",
                "vs plain, same kind", "vs plain full", "rows in → out", "files in → out", "changelog rows",
                "checks", "peak RSS MiB", "RSS before step MiB")


def ours_row(outcomes: list[StepOutcome], o: StepOutcome, facts: Facts) -> list[str]:
    variant, check = VARIANTS[o.step.variant], o.check
    work = (f"{check['rows_in']:,} → {check['rows_out']:,}", f"{check['files_in']} → {check['files_out']}")
    return [str(o.step.batch), variant.producer, variant.compaction, f"{o.median('seconds'):.3f}", o.spread(),
            f"{o.median('cpu_seconds'):.2f}", _ratio(outcomes, o, variant.baseline), _ratio(outcomes, o, PLAIN_FULL),
            *(work if check["compacted"] else ("nothing to compact", "")), describe_changes(check["changes"]),
            "FAIL" if failures(o, facts) else "ok", f"{o.median('peak_rss_mib'):.0f}",
            f"{o.median('base_rss_mib'):.0f}"]


SUMMARY_COLUMNS = ("changelog-producer", "compaction", "seconds, sum of the batches' medians", "vs plain, same kind",
                   "vs plain full", "changelog rows", "steps with failed checks", "peak RSS MiB (max)")


def summary_rows(outcomes: list[StepOutcome], facts: Facts) -> list[list[str]]:
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
        variant = VARIANTS[name]
        mine = [o for o in outcomes if o.step.variant == name]
        changes = sum(kind["rows"] for o in mine for kind in o.check["changes"].values())
        failed = sum(1 for o in mine if failures(o, facts))
        rows.append([variant.producer, variant.compaction, f"{total:.3f}", ratio(name, variant.baseline),
                     ratio(name, PLAIN_FULL), f"{changes:,}", f"{failed} of {len(mine)}",
                     f"{max(o.median('peak_rss_mib') for o in mine):.0f}"])
    return rows


DELTA_COLUMNS = ("step", "seconds (median)", "min-max", "CPU s", "rows updated / inserted / deleted",
                 "change data feed rows", "checks", "peak RSS MiB", "RSS before step MiB")


def delta_row(o: StepOutcome, facts: Facts) -> list[str]:
    check = o.check
    feed = " / ".join(f"{kind} {check['cdf'][kind]:,}" for kind in KINDS) if "cdf" in check else ""
    return [o.step.name, f"{o.median('seconds'):.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{check['updated']:,} / {check['inserted']:,} / {check['deleted']:,}", feed,
            "FAIL" if failures(o, facts) else "ok", f"{o.median('peak_rss_mib'):.0f}",
            f"{o.median('base_rss_mib'):.0f}"]


def delta_note(outcomes: list[StepOutcome]) -> str:
    plain, cdf = (find(outcomes, "delta", (v, DELTA_BATCH)) for v in ("plain", "cdf"))
    if plain is None or cdf is None:
        return ""
    return (f"delta-rs change data feed overhead: MERGE with CDF / without = "
            f"{cdf.median('seconds') / plain.median('seconds'):.2f}x (median seconds).")


def render(facts: Facts, outcomes: list[StepOutcome], builds: dict[str, float], problems: list[str]) -> str:
    plan = facts.plan
    ours = [o for o in outcomes if o.step.engine == "ours"]
    delta = [o for o in outcomes if o.step.engine == "delta"]
    parts = [
        markdown(OURS_COLUMNS, (ours_row(outcomes, o, facts) for o in ours)),
        f"Over the {plan.batches} batches:",
        markdown(SUMMARY_COLUMNS, summary_rows(ours, facts)),
        "vs plain, same kind: this table's compaction seconds over those of the changelog-producer=none table "
        "running the same kind of compaction on the same data (full-compaction: compact(full=True); lookup: "
        "compact() with level 0 forced up). vs plain full: over the none table's compact(full=True). "
        "Ratios are of median seconds, per batch or of the sums over the batches.",
        "compact() on the none table is what the picker does by itself: with fewer than "
        "num-sorted-run.compaction-trigger (5) sorted runs in a bucket it does nothing. The lookup table's "
        "compact() pushes level 0 up at every compaction instead, and the none table with level 0 forced up "
        "runs the same plan without lookups: paimon_core has no compaction.force-up-level-0, so the ours "
        "engine patches the planner in that table's processes. Where level 0 only moves up a "
        "level (files in → out 0 → 0: no rewrite), the plain table does metadata work alone, while the lookup "
        "table still reads the level-0 rows and looks their keys up in the deeper levels. The two tables' "
        "later states differ in file sizes, so the picker may merge different runs (rows in → out).",
        "Unmeasured state builds (base write and full compaction, then per batch a write, a copy and the "
        "compaction): " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in builds.items()) + ".",
        pressure_note(outcomes),
    ]
    if delta:
        parts += [f"Anchor, delta-rs MERGE of batch {DELTA_BATCH} ({plan.batch_rows:,} rows) into the "
                  f"{plan.rows:,}-row base:", markdown(DELTA_COLUMNS, (delta_row(o, facts) for o in delta)),
                  delta_note(outcomes)]
    checked = len(outcomes)
    if problems:
        lines = "\n".join(f"FAIL  {p}" for p in problems)
        parts.append(f"Checks: {sum(1 for o in outcomes if not failures(o, facts))} of {checked} steps passed; "
                     f"failed checks:\n\n```\n{lines}\n```")
    else:
        parts.append(f"Checks: all {checked} steps passed (changelog rows per kind with key and v_int sums, "
                     "the table read back, level 0 emptied, the same table in every variant).")
    return joined(parts)


# ---- entry -------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="base rows")
    parser.add_argument("--batch-rows", type=int, default=100_000, help="rows per batch")
    parser.add_argument("--batches", type=int, default=3, help="batches, each followed by one compaction")
    parser.add_argument("--insert-share", type=float, default=0.10, help="share of a batch's rows with new keys")
    parser.add_argument("--delete-share", type=float, default=0.05, help="share of a batch's rows deleting keys")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS),
                        help="ours' tables to run")


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.rows, args.batch_rows, args.batches = 10_000, 1_000, 2
    args.variants = [v for v in VARIANTS if v in args.variants]
    args.plan = Plan(args.rows, args.batch_rows, args.batches, args.insert_share, args.delete_share)
    try:
        args.plan.validate()
    except ValueError as error:
        parser.error(str(error))


def run(run: SuiteRun) -> Result:
    args = run.args
    plan: Plan = args.plan
    run.meta.update(plan=asdict(plan), variants=args.variants)
    directory, facts = dataset(run.work, plan)
    ctx = Context(run.steps(directory), facts, run.work / "pristine", run.work / "run")
    shutil.rmtree(ctx.pristine, ignore_errors=True)
    shutil.rmtree(ctx.scratch, ignore_errors=True)
    delta = run.runs("delta")
    builds = ctx.build([("ours", v) for v in args.variants] + ([("delta", v) for v in DELTA_VARIANTS] if delta else []))
    outcomes = run_phases(phases(args.variants, args.batches, delta), ctx.run_rep, reps=lambda step: args.reps,
                          describe=lambda step: f"{step.engine:<5} {step.variant:<16} batch {step.batch}")
    problems = all_failures(outcomes, facts)
    title = (f"Changelog benchmark: {plan.rows:,} base rows, {plan.batches} batches of {plan.batch_rows:,} "
             f"({plan.updates:,} updates, {plan.inserts:,} inserts, {plan.deletes:,} deletes), bucket {BUCKETS}, "
             f"write-only; {args.reps} process(es) per step, median step seconds")
    document = {"build_seconds": builds, "steps": [o.to_json() for o in outcomes], "failed_checks": problems}
    return Result(title, render(facts, outcomes, builds, problems), document, problems)
