"""Faults on a real deployment (webserver + daemon, the shipped instance settings): processes are
SIGKILLed at chosen moments, and the tables are checked against a recomputed reference.

- a run worker killed mid-commit (ingestion, after some of a partition's chunk commits landed),
  mid-compaction (a compaction's files written) and mid-expiry (snapshots being deleted): Dagster's
  run retries (``run_retries`` in ``dagster_home/dagster.yaml``) launch the run again, which
  commits exactly once: every chunk of the partition lands once, the compaction and expiry finish,
  and the table reads as the reference;
- the daemon killed while its sensors tick, then restarted: the sensors go on from their cursors,
  no run key launches twice;
- the whole deployment killed while a compaction runs (a host crash), then started again: the run
  left STARTED is failed by the table's watchdog as soon as it sees its worker gone, not after its
  bound, and the table compacts again.

Each kill-to-recovery time is printed (``-s``); ``PAIMON_DAGSTER_FIGURES=<file.md>`` appends them
there.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.compaction.jobs import compaction_run_config, full_compaction_run_config
from pipelines.definitions import REPO_ROOT
from pipelines.maintenance.expiry import expire_run_config
from pipelines.maintenance.orphans import orphans_run_config
from pipelines.target import SENSOR_INTERVAL_ENV
from resources.keys import COMPACTION_TAG, MAX_RUNTIME_TAG
from tests.dagster.test_compaction_live import create_orders, report, sorted_rows
from tests.support.fixture_project.data import order_changes
from tests.support.fixture_project.definitions import CODE_LOCATION, WORKSPACE
from tests.support.fixture_project.defs.resources import ORDERS_ENV
from tests.support.fixture_project.tables import EVENTS_TABLE, ORDERS_TABLE, spec
from tests.support.live_dagster import FINISHED, CodeLocation, LiveDagster, live_dagster

pytestmark = [pytest.mark.slow, pytest.mark.live]  # a real webserver and daemon

LOCATION = CodeLocation(WORKSPACE, CODE_LOCATION)
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
# About 7,000 changes a day: five chunk commits of the YAML's 1,500.
ORDERS_PER_DAY = 2_000
CHUNKS_PER_DAY = 5
SETTLE_TIMEOUT_S = 300
KILL_TIMEOUT_S = 120
ENV = {SENSOR_INTERVAL_ENV: "2", ORDERS_ENV: str(ORDERS_PER_DAY)}
# The shipped run monitoring, polled faster so the tests are short.
SHIPPED = __import__("yaml").safe_load((REPO_ROOT / "dagster_home" / "dagster.yaml").read_text())
OVERRIDES = {"run_monitoring": {**SHIPPED["run_monitoring"], "poll_interval_seconds": 2}}


# ---- killing a run's worker at a moment -----------------------------------------------------------


def run_worker(dagster: LiveDagster, run_id: str) -> psutil.Process | None:
    """The process executing the run: the code server's subprocess its log names ("Started process
    for run (pid: N)")."""
    for line in dagster.run_logs(run_id):
        found = re.search(r"Started process for run \(pid: (\d+)\)", line)
        if found:
            return psutil.Process(int(found.group(1)))
    return None


def kill_worker_when(dagster: LiveDagster, run_id: str, moment: Callable[[], bool], *,
                     timeout: float = KILL_TIMEOUT_S) -> float:
    """SIGKILL the run's worker as soon as ``moment()`` is true (polled every 2 ms once the worker
    runs); when it was killed (epoch seconds)."""
    deadline = time.monotonic() + timeout
    worker = None
    while time.monotonic() < deadline:
        if worker is None:
            worker = run_worker(dagster, run_id)
        if worker is not None and moment():
            worker.send_signal(signal.SIGKILL)
            return time.time()
        if worker is not None and not worker.is_running():
            raise AssertionError(f"run {run_id} ended before the moment to kill it:\n"
                                 + "\n".join(dagster.run_logs(run_id)[-15:]))
        time.sleep(0.002 if worker is not None else 0.05)
    raise TimeoutError(f"the moment to kill run {run_id} did not come in {timeout} s")


def snapshot_ids(root: Path) -> list[int]:
    directory = root / "snapshot"
    if not directory.exists():
        return []
    return sorted(int(p.name.split("-")[1]) for p in directory.glob("snapshot-*"))


def files_written_after(root: Path, since: float) -> bool:
    return any(p.stat().st_mtime > since for p in root.glob("dt=*/bucket-*/*"))


def retried(dagster: LiveDagster, run_id: str) -> dict[str, Any]:
    """The run retried from ``run_id`` (Dagster's run retries), once it ended successfully."""

    def done() -> dict[str, Any] | None:
        runs = dagster.runs({"dagster/parent_run_id": run_id})
        if any(r["status"] == "FAILURE" for r in runs):
            raise AssertionError(f"the retry of {run_id} failed: {runs}\n" + "\n".join(
                line for r in runs for line in dagster.run_logs(r["runId"])[-20:]))
        return next((r for r in runs if r["status"] == "SUCCESS"), None)

    return dict(dagster.wait(done, timeout=SETTLE_TIMEOUT_S, what=f"the retry of {run_id} to succeed"))


def status(dagster: LiveDagster, run_id: str) -> str:
    return str(next(r["status"] for r in dagster.runs(limit=500) if r["runId"] == run_id))


def ended(dagster: LiveDagster, run_id: str) -> dict[str, Any]:
    return dict(dagster.wait(lambda: next((r for r in dagster.runs(limit=500)
                                           if r["runId"] == run_id and r["status"] in FINISHED), None),
                             timeout=SETTLE_TIMEOUT_S, what=f"run {run_id} to end"))


def reference(root: Path, days: list[str]) -> pc.Table:
    table = create_orders(str(root / "reference"), options={"bucket": "4", "merge-engine": "deduplicate",
                                                            "rowkind.field": "op"})
    for day in days:
        table.write(order_changes(day, orders=ORDERS_PER_DAY))
    return table


def chunk_commits(orders: pc.Table) -> dict[str, list[int]]:
    """The data commits of each commit user: its identifiers, in commit order."""
    commits: dict[str, list[int]] = {}
    for snapshot in orders.snapshots():
        if snapshot.commit_kind == "APPEND":
            commits.setdefault(snapshot.commit_user, []).append(snapshot.commit_identifier)
    return commits


def next_upkeep(dagster: LiveDagster, table: str, killed_at: float) -> str:
    """Launch the table's compaction and expiry (as its sensor and schedule would) and wait for
    both; the times from the kill to each one's success."""
    target = spec(table).target()
    compaction = (dagster.launch_run(names.full_compaction_job(table), run_config=full_compaction_run_config(target))
                  if table == ORDERS_TABLE else
                  dagster.launch_run(names.compaction_job(table), run_config=compaction_run_config(target)))
    compacted = ended(dagster, compaction)
    expired = ended(dagster, dagster.launch_run(names.expire_job(table), run_config=expire_run_config(target)))
    assert compacted["status"] == expired["status"] == "SUCCESS", (compacted, expired)
    return (f"; the table's next compaction succeeded {compacted['endTime'] - killed_at:.1f} s and its next "
            f"maintenance {expired['endTime'] - killed_at:.1f} s after the kill")


def orphans(warehouse: str, table: str) -> int:
    """Files of ``table`` that nothing references (as a cleanup of everything up to now would see)."""
    now_ms = int(time.time() * 1000)
    return len(pc.Catalog(warehouse).get_table(table).remove_orphan_files(older_than=now_ms, dry_run=True,
                                                                            force=True).orphans)


# ---- worker kills, each run retried by Dagster ------------------------------------------------------


def test_killed_workers_are_retried_and_commit_exactly_once(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    root = Path(warehouse) / "sales.db" / "orders"
    figures: list[str] = []
    with live_dagster(tmp_path, warehouse=warehouse, env=ENV, location=LOCATION,
                      instance_overrides=OVERRIDES) as dagster:
        assert dagster.config["run_retries"] == {"enabled": True, "max_retries": 2,
                                                 "retry_on_asset_or_op_failure": False}
        job = names.ingestion_job(ORDERS_TABLE)
        # Compactions are launched by hand here, to kill one that has work to do.
        dagster.stop_sensor(names.compaction_sensor(ORDERS_TABLE))

        # 1. Ingestion: killed right after its second chunk commit landed.
        first = dagster.launch_run(job, tags={"dagster/partition": DAYS[0]})
        killed_at = kill_worker_when(dagster, first, lambda: len(snapshot_ids(root)) >= 2)
        landed = len(snapshot_ids(root))
        retry = retried(dagster, first)
        assert status(dagster, first) == "FAILURE"
        figures.append(f"- ingestion worker killed after {landed} of {CHUNKS_PER_DAY} chunk commits: retry "
                       f"{retry['runId'][:8]} succeeded {retry['endTime'] - killed_at:.1f} s after the kill"
                       + next_upkeep(dagster, ORDERS_TABLE, killed_at))
        orders = pc.Catalog(warehouse).get_table(ORDERS_TABLE)
        commits = chunk_commits(orders)
        [(user, identifiers)] = commits.items()
        assert first in user  # the commit user names the root run: the retry resumed its commits
        assert identifiers == list(range(1, CHUNKS_PER_DAY + 1)), identifiers  # each chunk exactly once

        # 2. Compaction: a full compaction killed once it wrote files, retried.
        dagster.launch_run(job, tags={"dagster/partition": DAYS[1]})
        dagster.wait(lambda: len(chunk_commits(pc.Catalog(warehouse).get_table(ORDERS_TABLE))) == 2
                     and all(len(ids) == CHUNKS_PER_DAY for ids in
                             chunk_commits(pc.Catalog(warehouse).get_table(ORDERS_TABLE)).values()),
                     timeout=SETTLE_TIMEOUT_S, what="the second day")
        compact_job = names.full_compaction_job(ORDERS_TABLE)
        launched = time.time()
        compaction = dagster.launch_run(compact_job, run_config=full_compaction_run_config(spec(ORDERS_TABLE).target()))
        killed_at = kill_worker_when(dagster, compaction, lambda: files_written_after(root, launched))
        retry = retried(dagster, compaction)
        assert status(dagster, compaction) == "FAILURE"
        orders = pc.Catalog(warehouse).get_table(ORDERS_TABLE)
        state = orders.lsm_state()
        assert state.max_level0_files == 0 and not any(any(b.level_files[:-1]) for b in state.buckets)
        figures.append(f"- full-compaction worker killed after writing its first file: retry {retry['runId'][:8]} "
                       f"succeeded {retry['endTime'] - killed_at:.1f} s after the kill"
                       + next_upkeep(dagster, ORDERS_TABLE, killed_at))

        # 3. Expiry (of app.events, whose snapshots no consumer holds): killed at its first delete.
        events_root = Path(warehouse) / "app.db" / "events"
        for day in [DAYS[0], DAYS[1], DAYS[0], DAYS[1]]:  # the rewrites leave files to expire
            assert ended(dagster, dagster.launch_run(names.ingestion_job(EVENTS_TABLE),
                                                     tags={"dagster/partition": day}))["status"] == "SUCCESS"
        events = pc.Catalog(warehouse).get_table(EVENTS_TABLE)
        rows_before = events.read().sort_by("ts")
        files_before = sum(1 for p in events_root.rglob("*") if p.is_file())
        expiry = dagster.launch_run(names.expire_job(EVENTS_TABLE), run_config=expire_run_config(
            spec(EVENTS_TABLE).target(), retain_min=1, retain_max=1, older_than="now"))
        killed_at = kill_worker_when(dagster, expiry, lambda: sum(
            1 for p in events_root.rglob("*") if p.is_file()) < files_before)
        retry = retried(dagster, expiry)
        assert snapshot_ids(events_root) == [4]
        figures.append(f"- expiry worker killed at its first delete (4 snapshots): retry {retry['runId'][:8]} "
                       f"succeeded {retry['endTime'] - killed_at:.1f} s after the kill"
                       + next_upkeep(dagster, EVENTS_TABLE, killed_at))
        assert pc.Catalog(warehouse).get_table(EVENTS_TABLE).read().sort_by("ts").equals(rows_before)

        # What the killed runs left behind (files they wrote and never committed) is reclaimed by the
        # cleanup once old enough ("now" here, forced); the tables still read as the reference.
        left = {table: orphans(warehouse, table) for table in (ORDERS_TABLE, EVENTS_TABLE)}
        assert left[ORDERS_TABLE] > 0, left  # the killed compaction's first file at least
        for table in (ORDERS_TABLE, EVENTS_TABLE):
            cleanup = dagster.launch_run(names.orphans_job(table), run_config=orphans_run_config(
                spec(table).target(), dry_run=False, older_than="now", force=True))
            assert ended(dagster, cleanup)["status"] == "SUCCESS"
            assert orphans(warehouse, table) == 0
        figures.append(f"- orphans the killed runs left: {left}; none after the cleanup")
    orders = pc.Catalog(warehouse).get_table(ORDERS_TABLE)
    assert sorted_rows(orders).equals(sorted_rows(reference(tmp_path, DAYS[:2])))
    for table in (orders, pc.Catalog(warehouse).get_table(EVENTS_TABLE)):
        for snapshot in table.snapshots():  # every retained snapshot reads
            table.read(snapshot_id=snapshot.id)
    assert pc.Catalog(warehouse).get_table(EVENTS_TABLE).read().sort_by("ts").equals(rows_before)
    report("Faults: run workers SIGKILLed, retried by run_retries", figures)


# ---- the daemon, then the whole deployment ---------------------------------------------------------


def kill_mid_tick(dagster: LiveDagster, log: Path, *, timeout: float = 60) -> float:
    """SIGKILL the daemon process (not its code server) while a sensor evaluates: its log's last
    sensor line says it is checking one; when (epoch seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with log.open("rb") as text:
            text.seek(max(0, log.stat().st_size - 4096))
            lines = [line for line in text.read().decode(errors="replace").splitlines() if "SensorDaemon" in line]
        if lines and "Checking for new runs for sensor" in lines[-1]:
            dagster.kill("daemon", group=False)
            return time.time()
        time.sleep(0.002)
    raise TimeoutError("no sensor tick in progress seen")


def sensor_runs(dagster: LiveDagster) -> list[dict[str, Any]]:
    return [r for r in dagster.runs(limit=500) if "dagster/sensor_name" in r["tags"]]


def test_a_killed_daemon_and_a_crashed_deployment_leave_no_table_blocked(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    figures: list[str] = []
    orders_job = names.ingestion_job(ORDERS_TABLE)
    with live_dagster(tmp_path, warehouse=warehouse, env=ENV, location=LOCATION,
                      instance_overrides=OVERRIDES) as dagster:
        # 1. The daemon SIGKILLed while its sensors tick (every 2 s, a dozen sensors) and a day's
        # ingestion commits; its code server and runs live on. Restarted, the sensors go on from
        # their cursors and the compaction the commits made due is launched once.
        first = dagster.launch_run(orders_job, tags={"dagster/partition": DAYS[0]})
        killed_at = kill_mid_tick(dagster, tmp_path / "daemon.log")
        dagster.restart("daemon")
        back_at = time.time()
        assert ended(dagster, first)["status"] == "SUCCESS"

        def compacted() -> bool:
            state = pc.Catalog(warehouse).get_table(ORDERS_TABLE).lsm_state()
            runs = dagster.runs({COMPACTION_TAG: ORDERS_TABLE})
            ticks = dagster.sensor(names.compaction_sensor(ORDERS_TABLE))["sensorState"]["ticks"]
            return (any(t["timestamp"] > back_at for t in ticks) and bool(runs)
                    and all(r["status"] in FINISHED for r in runs) and not state.full_compaction_due)

        dagster.wait(compacted, timeout=SETTLE_TIMEOUT_S, what="the due full compaction after the daemon restart")
        recovered = time.time()
        ticks = dagster.sensor(names.compaction_sensor(ORDERS_TABLE), ticks=200)["sensorState"]["ticks"]
        after_restart = [t["timestamp"] for t in ticks if t["timestamp"] > back_at]
        assert after_restart, "no tick after the restart"
        keys = [r["tags"]["dagster/run_key"] for r in sensor_runs(dagster) if "dagster/run_key" in r["tags"]]
        assert len(keys) == len(set(keys)), keys  # no run key launched twice
        full = [r for r in dagster.runs({COMPACTION_TAG: ORDERS_TABLE})
                if r["jobName"] == names.full_compaction_job(ORDERS_TABLE)]
        assert {r["status"] for r in full} == {"SUCCESS"}
        maintained = ended(dagster, dagster.launch_run(names.expire_job(ORDERS_TABLE), run_config=expire_run_config(
            spec(ORDERS_TABLE).target())))
        assert maintained["status"] == "SUCCESS"
        figures.append(f"- daemon SIGKILLed mid-tick; the sensor ticked again {min(after_restart) - killed_at:.1f} s "
                       f"after the kill; the due full compaction done {recovered - killed_at:.1f} s after the kill "
                       f"({len(full)} run(s), run keys unique), maintenance {maintained['endTime'] - killed_at:.1f} s")

        # 2. The whole deployment SIGKILLed (webserver, daemon, code servers, run workers) while a
        # compaction run follows the table, then started again: the watchdog finds the run's
        # worker gone and fails it, and the table compacts again.
        assert ended(dagster, dagster.launch_run(orders_job, tags={"dagster/partition": DAYS[1]}))["status"] \
            == "SUCCESS"
        config = compaction_run_config(spec(ORDERS_TABLE).target(), follow_seconds=20)
        config["ops"]["plan_compaction"]["config"]["idle_seconds"] = 20
        following = dagster.launch_run(names.compaction_job(ORDERS_TABLE), run_config=config)
        kill_worker_when(dagster, following, lambda: status(dagster, following) == "STARTED", timeout=SETTLE_TIMEOUT_S)
        crashed_at = time.time()
        dagster.kill()
        dagster.restart()
        restarted_at = time.time()
        failed = ended(dagster, following)
        failed_at = time.time()
        assert failed["status"] == "FAILURE"
        logs = "\n".join(dagster.run_logs(following))
        assert (f"paimon watchdog: failing compaction run {following} ({names.compaction_job(ORDERS_TABLE)}) holding "
                f"{ORDERS_TABLE}'s compaction slot: its worker is gone") in logs, logs[-3000:]
        retry = retried(dagster, following)
        figures.append(f"- whole deployment SIGKILLed during a following compaction, restarted in "
                       f"{restarted_at - crashed_at:.1f} s; its run failed by the watchdog "
                       f"{failed_at - crashed_at:.1f} s after the crash (its bound: "
                       f"{failed['tags'][MAX_RUNTIME_TAG]} s), its retry done "
                       f"{retry['endTime'] - crashed_at:.1f} s after")
        figures[-1] += next_upkeep(dagster, ORDERS_TABLE, crashed_at).replace("the kill", "the crash")
    orders = pc.Catalog(warehouse).get_table(ORDERS_TABLE)
    assert sorted_rows(orders).equals(sorted_rows(reference(tmp_path, DAYS[:2])))
    assert orders.lsm_state().max_level0_files == 0
    report("Faults: the daemon killed mid-tick, the whole deployment crashed", figures)
