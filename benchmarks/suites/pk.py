"""Primary-key table: paimon_core (ours) vs pypaimon 2.1.0, Java Paimon 0.9 and delta-rs MERGE, plus raw pyarrow.

A keyed dataset (1M base rows, 20 upsert batches of 100k: half updates, half inserts) is generated
once into Arrow IPC files. Every engine builds its table states once (after 0, 1, 5 and 20
upserts), outside any measurement. Every repetition of every step then runs in its own fresh
process, which times only the step; an upsert starts from a fresh copy of the base state. Steps:
write, upsert, merge-on-read after n upserts, and a range read. Every read must return the
generator's fingerprint; targets compare ours with each peer.

Java Paimon's steps (``benchmarks/engines/java/PaimonBench.java``) run ``--java-warm`` times in
their JVM before the measured run, so its figures are the JIT-compiled steady state; ours and the
other Python engines are measured on their first call in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from benchmarks import data
from benchmarks.harness.measure import measure, measure_and_report, report
from benchmarks.harness.report import (
    Target,
    Verdict,
    cross_check,
    joined,
    markdown,
    pressure_note,
    profile_texts,
    ratio_cells,
    render_verdicts,
    verdicts,
)
from benchmarks.harness.runner import Outcome, Rep, Steps, require, run_phases
from benchmarks.harness.suite import Result, SuiteRun

log = logging.getLogger("benchmarks.pk")

ENGINES = ("pyarrow", "ours", "pypaimon", "java", "delta")
WRITERS = ("ours", "pypaimon", "java", "delta")  # engines with write and upsert steps (pyarrow: reads only)
PEERS = ("pypaimon", "java", "delta", "pyarrow")  # ratio columns: ours / peer
WORK_DIRS = ("data", "pristine", "run")
SEED = 20240607
TABLE = "bench.pk"
KEY = data.KEY
BUCKETS = "4"
SCHEMA = data.KEYED_SCHEMA
BASE_FILE, UPSERTS_FILE, FACTS_FILE = "base.arrow", "upserts.arrow", data.FACTS_FILE
RANGE_START, RANGE_SHARE = 0.45, 0.01  # the range read covers 1% of the keys, from 45% of them on
PROFILE_TOP = 15


# ---- dataset -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Plan:
    """Dataset shape: ``rows`` base rows, then ``batches`` upsert batches of ``batch_rows`` rows.

    Half of every batch updates existing keys (new values), the other half inserts new keys, so
    after ``n`` batches the table holds ``rows + n * batch_rows / 2`` keys, ``0 .. keys - 1``.
    """

    rows: int
    batch_rows: int
    batches: int

    @property
    def half(self) -> int:
        return self.batch_rows // 2

    def keys_after(self, upserts: int) -> int:
        return self.rows + upserts * self.half

    def stored_rows(self, upserts: int) -> int:
        """Rows stored (every version) after ``upserts`` batches: what a merge-on-read merges."""
        return self.rows + upserts * self.batch_rows

    def key_range(self) -> tuple[int, int]:
        """``[low, high)`` of the range read, after all batches."""
        keys = self.keys_after(self.batches)
        low = int(keys * RANGE_START)
        return low, low + max(1, int(keys * RANGE_SHARE))


@dataclass(frozen=True, slots=True)
class Facts:
    """The plan and the expected fingerprints: the full table after n upserts, and the range read."""

    plan: Plan
    states: dict[int, dict[str, int]]
    key_range: dict[str, int]

    def to_json(self) -> str:
        return json.dumps({"plan": asdict(self.plan), "states": self.states, "range": self.key_range})

    @staticmethod
    def from_json(text: str) -> Facts:
        known = json.loads(text)
        return Facts(Plan(**known["plan"]), {int(n): fp for n, fp in known["states"].items()}, known["range"])


def _batch_keys(rng: np.random.Generator, plan: Plan, index: int) -> np.ndarray:
    """Keys of upsert batch ``index`` (1-based): half existing keys, half new ones, shuffled."""
    existing = plan.keys_after(index - 1)
    keys = np.concatenate([rng.choice(existing, plan.half, replace=False),
                           np.arange(existing, existing + plan.half)])
    rng.shuffle(keys)
    return keys


class _Newest:
    """The newest value of every key, kept independently of any sort/dedupe code."""

    def __init__(self, keys: int) -> None:
        self.v_int = np.zeros(keys, dtype=np.int64)
        self.v_i32 = np.zeros(keys, dtype=np.int64)

    def apply(self, rows: pa.Table) -> pa.Table:
        ids = rows[KEY].to_numpy()
        self.v_int[ids] = rows["v_int"].to_numpy()
        self.v_i32[ids] = rows["v_i32"].to_numpy()
        return rows

    def fingerprint(self, low: int, high: int) -> dict[str, int]:
        """Expected fingerprint of keys ``low .. high - 1``."""
        return {"rows": high - low, "sum_id": (low + high - 1) * (high - low) // 2,
                "sum_v_int": int(self.v_int[low:high].sum()), "sum_v_i32": int(self.v_i32[low:high].sum())}


def generate(directory: Path, plan: Plan) -> Facts:
    """Write the base rows and the upsert batches (one record batch each) as Arrow IPC files."""
    if plan.batch_rows % 2:
        raise ValueError("the upsert batch size must be even (half updates, half inserts)")
    rng = np.random.default_rng(SEED)
    directory.mkdir(parents=True, exist_ok=True)
    newest = _Newest(plan.keys_after(plan.batches))
    data.write_table(directory / BASE_FILE, newest.apply(data.keyed_rows(rng, rng.permutation(plan.rows))))
    states = {0: newest.fingerprint(0, plan.keys_after(0))}

    def batches() -> Iterator[pa.Table]:
        for index in range(1, plan.batches + 1):
            yield newest.apply(data.keyed_rows(rng, _batch_keys(rng, plan, index)))
            states[index] = newest.fingerprint(0, plan.keys_after(index))

    data.write_batches(directory / UPSERTS_FILE, SCHEMA, batches())
    return Facts(plan, states, newest.fingerprint(*plan.key_range()))


def dataset(work: Path, plan: Plan) -> tuple[Path, Facts]:
    """The input files and expected results, generated unless a kept copy exists."""
    directory = work / "data" / f"pk_{plan.rows}_{plan.batch_rows}x{plan.batches}"
    return directory, data.kept_or_generated(
        directory, plan, load=Facts.from_json, generate=generate,
        what=f"{plan.rows:,} rows + {plan.batches} x {plan.batch_rows:,} upserts")


def load_base(directory: Path) -> pa.Table:
    return data.load_mapped(directory / BASE_FILE)


def load_upsert(directory: Path, index: int) -> pa.Table:
    """Upsert batch ``index`` (1-based)."""
    return data.load_mapped_batch(directory / UPSERTS_FILE, index - 1)


def state_dir(root: Path, upserts: int) -> Path:
    return root / f"state_{upserts}"


# ---- steps (in the step process) --------------------------------------------------------------------

class PkEngine(Protocol):
    """One engine under test. Only ``write``, ``upsert`` and ``read`` run inside the timer."""

    def create(self, target: Path) -> Any:
        """Create the empty table (Paimon: bucket 4, key ``id``) and return its handle."""

    def open(self, target: Path) -> Any:
        """A handle on an existing table (catalog and table objects, not its snapshot)."""

    def write(self, handle: Any, rows: pa.Table) -> None:
        """The initial write of the base rows, one commit."""

    def upsert(self, handle: Any, rows: pa.Table) -> None:
        """Upsert one batch, one commit."""

    def read(self, handle: Any, key_range: tuple[int, int] | None) -> pa.Table:
        """The merged table, or its rows with ``low <= id < high``; includes planning the scan."""

    def committed_rows(self, handle: Any) -> int:
        """Rows the latest commit wrote (checked after the timer)."""


def _write(engine: PkEngine, args: argparse.Namespace) -> None:
    rows = load_base(args.input)
    handle = engine.create(args.target)
    _, timing = measure(lambda: engine.write(handle, rows), args.profile)
    report(timing, {"rows": engine.committed_rows(handle)})


def _layout_write(engine: Any, args: argparse.Namespace) -> None:
    """Raw pyarrow only: the physical work of the initial write (see ``raw_pyarrow.Pk``)."""
    rows = load_base(args.input)
    handle = engine.create(args.target)
    written, timing = measure(lambda: engine.layout_write(handle, rows), args.profile)
    report(timing, {"rows": written})


def _upsert(engine: PkEngine, args: argparse.Namespace) -> None:
    batch = load_upsert(args.input, args.upserts)
    handle = engine.open(args.target)
    _, timing = measure(lambda: engine.upsert(handle, batch), args.profile)
    report(timing, {"rows": engine.committed_rows(handle)})


def _read(engine: PkEngine, args: argparse.Namespace) -> None:
    key_range = tuple(args.key_range) if args.key_range else None
    handle = engine.open(args.target)
    measure_and_report(lambda: engine.read(handle, key_range), args.profile, data.keyed_fingerprint, warm=args.warm)


def _build(engine: PkEngine, args: argparse.Namespace) -> None:
    """Write the base, apply upserts 1..max(states) and copy the table after each state wanted.

    Not a measured step: it prepares the table states that the upsert and read steps start from.
    """
    states = set(args.states)
    work = args.target / "building"
    shutil.rmtree(work, ignore_errors=True)

    def build() -> None:
        handle = engine.create(work)
        engine.write(handle, load_base(args.input))
        for index in range(max(states) + 1):
            if index:
                engine.upsert(handle, load_upsert(args.input, index))
            if index in states:
                shutil.copytree(work, state_dir(args.target, index), dirs_exist_ok=False)
        shutil.rmtree(work)

    _, timing = measure(build)
    report(timing, {"states": len(states)})


STEPS = {
    "write": _write,
    "layout_write": _layout_write,
    "upsert": _upsert,
    "read": _read,
    "range_read": _read,
    "build": _build,
}


def add_step_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--upserts", type=int, default=1,
                        help="upsert: the batch to apply (1-based); reads: informational")
    parser.add_argument("--states", type=int, nargs="+", default=[0, 1, 5, 20],
                        help="build: upsert counts after which to keep a copy of the table")
    parser.add_argument("--key-range", type=int, nargs=2, metavar=("LOW", "HIGH"),
                        help="range_read: read the keys LOW <= id < HIGH")
    parser.add_argument("--warm", type=int, default=0,
                        help="read, range_read: unmeasured reads before the measured one, in the step's process")


# ---- driver ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Step:
    """One measured step of one engine."""

    engine: str
    action: str  # write | upsert | read | range_read
    upserts: int = 0  # read: the table state read; upsert: the batch applied (onto the base)

    @property
    def key(self) -> tuple[str, int]:
        """The same step of another engine has the same key."""
        return ("write" if self.action == "layout_write" else self.action), self.upserts

    @property
    def name(self) -> str:
        if self.action in ("write", "upsert", "layout_write"):
            return "write" if self.action == "layout_write" else self.action
        return f"{'range read' if self.action == 'range_read' else 'read'} after {self.upserts}"

    @property
    def label(self) -> str:
        """What the engine actually runs, where that differs from the step's name."""
        if self.engine == "delta" and self.action == "upsert":
            return "upsert (MERGE)"
        if self.action == "layout_write":
            return "write (bucket + sort + system columns)"
        if self.engine == "pyarrow" and self.action == "read":
            return f"{self.name} (sort+dedupe)"
        return self.name

    def extra(self, plan: Plan) -> list[str]:
        """The step's options: the batch or state, and the keys of a range read."""
        if self.action == "range_read":
            return ["--upserts", str(self.upserts), "--key-range", *map(str, plan.key_range())]
        return ["--upserts", str(self.upserts)]


def phases(engines: tuple[str, ...], read_states: list[int]) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    writers = [e for e in engines if e in WRITERS]
    last = max(read_states)
    return [
        [*(Step(engine, "write") for engine in writers),
         *([Step("pyarrow", "layout_write")] if "pyarrow" in engines else [])],
        [Step(engine, "upsert", 1) for engine in writers],
        *([Step(engine, "read", n) for engine in engines] for n in read_states),
        [Step(engine, "range_read", last) for engine in engines],
    ]


def targets(read_states: list[int]) -> list[Target[Step]]:
    reads = [target for n in read_states for target in (
        Target(f"merge-on-read after {n} upserts >= 5x pypaimon", Step("ours", "read", n), "pypaimon", 1 / 5),
        Target(f"merge-on-read after {n} upserts within 1.5x of raw pyarrow sort+dedupe", Step("ours", "read", n),
               "pyarrow", 1.5))]
    return [
        Target("initial write >= 10x pypaimon", Step("ours", "write"), "pypaimon", 1 / 10),
        Target("initial write faster than delta write_deltalake", Step("ours", "write"), "delta", 1.0, strict=True),
        Target("initial write within 1.2x of raw pyarrow doing its physical work (bucket, sort, system columns)",
               Step("ours", "write"), "pyarrow", 1.2),
        Target("upsert >= 10x pypaimon", Step("ours", "upsert", 1), "pypaimon", 1 / 10),
        Target("upsert faster than delta MERGE", Step("ours", "upsert", 1), "delta", 1.0, strict=True),
        Target("initial write faster than Java Paimon", Step("ours", "write"), "java", 1.0, strict=True),
        Target("upsert faster than Java Paimon", Step("ours", "upsert", 1), "java", 1.0, strict=True),
        *(Target(f"merge-on-read after {n} upserts faster than Java Paimon", Step("ours", "read", n),
                 "java", 1.0, strict=True) for n in read_states),
        *reads,
    ]


@dataclass(frozen=True, slots=True)
class Context:
    """Where the run's tables are, and how to start a step of each engine."""

    steps: Steps
    facts: Facts
    pristine: Path  # built states, read in place and copied for upserts
    scratch: Path  # the table a write or upsert repetition works on
    engine_options: dict[str, list[str]]  # options every measured step of an engine gets

    def prepare_target(self, step: Step) -> Path:
        """The step's table: fresh for a write, a copy of the prior state for an upsert, else a state."""
        if step.action in ("read", "range_read"):
            return state_dir(self.pristine / step.engine, step.upserts)  # reads leave it unchanged
        target = self.scratch / step.engine
        shutil.rmtree(target, ignore_errors=True)
        if step.action == "upsert":
            shutil.copytree(state_dir(self.pristine / step.engine, step.upserts - 1), target)
        return target

    def expected(self, step: Step) -> dict[str, int]:
        if step.action in ("write", "layout_write"):
            return {"rows": self.facts.plan.rows}
        if step.action == "upsert":
            return {"rows": self.facts.plan.batch_rows}
        if step.action == "range_read":
            return self.facts.key_range
        return self.facts.states[step.upserts]

    def run_rep(self, step: Step) -> tuple[Rep, dict[str, Any]]:
        """One repetition of one step in a fresh process, checked against the expected result."""
        rep, check = self.steps.measured(step.engine, step.action, self.prepare_target(step),
                                         *step.extra(self.facts.plan), *self.engine_options.get(step.engine, []))
        require(check, self.expected(step), f"{step.engine} {step.name}")
        return rep, check


def build_states(ctx: Context, engines: tuple[str, ...], states: list[int]) -> dict[str, float]:
    """Every engine's table after each number of upserts in ``states`` (unmeasured preparation)."""
    seconds = {}
    for engine in engines:
        result = ctx.steps.prepare(engine, "build", ctx.pristine / engine, "--states", *map(str, states))
        seconds[engine] = result["seconds"]
        log.info("built %-8s states %s in %.1f s", engine, states, result["seconds"])
    return seconds


def profile_ours(ctx: Context, directory: Path, steps: list[Step]) -> dict[str, str]:
    """cProfile of one extra (unreported) repetition of each of ours' ``steps``."""
    directory.mkdir(parents=True, exist_ok=True)
    texts = {}
    for step in steps:
        out = directory / f"ours_{step.action}_{step.upserts}.prof"
        ctx.steps.prepare("ours", step.action, ctx.prepare_target(step), *step.extra(ctx.facts.plan),
                          "--profile", str(out))
        texts.update(profile_texts(out, step.name, PROFILE_TOP))
    return texts


# ---- report -------------------------------------------------------------------------------------

COLUMNS = ("engine", "step", "seconds (median)", "min-max", "CPU s", "rows/s", "rows out", "peak RSS MiB",
           "RSS before step MiB", "ours/pypaimon", "ours/java", "ours/delta", "ours/raw-pyarrow")


def rows_in(step: Step, plan: Plan) -> int:
    """Rows a step processes: its input for writes, every stored version for reads."""
    if step.action == "write":
        return plan.rows
    if step.action == "upsert":
        return plan.batch_rows
    return plan.stored_rows(step.upserts)


def table_row(plan: Plan, outcomes: list[Outcome[Step]], o: Outcome[Step]) -> list[str]:
    seconds = o.median("seconds")
    return [o.step.engine, o.step.label, f"{seconds:.3f}", o.spread(), f"{o.median('cpu_seconds'):.2f}",
            f"{rows_in(o.step, plan) / seconds / 1e6:.2f} M", f"{o.check.get('rows', 0):,}",
            f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            *ratio_cells(outcomes, o.step, PEERS)]


def render(plan: Plan, outcomes: list[Outcome[Step]], builds: dict[str, float], results: list[Verdict[Step]]) -> str:
    table = markdown(COLUMNS, (table_row(plan, outcomes, o) for o in outcomes))
    notes = joined([
        f"rows/s counts the rows a step processes: {plan.rows:,} for the write, {plan.batch_rows:,} for "
        f"an upsert, and every stored version (base + n x batch) for reads. rows out: rows committed or "
        f"returned. Ratios below 1 mean ours is faster.",
        "Unmeasured state builds (base write + upserts + copies): "
        + ", ".join(f"{engine} {seconds:.1f} s" for engine, seconds in builds.items()) + ".",
        pressure_note(outcomes),
    ], "\n")
    return f"{table}\n\n{notes}\n\n{render_verdicts(results)}"


# ---- entry -------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=1_000_000, help="base rows")
    parser.add_argument("--batch-rows", type=int, default=100_000, help="rows per upsert batch")
    parser.add_argument("--read-states", type=int, nargs="+", default=[1, 5, 20],
                        help="upsert counts after which the full merge-on-read is measured")
    parser.add_argument("--oracle-reps", type=int, help="processes per pypaimon step (default --reps)")
    parser.add_argument("--java-warm", type=int, default=2,
                        help="runs of each Java step in its JVM before the measured one (JIT warm-up; 0 with --quick)")
    parser.add_argument("--read-warm", type=int, default=0,
                        help="unmeasured reads a Python engine's read step runs first in its process, as Java's "
                             "steps do (--java-warm): on a VM that returns freed memory to its host, a fresh "
                             "process's first touch of its memory is otherwise part of its time")
    parser.add_argument("--java-threads", type=int, default=1,
                        help="Java's writers (one BatchTableWrite each, buckets split between them) and "
                             "read threads (splits split between them)")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also profile ours' write, upsert and last read (cProfile, top "
                             f"{PROFILE_TOP} by cumulative time) into DIR")


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.rows, args.batch_rows, args.read_states, args.java_warm = 10_000, 1_000, [1, 3], 0
    args.oracle_reps = args.oracle_reps or args.reps
    args.read_states = sorted(set(args.read_states))


def run(run: SuiteRun) -> Result:
    args = run.args
    plan = Plan(args.rows, args.batch_rows, max(args.read_states))
    run.meta.update(oracle_reps=args.oracle_reps, java_warm=args.java_warm, java_threads=args.java_threads,
                    read_warm=args.read_warm,
                    plan=asdict(plan))
    directory, facts = dataset(run.work, plan)
    ctx = Context(run.steps(directory), facts, run.work / "pristine", run.work / "run",
                  {"java": ["--warm", str(args.java_warm), "--threads", str(args.java_threads)],
                   **{engine: ["--warm", str(args.read_warm)] for engine in ENGINES if engine != "java"}})
    shutil.rmtree(ctx.pristine, ignore_errors=True)
    shutil.rmtree(ctx.scratch, ignore_errors=True)
    builds = build_states(ctx, run.engines, [0, *args.read_states])
    outcomes = run_phases(phases(run.engines, args.read_states), ctx.run_rep,
                          reps=lambda step: args.oracle_reps if step.engine == "pypaimon" else args.reps,
                          describe=lambda step: f"{step.engine:<8} {step.name:<22}")
    cross_check(outcomes, {o.step.key for o in outcomes if "read" in o.step.action})
    last = max(args.read_states)
    profiles = profile_ours(ctx, args.profile, [Step("ours", "write"), Step("ours", "upsert", 1),
                                                Step("ours", "read", last)]) if args.profile else {}
    results = verdicts(outcomes, targets(args.read_states), run.engines)
    title = (f"Primary-key benchmark: {plan.rows:,} rows, {plan.batches} upserts of {plan.batch_rows:,} "
             f"(half updates), bucket {BUCKETS}; {args.reps} process(es) per step ({args.oracle_reps} for "
             f"pypaimon; Java after {args.java_warm} warm-up run(s) in its JVM, on {args.java_threads} "
             f"thread(s); Python reads after {args.read_warm} warm-up read(s)), median step seconds")
    document = {"build_seconds": builds, "steps": [o.to_json() for o in outcomes],
                "targets": [v.to_json() for v in results]}
    return Result(title, render(plan, outcomes, builds, results), document, profiles=profiles,
                  profile_note=f"top {PROFILE_TOP} by cumulative time")
