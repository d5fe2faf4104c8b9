"""Scale-out on Dagster's executors: a backfill and a full compaction with 1 and 2 worker processes.

The table: a primary-key table of 8 daily partitions x 4 buckets. The backfill writes the
partitions through the table's Dagster ingestion job (landed Parquet files, ``workers`` write
steps per partition, one commit each); the compaction input is the same rows written in four
commits per partition (four level-0 runs per bucket), compacted by the table's full compaction job
with a step per partition and one commit at the end. Each variant runs on a fresh copy.

Variants, in one run: in-process (one process, its threads on both cores), the multiprocess
executor with 1 and 2 concurrent steps, and the Dask executor on a LocalCluster with 1 and 2
worker processes on 127.0.0.1, each worker pinned to its own core (one thread: the 1-vs-2 workers
figure). The executors under test start the processes, so this suite runs its jobs from the
driver; the jobs' steps report their own peak RSS. Then what one core does on one partition
(``core_rates``): the rates the README's 1 TB/day model is built on.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dagster_shared.serdes import deserialize_value, serialize_value

import paimon_core as pc
from benchmarks.harness.postgres import postgres_server
from benchmarks.harness.report import markdown
from benchmarks.harness.runner import REPO, wait_quiet
from benchmarks.harness.suite import Result, SuiteRun
from benchmarks.suites import core_rates
from pipelines import names
from pipelines.compaction.jobs import compact_partition, compaction_tags, full_compaction_run_config
from pipelines.factory import paimon_definitions
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.parts import Column, Compaction, Ingestion, Partitions
from resources import keys
from resources.landing_location import LandingLocation

ENGINES = ("ours",)
WORK_DIRS = ("run",)
DEFAULT_REPS = 1
TABLE = "bench.accounts"
DAYS = [f"2024-05-0{d + 1}" for d in range(8)]
SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64()), ("name", pa.string()),
                    ("score", pa.float64())])
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
VARIANTS = ("in-process", "multiprocess x1", "multiprocess x2", "dask x1", "dask x2")


def spec(settings: dict[str, Any]) -> PaimonTableSpec:
    return PaimonTableSpec(
        table=TABLE, columns=tuple(Column(f.name, {"string": "STRING", "int64": "BIGINT", "double": "DOUBLE"}[
            str(f.type)]) for f in SCHEMA),
        primary_key=("dt", "id"), partition_keys=("dt",),
        partitions=Partitions("daily", start=DAYS[0], end="2024-05-09"),
        options={"bucket": "4", "write-only": "true"},
        ingestion=Ingestion(mode="upsert", workers=int(settings["workers"]), executor=settings.get("executor"),
                            executor_config=settings.get("executor_config") or {},
                            backfill_policy="single_run" if settings.get("ranged") else "multi_run",
                            landing=LandingLocation(path=settings["landing"] + "/dt={partition}/*.parquet")),
        compaction=Compaction(commit_once=True))


def definitions(described: str) -> dg.Definitions:
    settings = json.loads(described)
    executor = None
    if settings.get("executor") == "dask":
        from pipelines.executors.dask import dask_executor

        executor = dask_executor.configured(settings["executor_config"])
    elif settings.get("executor") == "multiprocess":
        executor = dg.multiprocess_executor.configured(settings["executor_config"])
    return paimon_definitions([spec(settings)], warehouse=settings["warehouse"], executor=executor)


def bench_job(name: str, described: str) -> dg.JobDefinition:
    """The job ``name`` of the table ``described`` (JSON): what the executors' processes rebuild."""
    return definitions(described).resolve_job_def(name)


def generate(root: Path, rows: int, days: list[str]) -> Path:
    """Landed files: per partition four Parquet files (one per commit of the compaction input)."""
    landing = root / "landing"
    per_file = rows // len(days) // 4
    rng = np.random.default_rng(7)
    for day in days:
        folder = landing / f"dt={day}"
        folder.mkdir(parents=True, exist_ok=True)
        for part in range(4):
            ids = rng.integers(0, per_file * 3, per_file)
            pq.write_table(pa.table({
                "id": pa.array(ids), "v": pa.array(rng.integers(0, 1 << 40, per_file)),
                "name": pa.array(np.char.add("user-", (ids % 50_000).astype(str))),
                "score": pa.array(rng.random(per_file))}), folder / f"part-{part}.parquet")
    return landing


def compaction_input(root: Path, landing: Path, days: list[str]) -> Path:
    """The table written with four commits per partition (API, not timed)."""
    warehouse = root / "base"
    catalog = pc.Catalog(str(warehouse))
    catalog.create_database("bench")
    table = catalog.create_table(TABLE, schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                 options={"bucket": "4", "write-only": "true"})
    for part in range(4):
        for day in days:
            rows = pq.read_table(landing / f"dt={day}" / f"part-{part}.parquet")
            table.write(rows.append_column("dt", pa.array([day] * rows.num_rows)).select(SCHEMA.names))
    return warehouse


@dataclass(frozen=True, slots=True)
class RunSteps:
    """What one run's event log says of its steps."""

    durations: dict[str, float]  # seconds per step key (STEP_SUCCESS)
    rss: list[float]  # the peak RSS each step reported
    fanned_s: float  # from the first fanned-out step's start to the last one's end: the part more workers share


def step_events(instance: dg.DagsterInstance, run_id: str) -> RunSteps:
    """The run's steps, from its event log (whose records carry the times)."""
    durations: dict[str, float] = {}
    rss: list[float] = []
    starts, ends = [], []
    fanned = (names.write_share_op(TABLE), compact_partition.name)
    for record in instance.all_logs(run_id):
        event: Any = record.dagster_event  # its data is a union of every event kind's
        if event is None:
            continue
        step = event.step_key or ""
        if event.event_type_value == "STEP_START" and any(op in step for op in fanned):
            starts.append(record.timestamp)
        if event.event_type_value == "STEP_SUCCESS":
            durations[step] = event.event_specific_data.duration_ms / 1000
            if any(op in step for op in fanned):
                ends.append(record.timestamp)
        if event.event_type_value == "STEP_OUTPUT":
            metadata = event.event_specific_data.metadata or {}
            for key in (keys.COMPACTION_PEAK_RSS_MIB, "peak_rss_mib"):
                if key in metadata:
                    rss.append(float(metadata[key].value))
    return RunSteps(durations, rss, max(ends) - min(starts) if starts and ends else 0.0)


def execute(job_name: str, settings: dict[str, Any], instance: dg.DagsterInstance,
            **kwargs: Any) -> tuple[float, RunSteps]:
    """Run one job to its end; (its wall seconds, its steps)."""
    job = dg.build_reconstructable_job(__name__, "bench_job",
                                       reconstructable_args=(job_name, json.dumps(settings)),  # type: ignore[arg-type]
                                       reconstructor_working_directory=str(REPO))
    started = time.monotonic()
    with dg.execute_job(job, instance=instance, **kwargs) as result:
        wall = time.monotonic() - started
        if not result.success:
            raise RuntimeError(f"{job_name} failed with {settings}")
        return wall, step_events(instance, result.run_id)


@dataclass(frozen=True, slots=True)
class Setup:
    """What every variant runs on: the landed files, the compaction input, the Dagster instance."""

    root: Path
    landing: Path
    base: Path  # the compaction input, copied for every variant
    instance: dg.DagsterInstance
    days: list[str]
    quiet_wait: float
    ranged: bool  # the backfill as one run of the whole range, else a run per partition


def variant(name: str, setup: Setup, *, executor: str | None, config: dict[str, Any], workers: int,
            rep: int = 0) -> dict[str, Any]:
    """One executor setting, once: the backfill and the full compaction, each on a fresh copy."""
    root, landing, base, instance, days = setup.root, setup.landing, setup.base, setup.instance, setup.days
    pressure = wait_quiet(setup.quiet_wait)
    backfill_wh = root / f"backfill-{name}-{rep}"
    settings = {"warehouse": str(backfill_wh), "landing": str(landing), "workers": workers, "executor": executor,
                "executor_config": config, "ranged": setup.ranged}
    backfill = 0.0
    write_rss: list[float] = []
    backfill_work, backfill_steps, backfill_fanned = 0.0, 0, 0.0
    # The whole range in one run (backfill_policy single_run: every partition's write steps at once),
    # or a run per partition, one after the other (one writer per table).
    runs = [{RANGE_START: days[0], RANGE_END: days[-1]}] if setup.ranged else [{"dagster/partition": d} for d in days]
    for tags in runs:
        wall, steps = execute(names.ingestion_job(TABLE), settings, instance, tags=tags)
        backfill += wall
        write_rss += steps.rss
        backfill_work += sum(steps.durations.values())
        backfill_steps += len(steps.durations)
        backfill_fanned += steps.fanned_s
    rows = pc.Catalog(str(backfill_wh)).get_table(TABLE).read(columns=["id"]).num_rows
    compact_wh = root / f"compact-{name}-{rep}"
    shutil.copytree(base, compact_wh)
    settings = {**settings, "warehouse": str(compact_wh)}
    wall, compacted = execute(names.full_compaction_job(TABLE), settings, instance,
                              run_config=full_compaction_run_config(spec(settings).target()),
                              tags=compaction_tags(TABLE))
    durations, rss = compacted.durations, compacted.rss
    table = pc.Catalog(str(compact_wh)).get_table(TABLE)
    commit = sum(s for k, s in durations.items() if k == "commit_compaction")
    # What a step costs beyond its own work (launch, the worker's Dagster, the event log, the
    # executor noticing it ended), on average: exact for one worker, where the steps run in turn.
    overhead = {"backfill_step_overhead_s": round((backfill - backfill_work) / max(backfill_steps, 1), 3),
                "compaction_step_overhead_s": round((wall - sum(durations.values())) / max(len(durations), 1), 3),
                "backfill_steps": backfill_steps, "backfill_work_s": round(backfill_work, 2),
                "compaction_work_s": round(sum(durations.values()), 2),
                # The rest of the wall (planning, commits, checks, the run's start and end) is what
                # more workers cannot share: with one worker, wall / (rest + fanned / N) bounds N's speed-up.
                "backfill_fanned_s": round(backfill_fanned, 2), "backfill_rest_s": round(backfill - backfill_fanned, 2),
                "compaction_fanned_s": round(compacted.fanned_s, 2),
                "compaction_rest_s": round(wall - compacted.fanned_s, 2)}
    return {"variant": name, "backfill_s": round(backfill, 2), "rows": rows, "compaction_s": round(wall, 2),
            **overhead,
            "commit_s": round(commit, 3), "commit_share": round(commit / wall, 4),
            "steps": sum(1 for k in durations if k.startswith(compact_partition.name)),
            "peak_rss_mib_compaction": max(rss, default=0.0), "peak_rss_mib_write": max(write_rss, default=0.0),
            "level0_after": table.lsm_state().max_level0_files, "cpu_pressure": pressure}


def warm_up(client: Any, instance: dg.DagsterInstance, described: str) -> float:
    """Bring every worker to where a long-lived one is before a run reaches it: its Dagster
    instance open (the executor keeps one per worker process; opening it imports the storage's
    modules, about 1 s) and the job's definitions built. Returns the seconds it took, reported
    apart from the runs' walls."""
    started = time.monotonic()
    client.run(warm_worker, serialize_value(instance.get_ref()), names.ingestion_job(TABLE), described)
    return round(time.monotonic() - started, 2)


def warm_worker(ref: str, job_name: str, described: str) -> str:
    """In a worker: open the executor's instance for ``ref`` and build the job; the job's name,
    which, unlike the job, travels back to the client."""
    from pipelines.executors.dask import worker_instance

    worker_instance(deserialize_value(ref))
    return bench_job(job_name, described).name


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


def run_variants(root: Path, landing: Path, base: Path, days: list[str], names: list[str],
                 quiet_wait: float, ranged: bool, reps: int = 1, storage: str = "sqlite") -> list[dict[str, Any]]:
    """Every variant ``reps`` times, the variants alternating within a repetition; each variant's
    figures are the medians of its repetitions (each repetition kept in ``reps``). ``storage``:
    the Dagster instance's, SQLite files (the default instance) or a PostgreSQL server."""
    from distributed import Client, LocalCluster

    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    (root / "dagster").mkdir()
    with ExitStack() as stack:
        overrides = None
        if storage == "postgres":
            url = stack.enter_context(postgres_server())
            overrides = {"storage": {"postgres": {"postgres_url": url}}}
        instance = stack.enter_context(dg.instance_for_test(temp_dir=str(root / "dagster"), overrides=overrides))
        setup = Setup(root, landing, base, instance, days, quiet_wait, ranged)
        for rep in range(reps):
            for name in names:
                kind, _, count = name.partition(" x")
                if kind == "in-process":
                    runs[name].append(variant(name, setup, executor=None, config={}, workers=1, rep=rep))
                elif kind == "multiprocess":
                    config = {"max_concurrent": int(count), "start_method": {"forkserver": {}}}
                    runs[name].append(variant(name, setup, executor="multiprocess", config=config, workers=2,
                                              rep=rep))
                else:
                    with LocalCluster(n_workers=int(count), threads_per_worker=1, processes=True, host="127.0.0.1",
                                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
                        pin_workers(client)
                        config = {"cluster": {"existing": {"address": cluster.scheduler_address}}}
                        described = json.dumps({"warehouse": str(root / "warm-up"), "landing": str(landing),
                                                "workers": 2, "executor": None, "executor_config": {}})
                        warm = warm_up(client, instance, described)
                        runs[name].append({**variant(name, setup, executor="dask", config=config, workers=2,
                                                     rep=rep), "worker_warmup_s": warm})
    results = [medians(name, each) for name, each in runs.items()]
    by_name = {r["variant"]: r for r in results}
    for r in results:
        one = by_name.get(r["variant"].replace("x2", "x1")) if "x2" in r["variant"] else None
        r["speedup_vs_x1"] = round(one["compaction_s"] / r["compaction_s"], 2) if one else None
        r["backfill_speedup_vs_x1"] = round(one["backfill_s"] / r["backfill_s"], 2) if one else None
    return results


def medians(name: str, each: list[dict[str, Any]]) -> dict[str, Any]:
    """A variant's repetitions as one row: the median of every number, the spread of the two walls."""
    row: dict[str, Any] = {"variant": name, "reps": each}
    for key, value in each[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            row[key] = round(statistics.median(r[key] for r in each), 3)
    for key in ("backfill_s", "compaction_s"):
        row[f"{key}_range"] = f"{min(r[key] for r in each)}-{max(r[key] for r in each)}"
    return row


def run(run: SuiteRun) -> Result:
    args = run.args
    days = DAYS[: args.days]
    root = run.work / "run"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    os.environ["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    landing = generate(root, args.rows, days)
    base = compaction_input(root, landing, days)
    results = run_variants(root, landing, base, days, args.variants, args.quiet_wait, args.backfill == "range",
                           args.reps, args.instance)
    header = ("variant", "backfill s", "x1/x2", "full compaction s", "x1/x2", "commit s (share)", "steps",
              "step work s, backfill / compaction", "overhead per step s, backfill / compaction",
              "fanned-out part / rest s, backfill", "fanned-out part / rest s, compaction",
              "peak RSS write / compact MiB")
    rows = [[r["variant"], f"{r['backfill_s']} ({r['backfill_s_range']})", str(r["backfill_speedup_vs_x1"] or "-"),
             f"{r['compaction_s']} ({r['compaction_s_range']})",
             str(r["speedup_vs_x1"] or "-"), f"{r['commit_s']} ({r['commit_share']:.1%})", str(r["steps"]),
             f"{r['backfill_work_s']} / {r['compaction_work_s']}",
             f"{r['backfill_step_overhead_s']} / {r['compaction_step_overhead_s']}",
             f"{r['backfill_fanned_s']} / {r['backfill_rest_s']}",
             f"{r['compaction_fanned_s']} / {r['compaction_rest_s']}",
             f"{r['peak_rss_mib_write']} / {r['peak_rss_mib_compaction']}"] for r in results]
    wait_quiet(args.quiet_wait)
    report = markdown(header, rows) + "\n\n" + bounds_report(results)
    rates = core_rates.measure(landing, days[0], root / "rates",
                               commit_files=core_rates.QUICK_COMMIT_FILES if args.quick else core_rates.COMMIT_FILES)
    run.meta.update(rows=args.rows, days=days, variants=args.variants, backfill=args.backfill, reps=args.reps,
                    instance=args.instance)
    how = "one run of the range" if args.backfill == "range" else "a run per partition"
    title = (f"Scale-out benchmark: {args.rows:,} rows, {len(days)} partitions x 4 buckets, backfill as {how}; "
             f"Dagster instance on {args.instance}; medians of {args.reps} repetition(s) (range in brackets); "
             "compaction: 4 level-0 runs per bucket, a step per partition, one commit")
    return Result(title, report + "\n\n" + rates_report(rates),
                  {"rows": args.rows, "results": results, "per_core": rates})


def speedup_bound(wall: float, fanned: float, workers: int) -> float:
    """Amdahl's bound on N workers' speed-up over one: only the fanned-out part is shared."""
    return round(wall / (wall - fanned + fanned / workers), 2) if wall > 0 else 0.0


def bounds_report(results: list[dict[str, Any]]) -> str:
    """Per one-worker variant, what 2 (and 16) workers could reach at best on its own figures."""
    rows = []
    for r in results:
        if not r["variant"].endswith("x1"):
            continue
        rows.append([r["variant"], *(f"{speedup_bound(r[f'{what}_s'], r[f'{what}_fanned_s'], n)}x"
                                     for what in ("backfill", "compaction") for n in (2, 16))])
    header = ("one worker's run", "backfill: bound at 2 workers", "at 16", "compaction: bound at 2 workers", "at 16")
    return markdown(header, rows) if rows else ""


def rates_report(rates: dict[str, Any]) -> str:
    """The per-core rates as two small tables."""
    work = markdown(("one core, one partition", "value"), [
        ["rows (Arrow bytes per row)", f"{rates['rows']:,} ({rates['bytes_per_row']} B)"],
        ["primary-key write, 4 buckets, one commit", f"{rates['pk_write_mib_s']} MiB/s, "
                                                     f"{rates['pk_write_rows_s']:,} rows/s"],
        ["full compaction of 4 level-0 runs", f"{rates['full_compaction_rows_s']:,} input rows/s"],
        ["Parquet decode", f"{rates['parquet_decode_mib_s']} MiB/s"]])
    commits = markdown(("files committed", "commit s", "us per file", "message B per file", "manifest B per file"),
                       [[str(c["files"]), str(c["commit_s"]), str(c["us_per_file"]), str(c["message_bytes_per_file"]),
                         str(c["manifest_bytes_per_file"])] for c in rates["commits"]])
    return work + "\n\n" + commits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--days", type=int, default=len(DAYS), choices=range(1, len(DAYS) + 1),
                        help="partitions backfilled and compacted")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--instance", choices=("sqlite", "postgres"), default="sqlite",
                        help="the Dagster instance's storage: SQLite files, or a PostgreSQL server this run starts on "
                             "127.0.0.1 (what steps in many processes or hosts write their events to)")
    parser.add_argument("--backfill", choices=("range", "partitions"), default="range",
                        help="the backfill as one run of the whole range (backfill_policy single_run), or a run "
                             "per partition")


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if args.quick:
        args.rows, args.days = 40_000, 2
        if args.variants == list(VARIANTS):  # not chosen on the command line
            args.variants = ["in-process", "multiprocess x2", "dask x2"]
