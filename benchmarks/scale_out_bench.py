"""Scale-out on Dagster's executors: a backfill and a full compaction with 1 and 2 worker processes.

The table: a primary-key table of 8 daily partitions x 4 buckets. The backfill writes the
partitions through the table's Dagster ingestion job (landed Parquet files, ``workers`` write
steps per partition, one commit each); the compaction input is the same rows written in four
commits per partition (four level-0 runs per bucket), compacted by ``paimon_full_compaction_job``
with a step per partition and one commit at the end. Each variant runs on a fresh copy.

Variants, in one run: in-process (one process, its threads on both cores), the multiprocess
executor with 1 and 2 concurrent steps, and the Dask executor on a LocalCluster with 1 and 2
worker processes, each worker pinned to its own core (one thread: the 1-vs-2 workers figure).

    .venv/bin/python benchmarks/scale_out_bench.py            # 8M rows: about 10 min
    .venv/bin/python benchmarks/scale_out_bench.py --quick    # 400k rows, smoke run

Prints a Markdown table and writes ``.bench/scale_out_bench.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import paimon_core as pc  # noqa: E402
from pipelines.compaction import compaction_tags, full_compaction_run_config  # noqa: E402
from pipelines.factory import paimon_definitions  # noqa: E402
from pipelines.ingestion import target_of  # noqa: E402
from pipelines.spec import Column, Compaction, Ingestion, PaimonTableSpec, Partitions  # noqa: E402
from resources.landing_location import LandingLocation  # noqa: E402

TABLE = "bench.accounts"
DAYS = [f"2024-05-0{d + 1}" for d in range(8)]
SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64()), ("name", pa.string()),
                    ("score", pa.float64())])


def spec(settings: dict[str, Any]) -> PaimonTableSpec:
    return PaimonTableSpec(
        table=TABLE, columns=tuple(Column(f.name, {"string": "STRING", "int64": "BIGINT", "double": "DOUBLE"}[
            str(f.type)]) for f in SCHEMA),
        primary_key=("dt", "id"), partition_keys=("dt",),
        partitions=Partitions("daily", start=DAYS[0], end="2024-05-09"),
        options={"bucket": "4", "write-only": "true"},
        ingestion=Ingestion(mode="upsert", workers=int(settings["workers"]), executor=settings.get("executor"),
                            executor_config=settings.get("executor_config") or {},
                            landing=LandingLocation(path=settings["landing"] + "/dt={partition}/*.parquet")),
        compaction=Compaction(commit_once=True))


def definitions(described: str) -> dg.Definitions:
    settings = json.loads(described)
    executor = None
    if settings.get("executor") == "dask":
        from pipelines.dask_executor import dask_executor

        executor = dask_executor.configured(settings["executor_config"])
    elif settings.get("executor") == "multiprocess":
        executor = dg.multiprocess_executor.configured(settings["executor_config"])
    return paimon_definitions([spec(settings)], warehouse=settings["warehouse"], executor=executor)


def bench_job(name: str, described: str) -> dg.JobDefinition:
    return definitions(described).resolve_job_def(name)


def generate(root: Path, rows: int) -> Path:
    """Landed files: per partition four Parquet files (one per commit of the compaction input)."""
    landing = root / "landing"
    per_file = rows // len(DAYS) // 4
    rng = np.random.default_rng(7)
    for day in DAYS:
        folder = landing / f"dt={day}"
        folder.mkdir(parents=True, exist_ok=True)
        for part in range(4):
            ids = rng.integers(0, per_file * 3, per_file)
            pq.write_table(pa.table({
                "id": pa.array(ids), "v": pa.array(rng.integers(0, 1 << 40, per_file)),
                "name": pa.array(np.char.add("user-", (ids % 50_000).astype(str))),
                "score": pa.array(rng.random(per_file))}), folder / f"part-{part}.parquet")
    return landing


def compaction_input(root: Path, landing: Path) -> Path:
    """The table written with four commits per partition (API, not timed)."""
    warehouse = root / "base"
    catalog = pc.Catalog(str(warehouse))
    catalog.create_database("bench")
    table = catalog.create_table(TABLE, schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                 options={"bucket": "4", "write-only": "true"})
    for part in range(4):
        for day in DAYS:
            data = pq.read_table(landing / f"dt={day}" / f"part-{part}.parquet")
            table.write(data.append_column("dt", pa.array([day] * data.num_rows)).select(SCHEMA.names))
    return warehouse


def step_events(result: Any) -> tuple[dict[str, float], list[float]]:
    """Seconds per step key (STEP_SUCCESS) and the peak RSS each step reported."""
    durations: dict[str, float] = {}
    rss: list[float] = []
    for event in result.all_events:
        if event.event_type_value == "STEP_SUCCESS":
            durations[event.step_key] = event.event_specific_data.duration_ms / 1000
        if event.event_type_value == "STEP_OUTPUT":
            metadata = event.event_specific_data.metadata or {}
            for key in ("paimon/compaction/peak_rss_mib", "peak_rss_mib"):
                if key in metadata:
                    rss.append(float(metadata[key].value))
    return durations, rss


def run(job_name: str, settings: dict[str, Any], instance: dg.DagsterInstance, **kwargs: Any) -> tuple[float, Any]:
    described = json.dumps(settings)
    job = dg.build_reconstructable_job(__name__ if __name__ != "__main__" else "benchmarks.scale_out_bench",
                                       "bench_job", reconstructable_args=(job_name, described),
                                       reconstructor_working_directory=str(ROOT))
    started = time.monotonic()
    with dg.execute_job(job, instance=instance, **kwargs) as result:
        wall = time.monotonic() - started
        if not result.success:
            raise RuntimeError(f"{job_name} failed with {settings}")
        return wall, step_events(result)


def variant(name: str, root: Path, landing: Path, base: Path, instance: dg.DagsterInstance, *,
            executor: str | None, config: dict[str, Any], workers: int) -> dict[str, Any]:
    """One executor setting: the backfill (8 partition runs) and the full compaction."""
    backfill_wh = root / f"backfill-{name}"
    settings = {"warehouse": str(backfill_wh), "landing": str(landing), "workers": workers, "executor": executor,
                "executor_config": config}
    backfill = 0.0
    write_rss: list[float] = []
    for day in DAYS:
        wall, (_, rss) = run(f"ingest_{TABLE.replace('.', '_')}_job", settings, instance,
                             tags={"dagster/partition": day})
        backfill += wall
        write_rss += rss
    rows = pc.Catalog(str(backfill_wh)).get_table(TABLE).read(columns=["id"]).num_rows
    compact_wh = root / f"compact-{name}"
    shutil.copytree(base, compact_wh)
    settings = {**settings, "warehouse": str(compact_wh)}
    target = target_of(spec(settings))
    wall, (durations, rss) = run("paimon_full_compaction_job", settings, instance,
                                 run_config=full_compaction_run_config(target), tags=compaction_tags(TABLE))
    table = pc.Catalog(str(compact_wh)).get_table(TABLE)
    commit = sum(s for k, s in durations.items() if k == "commit_compaction")
    return {"variant": name, "backfill_s": round(backfill, 2), "rows": rows, "compaction_s": round(wall, 2),
            "commit_s": round(commit, 3), "commit_share": round(commit / wall, 4),
            "steps": sum(1 for k in durations if k.startswith("compact_partition")),
            "peak_rss_mib_compaction": max(rss, default=0.0), "peak_rss_mib_write": max(write_rss, default=0.0),
            "level0_after": table.lsm_state().max_level0_files}


def pin_workers(client: Any) -> None:
    """One core and one Arrow thread per Dask worker, set before any task imports paimon_core."""
    workers = sorted(client.scheduler_info()["workers"])
    for index, address in enumerate(workers):
        core = index % (os.cpu_count() or 1)

        def pin(core: int = core) -> None:
            os.sched_setaffinity(0, {core})
            pa.set_cpu_count(1)
            pa.set_io_thread_count(1)

        client.run(pin, workers=[address])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--quick", action="store_true", help="400k rows")
    args = parser.parse_args()
    rows = 400_000 if args.quick else args.rows
    root = ROOT / ".bench" / "scale_out"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    landing = generate(root, rows)
    base = compaction_input(root, landing)
    results = []
    from distributed import Client, LocalCluster

    (root / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(root / "dagster")) as instance:
        results.append(variant("in-process", root, landing, base, instance, executor=None, config={}, workers=1))
        for n in (1, 2):
            results.append(variant(f"multiprocess x{n}", root, landing, base, instance, executor="multiprocess",
                                   config={"max_concurrent": n, "start_method": {"forkserver": {}}}, workers=2))
        for n in (1, 2):
            with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
                pin_workers(client)
                config = {"cluster": {"existing": {"address": cluster.scheduler_address}}}
                results.append(variant(f"dask x{n}", root, landing, base, instance, executor="dask",
                                       config=config, workers=2))
    by_name = {r["variant"]: r for r in results}
    for r in results:
        one = by_name.get(r["variant"].replace("x2", "x1"))
        r["speedup_vs_x1"] = round(one["compaction_s"] / r["compaction_s"], 2) if one and "x2" in r["variant"] else None
        r["backfill_speedup_vs_x1"] = round(one["backfill_s"] / r["backfill_s"], 2) \
            if one and "x2" in r["variant"] else None
    print(f"\n{rows:,} rows, 8 partitions x 4 buckets; compaction: 4 level-0 runs per bucket, a step per partition, "
          "one commit\n")
    print("| variant | backfill s | x1/x2 | full compaction s | x1/x2 | commit s (share) | steps | "
          "peak RSS write / compact MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['variant']} | {r['backfill_s']} | {r['backfill_speedup_vs_x1'] or '-'} | {r['compaction_s']} | "
              f"{r['speedup_vs_x1'] or '-'} | {r['commit_s']} ({r['commit_share']:.1%}) | {r['steps']} | "
              f"{r['peak_rss_mib_write']} / {r['peak_rss_mib_compaction']} |")
    out = ROOT / ".bench" / "scale_out_bench.json"
    out.write_text(json.dumps({"rows": rows, "results": results}, indent=2))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
