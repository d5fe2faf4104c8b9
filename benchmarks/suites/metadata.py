"""Metadata slimming: manifest bytes and scan-planning time of a wide log table after many small commits.

A 100-column log table (20 int64, 20 double, 50 string, 10 timestamp columns) receives
``--commits`` commits of ``--rows`` rows, with an append compaction every 25 commits (its DELETE
entries are what ``manifest.delete-file-drop-stats`` slims). Each variant differs only in its
metadata options and runs in a fresh process. Reported per variant: bytes of every manifest and
manifest list written, bytes a scan of the latest snapshot reads (its lists and manifests),
manifests in it, median planning time, total commit time, and ratios against full stats without
merging. Anchor: delta-rs appends of the same batches (``_delta_log`` bytes with its default
stats on the first 32 columns and checkpoints every 100 commits, and the time to load the table
and list its files).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from benchmarks.harness.measure import measure, report
from benchmarks.harness.report import markdown, pressure_note
from benchmarks.harness.runner import Outcome, Rep, require, run_phases
from benchmarks.harness.suite import Result, SuiteRun

ENGINES = ("ours", "delta")
WORK_DIRS = ("tables",)
DEFAULT_REPS = 1
COMPACT_EVERY = 25
PLAN_REPEATS = 5
NO_MERGE = {"manifest.merge-min-count": "1000000", "manifest.full-compaction-threshold-size": "1 tb"}
VARIANTS: dict[str, dict[str, str]] = {
    "full, no merging": {"metadata.stats-mode": "full", **NO_MERGE},
    "full": {"metadata.stats-mode": "full"},
    "truncate(16) (default)": {},
    "truncate(16), delete-file-drop-stats": {"manifest.delete-file-drop-stats": "true"},
    "truncate(16), no merging": dict(NO_MERGE),
    "counts": {"metadata.stats-mode": "counts"},
    "none": {"metadata.stats-mode": "none"},
    "none + full on 2 fields": {"metadata.stats-mode": "none", "fields.c0.stats-mode": "full",
                                "fields.c90.stats-mode": "full"},
    "none + full on 2 fields, sparse store": {"metadata.stats-mode": "none", "fields.c0.stats-mode": "full",
                                              "fields.c90.stats-mode": "full", "metadata.stats-dense-store": "false"},
}
BASELINE = "full, no merging"
DELTA_VARIANT = "delta-rs (anchor)"


def schema() -> pa.Schema:
    fields = [pa.field(f"c{i}", pa.int64()) for i in range(20)]
    fields += [pa.field(f"c{i}", pa.float64()) for i in range(20, 40)]
    fields += [pa.field(f"c{i}", pa.string()) for i in range(40, 90)]
    fields += [pa.field(f"c{i}", pa.timestamp("us")) for i in range(90, 100)]
    return pa.schema(fields)


def batch(commit: int, rows: int) -> pa.Table:
    """Commit ``commit``'s rows: the same for every variant and engine (seeded by the commit)."""
    rng = np.random.default_rng(commit)
    base = commit * rows
    columns: list[pa.Array] = [pa.array(base + np.arange(rows) + i, pa.int64()) for i in range(20)]
    columns += [pa.array(rng.random(rows)) for _ in range(20, 40)]
    alphabet = np.array(list("0123456789abcdef"))
    for i in range(40, 90):
        width = 8 + i % 33
        chars = alphabet[rng.integers(0, 16, size=(rows, width))]
        columns.append(pa.array(["".join(row) for row in chars]))
    start = np.datetime64("2024-01-01T00:00:00") + np.timedelta64(commit, "m")
    columns += [pa.array(start + np.arange(rows).astype("timedelta64[s]") + np.timedelta64(i, "s"))
                .cast(pa.timestamp("us")) for i in range(90, 100)]
    return pa.Table.from_arrays(columns, schema=schema())


# ---- steps (in the step process) --------------------------------------------------------------------

class MetadataEngine(Protocol):
    """One engine: the whole variant in one process. Its figures are timed inside (each commit,
    and the planning repeated :data:`PLAN_REPEATS` times); the step's own timer spans it all."""

    def run(self, work: Path, variant: str, commits: int, rows: int) -> dict[str, Any]:
        """Make the commits in a table under ``work`` and return the variant's figures."""


def _run(engine: MetadataEngine, args: argparse.Namespace) -> None:
    figures, timing = measure(lambda: engine.run(args.target, args.variant, args.commits, args.rows), args.profile)
    report(timing, figures)


STEPS = {"run": _run}


def add_step_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, help=f"one of ours' {', '.join(VARIANTS)}, or {DELTA_VARIANT}")
    parser.add_argument("--commits", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)


# ---- driver ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Step:
    """One variant (ours) or the anchor (delta); ``index`` names its table's folder."""

    engine: str
    variant: str
    index: int

    @property
    def name(self) -> str:
        return self.variant

    @property
    def key(self) -> str:
        return self.variant


def run(run: SuiteRun) -> Result:
    args = run.args
    run.meta.update(commits=args.commits, rows=args.rows)
    steps = run.steps(run.work)
    variants = [Step("ours", v, i) for i, v in enumerate(VARIANTS)]
    if run.runs("delta"):
        variants.append(Step("delta", DELTA_VARIANT, len(variants)))
    figures: dict[str, list[dict[str, Any]]] = {step.variant: [] for step in variants}

    def run_rep(step: Step) -> tuple[Rep, dict[str, Any]]:
        target = run.work / "tables" / str(step.index)  # a fresh table for every repetition
        shutil.rmtree(target, ignore_errors=True)
        try:
            rep, check = steps.measured(step.engine, "run", target, "--variant", step.variant,
                                        "--commits", str(args.commits), "--rows", str(args.rows))
        finally:
            shutil.rmtree(target, ignore_errors=True)
        if step.engine == "ours":
            require(check, {"rows": args.commits * args.rows}, f"the {step.variant} table read back")
        figures[step.variant].append(check)
        return rep, check

    outcomes = run_phases([variants], run_rep, reps=lambda step: args.reps, describe=lambda step: f"{step.variant:<40}")
    results = [summarise(figures[step.variant]) for step in variants]
    document = {"results": results, "steps": [{"variant": o.step.variant, "engine": o.step.engine,
                                               "figures": figures[o.step.variant],
                                               "reps": [asdict(r) for r in o.reps]} for o in outcomes]}
    title = (f"Metadata benchmark: {args.commits} commits of {args.rows} rows into a 100-column log table "
             f"(append compaction every {COMPACT_EVERY} commits); {args.reps} process(es) per variant")
    return Result(title, render(results, outcomes), document)


def summarise(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant over its repetitions: the byte counts (the same every time) and median times."""
    first = reps[0]
    return {**first, "plan_ms": statistics.median(r["plan_ms"] for r in reps),
            "commit_s": statistics.median(r["commit_s"] for r in reps)}


def render(results: list[dict[str, Any]], outcomes: list[Outcome[Step]]) -> str:
    base = next(r for r in results if r["variant"] == BASELINE)
    rows = []
    for r, o in zip(results, outcomes):
        ratio = f"{base['scan_bytes'] / r['scan_bytes']:.1f}x smaller" if r["scan_bytes"] else "-"
        scan = f"{r['scan_bytes']:,}" if r["scan_bytes"] else "-"
        count = f"{r['manifests']}" if r["scan_bytes"] else f"{r['manifests']} files listed"
        rows.append([r["variant"], f"{r['all_manifest_bytes']:,}", scan, ratio, count, f"{r['plan_ms']:.1f}",
                     f"{r['commit_s']:.1f}", f"{o.median('peak_rss_mib'):.0f}"])
    header = ("variant", "manifest bytes written", "bytes a scan reads", "vs full, no merging", "manifests in scan",
              "planning ms", "commits s", "peak RSS MiB")
    notes = ("planning ms: median of the variant's repeated plan() calls (delta-rs: table load plus file listing); "
             "commits s: every commit of the variant, compactions included (median over repetitions).")
    return "\n\n".join(p for p in (markdown(header, rows), notes, pressure_note(outcomes)) if p)


# ---- entry -------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--rows", type=int, default=200)


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.commits, args.rows = COMPACT_EVERY + 1, 50
