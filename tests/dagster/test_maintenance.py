"""Snapshot expiry and orphan-file cleanup through Dagster: the jobs, the schedules, the checks.

Real runs (``execute_in_process`` into ``instance_for_test``) on small real tables in tmp_path.
What a run should delete comes from the engine's own dry-run plan taken before the run, or from
files the test planted; never from the pipeline code under test.
"""

import datetime as dt_
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest

import paimon_core as pc
from pipelines.assets import LOG_EVENTS_KEY
from pipelines.checks import maintenance_asset_checks
from pipelines.compaction import COMPACTION_JOB, compaction_run_config, compaction_tags
from pipelines.definitions import defs
from pipelines.log_events import SCHEMA as LOG_SCHEMA
from pipelines.log_events import TABLE as LOG_TABLE
from pipelines.log_events import TABLE_OPTIONS as LOG_OPTIONS
from pipelines.log_events import synthetic_batches
from pipelines.lsm import COMPACTED_TABLES, COMPACTION_TAG, CompactedTable, compacted_table
from pipelines.maintenance import (
    DEFAULT_EXPIRE_CRON,
    DEFAULT_ORPHANS_CRON,
    EXPIRE_CRON_ENV,
    EXPIRE_JOB,
    ORPHANS_CHECK,
    ORPHANS_CRON_ENV,
    ORPHANS_JOB,
    RETENTION_CHECK,
    expire_cron,
    expire_run_config,
    maintenance_tags,
    orphans_cron,
    orphans_outcome,
    orphans_run_config,
    retention_outcome,
    scheduled_ticks,
)
from pipelines.sensors import pending_compaction
from resources import PaimonCatalogResource

DAY = "2024-01-03"
COMMITS = 8
HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
SPEC = compacted_table(LOG_TABLE)


# ---- helpers --------------------------------------------------------------------------------


@pytest.fixture
def catalog(resources: dict[str, Any]) -> PaimonCatalogResource:
    return resources["catalog"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse with logs.events at COMMITS snapshots, each replacing the day (so each replaced
    file is freed by expiry); written once, copied for each test."""
    warehouse = tmp_path_factory.mktemp("template") / "warehouse"
    table = PaimonCatalogResource(warehouse=str(warehouse)).ensure_table(
        LOG_TABLE, schema=LOG_SCHEMA, partition_keys=["dt"], options=LOG_OPTIONS)
    for count in range(20, 20 + COMMITS):
        table.write(pa.Table.from_batches(synthetic_batches(DAY, rows=count)), overwrite=True)
    return warehouse


@pytest.fixture
def events(template: Path, warehouse: str, catalog: PaimonCatalogResource) -> pc.Table:
    shutil.copytree(template, warehouse)
    return catalog.table(LOG_TABLE)


@pytest.fixture
def job_defs(resources: dict[str, Any]) -> dg.Definitions:
    """The code location's definitions on the test warehouse."""
    return dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=defs.jobs,
                          schedules=defs.schedules, resources=resources)


def run(job_defs: dg.Definitions, instance: dg.DagsterInstance, job: str, run_config: dict[str, Any], *,
        raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    """A maintenance run of logs.events, tagged as its schedules tag it."""
    return job_defs.resolve_job_def(job).execute_in_process(
        run_config=run_config, instance=instance, raise_on_error=raise_on_error, tags=maintenance_tags(LOG_TABLE))


def observations(result: dg.ExecuteInProcessResult) -> list[dg.AssetObservation]:
    return [e.event_specific_data.asset_observation for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"]


def plain(metadata: dict[str, Any]) -> dict[str, Any]:
    return {key: getattr(value, "value", value) for key, value in metadata.items()}


def checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def plant(table: pc.Table, name: str, *, age_s: float, size: int = 321) -> Path:
    """A stray file in a bucket directory (as a crashed writer leaves one), last modified ``age_s`` ago."""
    [bucket_dir] = [p for p in Path(table.paths.root).glob("dt=*/bucket-*") if p.is_dir()][:1]
    path = bucket_dir / name
    path.write_bytes(b"x" * size)
    mtime = time.time() - age_s
    os.utime(path, (mtime, mtime))
    return path


def output_metadata(result: dg.ExecuteInProcessResult, node: str) -> dict[str, Any]:
    [event] = [e for e in result.all_node_events if e.node_name == node and e.event_type_value == "STEP_OUTPUT"]
    return dict(event.step_output_data.metadata)


def check_def(name: str) -> dg.AssetChecksDefinition:
    """The code location's check ``name`` on logs/events."""
    [found] = [c for c in maintenance_asset_checks if dg.AssetCheckKey(LOG_EVENTS_KEY, name) in c.check_keys]
    return found


def rows(table: pc.Table) -> list[dict[str, Any]]:
    return table.read().sort_by("ts").to_pylist()


# ---- the expiry job -------------------------------------------------------------------------


def test_expire_job_deletes_what_the_engine_plans(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                  events: pc.Table) -> None:
    expected = events.expire_snapshots(dry_run=True, older_than=int(time.time() * 1000), retain_min=3)
    before = rows(events)
    assert expected.snapshots == tuple(range(1, COMMITS - 2)) and len(expected.data_files) == COMMITS - 3

    result = run(job_defs, instance, EXPIRE_JOB, expire_run_config(LOG_TABLE, older_than="now", retain_min=3))

    done = result.output_for_node("expire_snapshots")
    assert (done.snapshots, done.data_files, done.metadata_files) == (
        expected.snapshots, expected.data_files, expected.metadata_files)
    assert not done.dry_run
    assert [s.id for s in events.snapshots()] == [COMMITS - 2, COMMITS - 1, COMMITS]
    assert not any(os.path.exists(p) for p in (*done.data_files, *done.metadata_files))
    assert rows(events) == before
    [observed] = observations(result)
    meta = plain(observed.metadata)
    assert observed.asset_key == LOG_EVENTS_KEY
    assert meta["snapshots_expired"] == COMMITS - 3 and meta["expired_snapshots"] == f"1..{COMMITS - 3}"
    assert meta["earliest_snapshot_before"] == 1 and meta["earliest_snapshot_after"] == COMMITS - 2
    assert (meta["snapshots_retained_before"], meta["snapshots_retained_after"]) == (COMMITS, 3)
    assert meta["data_files"] == COMMITS - 3 and meta["bytes"] == expected.bytes > 0
    assert meta["metadata_files"] == len(expected.metadata_files)
    assert Path(expected.data_files[0]).name in meta["files"]
    # The retention check is recorded on the asset as of after the run.
    assert checks(result)[RETENTION_CHECK].passed


def test_expire_dry_run_deletes_nothing(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                        events: pc.Table) -> None:
    result = run(job_defs, instance, EXPIRE_JOB,
                 expire_run_config(LOG_TABLE, dry_run=True, older_than="now", retain_min=2))

    plan = result.output_for_node("expire_snapshots")
    assert plan.dry_run and len(plan.snapshots) == COMMITS - 2
    assert len(events.snapshots()) == COMMITS
    assert all(os.path.exists(p) for p in (*plan.data_files, *plan.metadata_files))
    assert not observations(result)
    meta = plain(output_metadata(result, "expire_snapshots"))
    assert (meta["dry_run"], meta["snapshots_expired"]) == (True, COMMITS - 2)
    assert meta["snapshots_retained_after"] == COMMITS


def test_default_retention_keeps_young_snapshots(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                 events: pc.Table) -> None:
    result = run(job_defs, instance, EXPIRE_JOB, expire_run_config(LOG_TABLE))

    assert result.output_for_node("expire_snapshots").snapshots == ()
    assert len(events.snapshots()) == COMMITS
    [observed] = observations(result)
    assert plain(observed.metadata)["snapshots_expired"] == 0


def test_expiry_creates_due_automatic_tags_first(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                 events: pc.Table, monkeypatch: pytest.MonkeyPatch) -> None:
    events.alter([pc.SetOption("tag.automatic-creation", "process-time")])
    # A day on, today has ended: its tag (its last snapshot) is due. Only the engine's clock moves.
    tomorrow = time.time() + 24 * 3600
    monkeypatch.setattr("paimon_core.table.time", SimpleNamespace(time=lambda: tomorrow, monotonic=time.monotonic))
    today = dt_.datetime.fromtimestamp(tomorrow - 24 * 3600).strftime("%Y-%m-%d")

    result = run(job_defs, instance, EXPIRE_JOB, expire_run_config(LOG_TABLE, older_than="now", retain_min=2))

    assert [(t.name, t.snapshot_id) for t in events.list_tags()] == [(today, COMMITS)]
    meta = plain(output_metadata(result, "expire_snapshots"))
    assert (meta["automatic_tag_created"], meta["snapshots_expired"]) == (today, COMMITS - 2)
    # A dry run creates no tag either.
    events.delete_tag(today)
    run(job_defs, instance, EXPIRE_JOB, expire_run_config(LOG_TABLE, dry_run=True))
    assert events.list_tags() == []


def test_bad_time_fails_the_run_before_deleting(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                events: pc.Table) -> None:
    result = run(job_defs, instance, EXPIRE_JOB, expire_run_config(LOG_TABLE, older_than="yesterday"),
                 raise_on_error=False)

    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "'now' or an ISO-8601 time" in failure.event_specific_data.error.message
    assert len(events.snapshots()) == COMMITS


# ---- the orphan-file job --------------------------------------------------------------------


def test_orphan_job_removes_a_crash_leftover(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                            events: pc.Table) -> None:
    stray = plant(events, "data-crashed-writer-0.parquet", age_s=2 * DAY_MS / 1000)
    young = plant(events, "data-in-flight-0.parquet", age_s=60)
    before = rows(events)

    result = run(job_defs, instance, ORPHANS_JOB, orphans_run_config(LOG_TABLE))

    done = result.output_for_node("remove_orphan_files")
    assert [Path(p).name for p in done.orphans] == [stray.name]
    assert not stray.exists() and young.exists()  # younger than the day's window: kept
    assert rows(events) == before
    [observed] = observations(result)
    meta = plain(observed.metadata)
    assert observed.asset_key == LOG_EVENTS_KEY
    assert (meta["orphan_files"], meta["bytes"], meta["data_files"], meta["manifest_files"]) == (1, 321, 1, 0)
    assert stray.name in meta["orphans"]
    assert checks(result)[ORPHANS_CHECK].passed


def test_orphan_dry_run_deletes_nothing(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                        events: pc.Table) -> None:
    stray = plant(events, "data-crashed-writer-1.parquet", age_s=2 * DAY_MS / 1000)

    result = run(job_defs, instance, ORPHANS_JOB, orphans_run_config(LOG_TABLE, dry_run=True))

    assert [Path(p).name for p in result.output_for_node("remove_orphan_files").orphans] == [stray.name]
    assert stray.exists()
    assert not observations(result)


def test_recent_window_needs_force_and_no_writer_running(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                         events: pc.Table) -> None:
    stray = plant(events, "data-crashed-writer-2.parquet", age_s=5)
    now_config = orphans_run_config(LOG_TABLE, older_than="now")
    refused = run(job_defs, instance, ORPHANS_JOB, now_config, raise_on_error=False)
    assert not refused.success and stray.exists()

    writer = instance.create_run_for_job(job_defs.resolve_job_def(COMPACTION_JOB),
                                         run_config=compaction_run_config(LOG_TABLE),
                                         tags=compaction_tags(LOG_TABLE), status=dg.DagsterRunStatus.STARTED)
    forced = orphans_run_config(LOG_TABLE, older_than="now", force=True)
    busy = run(job_defs, instance, ORPHANS_JOB, forced, raise_on_error=False)
    [failure] = [e for e in busy.all_events if e.event_type_value == "STEP_FAILURE"]
    assert writer.run_id in failure.event_specific_data.error.message and stray.exists()

    instance.report_run_canceled(writer)
    done = run(job_defs, instance, ORPHANS_JOB, forced)
    assert [Path(p).name for p in done.output_for_node("remove_orphan_files").orphans] == [stray.name]
    assert not stray.exists() and len(rows(events)) > 0


# ---- schedules ------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", COMPACTED_TABLES, ids=lambda spec: spec.name)
def test_every_table_has_both_schedules(job_defs: dg.Definitions, catalog: PaimonCatalogResource,
                                        events: pc.Table, spec: CompactedTable) -> None:
    if spec.table != LOG_TABLE:
        catalog.ensure_table(spec.table, schema=LOG_SCHEMA)
    tick = dt_.datetime(2024, 3, 5, 3, 0, tzinfo=dt_.UTC)
    expected = [(f"expire_snapshots_{spec.name}", EXPIRE_JOB, DEFAULT_EXPIRE_CRON, expire_run_config(spec.table)),
                (f"remove_orphan_files_{spec.name}", ORPHANS_JOB, DEFAULT_ORPHANS_CRON,
                 orphans_run_config(spec.table))]
    for name, job, cron, run_config in expected:
        schedule = job_defs.resolve_schedule_def(name)
        context = dg.build_schedule_context(scheduled_execution_time=tick, resources={"catalog": catalog})

        [request] = schedule.evaluate_tick(context).run_requests

        assert (schedule.job_name, schedule.cron_schedule, schedule.execution_timezone) == (job, cron, "UTC")
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
        assert request.run_config == run_config
        assert request.tags[COMPACTION_TAG] == spec.table
        assert not run_config["ops"][next(iter(run_config["ops"]))]["config"]["dry_run"]


def test_schedules_skip_tables_that_do_not_exist(job_defs: dg.Definitions, catalog: PaimonCatalogResource) -> None:
    schedule = job_defs.resolve_schedule_def("expire_snapshots_shop_orders")
    context = dg.build_schedule_context(scheduled_execution_time=dt_.datetime(2024, 3, 5, tzinfo=dt_.UTC),
                                        resources={"catalog": catalog})

    assert "shop.orders does not exist yet" in (schedule.evaluate_tick(context).skip_message or "")


def test_crons_from_the_table_entry_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = CompactedTable(LOG_TABLE, LOG_EVENTS_KEY, expire_cron="*/10 * * * *")
    assert (expire_cron(spec), orphans_cron(spec)) == ("*/10 * * * *", DEFAULT_ORPHANS_CRON)

    monkeypatch.setenv(EXPIRE_CRON_ENV, "30 */2 * * *")
    monkeypatch.setenv(ORPHANS_CRON_ENV, "0 4 * * 0")
    assert (expire_cron(SPEC), orphans_cron(SPEC), expire_cron(spec)) == ("30 */2 * * *", "0 4 * * 0", "*/10 * * * *")

    monkeypatch.setenv(ORPHANS_CRON_ENV, "every day")
    with pytest.raises(dg.DagsterInvariantViolationError, match=ORPHANS_CRON_ENV):
        orphans_cron(SPEC)


def test_scheduled_ticks_are_the_last_two_at_or_before_now() -> None:
    at = int(dt_.datetime(2024, 3, 5, 10, 30, tzinfo=dt_.UTC).timestamp() * 1000)
    hour = int(dt_.datetime(2024, 3, 5, 9, tzinfo=dt_.UTC).timestamp() * 1000)

    assert scheduled_ticks("0 * * * *", at) == (hour, hour + HOUR_MS)
    assert scheduled_ticks("0 3 * * *", at) == (hour - 6 * HOUR_MS - DAY_MS, hour - 6 * HOUR_MS)


def test_maintenance_runs_do_not_count_as_pending_compactions(job_defs: dg.Definitions,
                                                              instance: dg.DagsterInstance) -> None:
    queued = instance.create_run_for_job(job_defs.resolve_job_def(EXPIRE_JOB), run_config=expire_run_config(LOG_TABLE),
                                         tags=maintenance_tags(LOG_TABLE), status=dg.DagsterRunStatus.NOT_STARTED)
    assert pending_compaction(instance, LOG_TABLE) is None

    compaction = instance.create_run_for_job(job_defs.resolve_job_def(COMPACTION_JOB),
                                             run_config=compaction_run_config(LOG_TABLE),
                                             tags=compaction_tags(LOG_TABLE), status=dg.DagsterRunStatus.NOT_STARTED)
    assert compaction.run_id in (pending_compaction(instance, LOG_TABLE) or "")
    assert queued.tags[COMPACTION_TAG] == compaction.tags[COMPACTION_TAG]


# ---- checks ---------------------------------------------------------------------------------


def test_retention_check_warns_once_expiry_is_overdue(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                      events: pc.Table) -> None:
    table = events
    table.alter([pc.SetOption("snapshot.num-retained.min", "3")])  # the alter is snapshot-free
    now = int(time.time() * 1000)

    fresh = retention_outcome(table, SPEC, at_ms=now)
    assert fresh.passed and fresh.metadata["expirable_now"] == 0
    # Three hours on, the runs at the last two hourly ticks could have expired all but the newest 3.
    later = retention_outcome(table, SPEC, at_ms=now + 3 * HOUR_MS)
    assert not later.passed and later.severity == dg.AssetCheckSeverity.WARN
    assert later.metadata["overdue_snapshots"] == COMMITS - 3
    assert later.metadata["snapshots_retained"] == COMMITS

    run(job_defs, instance, EXPIRE_JOB, expire_run_config(LOG_TABLE, older_than="now"))
    assert retention_outcome(table, SPEC, at_ms=now + 3 * HOUR_MS).passed


def test_retention_check_warns_above_num_retained_max(events: pc.Table) -> None:
    events.alter([pc.SetOption("snapshot.num-retained.min", "2"), pc.SetOption("snapshot.num-retained.max", "4")])

    outcome = retention_outcome(events, SPEC)

    # Beyond the hard cap every snapshot but the newest 4 may go whatever its age.
    assert not outcome.passed and outcome.metadata["overdue_snapshots"] == COMMITS - 4


def test_orphan_check_warns_about_orphans_the_last_run_should_have_deleted(
        job_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
        events: pc.Table) -> None:
    plant(events, "data-crashed-writer-3.parquet", age_s=30 * HOUR_MS / 1000)  # within the window still
    assert orphans_outcome(events, SPEC).passed
    old = plant(events, "data-crashed-writer-4.parquet", age_s=4 * DAY_MS / 1000, size=1000)

    outcome = orphans_outcome(events, SPEC)

    assert not outcome.passed and outcome.severity == dg.AssetCheckSeverity.WARN
    assert (outcome.metadata["orphan_files"], outcome.metadata["orphan_bytes"]) == (1, 1000)
    assert old.name in outcome.metadata["orphans"].value
    # The check on the asset says the same; after the cleanup job it passes.
    assert not check_def(ORPHANS_CHECK)(catalog=catalog).passed
    result = run(job_defs, instance, ORPHANS_JOB, orphans_run_config(LOG_TABLE))
    assert checks(result)[ORPHANS_CHECK].passed and not old.exists()
    assert check_def(ORPHANS_CHECK)(catalog=catalog).passed


def test_checks_run_with_the_asset(materialize_day: Any, catalog: PaimonCatalogResource) -> None:
    result = materialize_day(DAY, extra=[check_def(RETENTION_CHECK), check_def(ORPHANS_CHECK)])

    evaluated = checks(result)
    assert evaluated[RETENTION_CHECK].passed and evaluated[ORPHANS_CHECK].passed
    assert evaluated[RETENTION_CHECK].metadata["snapshots_retained"].value == 1
