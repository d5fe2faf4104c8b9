"""Primary-key lookups: ``TableLookup`` (cached) and ``Table.lookup`` against a filtered read and DuckDB.

A primary-key table (``bucket = 8``, deduplicate) in two shapes holding the same rows: ``level0``,
written as 10 commits of a tenth of the keys each and never compacted (10 level-0 runs per bucket,
each spanning the whole key range), and ``compacted``, a copy of it after a full compaction (one
file per bucket). Random keys (about 9% absent, 1% repeated) are looked up one per call (latency
p50/p99) and in batches of 1k and of all of them (keys/s), by:

* ``lookup, cache fits``: ``table.new_lookup()`` with ``lookup.cache-max-memory-size`` large
  enough for the decoded table (``--big-cache``); the single calls start from an empty cache.
* ``lookup, 256 mb cache``: the same with Paimon's default bound, smaller than the table.
* ``table.lookup``: one-shot, no cache (plans the snapshot from its manifests on every call).
* ``read(filter)``: ``table.read(filter=[("id", "=", k)])`` / ``[("id", "in", keys)]``.
* ``duckdb``: DuckDB over the snapshot's live data files (``parquet_metadata_cache`` on), with
  the same merge-on-read semantics: newest ``_SEQUENCE_NUMBER`` per key, retractions dropped.

The tables are built in one process; the engines of one shape then run one after the other in
one process (they share its table object and page cache, as a service would). Every result is
checked against the generator (row count, sum of ids and of ``v_int``); a mismatch aborts with
``CORRECTNESS FAILURE``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from benchmarks import data, engines
from benchmarks.harness.measure import measure, report
from benchmarks.harness.report import markdown
from benchmarks.harness.runner import cpu_pressure, wait_quiet
from benchmarks.harness.suite import Result, SuiteRun

ENGINES = ("ours", "duckdb")
WORK_DIRS = ("data", "tables")
SEED = 20240808
RUNS = 10
BUCKETS = "8"
SHAPES = ("compacted", "level0")
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("v_int", pa.int64()), ("v_float", pa.float64()), ("v_str", pa.string()),
    ("v_ts", pa.timestamp("us")), ("v_i32", pa.int32()),
])
Fingerprint = tuple[int, int, int]  # rows, sum(id), sum(v_int)
BASE_ENGINE = "lookup, cache fits"


def fingerprint(table: pa.Table) -> Fingerprint:
    ids = table.column("id").to_numpy()
    return table.num_rows, int(ids.sum()), int(table.column("v_int").to_numpy().sum())


@dataclass(frozen=True, slots=True)
class Expected:
    v_int: np.ndarray  # by id

    def of(self, keys: np.ndarray) -> Fingerprint:
        distinct = np.unique(keys)
        found = distinct[distinct < len(self.v_int)]
        return len(found), int(found.sum()), int(self.v_int[found].sum())


def generate(rows: int) -> tuple[Expected, list[pa.Table]]:
    """The table's rows by id, in RUNS random slices of the keys (each slice one level-0 run)."""
    rng = np.random.default_rng(SEED)
    ids = np.arange(rows, dtype=np.int64)
    v_int = rng.integers(-10**9, 10**9, rows)
    table = pa.table({"id": ids, "v_int": v_int, "v_float": rng.random(rows),
                      "v_str": data.random_hex(rng, rows, 20),
                      "v_ts": pa.array(rng.integers(0, 365 * data.DAY_US, rows), pa.timestamp("us")),
                      "v_i32": rng.integers(-2**31, 2**31 - 1, rows).astype(np.int32)}, schema=SCHEMA)
    order = rng.permutation(rows)
    return Expected(v_int), [table.take(pa.array(part)) for part in np.array_split(order, RUNS)]


def lookup_keys(rows: int, count: int) -> np.ndarray:
    """``count`` random ids from ``0 .. 1.1 x rows`` (about 9% absent), 1% of them repeated."""
    rng = np.random.default_rng(SEED + 1)
    keys = rng.integers(0, int(rows * 1.1), count).astype(np.int64)
    keys[-count // 100:] = keys[: count // 100]
    rng.shuffle(keys)
    return keys


# ---- engines and how they are measured ---------------------------------------------------------------

@dataclass
class LookupEngine:
    """One way to look keys up, as the step measures it."""

    name: str
    single: Callable[[int], pa.Table]
    batch: Callable[[np.ndarray], pa.Table]
    single_calls: int  # how many of the keys the single-key run looks up
    batch_chunks: int  # how many 1k batches the batched run looks up
    reps: int
    extra: Callable[[], dict[str, Any]] = field(default=lambda: {})


@dataclass(frozen=True, slots=True)
class Settings:
    """How many calls and repetitions each engine gets (the suite's options)."""

    big_cache: str
    small_cache_calls: int
    one_shot_calls: int
    read_calls: int
    read_chunks: int
    keys: int
    reps: int


class LookupTables(Protocol):
    """The engine whose tables are looked up (ours): it builds them and names its lookups."""

    def build(self, warehouse: Path, runs: list[pa.Table]) -> None:
        """The ``level0`` table from ``runs`` (one commit each) and ``compacted``, its fully compacted copy."""

    def open(self, warehouse: Path, shape: str) -> Any: ...

    def layout(self, table: Any) -> dict[str, Any]:
        """Files, row groups and bytes of the table's live data."""

    def data_files(self, table: Any) -> list[str]:
        """The live data files of the table's latest snapshot."""

    def engines(self, table: Any, settings: Settings) -> list[LookupEngine]: ...


class FileLookups(Protocol):
    """An engine that looks keys up in another engine's data files (DuckDB)."""

    def engine(self, files: list[str], calls: int, reps: int) -> LookupEngine: ...


def check(engine: str, what: str, got: Fingerprint, want: Fingerprint) -> None:
    if got != want:
        raise SystemExit(f"CORRECTNESS FAILURE: {engine} {what}: got (rows, sum id, sum v_int) {got}, want {want}")


def run_single(engine: LookupEngine, keys: np.ndarray, expected: Expected, quiet_wait: float) -> dict[str, Any]:
    calls = keys[: engine.single_calls]
    pressure = wait_quiet(quiet_wait)
    latencies = np.empty(len(calls))
    rows = ids = values = 0
    seen: set[int] = set()
    for i, key in enumerate(calls.tolist()):
        started = time.perf_counter()
        result = engine.single(key)
        latencies[i] = time.perf_counter() - started
        if key not in seen:  # a repeated key is found again; count it once as the expectation does
            seen.add(key)
            r, s, v = fingerprint(result)
            rows, ids, values = rows + r, ids + s, values + v
    check(engine.name, f"single lookups of {len(calls)} keys", (rows, ids, values), expected.of(calls))
    return {"calls": len(calls), "p50 ms": float(np.percentile(latencies, 50) * 1e3),
            "p99 ms": float(np.percentile(latencies, 99) * 1e3), "mean ms": float(latencies.mean() * 1e3),
            "cpu pressure": pressure}


def run_batches(engine: LookupEngine, keys: np.ndarray, size: int, expected: Expected,
                quiet_wait: float) -> dict[str, Any]:
    chunks = [keys[i:i + size] for i in range(0, len(keys), size)][: engine.batch_chunks]
    seconds = []
    pressure = wait_quiet(quiet_wait)
    for _ in range(engine.reps):
        started = time.perf_counter()
        results = [engine.batch(chunk) for chunk in chunks]
        seconds.append(time.perf_counter() - started)
        for chunk, result in zip(chunks, results):
            check(engine.name, f"a batch of {len(chunk)} keys", fingerprint(result), expected.of(chunk))
    looked = sum(len(c) for c in chunks)
    median = statistics.median(seconds)
    return {"batches": len(chunks), "keys": looked, "median s": median, "keys/s": looked / median,
            "cpu pressure": pressure}


# ---- steps (in the step process) --------------------------------------------------------------------

EXPECTED_FILE = "v_int.npy"


def _build(tables: LookupTables, args: argparse.Namespace) -> None:
    """Not measured: generate the rows, keep the expected values by id, build both shapes."""
    expected, runs = generate(args.rows)
    args.input.mkdir(parents=True, exist_ok=True)
    np.save(args.input / EXPECTED_FILE, expected.v_int)
    _, timing = measure(lambda: tables.build(args.target, runs))
    report(timing, {"rows": args.rows})


def _lookups(tables: LookupTables, args: argparse.Namespace) -> None:
    """Every engine on one shape, one after the other in this process; their figures."""
    expected = Expected(np.load(args.input / EXPECTED_FILE))
    settings = Settings(args.big_cache, args.small_cache_calls, args.one_shot_calls, args.read_calls,
                        args.read_chunks, args.keys, args.reps)
    keys = lookup_keys(args.rows, args.keys)
    table = tables.open(args.target, args.shape)

    def run_all() -> dict[str, Any]:
        layout = tables.layout(table)
        chosen = tables.engines(table, settings)
        if args.duckdb:
            duckdb: FileLookups = engines.load("duckdb").SUITES["lookup"]
            chosen.append(duckdb.engine(tables.data_files(table), args.one_shot_calls, args.reps))
        results: dict[str, dict[str, Any]] = {}
        for engine in chosen:
            started = time.perf_counter()
            single = run_single(engine, keys, expected, args.quiet_wait)
            batches = {f"batch {size}": run_batches(engine, keys, size, expected, args.quiet_wait)
                       for size in (1000, args.keys)}
            results[engine.name] = {"single": single, **batches, "extra": engine.extra(),
                                    "seconds": time.perf_counter() - started}
            if args.keys != 10_000:
                results[engine.name]["batch 10000"] = results[engine.name][f"batch {args.keys}"]
        return {"layout": layout, "results": results}

    figures, timing = measure(run_all, args.profile)
    report(timing, figures)


STEPS = {"build": _build, "lookups": _lookups}


def _add_sizes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--big-cache", default="4 gb", help="lookup.cache-max-memory-size of 'lookup, cache fits'")
    parser.add_argument("--small-cache-calls", type=int, default=1000, help="single calls with the 256 mb cache")
    parser.add_argument("--one-shot-calls", type=int, default=300, help="single calls of table.lookup and duckdb")
    parser.add_argument("--read-calls", type=int, default=20, help="single calls of read(filter)")
    parser.add_argument("--read-chunks", type=int, default=2, help="1k batches of read(filter)")


def add_step_options(parser: argparse.ArgumentParser) -> None:
    _add_sizes(parser)
    parser.add_argument("--shape", choices=SHAPES)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quiet-wait", type=float, default=5.0)
    parser.add_argument("--duckdb", action="store_true", help="also run DuckDB over the table's files")


# ---- driver ------------------------------------------------------------------------------------------

def machine_state() -> dict[str, Any]:
    model = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "")
    except OSError:
        pass
    mem = {line.split(":")[0]: line.split(":")[1].strip() for line in Path("/proc/meminfo").read_text().splitlines()
           if line.startswith(("MemTotal", "MemAvailable"))}
    return {"cpus": os.cpu_count(), "cpu": model, "load avg": os.getloadavg(), "cpu pressure": cpu_pressure(),
            "nice": os.nice(0), **mem}


def _ratio(value: float | None, base: float | None) -> str:
    return "" if value is None or not base else f"{value / base:.1f}x"


def render_shape(shape: str, figures: dict[str, Any], peak_rss_mib: float) -> str:
    results: dict[str, dict[str, Any]] = figures["results"]
    base = results[BASE_ENGINE]
    header = ["engine", "single p50 ms", "p99 ms", "calls", "p50 vs cached", "1k batches keys/s",
              "10k batch keys/s", "10k vs cached"]
    rows = []
    for name, r in results.items():
        single, one_k, ten_k = r["single"], r["batch 1000"], r["batch 10000"]
        rows.append([name, f"{single['p50 ms']:.2f}", f"{single['p99 ms']:.2f}", str(single["calls"]),
                     _ratio(single["p50 ms"], base["single"]["p50 ms"]), f"{one_k['keys/s']:,.0f}",
                     f"{ten_k['keys/s']:,.0f}", _ratio(base["batch 10000"]["keys/s"], ten_k["keys/s"])])
    extras = "\n".join(f"* {name}: {r['extra']}" for name, r in results.items() if r["extra"])
    layout = ", ".join(f"{k} {v}" for k, v in figures["layout"].items())
    return (f"### {shape}: {layout}\n\n{markdown(header, rows)}\n\n{extras}\n\n"
            f"(ratios: how many times slower than `{BASE_ENGINE}`; peak RSS of the shape's process "
            f"{peak_rss_mib:,.0f} MiB)")


def run(run: SuiteRun) -> Result:
    args = run.args
    sizes = ["--rows", str(args.rows), "--keys", str(args.keys)]
    warehouse = run.work / "tables" / f"warehouse_{args.rows}"
    steps = run.steps(run.work / "data" / f"lookup_{args.rows}")
    machine_before = machine_state()
    if (warehouse / "bench.db" / "compacted").exists() and (steps.data / EXPECTED_FILE).exists():
        build: dict[str, Any] = {"reused": True}  # the tables of an earlier --keep run
    else:
        build = steps.prepare("ours", "build", warehouse, *sizes)
    options = [*sizes, "--big-cache", args.big_cache, "--small-cache-calls", str(args.small_cache_calls),
               "--one-shot-calls", str(args.one_shot_calls), "--read-calls", str(args.read_calls),
               "--read-chunks", str(args.read_chunks), "--reps", str(args.reps),
               "--quiet-wait", str(args.quiet_wait), *(["--duckdb"] if run.runs("duckdb") else [])]
    shapes: dict[str, Any] = {}
    for shape in args.shapes:
        result = steps.prepare("ours", "lookups", warehouse, *options, "--shape", shape)
        shapes[shape] = {**result["check"], "seconds": result["seconds"], "peak_rss_mib": result["peak_rss_mib"]}
    run.meta.update(rows=args.rows, keys=args.keys, machine_before=machine_before, machine_after=machine_state())
    texts = [render_shape(shape, shapes[shape], shapes[shape]["peak_rss_mib"]) for shape in args.shapes]
    machine = f"machine before: {machine_before}\nmachine after: {run.meta['machine_after']}"
    return Result(f"Lookup benchmark: {args.rows:,} rows, {args.keys:,} keys", "\n\n".join([machine, *texts]),
                  {"build": build, "shapes": shapes})


# ---- entry -------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    _add_sizes(parser)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.rows, args.keys = 20_000, 2_000
        args.small_cache_calls, args.one_shot_calls, args.read_calls = 100, 30, 5
