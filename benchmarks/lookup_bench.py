"""Primary-key lookups: ``TableLookup`` (cached) and ``Table.lookup`` against a filtered full read
and DuckDB over the same Parquet data files.

    nice .venv/bin/python benchmarks/lookup_bench.py                  # 10M rows, 10k keys: about 15 min
    .venv/bin/python benchmarks/lookup_bench.py --rows 200000         # smoke run, about 1 min
    .venv/bin/python benchmarks/lookup_bench.py --keep --shapes compacted

A 10M-row primary-key table (``bucket = 8``, deduplicate) in two shapes holding the same rows:
``level0``, written as 10 commits of a tenth of the keys each and never compacted (10 level-0
runs per bucket, each spanning the whole key range), and ``compacted``, a copy of it after a full
compaction (one file per bucket). 10k random keys (about 9% absent, a few repeated) are looked up
one per call (latency p50/p99) and in batches of 1k and of all 10k (keys/s), by:

* ``lookup, cache fits``: ``table.new_lookup()`` with ``lookup.cache-max-memory-size`` large
  enough for the decoded table (``--big-cache``); the single calls start from an empty cache.
* ``lookup, 256 mb cache``: the same with Paimon's default bound, smaller than the table.
* ``table.lookup``: one-shot, no cache (plans the snapshot from its manifests on every call).
* ``read(filter)``: ``table.read(filter=[("id", "=", k)])`` / ``[("id", "in", keys)]``.
* ``duckdb``: DuckDB over the snapshot's live data files (``parquet_metadata_cache`` on), with
  the same merge-on-read semantics: newest ``_SEQUENCE_NUMBER`` per key, retractions dropped.

Every result is checked against the generator (row count, sum of ids and of ``v_int``); a
mismatch aborts with ``CORRECTNESS FAILURE``. The report gives a Markdown table per shape with
ratios against ``lookup, cache fits``, and ``.bench/lookup_bench.json`` holds every figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench_common as bc
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import paimon_core as pc

SEED = 20240808
DATABASE = "bench"
RUNS = 10
BUCKETS = "8"
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    ("v_int", pa.int64()), ("v_float", pa.float64()), ("v_str", pa.string()),
    ("v_ts", pa.timestamp("us")), ("v_i32", pa.int32()),
])
VALUE_COLUMNS = ", ".join(SCHEMA.names)
Fingerprint = tuple[int, int, int]  # rows, sum(id), sum(v_int)


def fingerprint(table: pa.Table) -> Fingerprint:
    ids = table.column("id").to_numpy()
    return table.num_rows, int(ids.sum()), int(table.column("v_int").to_numpy().sum())


@dataclass
class Data:
    v_int: np.ndarray  # by id

    def expected(self, keys: np.ndarray) -> Fingerprint:
        distinct = np.unique(keys)
        found = distinct[distinct < len(self.v_int)]
        return len(found), int(found.sum()), int(self.v_int[found].sum())


def generate(rows: int) -> tuple[Data, list[pa.Table]]:
    """The table's rows by id, in RUNS random slices of the keys (each slice one level-0 run)."""
    rng = np.random.default_rng(SEED)
    ids = np.arange(rows, dtype=np.int64)
    v_int = rng.integers(-10**9, 10**9, rows)
    table = pa.table({"id": ids, "v_int": v_int, "v_float": rng.random(rows),
                      "v_str": bc.random_hex(rng, rows, 20),
                      "v_ts": pa.array(rng.integers(0, 365 * bc.DAY_US, rows), pa.timestamp("us")),
                      "v_i32": rng.integers(-2**31, 2**31 - 1, rows).astype(np.int32)}, schema=SCHEMA)
    order = rng.permutation(rows)
    runs = [table.take(pa.array(part)) for part in np.array_split(order, RUNS)]
    return Data(v_int), runs


def build(catalog: pc.Catalog, runs: list[pa.Table]) -> dict[str, pc.Table]:
    catalog.create_database(DATABASE, exist_ok=True)
    level0 = catalog.create_table(f"{DATABASE}.level0", schema=SCHEMA, primary_keys=["id"],
                                  options={"bucket": BUCKETS, "write-only": "true"})
    for i, run in enumerate(runs):
        started = time.perf_counter()
        level0.write(run)
        print(f"  level0: commit {i + 1}/{len(runs)} of {run.num_rows:,} rows in {time.perf_counter() - started:.1f} s",
              flush=True)
    source = Path(level0.path)
    shutil.copytree(source, source.parent / "compacted")
    compacted = catalog.get_table(f"{DATABASE}.compacted")
    started = time.perf_counter()
    compacted.compact(full=True)
    print(f"  compacted: full compaction in {time.perf_counter() - started:.1f} s", flush=True)
    return {"level0": level0, "compacted": compacted}


def layout(table: pc.Table) -> dict[str, Any]:
    files = table.files()
    groups = []
    for split in table.plan():
        for meta in split.files:
            path = table.paths.data_file("", split.bucket, meta.file_name)
            groups.append(pq.ParquetFile(path, filesystem=table.file_io.arrow_fs).metadata.num_row_groups)
    return {"files": len(files), "files per bucket": len(files) / int(BUCKETS),
            "row groups": sum(groups), "rows per row group": round(sum(f.row_count for f in files) / sum(groups)),
            "data MiB": round(sum(f.file_size for f in files) / 2**20, 1)}


# ---- engines ----------------------------------------------------------------------------------------


@dataclass
class Engine:
    name: str
    single: Callable[[int], pa.Table]
    batch: Callable[[np.ndarray], pa.Table]
    single_calls: int  # how many of the keys the single-key run looks up
    batch_chunks: int  # how many 1k batches the batched run looks up
    reps: int
    extra: Callable[[], dict[str, Any]] = field(default=lambda: {})


def ours_cached(table: pc.Table, name: str, cache: str, calls: int, reps: int) -> Engine:
    lookup = table.new_lookup(options={"lookup.cache-max-memory-size": cache})

    def extra() -> dict[str, Any]:
        stats = lookup.stats
        total = stats.cache.hits + stats.cache.misses
        return {"cache MiB": round(stats.cache.bytes / 2**20, 1),
                "hit rate": round(stats.cache.hits / max(total, 1), 3), "row groups decoded": stats.files_read,
                "evictions": stats.cache.evictions}

    return Engine(name, lambda k: lookup.lookup({"id": [k]}), lambda keys: lookup.lookup({"id": keys}),
                  calls, 10**9, reps, extra)


def ours_one_shot(table: pc.Table, calls: int, reps: int) -> Engine:
    return Engine("table.lookup", lambda k: table.lookup({"id": [k]}), lambda keys: table.lookup({"id": keys}),
                  calls, 10**9, reps)


def ours_read(table: pc.Table, calls: int, chunks: int) -> Engine:
    return Engine("read(filter)", lambda k: table.read(filter=[("id", "=", k)]),
                  lambda keys: table.read(filter=[("id", "in", keys.tolist())]), calls, chunks, 1)


def duckdb_engine(table: pc.Table, calls: int, reps: int) -> Engine:
    import duckdb

    files = [table.paths.data_file("", split.bucket, meta.file_name) for split in table.plan() for meta in split.files]
    con = duckdb.connect()
    con.execute("SET parquet_metadata_cache = true")
    listed = ", ".join(f"'{f}'" for f in files)
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
    newest = ("SELECT {cols} FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY _SEQUENCE_NUMBER DESC) AS rn "
              "FROM t WHERE {where}) WHERE rn = 1 AND _VALUE_KIND IN (0, 2)")
    one = newest.format(cols=VALUE_COLUMNS, where="id = $1")
    many = newest.format(cols=VALUE_COLUMNS, where="id IN (SELECT id FROM keys)")

    def batch(keys: np.ndarray) -> pa.Table:
        con.register("keys", pa.table({"id": keys}))
        try:
            return con.sql(many).to_arrow_table()
        finally:
            con.unregister("keys")

    def extra() -> dict[str, Any]:
        threads = con.execute("SELECT current_setting('threads')").fetchone()
        return {"duckdb": duckdb.__version__, "threads": threads[0] if threads else None}

    return Engine("duckdb", lambda k: con.sql(one, params=[k]).to_arrow_table(), batch, calls, 10**9, reps, extra)


# ---- measuring ----------------------------------------------------------------------------------------


def check(engine: str, what: str, got: Fingerprint, want: Fingerprint) -> None:
    if got != want:
        sys.exit(f"CORRECTNESS FAILURE: {engine} {what}: got (rows, sum id, sum v_int) {got}, want {want}")


def run_single(engine: Engine, keys: np.ndarray, data: Data, quiet_wait: float) -> dict[str, Any]:
    calls = keys[: engine.single_calls]
    pressure = bc.wait_quiet(quiet_wait)
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
    check(engine.name, f"single lookups of {len(calls)} keys", (rows, ids, values), data.expected(calls))
    return {"calls": len(calls), "p50 ms": float(np.percentile(latencies, 50) * 1e3),
            "p99 ms": float(np.percentile(latencies, 99) * 1e3), "mean ms": float(latencies.mean() * 1e3),
            "cpu pressure": pressure}


def run_batches(engine: Engine, keys: np.ndarray, size: int, data: Data, quiet_wait: float) -> dict[str, Any]:
    chunks = [keys[i:i + size] for i in range(0, len(keys), size)][: engine.batch_chunks]
    seconds = []
    pressure = bc.wait_quiet(quiet_wait)
    for _ in range(engine.reps):
        started = time.perf_counter()
        results = [engine.batch(chunk) for chunk in chunks]
        seconds.append(time.perf_counter() - started)
        for chunk, result in zip(chunks, results):
            check(engine.name, f"a batch of {len(chunk)} keys", fingerprint(result), data.expected(chunk))
    looked = sum(len(c) for c in chunks)
    median = statistics.median(seconds)
    return {"batches": len(chunks), "keys": looked, "median s": median, "keys/s": looked / median,
            "cpu pressure": pressure}


def machine_state() -> dict[str, Any]:
    model = ""
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "")
    except OSError:
        pass
    mem = {line.split(":")[0]: line.split(":")[1].strip() for line in Path("/proc/meminfo").read_text().splitlines()
           if line.startswith(("MemTotal", "MemAvailable"))}
    return {"cpus": os.cpu_count(), "cpu": model, "load avg": os.getloadavg(), "cpu pressure": bc.cpu_pressure(),
            "nice": os.nice(0), **mem}


def ratio(value: float | None, base: float | None) -> str:
    return "" if value is None or not base else f"{value / base:.1f}x"


def report(shape: str, info: dict[str, Any], results: dict[str, dict[str, Any]]) -> str:
    base = results["lookup, cache fits"]
    header = ["engine", "single p50 ms", "p99 ms", "calls", "p50 vs cached", "1k batches keys/s",
              "10k batch keys/s", "10k vs cached"]
    rows = []
    for name, r in results.items():
        single, one_k, ten_k = r["single"], r["batch 1000"], r["batch 10000"]
        rows.append([name, f"{single['p50 ms']:.2f}", f"{single['p99 ms']:.2f}", str(single["calls"]),
                     ratio(single["p50 ms"], base["single"]["p50 ms"]), f"{one_k['keys/s']:,.0f}",
                     f"{ten_k['keys/s']:,.0f}", ratio(base["batch 10000"]["keys/s"], ten_k["keys/s"])])
    extras = "\n".join(f"* {name}: {r['extra']}" for name, r in results.items() if r["extra"])
    return (f"### {shape}: {', '.join(f'{k} {v}' for k, v in info.items())}\n\n{bc.markdown(header, rows)}\n\n"
            f"{extras}\n\n(ratios: how many times slower than `lookup, cache fits`)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--shapes", nargs="+", default=["compacted", "level0"], choices=["compacted", "level0"])
    parser.add_argument("--big-cache", default="4 gb", help="lookup.cache-max-memory-size of 'lookup, cache fits'")
    parser.add_argument("--small-cache-calls", type=int, default=1000, help="single calls with the 256 mb cache")
    parser.add_argument("--one-shot-calls", type=int, default=300, help="single calls of table.lookup and duckdb")
    parser.add_argument("--read-calls", type=int, default=20, help="single calls of read(filter)")
    parser.add_argument("--read-chunks", type=int, default=2, help="1k batches of read(filter)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each batched run (median)")
    parser.add_argument("--work", type=Path, default=bc.REPO / ".bench" / "lookup_bench")
    parser.add_argument("--json", type=Path, default=bc.REPO / ".bench" / "lookup_bench.json")
    parser.add_argument("--quiet-wait", type=float, default=5.0)
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    args = parser.parse_args()

    versions = bc.host_versions()
    state_before = machine_state()
    warehouse = args.work / f"warehouse_{args.rows}"
    print(f"generating {args.rows:,} rows", flush=True)
    data, runs = generate(args.rows)
    catalog = pc.Catalog(str(warehouse))
    if (warehouse / f"{DATABASE}.db" / "compacted").exists():
        tables = {s: catalog.get_table(f"{DATABASE}.{s}") for s in ("level0", "compacted")}
        print("reusing the tables of an earlier --keep run", flush=True)
    else:
        shutil.rmtree(warehouse, ignore_errors=True)
        tables = build(catalog, runs)
    del runs
    rng = np.random.default_rng(SEED + 1)
    keys = rng.integers(0, int(args.rows * 1.1), args.keys).astype(np.int64)
    keys[-args.keys // 100:] = keys[: args.keys // 100]  # 1% repeated keys
    rng.shuffle(keys)
    document: dict[str, Any] = {"rows": args.rows, "keys": args.keys, "versions": versions,
                                "machine before": state_before, "shapes": {}}
    texts = []
    for shape in args.shapes:
        table = tables[shape]
        info = layout(table)
        print(f"\n{shape}: {info}", flush=True)
        engines = [ours_cached(table, "lookup, cache fits", args.big_cache, args.keys, args.reps),
                   ours_cached(table, "lookup, 256 mb cache", "256 mb", args.small_cache_calls, args.reps),
                   ours_one_shot(table, args.one_shot_calls, args.reps),
                   ours_read(table, args.read_calls, args.read_chunks),
                   duckdb_engine(table, args.one_shot_calls, args.reps)]
        results: dict[str, dict[str, Any]] = {}
        for engine in engines:
            started = time.perf_counter()
            single = run_single(engine, keys, data, args.quiet_wait)
            batches = {f"batch {size}": run_batches(engine, keys, size, data, args.quiet_wait)
                       for size in (1000, args.keys)}
            results[engine.name] = {"single": single, **batches, "extra": engine.extra(),
                                    "seconds": time.perf_counter() - started}
            print(f"  {engine.name}: p50 {single['p50 ms']:.2f} ms, p99 {single['p99 ms']:.2f} ms, "
                  f"1k {batches['batch 1000']['keys/s']:,.0f} keys/s, "
                  f"{args.keys // 1000}k {batches[f'batch {args.keys}']['keys/s']:,.0f} keys/s "
                  f"({results[engine.name]['seconds']:.0f} s)", flush=True)
            if args.keys != 10_000:
                results[engine.name]["batch 10000"] = results[engine.name][f"batch {args.keys}"]
        document["shapes"][shape] = {"layout": info, "results": results}
        texts.append(report(shape, info, results))
    document["machine after"] = machine_state()
    document["peak RSS MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    document["versions"]["paimon_core sources after run"] = bc.source_digest()
    bc.save_json(args.json, document)
    print(f"\nlookup_bench: {args.rows:,} rows, {args.keys:,} keys; "
          + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if document["versions"]["paimon_core sources after run"] != versions["paimon_core sources"]:
        print("\nWARNING: paimon_core's sources changed during this run; its results mix code versions.")
    print(f"machine before: {state_before}\nmachine after: {document['machine after']}")
    print(f"peak RSS {document['peak RSS MiB']:,.0f} MiB\n")
    print("\n\n".join(texts))
    print(f"\nsaved {args.json}")
    if not args.keep:
        shutil.rmtree(warehouse, ignore_errors=True)
        bc.remove_work(args.work, [])


if __name__ == "__main__":
    main()
