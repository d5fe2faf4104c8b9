"""Metadata slimming: manifest bytes and scan-planning time of a wide log table after many small commits.

A 100-column log table (20 int64, 20 double, 50 string, 10 timestamp columns) receives
``--commits`` commits of ``--rows`` rows, with an append compaction every 25 commits (its
DELETE entries are what ``manifest.delete-file-drop-stats`` slims). Each variant differs only in
its metadata options; each runs in a fresh process. Reported per variant: bytes of every manifest
and manifest list written, bytes a scan of the latest snapshot reads (its lists and manifests),
manifests in it, median planning time, total commit time, and ratios against full stats without
merging. Anchor: delta-rs appends of the same batches (``_delta_log`` bytes with its default
stats on the first 32 columns and checkpoints every 100 commits, and the time to load the table
and list its files).

    .venv/bin/python benchmarks/metadata_bench.py            # 500 commits: about 4 minutes
    .venv/bin/python benchmarks/metadata_bench.py --quick    # 60 commits
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DELTA_PYTHON = REPO / ".venv-bench" / "bin" / "python"
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


def schema() -> pa.Schema:
    fields = [pa.field(f"c{i}", pa.int64()) for i in range(20)]
    fields += [pa.field(f"c{i}", pa.float64()) for i in range(20, 40)]
    fields += [pa.field(f"c{i}", pa.string()) for i in range(40, 90)]
    fields += [pa.field(f"c{i}", pa.timestamp("us")) for i in range(90, 100)]
    return pa.schema(fields)


def batch(commit: int, rows: int) -> pa.Table:
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


def run_ours(variant: str, work: Path, commits: int, rows: int) -> dict[str, Any]:
    import paimon_core as pc
    from paimon_core.maintenance.reachable import References, manifest_lists

    catalog = pc.Catalog(str(work))
    catalog.create_database("bench")
    table = catalog.create_table("bench.logs", schema=schema(),
                                 options={"write-only": "true", "compaction.min.file-num": "5", **VARIANTS[variant]})
    commit_s = 0.0
    for c in range(commits):
        data = batch(c, rows)
        started = time.perf_counter()
        table.write(data)
        if (c + 1) % COMPACT_EVERY == 0:
            table.compact()
        commit_s += time.perf_counter() - started
    latest = table.latest_snapshot()
    assert latest is not None
    references = References(table.file_io, table.paths)
    lists = manifest_lists(latest)
    metas = [m for name in lists for m in references.manifests(name)]
    list_bytes = sum((Path(table.paths.manifest_file(name))).stat().st_size for name in lists)
    plan_times = []
    for _ in range(PLAN_REPEATS):
        started = time.perf_counter()
        splits = table.plan()
        plan_times.append(time.perf_counter() - started)
    manifest_dir = Path(table.paths.manifest_dir)
    assert table.read(columns=["c0"]).num_rows == commits * rows
    return {"variant": variant, "all_manifest_bytes": sum(p.stat().st_size for p in manifest_dir.iterdir()),
            "scan_bytes": list_bytes + sum(m.file_size for m in metas), "manifests": len(metas),
            "plan_ms": statistics.median(plan_times) * 1000, "commit_s": commit_s, "splits": len(splits)}


def run_delta(work: Path, commits: int, rows: int) -> dict[str, Any]:
    import deltalake

    path = str(work / "delta")
    commit_s = 0.0
    for c in range(commits):
        data = batch(c, rows)
        started = time.perf_counter()
        deltalake.write_deltalake(path, data, mode="append")
        commit_s += time.perf_counter() - started
    loads = []
    for _ in range(PLAN_REPEATS):
        started = time.perf_counter()
        files = deltalake.DeltaTable(path).file_uris()
        loads.append(time.perf_counter() - started)
    log_dir = Path(path) / "_delta_log"
    return {"variant": "delta-rs (anchor)", "all_manifest_bytes": sum(p.stat().st_size for p in log_dir.rglob("*")
                                                                      if p.is_file()),
            "scan_bytes": None, "manifests": len(files), "plan_ms": statistics.median(loads) * 1000,
            "commit_s": commit_s, "splits": len(files)}


def child(args: argparse.Namespace) -> None:
    work = Path(args.work)
    result = run_delta(work, args.commits, args.rows) if args.variant == "delta" else \
        run_ours(args.variant, work, args.commits, args.rows)
    print("RESULT " + json.dumps(result))


def spawn(python: Path, variant: str, commits: int, rows: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="metadata-bench-"))
    try:
        out = subprocess.run([str(python), __file__, "--child", "--variant", variant, "--work", str(work),
                              "--commits", str(commits), "--rows", str(rows)],
                             capture_output=True, text=True, check=True, cwd=REPO).stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    return dict(json.loads(line[len("RESULT "):]))


def report(results: list[dict[str, Any]], commits: int, rows: int) -> str:
    base = next(r for r in results if r["variant"] == BASELINE)
    lines = [f"Metadata benchmark: {commits} commits of {rows} rows into a 100-column log table "
             f"(append compaction every {COMPACT_EVERY} commits)", "",
             "| variant | manifest bytes written | bytes a scan reads | vs full, no merging | manifests in scan "
             "| planning ms | commits s |", "|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = f"{base['scan_bytes'] / r['scan_bytes']:.1f}x smaller" if r["scan_bytes"] else "-"
        scan = f"{r['scan_bytes']:,}" if r["scan_bytes"] else "-"
        count = f"{r['manifests']}" if r["scan_bytes"] else f"{r['manifests']} files listed"
        lines.append(f"| {r['variant']} | {r['all_manifest_bytes']:,} | {scan} | {ratio} | {count} | "
                     f"{r['plan_ms']:.1f} | {r['commit_s']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="60 commits")
    parser.add_argument("--no-delta", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    commits = 60 if args.quick else args.commits
    results = []
    for variant in VARIANTS:
        results.append(spawn(Path(sys.executable), variant, commits, args.rows))
        print(f"  {variant}: {results[-1]['scan_bytes']:,} scan bytes, {results[-1]['plan_ms']:.1f} ms", flush=True)
    if not args.no_delta and DELTA_PYTHON.exists():
        results.append(spawn(DELTA_PYTHON, "delta", commits, args.rows))
    print(report(results, commits, args.rows))


if __name__ == "__main__":
    main()
