"""Snapshot expiry and orphan-file cleanup through Dagster: the jobs, the schedules, the checks.

Real runs (``execute_in_process`` into ``instance_for_test``) on small real tables in tmp_path.
What a run should delete comes from the engine's own dry-run plan taken before the run, or from
files the test planted; never from the pipeline code under test.
"""

import dataclasses
import datetime as dt_
import os
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.compaction.jobs import compaction_run_config, compaction_tags
from pipelines.compaction.sensor import pending_compaction
from pipelines.cron import DEFAULT_EXPIRE_CRON, DEFAULT_ORPHANS_CRON
from pipelines.errors import TableDefinitionError
from pipelines.factory import paimon_definitions
from pipelines.maintenance.expiry import expire_run_config
from pipelines.maintenance.orphans import orphans_run_config, writers_running
from pipelines.maintenance.runs import maintenance_tags
from pipelines.maintenance.verdicts import (
    ORPHANS_CHECK,
    RETENTION_CHECK,
    expire_cron,
    orphans_cron,
    orphans_outcome,
    retention_outcome,
)
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.parts import Column, Maintenance, Partitions
from pipelines.target import TableTarget, declared_targets
from resources import PaimonCatalogResource, keys
from resources.keys import COMPACTION_TAG, TABLE_TAG
from tests.support.dagster_runs import JobRunner, one_line_failure
from tests.support.fixture_project import data
from tests.support.fixture_project.tables import (
    EVENTS_KEY,
    EVENTS_OPTIONS,
    EVENTS_SCHEMA,
    EVENTS_TABLE,
    ORDERS_TABLE,
    REVENUE_TABLE,
    TOTALS_TABLE,
)
from tests.support.metadata_values import value_of

DAY = "2024-01-03"
COMMITS = 8
HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
# The project's tables: each gets both maintenance schedules.
PROJECT_TABLES = (EVENTS_TABLE, ORDERS_TABLE, TOTALS_TABLE, REVENUE_TABLE)
CUSTOMERS_KEY = dg.AssetKey(["lake", "crm", "customers"])
# app.events' own maintenance and compaction jobs, which most tests here run.
EXPIRE_JOB = names.expire_job(EVENTS_TABLE)
ORPHANS_JOB = names.orphans_job(EVENTS_TABLE)
COMPACTION_JOB = names.compaction_job(EVENTS_TABLE)


# ---- helpers --------------------------------------------------------------------------------


@pytest.fixture
def target(project_defs: dg.Definitions) -> TableTarget:
    """app.events as the project declares it (hourly expiry, cleanup at 03:00)."""
    return declared_targets(project_defs)[EVENTS_TABLE]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse with app.events at COMMITS snapshots, each replacing the day (so each replaced
    file is freed by expiry); written once, copied for each test."""
    warehouse = tmp_path_factory.mktemp("template") / "warehouse"
    table = PaimonCatalogResource(warehouse=str(warehouse)).ensure_table(
        EVENTS_TABLE, schema=EVENTS_SCHEMA, partition_keys=["dt"], options=EVENTS_OPTIONS)
    for count in range(20, 20 + COMMITS):
        table.write(pa.Table.from_batches(data.events(DAY, rows=count)), overwrite=True)
    return warehouse


@pytest.fixture
def events(template: Path, warehouse: str, catalog: PaimonCatalogResource) -> pc.Table:
    shutil.copytree(template, warehouse)
    return catalog.table(EVENTS_TABLE)


def run(run_job: JobRunner, job: str, run_config: dict[str, Any], *, raise_on_error: bool = True,
        table: str = EVENTS_TABLE) -> dg.ExecuteInProcessResult:
    """A maintenance run, tagged as its schedules tag it."""
    return run_job(job, run_config=run_config, tags=maintenance_tags(table), raise_on_error=raise_on_error)


def observations(result: dg.ExecuteInProcessResult) -> list[dg.AssetObservation]:
    return [e.event_specific_data.asset_observation for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"]


def plain(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata values by name, the ``paimon/maint/`` namespace dropped."""
    return {key.removeprefix(keys.MAINTENANCE_PREFIX): value_of(value) for key, value in metadata.items()}


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def plant(table: pc.Table, name: str, *, age_s: float, size: int = 321) -> Path:
    """A stray file in a bucket directory (as a crashed writer leaves one), last modified ``age_s`` ago."""
    [bucket_dir] = [p for p in Path(table.paths.root).glob("*=*/bucket-*") if p.is_dir()][:1]
    path = bucket_dir / name
    path.write_bytes(b"x" * size)
    mtime = time.time() - age_s
    os.utime(path, (mtime, mtime))
    return path


def output_metadata(result: dg.ExecuteInProcessResult, node: str) -> dict[str, Any]:
    [event] = [e for e in result.all_node_events if e.node_name == node and e.event_type_value == "STEP_OUTPUT"]
    return dict(event.step_output_data.metadata)


def execute_check(defs: dg.Definitions, instance: dg.DagsterInstance, name: str,
                  key: dg.AssetKey = EVENTS_KEY) -> dg.AssetCheckEvaluation:
    """Run the check ``name`` of the asset ``key`` on its own, as the UI's Execute does."""
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(), asset_check_selection={dg.AssetCheckKey(key, name)})
    [evaluation] = job.execute_in_process(instance=instance).get_asset_check_evaluations()
    return evaluation


def rows(table: pc.Table) -> list[dict[str, Any]]:
    return table.read().sort_by("ts").to_pylist()


# ---- the expiry job -------------------------------------------------------------------------


def test_expire_job_deletes_what_the_engine_plans(run_job: JobRunner, events: pc.Table, target: TableTarget) -> None:
    expected = events.expire_snapshots(dry_run=True, older_than=int(time.time() * 1000), retain_min=3)
    before = rows(events)
    assert expected.snapshots == tuple(range(1, COMMITS - 2)) and len(expected.data_files) == COMMITS - 3

    result = run(run_job, EXPIRE_JOB, expire_run_config(target, older_than="now", retain_min=3))

    done = result.output_for_node("expire_snapshots")
    assert (done.snapshots, done.data_files, done.metadata_files) == (
        expected.snapshots, expected.data_files, expected.metadata_files)
    assert not done.dry_run
    assert [s.id for s in events.snapshots()] == [COMMITS - 2, COMMITS - 1, COMMITS]
    assert not any(os.path.exists(p) for p in (*done.data_files, *done.metadata_files))
    assert rows(events) == before
    [observed] = observations(result)
    meta = plain(observed.metadata)
    assert observed.asset_key == EVENTS_KEY and observed.partition is None
    assert meta["table"] == EVENTS_TABLE
    assert meta["expired"] == COMMITS - 3 and meta["expired_ids"] == f"1..{COMMITS - 3}"
    assert meta["earliest_before"] == 1 and meta["earliest_after"] == COMMITS - 2
    assert meta["latest"] == COMMITS
    assert (meta["retained_before"], meta["retained_after"]) == (COMMITS, 3)
    assert meta["data_files"] == COMMITS - 3 and meta["bytes"] == expected.bytes > 0
    assert meta["metadata_files"] == len(expected.metadata_files)
    assert Path(expected.data_files[0]).name in meta["files"]
    # The retention check is recorded on the asset as of after the run.
    assert checks(result)[RETENTION_CHECK].passed
    assert checks(result)[RETENTION_CHECK].asset_key == EVENTS_KEY


def test_the_retention_check_says_when_expiry_last_deleted(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                           run_job: JobRunner, events: pc.Table,
                                                           target: TableTarget) -> None:
    assert execute_check(project_defs, instance, RETENTION_CHECK).description.endswith("; no expiry run recorded")
    # A dry run deleted nothing: it is not the last expiry.
    run(run_job, EXPIRE_JOB, expire_run_config(target, dry_run=True))
    assert "last_expiry" not in execute_check(project_defs, instance, RETENTION_CHECK).metadata

    result = run(run_job, EXPIRE_JOB, expire_run_config(target, older_than="now", retain_min=3))

    recorded = checks(result)[RETENTION_CHECK]
    assert "; last expiry at " in (recorded.description or "")
    [record] = instance.get_run_records(dg.RunsFilter(run_ids=[result.run_id]))
    assert record.end_time is not None
    later = execute_check(project_defs, instance, RETENTION_CHECK)
    assert later.metadata["last_expiry"].value == pytest.approx(record.end_time, abs=0.001)
    assert recorded.metadata["last_expiry"].value <= record.end_time


def test_the_retention_check_counts_what_each_consumer_has_not_read(project_defs: dg.Definitions,
                                                                    instance: dg.DagsterInstance,
                                                                    events: pc.Table) -> None:
    events.consumer_store.record("audit", COMMITS - 1)  # has read all but the last two snapshots
    events.consumer_store.record("search", COMMITS + 1)  # has read everything

    evaluated = execute_check(project_defs, instance, RETENTION_CHECK)

    assert evaluated.metadata["max_consumer_lag"].value == 2
    assert evaluated.metadata["consumers"].value == f"audit@{COMMITS - 1} (2 unread), search@{COMMITS + 1} (0 unread)"
    assert (evaluated.description or "").endswith(f"; consumers audit@{COMMITS - 1} (2 unread), "
                                                  f"search@{COMMITS + 1} (0 unread)")


def test_expire_dry_run_deletes_nothing(run_job: JobRunner, events: pc.Table, target: TableTarget) -> None:
    result = run(run_job, EXPIRE_JOB, expire_run_config(target, dry_run=True, older_than="now", retain_min=2))

    plan = result.output_for_node("expire_snapshots")
    assert plan.dry_run and len(plan.snapshots) == COMMITS - 2
    assert len(events.snapshots()) == COMMITS
    assert all(os.path.exists(p) for p in (*plan.data_files, *plan.metadata_files))
    assert not observations(result)
    meta = plain(output_metadata(result, "expire_snapshots"))
    assert (meta["dry_run"], meta["expired"]) == (True, COMMITS - 2)
    assert meta["retained_after"] == COMMITS


def test_default_retention_keeps_young_snapshots(run_job: JobRunner, events: pc.Table, target: TableTarget) -> None:
    result = run(run_job, EXPIRE_JOB, expire_run_config(target))

    assert result.output_for_node("expire_snapshots").snapshots == ()
    assert len(events.snapshots()) == COMMITS
    assert plain(output_metadata(result, "expire_snapshots"))["expired"] == 0
    assert observations(result) == []  # nothing changed: no event on the asset


def test_expiry_creates_due_automatic_tags_first(run_job: JobRunner, events: pc.Table, target: TableTarget,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    events.alter([pc.SetOption("tag.automatic-creation", "process-time")])
    # A day on, today has ended: its tag (its last snapshot) is due. Only the engine's clock moves.
    tomorrow = time.time() + 24 * 3600
    monkeypatch.setattr("paimon_core.table.time", SimpleNamespace(time=lambda: tomorrow, monotonic=time.monotonic))
    today = dt_.datetime.fromtimestamp(tomorrow - 24 * 3600).strftime("%Y-%m-%d")

    result = run(run_job, EXPIRE_JOB, expire_run_config(target, older_than="now", retain_min=2))

    assert [(t.name, t.snapshot_id) for t in events.list_tags()] == [(today, COMMITS)]
    meta = plain(output_metadata(result, "expire_snapshots"))
    assert (meta["tag_created"], meta["expired"]) == (today, COMMITS - 2)
    # A dry run creates no tag either.
    events.delete_tag(today)
    run(run_job, EXPIRE_JOB, expire_run_config(target, dry_run=True))
    assert events.list_tags() == []


def test_bad_time_fails_the_run_before_deleting(run_job: JobRunner, events: pc.Table, target: TableTarget) -> None:
    result = run(run_job, EXPIRE_JOB, expire_run_config(target, older_than="yesterday"), raise_on_error=False)

    assert "'now' or an ISO-8601 time" in one_line_failure(result)
    assert len(events.snapshots()) == COMMITS


# ---- the orphan-file job --------------------------------------------------------------------


def test_orphan_job_removes_a_crash_leftover(run_job: JobRunner, events: pc.Table, target: TableTarget) -> None:
    stray = plant(events, "data-crashed-writer-0.parquet", age_s=2 * DAY_MS / 1000)
    young = plant(events, "data-in-flight-0.parquet", age_s=60)
    before = rows(events)

    result = run(run_job, ORPHANS_JOB, orphans_run_config(target))

    done = result.output_for_node("remove_orphan_files")
    assert [Path(p).name for p in done.orphans] == [stray.name]
    assert not stray.exists() and young.exists()  # younger than the day's window: kept
    assert rows(events) == before
    [observed] = observations(result)
    meta = plain(observed.metadata)
    assert observed.asset_key == EVENTS_KEY
    assert (meta["orphan_files"], meta["bytes"], meta["data_files"], meta["manifest_files"]) == (1, 321, 1, 0)
    assert stray.name in meta["orphans"]
    assert checks(result)[ORPHANS_CHECK].passed


def test_orphan_dry_run_deletes_nothing(run_job: JobRunner, events: pc.Table, target: TableTarget) -> None:
    stray = plant(events, "data-crashed-writer-1.parquet", age_s=2 * DAY_MS / 1000)

    result = run(run_job, ORPHANS_JOB, orphans_run_config(target, dry_run=True))

    assert [Path(p).name for p in result.output_for_node("remove_orphan_files").orphans] == [stray.name]
    assert stray.exists()
    assert not observations(result)


@pytest.mark.parametrize("writer_tag", [COMPACTION_TAG, TABLE_TAG], ids=["compaction", "ingestion"])
def test_recent_window_needs_force_and_no_writer_running(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                         run_job: JobRunner, events: pc.Table, target: TableTarget,
                                                         writer_tag: str) -> None:
    stray = plant(events, "data-crashed-writer-2.parquet", age_s=5)
    refused = run(run_job, ORPHANS_JOB, orphans_run_config(target, older_than="now"), raise_on_error=False)
    [failure] = [e for e in refused.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "pass force=True" in str(failure.event_specific_data.error) and stray.exists()
    # The window is said as a time, not as epoch milliseconds.
    moment = r"older_than \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00 is within"
    assert re.search(moment, str(failure.event_specific_data.error))

    # A compaction run, or an ingestion run, of the table in progress: its files may be in flight.
    writer = instance.create_run_for_job(project_defs.resolve_job_def(COMPACTION_JOB),
                                         run_config=compaction_run_config(target),
                                         tags={writer_tag: EVENTS_TABLE}, status=dg.DagsterRunStatus.STARTED)
    assert writers_running(instance, EVENTS_TABLE, own_run_id="another") == [f"{COMPACTION_JOB} ({writer.run_id})"]
    forced = orphans_run_config(target, older_than="now", force=True)
    busy = run(run_job, ORPHANS_JOB, forced, raise_on_error=False)
    description = one_line_failure(busy)
    assert writer.run_id in description and EVENTS_TABLE in description and stray.exists()

    instance.report_run_canceled(writer)
    done = run(run_job, ORPHANS_JOB, forced)
    assert [Path(p).name for p in done.output_for_node("remove_orphan_files").orphans] == [stray.name]
    assert not stray.exists() and len(rows(events)) > 0


# ---- which table a run works on -----------------------------------------------------------------


@pytest.mark.parametrize(("job", "op"), [(EXPIRE_JOB, "expire_snapshots"), (ORPHANS_JOB, "remove_orphan_files")])
def test_a_run_naming_nothing_works_on_its_jobs_table(run_job: JobRunner, events: pc.Table, job: str,
                                                      op: str) -> None:
    """The job carries its table: a run whose config names only what a person chooses (or the
    table itself) records its checks on the table's asset."""
    for config in ({"dry_run": True}, {"table": EVENTS_TABLE, "dry_run": True}):
        launched = run(run_job, job, {"ops": {op: {"config": config}}})
        assert launched.success
        assert {e.asset_key for e in launched.get_asset_check_evaluations()} == {EVENTS_KEY}


BAD_NAMES = ["sales.missing", "nodb.events", "events", "app.bad name!"]


@pytest.mark.parametrize(("job", "op"), [(EXPIRE_JOB, "expire_snapshots"), (ORPHANS_JOB, "remove_orphan_files")])
@pytest.mark.parametrize("table", BAD_NAMES)
def test_a_run_naming_another_table_is_refused_in_one_line(run_job: JobRunner, events: pc.Table, job: str, op: str,
                                                           table: str) -> None:
    """A table's maintenance job works on that table only (and under its limit)."""
    config = {"ops": {op: {"config": {"table": table, "asset_key": list(EVENTS_KEY.path)}}}}

    result = run(run_job, job, config, raise_on_error=False, table=table)

    assert f"{job} works on {EVENTS_TABLE}, but its run config names {table}" in one_line_failure(result)
    assert len(events.snapshots()) == COMMITS


@pytest.mark.parametrize(("job", "op"), [(EXPIRE_JOB, "expire_snapshots"), (ORPHANS_JOB, "remove_orphan_files")])
def test_a_table_not_created_yet_fails_the_run_in_one_line(run_job: JobRunner, target: TableTarget, job: str,
                                                           op: str) -> None:
    config = (expire_run_config(target) if op == "expire_snapshots" else orphans_run_config(target))

    result = run(run_job, job, config, raise_on_error=False)

    assert f"Paimon table {EVENTS_TABLE}" in one_line_failure(result)


# ---- a table declared with a spec of its own --------------------------------------------------


def customers_spec(maintenance: Maintenance | None = None) -> PaimonTableSpec:
    """crm.customers: an asset key of three parts, days as Paimon values like 20240103."""
    return PaimonTableSpec(
        table="crm.customers", asset_key=tuple(CUSTOMERS_KEY.path),
        columns=(Column("day", "STRING NOT NULL"), Column("id", "BIGINT NOT NULL"), Column("name", "STRING")),
        primary_key=("day", "id"), partition_keys=("day",), options={"bucket": "1"},
        partitions=Partitions(kind="daily", start="2024-01-01", end="2024-01-08", mapping={"day": "%Y%m%d"}),
        maintenance=maintenance or Maintenance(expire_cron="*/10 * * * *", orphans_cron="30 4 * * 0"))


def test_maintenance_of_a_table_declared_with_a_spec(warehouse: str, instance: dg.DagsterInstance) -> None:
    """Its schedules carry its crons and its key; the runs observe that key and judge by those crons."""
    defs = paimon_definitions([customers_spec()], warehouse=warehouse)
    catalog = defs.resources["paimon_catalog"]
    target = declared_targets(defs)["crm.customers"]
    assert (target.asset_key, target.expire_cron, target.orphans_cron) == (CUSTOMERS_KEY, "*/10 * * * *",
                                                                           "30 4 * * 0")
    table = catalog.ensure_table("crm.customers", schema=customers_spec().arrow_schema(), partition_keys=["day"],
                                 primary_keys=["day", "id"], options={"bucket": "1"})
    for i in range(4):
        table.write(pa.table({"day": ["20240103"], "id": [i], "name": [f"c{i}"]}))
    stray = plant(table, "data-crashed-writer-9.parquet", age_s=10 * DAY_MS / 1000)
    tick = dt_.datetime(2024, 3, 5, 4, 30, tzinfo=dt_.UTC)
    runner = JobRunner(defs, instance)
    customers = "crm.customers"
    for name, job, cron in ((names.expire_schedule(customers), names.expire_job(customers), "*/10 * * * *"),
                            (names.orphans_schedule(customers), names.orphans_job(customers), "30 4 * * 0")):
        schedule = defs.resolve_schedule_def(name)
        assert (schedule.job_name, schedule.cron_schedule) == (job, cron)
        context = dg.build_schedule_context(scheduled_execution_time=tick, resources={"paimon_catalog": catalog})
        [request] = schedule.evaluate_tick(context).run_requests

        result = runner(job, run_config=request.run_config, tags=dict(request.tags))

        assert result.success
        # The expiry has nothing to expire (no event on the asset); the cleanup deletes the stray.
        assert [o.asset_key for o in observations(result)] == ([CUSTOMERS_KEY] if job == names.orphans_job(customers)
                                                                else [])
        [evaluation] = result.get_asset_check_evaluations()
        assert evaluation.asset_key == CUSTOMERS_KEY
        assert evaluation.metadata["schedule"].value == cron
    assert not stray.exists()


# ---- schedules ------------------------------------------------------------------------------


@pytest.mark.parametrize("table", PROJECT_TABLES)
def test_every_table_has_both_schedules(project_defs: dg.Definitions, catalog: PaimonCatalogResource,
                                        events: pc.Table, table: str) -> None:
    targets = declared_targets(project_defs)
    assert sorted(targets) == sorted(PROJECT_TABLES)
    target = targets[table]
    if table != EVENTS_TABLE:
        catalog.ensure_table(table, schema=EVENTS_SCHEMA)
    tick = dt_.datetime(2024, 3, 5, 3, 0, tzinfo=dt_.UTC)
    expected = [(names.expire_schedule(table), names.expire_job(table), DEFAULT_EXPIRE_CRON, expire_run_config(target)),
                (names.orphans_schedule(table), names.orphans_job(table), DEFAULT_ORPHANS_CRON,
                 orphans_run_config(target))]
    for name, job, cron, run_config in expected:
        schedule = project_defs.resolve_schedule_def(name)
        context = dg.build_schedule_context(scheduled_execution_time=tick, resources={"paimon_catalog": catalog})

        [request] = schedule.evaluate_tick(context).run_requests

        assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (job, cron, "UTC")
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
        assert request.run_config == run_config
        config = run_config["ops"][next(iter(run_config["ops"]))]["config"]
        assert config["table"] == table and config["asset_key"] == list(target.asset_key.path)
        assert request.tags[COMPACTION_TAG] == table
        assert not config["dry_run"]


def test_schedules_skip_tables_that_do_not_exist(project_defs: dg.Definitions, catalog: PaimonCatalogResource) -> None:
    for name in (names.expire_schedule(ORDERS_TABLE), names.orphans_schedule(ORDERS_TABLE)):
        schedule = project_defs.resolve_schedule_def(name)
        context = dg.build_schedule_context(scheduled_execution_time=dt_.datetime(2024, 3, 5, tzinfo=dt_.UTC),
                                            resources={"paimon_catalog": catalog})

        assert f"{ORDERS_TABLE} does not exist yet" in (schedule.evaluate_tick(context).skip_message or "")


def test_crons_come_from_the_spec(warehouse: str) -> None:
    """(The old $PAIMON_EXPIRE_CRON / $PAIMON_ORPHANS_CRON are gone: each spec says its crons.)"""
    spec = TableTarget(EVENTS_TABLE, EVENTS_KEY, expire_cron="*/10 * * * *")
    assert (expire_cron(spec), orphans_cron(spec)) == ("*/10 * * * *", DEFAULT_ORPHANS_CRON)
    # No schedule of its own: the checks judge by the defaults.
    bare = TableTarget(EVENTS_TABLE, EVENTS_KEY, expire_cron=None, orphans_cron=None)
    assert (expire_cron(bare), orphans_cron(bare)) == (DEFAULT_EXPIRE_CRON, DEFAULT_ORPHANS_CRON)

    # A spec without one schedule gets none, and its target says so.
    defs = paimon_definitions([customers_spec(Maintenance(orphans_cron=None))], warehouse=warehouse)
    assert [s.name for s in defs.schedules or ()] == [names.expire_schedule("crm.customers")]
    assert declared_targets(defs)["crm.customers"].orphans_cron is None

    with pytest.raises(TableDefinitionError, match=r"table crm.customers: maintenance.orphans_cron .*'every day'"):
        customers_spec(Maintenance(orphans_cron="every day"))




def test_maintenance_runs_do_not_count_as_pending_compactions(project_defs: dg.Definitions,
                                                              instance: dg.DagsterInstance,
                                                              target: TableTarget) -> None:
    queued = instance.create_run_for_job(project_defs.resolve_job_def(EXPIRE_JOB), run_config=expire_run_config(target),
                                         tags=maintenance_tags(EVENTS_TABLE), status=dg.DagsterRunStatus.NOT_STARTED)
    assert pending_compaction(instance, EVENTS_TABLE) is None

    compaction = instance.create_run_for_job(project_defs.resolve_job_def(COMPACTION_JOB),
                                             run_config=compaction_run_config(target),
                                             tags=compaction_tags(EVENTS_TABLE), status=dg.DagsterRunStatus.NOT_STARTED)
    assert compaction.run_id in (pending_compaction(instance, EVENTS_TABLE) or "")
    assert queued.tags[COMPACTION_TAG] == compaction.tags[COMPACTION_TAG]


# ---- checks ---------------------------------------------------------------------------------


def test_retention_check_warns_once_expiry_is_overdue(run_job: JobRunner, events: pc.Table,
                                                      target: TableTarget) -> None:
    table = events
    table.alter([pc.SetOption("snapshot.num-retained.min", "3")])  # the alter is snapshot-free
    now = int(time.time() * 1000)

    fresh = retention_outcome(table, target, at_ms=now)
    assert fresh.passed and fresh.metadata["expirable_now"] == 0
    # Three hours on, the runs at the last two hourly ticks could have expired all but the newest 3.
    later = retention_outcome(table, target, at_ms=now + 3 * HOUR_MS)
    assert not later.passed and later.severity == dg.AssetCheckSeverity.WARN
    assert later.metadata["overdue_snapshots"] == COMMITS - 3
    assert later.metadata["snapshots_retained"] == COMMITS
    assert names.expire_schedule(EVENTS_TABLE) in later.description

    run(run_job, EXPIRE_JOB, expire_run_config(target, older_than="now"))
    assert retention_outcome(table, target, at_ms=now + 3 * HOUR_MS).passed


def test_retention_check_judges_by_the_tables_schedule(events: pc.Table, target: TableTarget) -> None:
    now = int(time.time() * 1000)
    events.alter([pc.SetOption("snapshot.num-retained.min", "3")])
    # Three hours on, an hourly expiry is overdue; a yearly one (its last two ticks long before
    # these snapshots were written) is not.
    yearly = dataclasses.replace(target, expire_cron="0 0 1 1 *")

    hourly = retention_outcome(events, target, at_ms=now + 3 * HOUR_MS)
    assert not hourly.passed and hourly.metadata["schedule"] == DEFAULT_EXPIRE_CRON
    judged = retention_outcome(events, yearly, at_ms=now + 3 * HOUR_MS)
    assert judged.passed and judged.metadata["schedule"] == "0 0 1 1 *"


def test_retention_check_warns_above_num_retained_max(events: pc.Table, target: TableTarget) -> None:
    events.alter([pc.SetOption("snapshot.num-retained.min", "2"), pc.SetOption("snapshot.num-retained.max", "4")])

    outcome = retention_outcome(events, target)

    # Beyond the hard cap every snapshot but the newest 4 may go whatever its age.
    assert not outcome.passed and outcome.metadata["overdue_snapshots"] == COMMITS - 4


def test_orphan_check_warns_about_orphans_the_last_run_should_have_deleted(
        project_defs: dg.Definitions, instance: dg.DagsterInstance, run_job: JobRunner, events: pc.Table,
        target: TableTarget) -> None:
    plant(events, "data-crashed-writer-3.parquet", age_s=30 * HOUR_MS / 1000)  # within the window still
    assert orphans_outcome(events, target).passed
    old = plant(events, "data-crashed-writer-4.parquet", age_s=4 * DAY_MS / 1000, size=1000)

    outcome = orphans_outcome(events, target)

    assert not outcome.passed and outcome.severity == dg.AssetCheckSeverity.WARN
    assert (outcome.metadata["orphan_files"], outcome.metadata["orphan_bytes"]) == (1, 1000)
    assert old.name in outcome.metadata["orphans"].value
    assert names.orphans_schedule(EVENTS_TABLE) in outcome.description
    # The check on the asset says the same; after the cleanup job it passes.
    assert not execute_check(project_defs, instance, ORPHANS_CHECK).passed
    result = run(run_job, ORPHANS_JOB, orphans_run_config(target))
    assert checks(result)[ORPHANS_CHECK].passed and not old.exists()
    assert execute_check(project_defs, instance, ORPHANS_CHECK).passed


def test_checks_run_with_the_asset(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                   materialize_day: Any) -> None:
    result = materialize_day(DAY)

    evaluated = checks(result)
    assert evaluated[RETENTION_CHECK].passed
    assert evaluated[RETENTION_CHECK].metadata["snapshots_retained"].value == 1
    # The orphan check lists every directory of the table, so the ingestion job leaves it out
    # (the cleanup job records it); run on its own it passes.
    assert ORPHANS_CHECK not in evaluated
    assert execute_check(project_defs, instance, ORPHANS_CHECK).passed


def test_writes_with_every_check_leave_the_orphan_check_unevaluated(project_defs: dg.Definitions,
                                                                    instance: dg.DagsterInstance,
                                                                    events: pc.Table) -> None:
    """Materializing from the asset page selects every check; the orphan check then says nothing
    (shown as not evaluated in that run), instead of a verdict it did not reach by listing the
    table's directories after each write; Execute evaluates it."""
    page = project_defs.resolve_implicit_global_asset_job_def()
    key = dg.AssetCheckKey(EVENTS_KEY, ORPHANS_CHECK)

    def write_with_every_check() -> dg.ExecuteInProcessResult:
        result = page.execute_in_process(instance=instance, partition_key=DAY, asset_selection=[EVENTS_KEY])
        assert result.success
        return result

    written = write_with_every_check()
    assert ORPHANS_CHECK not in checks(written)
    [planned] = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    assert planned.run_id == written.run_id and planned.status.value == "PLANNED"  # the UI: not evaluated
    plant(events, "data-crashed-writer-5.parquet", age_s=4 * DAY_MS / 1000)
    assert not execute_check(project_defs, instance, ORPHANS_CHECK).passed

    again = write_with_every_check()

    assert ORPHANS_CHECK not in checks(again)
    latest = [r for r in instance.event_log_storage.get_asset_check_execution_history(key, limit=5)
              if r.event is not None and r.event.asset_check_evaluation is not None]
    assert not latest[0].event.asset_check_evaluation.passed  # the last verdict stands, not repeated


def test_the_launchpad_opens_maintenance_as_a_dry_run_and_the_schedules_delete(project_defs: dg.Definitions,
                                                                               instance: dg.DagsterInstance,
                                                                               events: pc.Table) -> None:
    """As the command line: a person's launch of a maintenance job lists what it would delete;
    the schedules, which the retention decides for, delete."""
    old = plant(events, "data-crashed-writer-6.parquet", age_s=4 * DAY_MS / 1000)
    for name in (EXPIRE_JOB, ORPHANS_JOB):
        job = project_defs.resolve_job_def(name)
        [config] = [op["config"] for op in (job.run_config or {})["ops"].values()]  # what the launchpad opens with
        assert config["dry_run"] is True
        assert job.execute_in_process(instance=instance).success
    assert old.exists()  # the orphan launched by hand was listed, not deleted
    for schedule in (names.expire_schedule(EVENTS_TABLE), names.orphans_schedule(EVENTS_TABLE)):
        with dg.build_schedule_context(instance=instance, resources=project_defs.resources) as context:
            [request] = project_defs.resolve_schedule_def(schedule).evaluate_tick(context).run_requests or []
        op = next(iter(request.run_config["ops"]))
        assert request.run_config["ops"][op]["config"]["dry_run"] is False
