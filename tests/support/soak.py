"""A soak of the Dagster layer under faults (not part of ``make test``): a real deployment of the
fixture project with the shipped instance settings, for ``--minutes`` (default 15).

Every few seconds it launches a run, as an operator's schedules and backfills would: an ingestion
of a random day of ``sales.orders`` (upserts of the day's changes, several chunk commits) or of
``app.events`` (an overwrite of the day), and every minute an expiry and an orphan cleanup of each
table. The compaction sensors compact on their own. Now and then it SIGKILLs the worker of a random
running run. At the end, once every run settled: every table equals its reference (each day's
data applied once), every retained snapshot reads, level 0 is under the stop-trigger, no run failed
for good (every killed run was retried and succeeded), no sensor run key launched twice.

    .venv/bin/python -m tests.support.soak --minutes 15

It prints its figures (launches, kills, retries and kill-to-retry-success times, sampled level 0,
runs per job and status) as Markdown.
"""

from __future__ import annotations

import argparse
import random
import re
import signal
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa

import paimon_core as pc
from pipelines import names
from pipelines.maintenance.expiry import expire_run_config
from pipelines.maintenance.orphans import orphans_run_config
from pipelines.target import SENSOR_INTERVAL_ENV
from tests.support.fixture_project.data import events, order_changes
from tests.support.fixture_project.definitions import CODE_LOCATION, WORKSPACE
from tests.support.fixture_project.defs.resources import ORDERS_ENV
from tests.support.fixture_project.tables import EVENTS_TABLE, ORDERS_TABLE, spec
from tests.support.live_dagster import FINISHED, CodeLocation, LiveDagster, live_dagster

LOCATION = CodeLocation(WORKSPACE, CODE_LOCATION)
ORDERS_PER_DAY = 2_000
EVENTS_PER_DAY = 1_500  # the fixture's EventSource default
ORDER_DAYS = spec(ORDERS_TABLE).partitions_def().get_partition_keys()  # type: ignore[union-attr]
EVENT_DAYS = spec(EVENTS_TABLE).partitions_def().get_partition_keys()  # type: ignore[union-attr]
LAUNCH_EVERY_S = 6.0
MAINTAIN_EVERY_S = 60.0
SETTLE_TIMEOUT_S = 900


class Sampler(threading.Thread):
    """The worst level 0 of sales.orders, every half second."""

    def __init__(self, warehouse: str) -> None:
        super().__init__(daemon=True)
        self.warehouse = warehouse
        self.samples: list[int] = []
        self.stop_trigger = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.5):
            try:
                state = pc.Catalog(self.warehouse).get_table(ORDERS_TABLE).lsm_state()
            except pc.PaimonError:
                continue  # not created yet
            self.samples.append(state.max_level0_files)
            self.stop_trigger = state.stop_trigger


def worker_of(dagster: LiveDagster, run_id: str) -> psutil.Process | None:
    for line in dagster.run_logs(run_id):
        found = re.search(r"Started process for run \(pid: (\d+)\)", line)
        if found:
            try:
                return psutil.Process(int(found.group(1)))
            except psutil.NoSuchProcess:
                return None
    return None


def kill_a_running_worker(dagster: LiveDagster, rng: random.Random) -> tuple[str, str, float] | None:
    """SIGKILL the worker of a random STARTED run; (run id, job, when) or None."""
    running = [r for r in dagster.runs(limit=50) if r["status"] == "STARTED"]
    rng.shuffle(running)
    for run in running:
        worker = worker_of(dagster, run["runId"])
        if worker is not None:
            worker.send_signal(signal.SIGKILL)
            return run["runId"], run["jobName"], time.time()
    return None


def references(root: Path, order_days: set[str], event_days: set[str]) -> tuple[pc.Table, pc.Table]:
    catalog = pc.Catalog(str(root / "reference"))
    for name in (ORDERS_TABLE, EVENTS_TABLE):
        catalog.create_database(name.split(".")[0], exist_ok=True)
    orders_spec, events_spec = spec(ORDERS_TABLE), spec(EVENTS_TABLE)
    orders = catalog.create_table(ORDERS_TABLE, schema=orders_spec.arrow_schema(), partition_keys=["dt"],
                                  primary_keys=orders_spec.primary_key,
                                  options={"bucket": "4", "merge-engine": "deduplicate", "rowkind.field": "op"})
    logs = catalog.create_table(EVENTS_TABLE, schema=events_spec.arrow_schema(), partition_keys=["dt"],
                                options={"bucket": "-1"})
    for day in sorted(order_days):
        orders.write(order_changes(day, orders=ORDERS_PER_DAY))
    for day in sorted(event_days):
        logs.write(pa.Table.from_batches(list(events(day, rows=EVENTS_PER_DAY))))
    return orders, logs


def soak(root: Path, minutes: float, seed: int, kills: int) -> dict[str, Any]:
    rng = random.Random(seed)
    warehouse = str(root / "warehouse")
    env = {SENSOR_INTERVAL_ENV: "2", ORDERS_ENV: str(ORDERS_PER_DAY)}
    overrides = {"run_monitoring": {"enabled": True, "start_timeout_seconds": 300, "cancel_timeout_seconds": 180,
                                    "poll_interval_seconds": 5}}
    launched: Counter[str] = Counter()
    killed: list[tuple[str, str, float]] = []
    order_days: set[str] = set()
    event_days: set[str] = set()
    sampler = Sampler(warehouse)
    with live_dagster(root, warehouse=warehouse, env=env, instance_overrides=overrides,
                      location=LOCATION) as dagster:
        sampler.start()
        started = time.monotonic()
        end = started + minutes * 60
        kill_at = sorted(rng.uniform(started + 60, end - 60) for _ in range(kills))
        next_maintenance = started + MAINTAIN_EVERY_S
        while time.monotonic() < end:
            if rng.random() < 0.6:
                day = rng.choice(ORDER_DAYS)
                dagster.launch_run(names.ingestion_job(ORDERS_TABLE), tags={"dagster/partition": day})
                order_days.add(day)
                launched["ingest orders"] += 1
            else:
                day = rng.choice(EVENT_DAYS)
                dagster.launch_run(names.ingestion_job(EVENTS_TABLE), tags={"dagster/partition": day})
                event_days.add(day)
                launched["ingest events"] += 1
            if time.monotonic() >= next_maintenance:
                next_maintenance += MAINTAIN_EVERY_S
                for table in (ORDERS_TABLE, EVENTS_TABLE):
                    target = spec(table).target()
                    dagster.launch_run(names.expire_job(table), run_config=expire_run_config(
                        target, retain_min=1, retain_max=3, older_than="now"))
                    # The default window (a day): a forced one refuses to run next to the writers.
                    dagster.launch_run(names.orphans_job(table), run_config=orphans_run_config(target, dry_run=False))
                    launched["maintenance"] += 2
            while kill_at and time.monotonic() >= kill_at[0]:
                kill_at.pop(0)
                give_up = time.monotonic() + 30  # until a run is running
                victim = None
                while victim is None and time.monotonic() < give_up:
                    victim = kill_a_running_worker(dagster, rng)
                    time.sleep(0.2)
                if victim is not None:
                    killed.append(victim)
            time.sleep(LAUNCH_EVERY_S * rng.uniform(0.5, 1.5))

        def settled() -> bool:
            runs = dagster.runs(limit=1000)
            return all(r["status"] in FINISHED for r in runs)

        dagster.wait(settled, timeout=SETTLE_TIMEOUT_S, interval=2.0, what="every run to end")
        time.sleep(10)  # the compaction sensors' last requests
        dagster.wait(settled, timeout=SETTLE_TIMEOUT_S, interval=2.0, what="every run to end")
        sampler.halt.set()
        runs = dagster.runs(limit=1000)
        # Dagster's run retries copy a run's tags, its run key too: only first launches count.
        sensor_keys = [r["tags"]["dagster/run_key"] for r in runs
                       if "dagster/run_key" in r["tags"] and "dagster/parent_run_id" not in r["tags"]]
        retried_keys = sorted({r["tags"]["dagster/run_key"] for r in runs
                               if "dagster/run_key" in r["tags"] and "dagster/parent_run_id" in r["tags"]})
        recovery = []
        for run_id, _, at in killed:
            retries = [r for r in runs if r["tags"].get("dagster/root_run_id") == run_id
                       and r["status"] == "SUCCESS"]
            recovery.append(min((r["endTime"] - at for r in retries), default=float("nan")))
    catalog = pc.Catalog(warehouse)
    orders, logs = catalog.get_table(ORDERS_TABLE), catalog.get_table(EVENTS_TABLE)
    reference_orders, reference_logs = references(root, order_days, event_days)
    key = [("dt", "ascending"), ("order_id", "ascending")]
    orders_equal = orders.read().sort_by(key).equals(reference_orders.read().sort_by(key))
    logs_equal = logs.read().sort_by([("dt", "ascending"), ("ts", "ascending")]).equals(
        reference_logs.read().sort_by([("dt", "ascending"), ("ts", "ascending")]))
    for table in (orders, logs):
        for snapshot in table.snapshots():
            table.read(snapshot_id=snapshot.id)
    # A killed run failed; the run that counts is its retry: failed for good is a failed run
    # that no run retried to success.
    succeeded_roots = {r["tags"].get("dagster/root_run_id", r["runId"]) for r in runs if r["status"] == "SUCCESS"}
    failed_for_good = [r for r in runs if r["status"] == "FAILURE"
                       and r["tags"].get("dagster/root_run_id", r["runId"]) not in succeeded_roots]
    # Every failed run is one the soak killed (its retry is another run).
    unexplained = [r["runId"] for r in runs if r["status"] == "FAILURE" and r["runId"] not in {k[0] for k in killed}]
    return {
        "minutes": minutes, "launched": dict(launched), "runs": len(runs),
        "by_status": dict(Counter(r["status"] for r in runs)),
        "compaction_runs": sum(1 for r in runs if r["jobName"] in (names.compaction_job(ORDERS_TABLE),
                                                                     names.full_compaction_job(ORDERS_TABLE))),
        "retries": sum(1 for r in runs if "dagster/parent_run_id" in r["tags"]),
        "killed": [(job, round(t, 1)) for (_, job, _), t in zip(killed, recovery, strict=True)],
        "failed_for_good": [(r["runId"], r["jobName"]) for r in failed_for_good],
        "failed_unexplained": unexplained,
        "run_keys_unique": len(sensor_keys) == len(set(sensor_keys)),
        "run_keys_of_retries": retried_keys,
        "level0_max": max(sampler.samples, default=0),
        "level0_mean": round(statistics.fmean(sampler.samples or [0]), 2),
        "stop_trigger": sampler.stop_trigger, "level0_end": orders.lsm_state().max_level0_files,
        "orders_equal_reference": orders_equal, "events_equal_reference": logs_equal,
        "order_days": len(order_days), "event_days": len(event_days),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--kills", type=int, default=6, help="run workers SIGKILLed at random moments")
    parser.add_argument("--seed", type=int, default=20261207)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paimon-soak-") as root:
        figures = soak(Path(root), args.minutes, args.seed, args.kills)
    print("| figure | value |\n|---|---|")
    for name, value in figures.items():
        print(f"| {name} | {value} |")
    ok = (figures["orders_equal_reference"] and figures["events_equal_reference"] and figures["run_keys_unique"]
          and not figures["failed_for_good"] and not figures["failed_unexplained"]
          and figures["level0_end"] < figures["stop_trigger"])
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
