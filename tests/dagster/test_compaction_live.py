"""Sensor-driven compaction on a real deployment: ``dagster-webserver`` + ``dagster-daemon`` on 127.0.0.1.

Two scenarios, each with its own temp ``DAGSTER_HOME`` (the project's ``dagster_home/dagster.yaml``)
and temp warehouse, driven through GraphQL and checked on the tables themselves:

The code location is the fixture project's (``tests/support/fixture_project``):

- (4c) a backfill of the orders assets over three days; the daemon's compaction sensor sees a
  full compaction fall due (sales.orders' changelog comes from full compactions) or level 0
  reach the trigger and launches ``full_compact_sales_orders_job``, which folds it and writes the
  changelog; the revenue table's changes sensor then launches its ingestion job, whose
  aggregate matches the orders' max-level contents;
- (5) once the daemon's sensor launched a following compaction run (on the first commit), a
  writer committing every 2 s for 90 s while that run keeps every bucket's level 0 below the
  stop-trigger, measured throughout.

Set ``PAIMON_DAGSTER_FIGURES=<file.md>`` to have the measured figures appended there.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.compaction.sensor import REASON_FULL_DUE, REASON_LEVEL0
from pipelines.ingestion.consumer import pending_changes
from pipelines.target import FOLLOW_ENV, SENSOR_INTERVAL_ENV
from resources.keys import COMPACTION_TAG, CONSUMER_TAG, TABLE_TAG, TRIGGER_LEVEL0_TAG, TRIGGER_REASON_TAG
from tests.support.fixture_project.data import order_changes
from tests.support.fixture_project.definitions import CODE_LOCATION, WORKSPACE
from tests.support.fixture_project.defs.resources import ORDERS_ENV
from tests.support.fixture_project.tables import (
    ORDERS_CHANGELOG_OPTIONS,
    ORDERS_KEY,
    ORDERS_OPTIONS,
    ORDERS_PRIMARY_KEY,
    ORDERS_SCHEMA,
    ORDERS_TABLE,
    REVENUE_TABLE,
    TOTALS_KEY,
)
from tests.support.fixture_project.tables import spec as declared_spec
from tests.support.live_dagster import FINISHED, CodeLocation, LiveDagster, live_dagster

pytestmark = [pytest.mark.slow, pytest.mark.live]  # a real webserver and daemon

SENSOR = names.compaction_sensor(ORDERS_TABLE)
REVENUE_SENSOR = names.changes_sensor(REVENUE_TABLE)
REVENUE_JOB = names.ingestion_job(REVENUE_TABLE)
# The revenue consumer (sales.orders' changelog -> sales.revenue_by_status), as the YAML declares it.
CONSUMER_ID = declared_spec(REVENUE_TABLE).ingestion.consumer_id  # type: ignore[union-attr]
REVENUE_RUN_TAGS = {CONSUMER_TAG: CONSUMER_ID}
# The changes sensor keeps its spec's 60 s interval (the project's YAML sets none), so the consumer
# may start up to a minute after the last full compaction; on a busy 2-core machine the backfill
# and its compactions take minutes too.
SETTLE_TIMEOUT_S = 600
# sales.orders without its changelog: scenario 5 measures minor compactions (following runs).
MINOR_OPTIONS = {key: value for key, value in ORDERS_OPTIONS.items() if key not in ORDERS_CHANGELOG_OPTIONS}
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
# Orders a day in the code location: about 7,000 changes, 5 commits of the YAML's 1,500.
ORDERS_PER_DAY = 2_000
LOCATION = CodeLocation(WORKSPACE, CODE_LOCATION)
FIGURES_ENV = "PAIMON_DAGSTER_FIGURES"


def report(title: str, lines: list[str]) -> None:
    """Print the figures; also append them to ``$PAIMON_DAGSTER_FIGURES`` when set."""
    text = "\n".join([f"### {title}", "", *lines, ""])
    print("\n" + text)
    target = os.environ.get(FIGURES_ENV)
    if target:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        with Path(target).open("a") as out:
            out.write(text + "\n")


def seconds(values: Iterable[float]) -> str:
    return ", ".join(f"{value:.1f}" for value in values)


def sorted_rows(table: pc.Table) -> pa.Table:
    return table.read().sort_by([("dt", "ascending"), ("order_id", "ascending")])


def create_orders(warehouse: str, name: str = ORDERS_TABLE, options: dict[str, str] = MINOR_OPTIONS) -> pc.Table:
    catalog = pc.Catalog(warehouse)
    catalog.create_database(name.split(".", maxsplit=1)[0], exist_ok=True)
    return catalog.create_table(name, schema=ORDERS_SCHEMA, partition_keys=["dt"],
                                primary_keys=ORDERS_PRIMARY_KEY, options=options, exist_ok=True)


def revenue_by_status(rows: pa.Table) -> dict[tuple[str, str], tuple[int, Any]]:
    """Orders and revenue per (dt, status) of order rows, by a group-by of them."""
    sums = rows.group_by(["dt", "status"]).aggregate([("amount", "count"), ("amount", "sum")])
    return {(r["dt"], r["status"]): (r["amount_count"], r["amount_sum"]) for r in sums.to_pylist()}


def consumer_caught_up(orders: pc.Table) -> bool:
    """The revenue consumer ran and read every snapshot with changes."""
    return not pending_changes(orders, CONSUMER_ID).due


def compaction_runs(dagster: LiveDagster) -> list[dict[str, Any]]:
    """Runs of the compaction jobs on sales.orders (maintenance runs, launched by their schedules
    when a test crosses the hour, carry the same tag)."""
    runs = dagster.runs({COMPACTION_TAG: ORDERS_TABLE})
    jobs = (names.compaction_job(ORDERS_TABLE), names.full_compaction_job(ORDERS_TABLE))
    return [r for r in runs if r["jobName"] in jobs]


def failure_report(dagster: LiveDagster, runs: list[dict[str, Any]]) -> str:
    failed = [r for r in runs if r["status"] == "FAILURE"]
    return "\n".join(f"run {r['runId']} ({r['jobName']}):\n" + "\n".join(dagster.run_logs(r["runId"])[-30:])
                     for r in failed) + "\n" + dagster.logs()


# ---- 4c: backfill -> sensor -> compaction run ---------------------------------------------------


def test_backfill_through_graphql_gets_compacted_by_the_sensor(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    started = time.monotonic()
    env = {SENSOR_INTERVAL_ENV: "1", ORDERS_ENV: str(ORDERS_PER_DAY)}
    with live_dagster(tmp_path, warehouse=warehouse, env=env, location=LOCATION) as dagster:
        ready = time.monotonic() - started
        sensor = dagster.sensor(SENSOR)
        assert sensor["sensorState"]["status"] == "RUNNING"  # on by default, no toggle needed
        assert sensor["minIntervalSeconds"] == 1

        backfill_id = dagster.launch_backfill([list(ORDERS_KEY.path), list(TOTALS_KEY.path)], DAYS,
                                              tags={TABLE_TAG: ORDERS_TABLE}, title="orders, 3 days")

        def settled() -> bool:
            """Every day ingested, every compaction run finished, level 0 below the trigger.

            (The backfill's own status turns COMPLETED only at the daemon's next 30 s pass, so
            its runs are watched instead.)"""
            backfill = dagster.backfill(backfill_id)
            if backfill["status"] in ("FAILED", "CANCELED", "COMPLETED_FAILED"):
                raise AssertionError(f"backfill {backfill}\n{failure_report(dagster, dagster.runs())}")
            ingested = dagster.runs({"dagster/backfill": backfill_id})
            runs = compaction_runs(dagster) + dagster.runs(REVENUE_RUN_TAGS)
            if any(r["status"] == "FAILURE" for r in ingested + runs):
                raise AssertionError(failure_report(dagster, ingested + runs))
            if {r["tags"].get("dagster/partition") for r in ingested} != set(DAYS) or not runs:
                return False
            if any(r["status"] not in FINISHED for r in ingested + runs):
                return False
            orders = pc.Catalog(warehouse).get_table(ORDERS_TABLE)
            state = orders.lsm_state()
            return state.max_level0_files < 5 and not state.full_compaction_due and consumer_caught_up(orders)

        dagster.wait(settled, timeout=SETTLE_TIMEOUT_S, interval=1.0,
                     what="backfill, sensor and compaction to settle")
        elapsed = time.monotonic() - started
        ingestion = dagster.runs({"dagster/backfill": backfill_id})
        compactions = compaction_runs(dagster)
        consumers = dagster.runs(REVENUE_RUN_TAGS)
        ticks = dagster.sensor(SENSOR, ticks=200)["sensorState"]["ticks"]
        revenue_ticks = dagster.sensor(REVENUE_SENSOR, ticks=200)["sensorState"]["ticks"]
    assert not dagster.group_alive()

    # Dagster may run a day's two assets in one run or in two: every day ran, and every run succeeded.
    assert sorted({r["tags"]["dagster/partition"] for r in ingestion}) == DAYS
    assert {r["status"] for r in ingestion} == {"SUCCESS"}
    assert all(r["tags"][TABLE_TAG] == ORDERS_TABLE for r in ingestion)
    assert compactions and {r["status"] for r in compactions} == {"SUCCESS"}
    assert {r["jobName"] for r in compactions} == {names.full_compaction_job(ORDERS_TABLE)}
    assert all(r["tags"]["dagster/sensor_name"] == SENSOR for r in compactions)
    # Why each was launched: 5 commits since the last full compaction, or 5 level-0 files seen.
    for run in compactions:
        reasons = set(run["tags"][TRIGGER_REASON_TAG].split(","))
        assert reasons <= {REASON_FULL_DUE, REASON_LEVEL0} and reasons
        assert REASON_FULL_DUE in reasons or int(run["tags"][TRIGGER_LEVEL0_TAG]) >= 5
    launched = {run_id for tick in ticks for run_id in tick["runIds"]}
    assert {r["runId"] for r in compactions} <= launched
    assert not [t for t in ticks if t["status"] == "FAILURE"]

    orders = pc.Catalog(warehouse).get_table(ORDERS_TABLE)
    state = orders.lsm_state()
    # Folded at least every 5 commits: what is left waits for the next full compaction.
    assert state.max_level0_files < 5 and not state.full_compaction_due
    kinds = [s.commit_kind for s in orders.snapshots()]
    assert kinds.count("APPEND") == 5 * len(DAYS) and "COMPACT" in kinds
    # The revenue consumer, launched by its sensor after the full compactions, holds exactly what
    # the full compactions put in the max level (a full read of a full-compaction table).
    assert consumers and {r["status"] for r in consumers} == {"SUCCESS"}
    assert all(r["tags"]["dagster/sensor_name"] == REVENUE_SENSOR for r in consumers)
    assert {r["jobName"] for r in consumers} == {REVENUE_JOB}
    assert all(r["tags"][TABLE_TAG] == REVENUE_TABLE for r in consumers)
    assert {r["runId"] for r in consumers} <= {run_id for tick in revenue_ticks for run_id in tick["runIds"]}
    compacted = next(orders.stream("latest-full", until_latest=True)).data
    revenue = pc.Catalog(warehouse).get_table(REVENUE_TABLE).read().to_pylist()
    assert {(r["dt"], r["status"]): (r["order_count"], r["revenue"]) for r in revenue
            if r["order_count"] or r["revenue"]} == revenue_by_status(compacted)
    # Compaction changed files, not rows: the same changes applied to an uncompacted table read the same.
    reference = create_orders(str(tmp_path / "reference"))
    for day in DAYS:
        reference.write(order_changes(day, orders=ORDERS_PER_DAY))
    assert sorted_rows(orders).equals(sorted_rows(reference))

    overlap = [(i, c) for i in ingestion for c in compactions
               if c["startTime"] and i["startTime"] and c["startTime"] < i["endTime"] and i["startTime"] < c["endTime"]]
    report("4c: backfill of 3 days through GraphQL, sensor-launched compaction", [
        f"- webserver + daemon ready in {ready:.1f} s; whole scenario {elapsed:.0f} s on {os.cpu_count()} cores",
        f"- {len(ingestion)} ingestion runs (5 write-only commits each), {len(compactions)} full compaction run(s) "
        f"launched by `{SENSOR}`; {len(overlap)} ingestion/compaction pair(s) ran at the same time; "
        f"{len(consumers)} revenue consumer run(s) launched by `{REVENUE_SENSOR}`",
        f"- level 0 per bucket: max {max(int(r['tags'][TRIGGER_LEVEL0_TAG]) for r in compactions)} seen by the "
        f"sensor -> {state.max_level0_files} at the end; sensor ticks {len(ticks)} "
        f"({sum(1 for t in ticks if t['runIds'])} requested a run)",
        f"- sensor tick -> compaction run start: {seconds(r['startTime'] - r['creationTime'] for r in compactions)} s; "
        f"run duration {seconds(r['endTime'] - r['startTime'] for r in compactions)} s",
    ])


# ---- 5: compaction-debt control under sustained ingest (measured) --------------------------------


@dataclass
class Sampler:
    """Samples a table's worst level 0 in a thread (manifests only)."""

    warehouse: str
    interval: float = 0.25
    samples: list[tuple[float, int | None, int]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        table = pc.Catalog(self.warehouse).get_table(ORDERS_TABLE)

        def loop() -> None:
            while not self._stop.is_set():
                state = table.lsm_state()
                self.samples.append((time.monotonic(), state.snapshot_id, state.max_level0_files))
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def best_read_ms(table: pc.Table, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        table.read()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def timed_commits(commit: Callable[[int], None], *, period: float, duration: float) -> int:
    """Call ``commit(i)`` every ``period`` seconds for ``duration`` seconds; the number of commits."""
    started, count = time.monotonic(), 0
    while time.monotonic() - started < duration:
        commit(count)
        count += 1
        time.sleep(max(0.0, started + count * period - time.monotonic()))
    return count


@dataclass
class Sustained:
    """What one sustained-ingest scenario measured."""

    period: float
    duration: float
    follow: int
    rows_per_commit: int
    commits: int
    stop_trigger: int
    trigger: int
    worst_level0: int
    mean_level0: float
    samples: int
    level0_at_writer_stop: int
    final: Any  # LsmState of the compacted table at the end
    uncompacted: Any  # LsmState of the twin that got the same commits and no compaction
    runs: list[dict[str, Any]]
    compact_snapshots: int
    first_run_start_s: float
    ticks: int
    read_compacted_ms: float
    read_uncompacted_ms: float
    live_rows: int
    rows_equal: bool
    failures: str  # the logs of failed runs, if any

    def lines(self) -> list[str]:
        mode = f"following runs (follow {self.follow} s, launch at 1 level-0 file)" if self.follow else \
            f"one-pass runs (launch at the trigger, {self.trigger} level-0 files)"
        bucket = self.final.buckets[0] if self.final.buckets else None
        launches = seconds(r["startTime"] - r["creationTime"] for r in self.runs)
        return [
            f"- {self.commits} write-only commits of {self.rows_per_commit} changes (one every {self.period:g} s for "
            f"{self.duration:g} s) into one partition (4 buckets) of sales.orders; `{SENSOR}` every 1 s, {mode}",
            f"- level 0 per bucket: **max {self.worst_level0}** (stop-trigger {self.stop_trigger}, compaction trigger "
            f"{self.trigger}); mean {self.mean_level0:.1f} over {self.samples} samples; {self.level0_at_writer_stop} "
            f"when the writer stopped, {self.final.max_level0_files} at the end",
            f"- {len(self.runs)} compaction run(s) ({', '.join(sorted({r['status'] for r in self.runs}))}), "
            f"{self.compact_snapshots} COMPACT snapshots; first run started {self.first_run_start_s:.1f} s after "
            f"the first commit; sensor tick -> run start {launches} s; {self.ticks} sensor ticks",
            f"- full read ({self.live_rows:,} live rows): **{self.read_compacted_ms:.1f} ms** compacted "
            f"(bucket 0 files per level {bucket.level_files if bucket else ()}) vs "
            f"**{self.read_uncompacted_ms:.1f} ms** for the same commits never compacted "
            f"({self.uncompacted.max_level0_files} level-0 files per bucket); same rows: "
            f"{self.rows_equal}",
        ]


def measure_sustained(root: Path, *, period: float, duration: float, follow: int,
                      rows: int = 300) -> Sustained:
    """A writer commits every ``period`` s for ``duration`` s (after a first commit, once the sensor's
    run is up) while the daemon's sensor compacts."""
    warehouse = str(root / "warehouse")
    orders = create_orders(warehouse)
    twin = create_orders(warehouse, f"{ORDERS_TABLE}_uncompacted")  # same commits, never compacted
    changes = order_changes("2024-02-01", orders=5_000)
    after_commit: list[int] = []
    env = {SENSOR_INTERVAL_ENV: "1", FOLLOW_ENV: str(follow)}

    with live_dagster(root, warehouse=warehouse, env=env, location=LOCATION) as dagster:
        sampler = Sampler(warehouse)
        sampler.start()
        began = time.time()

        def commit(i: int) -> None:
            piece = changes.slice(i * rows, rows)
            orders.write(piece)
            twin.write(piece)
            after_commit.append(orders.lsm_state().max_level0_files)

        try:
            # The first commit makes the sensor launch a run; the writer goes on once it is up. How
            # long launching takes depends on the machine (a run worker loads the code location
            # first: tens of seconds on a busy 2-core machine), and it is reported, not measured
            # against the stop-trigger: what is measured is how well a running compaction keeps up.
            commit(0)
            dagster.wait(lambda: [r for r in compaction_runs(dagster) if r["status"] in {"STARTED", *FINISHED}],
                         timeout=300, interval=0.5, what="the sensor's first compaction run to start")
            commits = 1 + timed_commits(lambda i: commit(i + 1), period=period, duration=duration)
            level0_at_end = orders.lsm_state().max_level0_files

            def finished() -> list[dict[str, Any]] | None:
                runs = compaction_runs(dagster)
                return runs if runs and all(r["status"] in FINISHED for r in runs) else None

            runs = dagster.wait(finished, timeout=300, interval=1.0, what="the compaction runs to finish")
        finally:
            sampler.stop()
        ticks = dagster.sensor(SENSOR, ticks=500)["sensorState"]["ticks"]
        failures = failure_report(dagster, runs) if any(r["status"] != "SUCCESS" for r in runs) else ""
    assert not dagster.group_alive()

    series = [level0 for _, _, level0 in sampler.samples]
    compacted_rows, twin_rows = sorted_rows(orders), sorted_rows(twin)
    return Sustained(
        period=period, duration=duration, follow=follow, rows_per_commit=rows, commits=commits,
        stop_trigger=orders.options.sorted_run_stop_trigger, trigger=orders.options.sorted_run_compaction_trigger,
        worst_level0=max(series + after_commit), mean_level0=statistics.mean(series), samples=len(series),
        level0_at_writer_stop=level0_at_end, final=orders.lsm_state(), uncompacted=twin.lsm_state(), runs=runs,
        compact_snapshots=sum(1 for s in orders.snapshots() if s.commit_kind == "COMPACT"),
        first_run_start_s=min(r["startTime"] for r in runs) - began, ticks=len(ticks),
        read_compacted_ms=best_read_ms(orders), read_uncompacted_ms=best_read_ms(twin),
        live_rows=compacted_rows.num_rows, rows_equal=compacted_rows.equals(twin_rows), failures=failures)


def test_sustained_ingest_keeps_level0_below_the_stop_trigger(tmp_path: Path) -> None:
    """A commit every 2 s for 90 s; the sensor keeps a following compaction run up while it lasts."""
    measured = measure_sustained(tmp_path, period=2.0, duration=90.0, follow=150)
    report(f"5: sustained ingest, a commit every {measured.period:g} s for {measured.duration:g} s", measured.lines())

    assert {r["status"] for r in measured.runs} == {"SUCCESS"}, measured.failures
    assert measured.commits >= 40
    assert measured.worst_level0 < measured.stop_trigger, measured.lines()
    assert measured.compact_snapshots >= measured.commits // 10  # folded again and again, not once at the end
    assert all(r["tags"]["dagster/sensor_name"] == SENSOR for r in measured.runs)
    # Without compaction every commit stays a level-0 file; with it, nothing was lost or changed.
    assert measured.uncompacted.max_level0_files == measured.commits
    assert measured.rows_equal
