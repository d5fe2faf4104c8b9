"""Full compaction: paimon_core (ours) vs raw pyarrow vs delta-rs optimize.compact.

Two scenarios, generated once into Arrow IPC files (one record batch per commit):

* pk: a primary-key table (4 buckets) built by 10 commits of 200k rows whose keys are drawn from
  1.3M, so later commits update earlier keys; write-only, so every commit stays a level-0 run.
* append: an append table (bucket -1) built by 200 commits of 10k log events (200 small files).

Every engine builds its tables once, outside any measurement. Every repetition of every step then
runs in its own fresh process: a read before compaction, the full compaction of a fresh copy of
the built table, and a read after it. Every read must return the generator's fingerprint (row
count, key sum and a digest of every column); targets compare ours with each peer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks import data
from benchmarks.harness.measure import measure, measure_and_report, report
from benchmarks.harness.report import (
    Target,
    Verdict,
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

log = logging.getLogger("benchmarks.compaction")

ENGINES = ("pyarrow", "ours", "delta")
PEERS = ("pyarrow", "delta")  # ratio columns: ours / peer
WORK_DIRS = ("data", "pristine", "run", "compacted")
SEED = 20240815
SCENARIOS = ("pk", "append")
PK_TABLE, APPEND_TABLE = "bench.pk", "bench.logs"
PK_KEY, APPEND_KEY = data.KEY, "event_id"
PK_BUCKETS = "4"  # four fixed buckets, as in the pk suite
PK_SCHEMA = data.KEYED_SCHEMA  # id (NOT NULL), v_int, v_float, v_str (20 chars), v_ts, v_i32
APPEND_SCHEMA = pa.schema([pa.field(APPEND_KEY, pa.int64(), nullable=False), *data.LOG_SCHEMA])
FILES = {"pk": "pk_commits.arrow", "append": "append_commits.arrow"}
STATES = ("before", "after")  # a read of the table before or after its full compaction
PROFILE_TOP = 15
MIB = 2**20


# ---- dataset -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Plan:
    """Dataset shape of both scenarios."""

    pk_commits: int
    pk_rows: int  # per commit
    pk_keys: int  # keyspace the commits draw from
    append_commits: int
    append_rows: int  # per commit

    def rows(self, scenario: str) -> int:
        """Rows stored before compaction: every version of every key (pk), every event (append)."""
        if scenario == "pk":
            return self.pk_commits * self.pk_rows
        return self.append_commits * self.append_rows


@dataclass(frozen=True, slots=True)
class Facts:
    """The plan and the expected fingerprints.

    ``pk_newest``: the newest row of every key (what a compacted pk table must read back),
    ``pk_all``: row count and key sum of every stored version (a Delta table keeps them all),
    ``append_all``: every event.
    """

    plan: Plan
    pk_newest: dict[str, int]
    pk_all: dict[str, int]
    append_all: dict[str, int]

    def to_json(self) -> str:
        return json.dumps({"plan": asdict(self.plan), "pk_newest": self.pk_newest, "pk_all": self.pk_all,
                           "append_all": self.append_all})

    @staticmethod
    def from_json(text: str) -> Facts:
        known = json.loads(text)
        return Facts(Plan(**known["plan"]), known["pk_newest"], known["pk_all"], known["append_all"])


def schema_of(scenario: str) -> pa.Schema:
    return PK_SCHEMA if scenario == "pk" else APPEND_SCHEMA


def key_of(scenario: str) -> str:
    return PK_KEY if scenario == "pk" else APPEND_KEY


def _digest(array: pa.Array) -> int:
    """48-bit digest of an array's values (and nulls), independent of its buffers' layout."""
    digest = hashlib.blake2b(digest_size=6)
    digest.update(str(array.null_count).encode())
    if array.null_count:
        digest.update(np.packbits(array.is_null().to_numpy(zero_copy_only=False)).tobytes())
    if pa.types.is_string(array.type):
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset:array.offset + len(array) + 1]
        digest.update((offsets - offsets[0]).tobytes())
        chars = array.buffers()[2]
        if chars is not None:
            digest.update(memoryview(chars)[int(offsets[0]):int(offsets[-1])])
    else:
        if pa.types.is_timestamp(array.type):
            array = array.cast(pa.int64())
        digest.update(np.ascontiguousarray(array.to_numpy(zero_copy_only=False)).tobytes())
    return int(digest.hexdigest(), 16)


def fingerprint(table: pa.Table, scenario: str) -> dict[str, int]:
    """Row count, key sum and a content digest of every column, taken in key order.

    The key must be unique (a compacted pk table, or the append table's event ids). Columns are
    cast to the suite's schema first, so string, large_string and string_view results match.
    """
    key = key_of(scenario)
    keys = table.column(key).combine_chunks()
    order: pa.Array | None = None
    ids = keys.to_numpy(zero_copy_only=False)
    if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        order = pc.sort_indices(keys)
    out = {"rows": table.num_rows, f"sum_{key}": int(ids.sum())}
    for field in schema_of(scenario):
        column = table.column(field.name).cast(field.type)
        if order is not None:
            column = column.take(order)
        out[f"digest_{field.name}"] = _digest(column.combine_chunks())
    return out


def light_fingerprint(table: pa.Table, scenario: str) -> dict[str, int]:
    """Row count and key sum only: for a table that keeps several versions of a key (Delta, pk)."""
    key = key_of(scenario)
    return {"rows": table.num_rows, f"sum_{key}": int(pc.sum(table.column(key)).as_py() or 0)}


def _append_commit(rng: np.random.Generator, plan: Plan, first_id: int) -> pa.Table:
    events = data.log_events(rng, plan.append_rows)  # log events, as the append suite's
    ids = pa.array(np.arange(first_id, first_id + plan.append_rows, dtype=np.int64))
    return events.add_column(0, APPEND_SCHEMA.field(APPEND_KEY), ids)


def _newest(rows: pa.Table, keys: int) -> pa.Table:
    """The newest version of every key, by position (later commits win), with no sort or dedupe."""
    last = np.full(keys, -1, dtype=np.int64)
    last[rows.column(PK_KEY).to_numpy()] = np.arange(rows.num_rows)  # later positions overwrite
    return rows.take(pa.array(last[last >= 0]))  # in key order


def generate(directory: Path, plan: Plan) -> Facts:
    """Write both scenarios' commits as Arrow IPC files and record the expected fingerprints."""
    rng = np.random.default_rng(SEED)
    directory.mkdir(parents=True, exist_ok=True)
    pk_commits = (data.keyed_rows(rng, rng.choice(plan.pk_keys, plan.pk_rows, replace=False))
                  for _ in range(plan.pk_commits))
    pk_rows = pa.concat_tables(data.write_batches(directory / FILES["pk"], PK_SCHEMA, pk_commits))
    append_commits = (_append_commit(rng, plan, index * plan.append_rows) for index in range(plan.append_commits))
    append_rows = pa.concat_tables(data.write_batches(directory / FILES["append"], APPEND_SCHEMA, append_commits))
    return Facts(plan, fingerprint(_newest(pk_rows, plan.pk_keys), "pk"), light_fingerprint(pk_rows, "pk"),
                 fingerprint(append_rows, "append"))


def dataset(work: Path, plan: Plan) -> tuple[Path, Facts]:
    """The input files and expected results, generated unless a kept copy exists."""
    directory = work / "data" / (f"pk_{plan.pk_commits}x{plan.pk_rows}_keys{plan.pk_keys}"
                                 f"_append_{plan.append_commits}x{plan.append_rows}")
    return directory, data.kept_or_generated(
        directory, plan, load=Facts.from_json, generate=generate,
        what=f"pk {plan.pk_commits} x {plan.pk_rows:,} rows (keys < {plan.pk_keys:,}) and append "
             f"{plan.append_commits} x {plan.append_rows:,} rows")


# ---- steps (in the step process) --------------------------------------------------------------------

class CompactionEngine(Protocol):
    """One engine under test. Only ``compact`` and ``read`` run inside the timer."""

    def build(self, target: Path, scenario: str, commits: Iterator[pa.Table]) -> dict[str, int]:
        """Create the table at ``target`` from one commit per batch; describe it (files, level 0)."""

    def open(self, target: Path, scenario: str) -> Any:
        """A handle on an existing table (catalog and table objects, not its snapshot)."""

    def compact(self, handle: Any, scenario: str) -> Any:
        """Rewrite the whole table (Paimon: full compaction, one COMPACT snapshot)."""

    def compacted(self, handle: Any, scenario: str, result: Any) -> dict[str, int]:
        """What the compaction did (checked after the timer): rows, files and bytes in and out."""

    def read(self, handle: Any, scenario: str, state: str) -> pa.Table:
        """The table's rows; includes planning the scan (Paimon) or replaying the log (Delta)."""

    def full_read_check(self, scenario: str) -> bool:
        """Whether a read returns every column of one version per key (else only rows are comparable)."""


def _build(engine: CompactionEngine, args: argparse.Namespace) -> None:
    """Not a measured step: it prepares the state that every compaction repetition copies."""
    shutil.rmtree(args.target, ignore_errors=True)
    commits = data.mapped_batches(args.input / FILES[args.scenario])
    described, timing = measure(lambda: engine.build(args.target, args.scenario, commits))
    report(timing, described)


def _compact(engine: CompactionEngine, args: argparse.Namespace) -> None:
    handle = engine.open(args.target, args.scenario)
    result, timing = measure(lambda: engine.compact(handle, args.scenario), args.profile)
    report(timing, engine.compacted(handle, args.scenario, result))


def _read(engine: CompactionEngine, args: argparse.Namespace) -> None:
    handle = engine.open(args.target, args.scenario)
    check = fingerprint if engine.full_read_check(args.scenario) else light_fingerprint
    measure_and_report(lambda: engine.read(handle, args.scenario, args.state), args.profile,
                       lambda table: check(table, args.scenario))


STEPS = {"build": _build, "compact": _compact, "read": _read}


def add_step_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--state", choices=STATES, default="after",
                        help="read: the table before or after compaction (only raw pyarrow reads differ)")


# ---- driver ------------------------------------------------------------------------------------------

LABELS = {  # what an engine runs for a step, where that is not obvious
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
        action = self.action if self.action == "compact" else f"read {self.state}"
        detail = LABELS.get((self.engine, action, self.scenario))
        return f"{self.name} ({detail})" if detail else self.name

    @property
    def extra(self) -> list[str]:
        return ["--scenario", self.scenario, *(["--state", self.state] if self.action == "read" else [])]


TARGETS = [target for scenario in SCENARIOS for target in (
    Target(f"{scenario} full compaction: ours >= 50% of raw pyarrow's throughput", Step("ours", scenario, "compact"),
           "pyarrow", 2.0, throughput=True),
    Target(f"{scenario} full compaction: ours within 1.2x of delta-rs optimize.compact",
           Step("ours", scenario, "compact"), "delta", 1.2),
    Target(f"{scenario} read after compaction: ours within 1.3x of raw pyarrow pq.read_table",
           Step("ours", scenario, "read"), "pyarrow", 1.3),
)]


def phases(engines: tuple[str, ...], scenarios: list[str]) -> list[list[Step]]:
    """Steps in run order; the steps of one phase alternate within each repetition."""
    return [phase for scenario in scenarios for phase in (
        [Step(engine, scenario, "read", "before") for engine in engines],
        [Step(engine, scenario, "compact") for engine in engines],
        [Step(engine, scenario, "read", "after") for engine in engines],
    )]


def rows_after(engine: str, scenario: str, facts: Facts) -> int:
    """Rows a compacted table holds: the newest row per key (Paimon, raw pyarrow pk), else all rows."""
    if scenario == "pk" and engine != "delta":
        return facts.pk_newest["rows"]
    return facts.plan.rows(scenario)


@dataclass(frozen=True, slots=True)
class Context:
    """Where the run's tables are, and how to start a step of each engine."""

    steps: Steps
    facts: Facts
    pristine: Path  # built tables, copied before every compaction repetition
    scratch: Path  # the copy a compaction repetition works on
    compacted: Path  # the last compaction repetition's result, read by the reads after compaction

    def build_expected(self, engine: str, scenario: str) -> dict[str, int]:
        plan = self.facts.plan
        want = {"rows": plan.rows(scenario)}
        if engine == "ours" and scenario == "pk":
            want["max_level0_files"] = plan.pk_commits
        if scenario == "append":
            want["files"] = plan.append_commits
        return want

    def build(self, engines: tuple[str, ...], scenarios: list[str]) -> dict[str, dict[str, Any]]:
        """Every engine's table of every scenario, before compaction (unmeasured preparation)."""
        builds: dict[str, dict[str, Any]] = {}
        for scenario in scenarios:
            for engine in engines:
                result = self.steps.prepare(engine, "build", self.pristine / engine / scenario, "--scenario", scenario)
                require(result["check"], self.build_expected(engine, scenario), f"{engine} build of {scenario}")
                builds[f"{engine} {scenario}"] = {"seconds": result["seconds"], **result["check"]}
                log.info("built %-7s %-6s in %5.1f s: %s", engine, scenario, result["seconds"], result["check"])
        return builds

    def prepare_target(self, step: Step) -> Path:
        """A compaction works on a fresh copy of the built table; reads use a table in place."""
        if step.action == "read":
            return (self.pristine if step.state == "before" else self.compacted) / step.engine / step.scenario
        target = self.scratch / step.engine / step.scenario
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.pristine / step.engine / step.scenario, target)
        return target

    def expected(self, step: Step) -> dict[str, int]:
        facts = self.facts
        if step.action == "compact":
            want = {"rows_in": facts.plan.rows(step.scenario),
                    "rows_out": rows_after(step.engine, step.scenario, facts)}
            if step.engine == "ours" and step.scenario == "pk":
                want.update(max_level0_files=0, max_sorted_runs=1)  # one sorted run at the max level
            return want
        if step.scenario == "append":
            return facts.append_all
        return facts.pk_all if step.engine == "delta" else facts.pk_newest

    def run_rep(self, step: Step) -> tuple[Rep, dict[str, Any]]:
        """One repetition of one step in a fresh process, checked against the expected result."""
        rep, check = self.steps.measured(step.engine, step.action, self.prepare_target(step), *step.extra)
        require(check, self.expected(step), f"{step.engine} {step.scenario} {step.name}")
        return rep, check

    def keep_compacted(self, outcomes: list[Outcome[Step]]) -> None:
        """Keep the last compaction repetition's table for the reads after compaction."""
        for outcome in outcomes:
            if outcome.step.action == "compact":
                done = self.compacted / outcome.step.engine / outcome.step.scenario
                shutil.rmtree(done, ignore_errors=True)
                done.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(self.scratch / outcome.step.engine / outcome.step.scenario, done)

    def profile_ours(self, directory: Path, scenarios: list[str]) -> dict[str, str]:
        """cProfile of one extra (unreported) run of ours' compactions and reads after compaction."""
        directory.mkdir(parents=True, exist_ok=True)
        texts = {}
        for scenario in scenarios:
            for step in (Step("ours", scenario, "compact"), Step("ours", scenario, "read")):
                out = directory / f"ours_{scenario}_{step.action}.prof"
                target = self.prepare_target(step)
                self.steps.prepare("ours", step.action, target, *step.extra, "--profile", str(out))
                if step.action == "compact":
                    shutil.rmtree(target, ignore_errors=True)
                texts.update(profile_texts(out, f"{scenario} {step.name}", PROFILE_TOP, ("cumulative", "tottime")))
        return texts


# ---- report -------------------------------------------------------------------------------------

COLUMNS = ("scenario", "step", "engine", "seconds (median)", "min-max", "CPU s", "rows/s in", "MiB/s in",
           "rows in → out", "files in → out", "MiB in → out", "peak RSS MiB", "RSS before step MiB",
           "ours/raw-pyarrow", "ours/delta")


def table_row(facts: Facts, outcomes: list[Outcome[Step]], o: Outcome[Step]) -> list[str]:
    seconds = o.median("seconds")
    step, check = o.step, o.check
    rows = rows_after(step.engine, step.scenario, facts) if step.action == "read" and step.state == "after" \
        else facts.plan.rows(step.scenario)  # every stored version, except for a read of a compacted table
    if step.action == "compact":
        throughput = f"{check['bytes_in'] / MIB / seconds:.0f}"
        files = f"{check['files_in']} → {check['files_out']}"
        size = f"{check['bytes_in'] / MIB:.1f} → {check['bytes_out'] / MIB:.1f}"
        out = check["rows_out"]
    else:
        throughput = files = size = ""
        out = check["rows"]
    return [step.scenario, step.label, step.engine, f"{seconds:.3f}", o.spread(),
            f"{o.median('cpu_seconds'):.2f}", f"{rows / seconds / 1e6:.2f} M", throughput, f"{rows:,} → {out:,}",
            files, size, f"{o.median('peak_rss_mib'):.0f}", f"{o.median('base_rss_mib'):.0f}",
            *ratio_cells(outcomes, step, PEERS)]


def memory_note(outcomes: list[Outcome[Step]], facts: Facts, directory: Path) -> str:
    """Ours' peak RSS per step (and its growth during the step), against the rows' size as Arrow."""
    parts = []
    for scenario in dict.fromkeys(o.step.scenario for o in outcomes):
        arrow = (directory / FILES[scenario]).stat().st_size / MIB
        steps = [f"{o.step.name} {o.median('peak_rss_mib'):.0f} MiB "
                 f"(+{o.median('peak_rss_mib') - o.median('base_rss_mib'):.0f})"
                 for o in outcomes if o.step.engine == "ours" and o.step.scenario == scenario]
        parts.append(f"{scenario} ({facts.plan.rows(scenario):,} stored rows, {arrow:.0f} MiB as Arrow): "
                     + ", ".join(steps))
    return ("Peak RSS of ours, and in brackets its growth during the step: " + "; ".join(parts) + "."
            if parts else "")


def render(ctx: Context, outcomes: list[Outcome[Step]], builds: dict[str, dict[str, Any]],
           results: list[Verdict[Step]]) -> str:
    facts = ctx.facts
    table = markdown(COLUMNS, (table_row(facts, outcomes, o) for o in outcomes))
    notes = joined([
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
        f"and raw pyarrow, append {facts.append_all['rows']:,} rows for every engine.",
        "Unmeasured builds: " + ", ".join(f"{name} {b['seconds']:.1f} s ({b['files']} files)"
                                          for name, b in builds.items()) + ".",
        memory_note(outcomes, facts, ctx.steps.data),
        pressure_note(outcomes),
    ])
    return f"{table}\n\n{notes}\n\n{render_verdicts(results)}"


# ---- entry -------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--pk-commits", type=int, default=10, help="pk: commits (level-0 runs per bucket)")
    parser.add_argument("--pk-rows", type=int, default=200_000, help="pk: rows per commit")
    parser.add_argument("--pk-keys", type=int, default=1_300_000, help="pk: keyspace the commits draw from")
    parser.add_argument("--append-commits", type=int, default=200, help="append: commits (small files)")
    parser.add_argument("--append-rows", type=int, default=10_000, help="append: rows per commit")
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also profile ours' compactions and reads after compaction (cProfile, top "
                             f"{PROFILE_TOP} by cumulative and by own time) into DIR")


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.pk_rows, args.pk_keys, args.append_commits, args.append_rows = 2_000, 13_000, 20, 500
    if args.pk_rows > args.pk_keys:
        parser.error("--pk-rows must not exceed --pk-keys (a commit holds every key once)")
    args.scenarios = [s for s in SCENARIOS if s in args.scenarios]


def run(run: SuiteRun) -> Result:
    args = run.args
    plan = Plan(args.pk_commits, args.pk_rows, args.pk_keys, args.append_commits, args.append_rows)
    run.meta.update(plan=asdict(plan), scenarios=args.scenarios)
    directory, facts = dataset(run.work, plan)
    ctx = Context(run.steps(directory), facts, run.work / "pristine", run.work / "run", run.work / "compacted")
    for folder in (ctx.pristine, ctx.scratch, ctx.compacted):
        shutil.rmtree(folder, ignore_errors=True)
    builds = ctx.build(run.engines, args.scenarios)
    outcomes = run_phases(phases(run.engines, args.scenarios), ctx.run_rep, reps=lambda step: args.reps,
                          describe=lambda step: f"{step.engine:<7} {step.scenario:<6} {step.name:<22}",
                          after=ctx.keep_compacted)
    profiles = ctx.profile_ours(args.profile, args.scenarios) if args.profile else {}
    results = verdicts(outcomes, (t for t in TARGETS if t.step.scenario in args.scenarios), run.engines)
    title = (f"Compaction benchmark: pk {plan.pk_commits} commits x {plan.pk_rows:,} rows (keys < {plan.pk_keys:,}, "
             f"bucket {PK_BUCKETS}, {facts.pk_newest['rows']:,} distinct), append {plan.append_commits} commits "
             f"x {plan.append_rows:,} rows (bucket -1); {args.reps} process(es) per step, median step seconds")
    document = {"builds": builds, "steps": [o.to_json() for o in outcomes],
                "targets": [v.to_json() for v in results]}
    return Result(title, render(ctx, outcomes, builds, results), document, profiles=profiles,
                  profile_note=f"top {PROFILE_TOP} by cumulative, then by own time")
