"""The watchdog of a table's runs: which runs hold a table, their bounds, and the failing of the
overdue ones on a real instance (runs created STARTED, the clock moved instead of waited)."""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from pipelines import names, watchdog
from pipelines.compaction import retries
from pipelines.compaction.jobs import compaction_tags
from pipelines.cron import age_text
from pipelines.dagster_internals import GRPC_INFO_TAG, run_worker_gone
from pipelines.runtime_bounds import bound_tags
from pipelines.watchdog import (
    CANCEL_GRACE_S,
    MONITOR_GRACE_S,
    HeldRun,
    Watched,
    ingestion_bound,
    overdue,
    read_cursor,
    runs_holding,
    slot_holder,
    watch,
    watch_sensor,
)
from resources.keys import TABLE_TAG, TRIGGER_SNAPSHOT_TAG
from tests.support.fixture_project.tables import EVENTS_TABLE, ORDERS_TABLE, spec

HOUR = 3600.0
DAILY = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")


def held(**changes: object) -> HeldRun:
    base = HeldRun("r1", names.compaction_job(ORDERS_TABLE), "compaction", canceling=False, started_s=1000.0,
                   changed_s=1000.0, bound_s=900.0, tagged=True, why_bound="its tag")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# ---- the decisions (pure) -----------------------------------------------------------------------


def test_a_tagged_run_is_overdue_after_its_bound_and_monitorings_grace() -> None:
    run = held()
    assert overdue(run, now_s=1000 + 900, monitored=False) is None
    assert "run 901 s, past its bound of 900 s (its tag)" in (overdue(run, now_s=1901, monitored=False) or "")
    # Run monitoring enforces the tag itself: the watchdog waits its grace out first.
    assert overdue(run, now_s=1000 + 900 + MONITOR_GRACE_S, monitored=True) is None
    assert overdue(run, now_s=1001 + 900 + MONITOR_GRACE_S, monitored=True) is not None
    # A bound the tag does not give (an ingestion run's) is the watchdog's alone: no grace.
    assert overdue(held(tagged=False), now_s=1901, monitored=True) is not None
    assert overdue(held(bound_s=None), now_s=10**9, monitored=False) is None


def test_a_canceling_run_is_overdue_once_it_has_not_ended_for_the_cancel_grace() -> None:
    run = held(canceling=True, changed_s=5000.0)
    assert overdue(run, now_s=5000 + CANCEL_GRACE_S, monitored=True) is None
    assert "asked to stop 181 s ago" in (overdue(run, now_s=5001 + CANCEL_GRACE_S, monitored=True) or "")


def test_an_ingestion_runs_bound_is_the_partition_runtime_per_partition_it_writes() -> None:
    assert ingestion_bound({"dagster/partition": "2024-01-03"}, HOUR, DAILY)[0] == HOUR
    ranged = {"dagster/asset_partition_range_start": "2024-01-01", "dagster/asset_partition_range_end": "2024-01-30"}
    bound, why = ingestion_bound(ranged, HOUR, DAILY)
    assert bound == 30 * HOUR and why == "30 partition(s) x ingestion.partition_runtime 3600 s"
    assert ingestion_bound(ranged, HOUR, DAILY, tables_in_run=3)[0] == 90 * HOUR
    assert ingestion_bound({}, HOUR, None)[0] == HOUR  # an unpartitioned table
    assert ingestion_bound(ranged, None, DAILY)[0] is None  # partition_runtime unset: never failed
    gone = {"dagster/asset_partition_range_start": "2023-01-01", "dagster/asset_partition_range_end": "2023-01-09"}
    assert ingestion_bound(gone, HOUR, DAILY)[0] == 2 * HOUR


# ---- on an instance -----------------------------------------------------------------------------


@pytest.fixture
def monitored(empty_instance_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dg.DagsterInstance]:
    home = tmp_path_factory.mktemp("dagster-instance")
    with dg.instance_for_test(temp_dir=str(home), overrides={"run_monitoring": {"enabled": True}}) as instance:
        yield instance


def orders_watched() -> Watched:
    orders = spec(ORDERS_TABLE)
    assert orders.ingestion is not None and orders.ingestion.partition_runtime == "2 h"
    return Watched(ORDERS_TABLE, orders.key, orders.partitions_def(), orders.ingestion.partition_runtime_s())


def started(instance: dg.DagsterInstance, defs: dg.Definitions, job: str, tags: dict[str, str],
            **kwargs: object) -> dg.DagsterRun:
    return instance.create_run_for_job(defs.resolve_job_def(job), tags=tags, status=dg.DagsterRunStatus.STARTED,
                                       **kwargs)  # type: ignore[arg-type]


def logs(instance: dg.DagsterInstance, run_id: str) -> str:
    return "\n".join(entry.message for entry in instance.all_logs(run_id))


def test_the_watchdog_fails_the_overdue_runs_of_its_table_and_names_it(
        project_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    watched = orders_watched()
    compaction = started(instance, project_defs, names.compaction_job(ORDERS_TABLE),
                         {**compaction_tags(ORDERS_TABLE), **bound_tags(900)})
    days = {"dagster/asset_partition_range_start": "2024-01-01", "dagster/asset_partition_range_end": "2024-01-03"}
    ingestion = started(instance, project_defs, names.ingestion_job(ORDERS_TABLE), {TABLE_TAG: ORDERS_TABLE, **days})
    # An asset-page run carries no paimon tag: the table's asset in its selection is what holds it.
    page = started(instance, project_defs, names.ingestion_job(ORDERS_TABLE), {"dagster/partition": "2024-01-02"},
                   asset_selection=frozenset({watched.asset_key}))
    other = started(instance, project_defs, names.compaction_job(EVENTS_TABLE),
                    {**compaction_tags(EVENTS_TABLE), **bound_tags(1)})
    t0 = max(h.started_s for h in runs_holding(instance, watched))
    assert {h.run_id: h.role for h in runs_holding(instance, watched)} == {
        compaction.run_id: "compaction", ingestion.run_id: "ingestion", page.run_id: "ingestion"}
    assert {h.run_id: h.bound_s for h in runs_holding(instance, watched)} == {
        compaction.run_id: 900, ingestion.run_id: 3 * 2 * HOUR, page.run_id: 2 * HOUR}

    quiet = watch(instance, watched, now_s=t0 + 60).message
    assert "3 run(s) hold sales.orders, none past its bound" in quiet
    assert "this instance has no run_monitoring, so the watchdog alone fails dead runs" in quiet

    first = watch(instance, watched, now_s=t0 + 901).message
    assert f"failed {compaction.run_id} (it has run " in first
    status = {r.run_id: r.status for r in instance.get_runs()}
    assert status[compaction.run_id] == dg.DagsterRunStatus.FAILURE
    assert status[ingestion.run_id] == status[page.run_id] == dg.DagsterRunStatus.STARTED
    assert status[other.run_id] == dg.DagsterRunStatus.STARTED  # another table's watchdog's business
    assert (f"paimon watchdog: failing compaction run {compaction.run_id} ({names.compaction_job(ORDERS_TABLE)}) "
            "holding sales.orders's compaction slot: it has run") in logs(instance, compaction.run_id)

    watch(instance, watched, now_s=t0 + 2 * HOUR + 1)
    assert instance.get_run_by_id(page.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
    assert "holding sales.orders's writers' pool: it has run" in logs(instance, page.run_id)
    assert "(1 partition(s) x ingestion.partition_runtime 7200 s)" in logs(instance, page.run_id)
    watch(instance, watched, now_s=t0 + 6 * HOUR + 1)
    assert instance.get_run_by_id(ingestion.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
    assert watch(instance, watched, now_s=t0 + 7 * HOUR).message.startswith("no run holds sales.orders")


def test_under_run_monitoring_the_watchdog_leaves_a_tagged_run_to_it_for_a_grace(
        project_defs: dg.Definitions, monitored: dg.DagsterInstance) -> None:
    watched = orders_watched()
    run = started(monitored, project_defs, names.compaction_job(ORDERS_TABLE),
                  {**compaction_tags(ORDERS_TABLE), **bound_tags(900)})
    [holder] = runs_holding(monitored, watched)
    assert "no run_monitoring" not in watch(monitored, watched, now_s=holder.started_s + 901).message
    assert monitored.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]
    watch(monitored, watched, now_s=holder.started_s + 901 + MONITOR_GRACE_S)
    assert monitored.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]


def test_a_compaction_canceled_for_its_bound_is_retried_one_a_person_canceled_is_not(
        project_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    """Run monitoring ends a live run past its bound by canceling it, so the run may end CANCELED:
    that is a failure to retry, unlike a cancel before the bound."""
    tags = {**compaction_tags(ORDERS_TABLE), **bound_tags(0), TRIGGER_SNAPSHOT_TAG: "7"}
    bounded = started(instance, project_defs, names.compaction_job(ORDERS_TABLE), tags)
    instance.report_run_canceled(bounded)
    found = retries.failed_attempts(instance, ORDERS_TABLE, 7)
    assert found is not None and found.count == 1 and found.last_run_id == bounded.run_id

    person = started(instance, project_defs, names.compaction_job(ORDERS_TABLE),
                     {**tags, TRIGGER_SNAPSHOT_TAG: "8", **bound_tags(3600)})
    instance.report_run_canceled(person)
    assert retries.failed_attempts(instance, ORDERS_TABLE, 8) is None


def test_every_table_gets_its_watchdog_sensor(project_defs: dg.Definitions) -> None:
    sensors = {s.name for s in project_defs.sensors or ()}
    assert {names.watch_sensor(ORDERS_TABLE), names.watch_sensor(EVENTS_TABLE)} <= sensors
    assert watchdog.RUNS_LOOKED_AT >= 100


def test_a_run_whose_code_server_is_gone_is_failed_on_the_second_tick_whatever_its_bound(
        project_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    """The whole deployment went down with the run and came back: the code server that launched
    the run no longer listens, so the run is dead long before its bound."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    where = {GRPC_INFO_TAG: json.dumps({"host": "127.0.0.1", "port": port, "socket": None})}
    dead = started(instance, project_defs, names.compaction_job(ORDERS_TABLE),
                   {**compaction_tags(ORDERS_TABLE), **bound_tags(3600), **where})
    unknown = started(instance, project_defs, names.compaction_job(EVENTS_TABLE),
                      {**compaction_tags(EVENTS_TABLE), **bound_tags(3600)})
    assert run_worker_gone(dead) is True and run_worker_gone(unknown) is None  # no server named: not judged
    watched = orders_watched()

    first = watch(instance, watched)
    assert first.gone == {dead.run_id} and "1 whose worker looks gone (failed if still so next tick)" in first.message
    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.STARTED  # type: ignore[union-attr]
    second = watch(instance, watched, seen_gone=first.gone)
    assert f"failed {dead.run_id} (its worker is gone" in second.message and not second.gone
    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE  # type: ignore[union-attr]
    assert "its worker is gone (the code server that launched it does not run it" in logs(instance, dead.run_id)


def test_the_watchdog_records_the_instance_check_when_its_verdict_changes(instance: dg.DagsterInstance) -> None:
    sensor = watch_sensor(orders_watched())
    with dg.build_sensor_context(instance=instance) as context:
        first = sensor(context)
    assert isinstance(first, dg.SensorResult) and "no run holds sales.orders" in (first.skip_reason.skip_message
                                                                                    or "")  # type: ignore[union-attr]
    [evaluation] = first.asset_events
    assert isinstance(evaluation, dg.AssetCheckEvaluation) and evaluation.check_name == names.INSTANCE_CHECK
    assert not evaluation.passed and "run_monitoring: {enabled: true}" in (evaluation.description or "")
    with dg.build_sensor_context(instance=instance, cursor=first.cursor) as context:
        second = sensor(context)
    assert isinstance(second, dg.SensorResult) and not second.asset_events  # unchanged: not recorded again


def test_the_slot_holder_is_the_oldest_other_run_holding_the_compaction_slot(
        project_defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
    assert slot_holder(instance, ORDERS_TABLE) is None
    held = started(instance, project_defs, names.compaction_job(ORDERS_TABLE),
                   {**compaction_tags(ORDERS_TABLE), **bound_tags(900)})
    [holder] = runs_holding(instance, orders_watched())
    text = slot_holder(instance, ORDERS_TABLE, now_s=holder.started_s + 3 * 3600)
    assert text == (f"run {held.run_id} ({names.compaction_job(ORDERS_TABLE)}) has held sales.orders's compaction "
                    f"slot for {age_text(3 * 3600 * 1000)} (bound 900 s)")
    assert slot_holder(instance, ORDERS_TABLE, exclude=held.run_id) is None  # the run asking is not its own holder


def test_a_cursor_of_another_form_reads_as_empty() -> None:
    assert read_cursor(None) == read_cursor("") == read_cursor('["r1"]') == read_cursor("not json") == {}
    assert read_cursor('{"gone": "r1"}') == {}
    assert read_cursor('{"gone": ["r1"], "instance": "x"}') == {"gone": ["r1"], "instance": "x"}
