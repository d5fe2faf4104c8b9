"""Sensor-driven compaction in process: chunked write-only ingestion, the sensors, the jobs, the checks.

Real Dagster runs (``execute_in_process`` into ``instance_for_test``) and real tables in tmp_path.
Expected table contents come from a plain-Python replay of the change stream, or from a read
taken before compacting; never from the compaction code itself.

sales.orders here is created without its changelog options, so the sensor takes the minor
compaction path; the full-compaction changelog path is in test_changelog.py.
"""

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from conftest import ORDERS_JOB, ORDERS_PER_DAY

import paimon_core as pc
from pipelines import names
from pipelines.compaction import retries
from pipelines.compaction.jobs import (
    compaction_run_config,
    compaction_tags,
    full_compaction_run_config,
)
from pipelines.compaction.lsm import (
    LEVEL0_CHECK,
    SMALL_FILES_CHECK,
    check_outcomes,
    level0_threshold,
    partition_spec,
)
from pipelines.compaction.sensor import evaluate, run_key
from pipelines.compaction.tasks import CompactionPlan, complete, follow, plan_tasks, run_task
from pipelines.errors import TableDefinitionError
from pipelines.factory import paimon_definitions
from pipelines.maintenance.verdicts import ORPHANS_CHECK, RETENTION_CHECK
from pipelines.runtime_bounds import COMPACTION_DEFAULT_S, COMPACTION_MIN_S, compaction_bound_s
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.parts import Column, Compaction, Ingestion, Partitions
from pipelines.target import (
    FOLLOW_ENV,
    SENSOR_INTERVAL_ENV,
    TableTarget,
    declared_targets,
    follow_seconds,
    sensor_interval_seconds,
)
from resources import PaimonCatalogResource, keys, write_partition
from resources import metadata as metadata_module
from resources.keys import COMPACTION_TAG, FOLLOW_TAG
from resources.metadata import write_metadata
from resources.writes import CHUNK_PROPERTY, FINAL_PROPERTY
from tests.support.cdc_truth import replay
from tests.support.dagster_runs import JobRunner, one_line_failure
from tests.support.fixture_project import data
from tests.support.fixture_project.definitions import load
from tests.support.fixture_project.sources import resources as fixture_resources
from tests.support.fixture_project.tables import (
    EVENTS_KEY,
    EVENTS_OPTIONS,
    EVENTS_SCHEMA,
    EVENTS_TABLE,
    ORDERS_CHANGELOG_OPTIONS,
    ORDERS_KEY,
    ORDERS_OPTIONS,
    ORDERS_PRIMARY_KEY,
    ORDERS_SCHEMA,
    ORDERS_TABLE,
)
from tests.support.fixture_project.tables import spec as declared_spec
from tests.support.metadata_values import value_of

DAY = "2024-01-03"
OTHER_DAY = "2024-01-02"  # both inside the sales partitions (2024-01-01 .. 2024-01-03)
CHUNK = 250  # 5 commits a day: the default compaction trigger
SENSOR = names.compaction_sensor(ORDERS_TABLE)
COMPACTION_JOB = names.compaction_job(ORDERS_TABLE)
FULL_COMPACTION_JOB = names.full_compaction_job(ORDERS_TABLE)
# sales.orders as it was before it produced a changelog: minor compactions only.
MINOR_OPTIONS = {key: value for key, value in ORDERS_OPTIONS.items() if key not in ORDERS_CHANGELOG_OPTIONS}
# A table of its own: an asset key of three parts and a Paimon partition value that is not the
# Dagster key (day=20240103 for the key 2024-01-03).
CUSTOMERS_TABLE = "crm.customers"
CUSTOMERS_KEY = dg.AssetKey(["lake", "crm", "customers"])


# ---- helpers --------------------------------------------------------------------------------


@pytest.fixture
def target(project_defs: dg.Definitions) -> TableTarget:
    """sales.orders as the project declares it (what its sensor and schedules put in run config)."""
    return declared_targets(project_defs)[ORDERS_TABLE]


@pytest.fixture
def orders(catalog: PaimonCatalogResource) -> pc.Table:
    return catalog.ensure_table(ORDERS_TABLE, schema=ORDERS_SCHEMA, partition_keys=["dt"],
                                primary_keys=ORDERS_PRIMARY_KEY, options=MINOR_OPTIONS)


def orders_defs(warehouse: str, *, commit_every_rows: int) -> dg.Definitions:
    """sales.orders alone, as declared but committing every ``commit_every_rows`` changes."""
    spec = declared_spec(ORDERS_TABLE)
    assert spec.ingestion is not None
    spec = spec.with_options(ingestion=dataclasses.replace(spec.ingestion, commit_every_rows=commit_every_rows))
    return paimon_definitions([spec], warehouse=warehouse, resources=fixture_resources())


def day_stream(day: str, orders: int = ORDERS_PER_DAY) -> pa.Table:
    return data.order_changes(day, orders=orders)


def ingest(table: pc.Table, day: str, *, run_id: str, chunk: int = CHUNK) -> Any:
    """A day's changes upserted as the ingestion asset writes them: one commit every ``chunk`` rows."""
    return write_partition(table, day_stream(day).to_batches(max_chunksize=400), mode="upsert",
                           partition={"dt": day}, commit_user=f"test:{run_id}", commit_every_rows=chunk)


def sorted_rows(table: pc.Table) -> list[dict[str, Any]]:
    return table.read().sort_by([("dt", "ascending"), ("order_id", "ascending")]).to_pylist()


def sensor_tick(defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
                name: str = SENSOR, cursor: str | None = None) -> Any:
    sensor = defs.resolve_sensor_def(name)
    context = dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor,
                                      resources={"paimon_catalog": catalog})
    return sensor.evaluate_tick(context)


def compact(run_job: JobRunner, run_config: dict[str, Any], *, job: str = COMPACTION_JOB,
            tags: dict[str, str] | None = None, raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
    """A compaction run of sales.orders, tagged as the sensor tags it unless ``tags`` says otherwise."""
    return run_job(job, run_config=run_config, tags=tags if tags is not None else compaction_tags(ORDERS_TABLE),
                   raise_on_error=raise_on_error)


def level0_per_bucket(table: pc.Table, day: str) -> list[int]:
    return [b.level0_files for b in table.lsm_state(partitions={"dt": day}).buckets]


def observations(result: dg.ExecuteInProcessResult) -> list[dg.AssetObservation]:
    """Every observation of the run."""
    return [e.event_specific_data.asset_observation for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"]


def shape_after(result: dg.ExecuteInProcessResult) -> dg.AssetObservation:
    """The run's one observation: its compactions and the table's LSM shape after them."""
    [shape] = observations(result)
    assert keys.LSM_MAX_LEVEL0_FILES in shape.metadata and keys.COMPACTION_PARTITIONS in shape.metadata
    return shape


def compacted_partitions(result: dg.ExecuteInProcessResult) -> list[str]:
    """The Paimon partitions the run's observation says it compacted."""
    return str(shape_after(result).metadata[keys.COMPACTION_PARTITIONS].value).split(", ")


# ---- chunked write-only ingestion -------------------------------------------------------------




def test_a_day_lands_as_one_commit_per_chunk(orders: pc.Table) -> None:
    changes = day_stream(DAY)

    applied = ingest(orders, DAY, run_id="r1")

    chunks = -(-changes.num_rows // CHUNK)
    snapshots = orders.snapshots()
    assert applied.commits == len(snapshots) == chunks == 5
    assert applied.rows_written == changes.num_rows == sum(applied.kinds.values())
    assert [s.properties[CHUNK_PROPERTY] for s in snapshots] == [str(i) for i in range(chunks)]
    assert [s.properties[FINAL_PROPERTY] for s in snapshots] == ["false"] * (chunks - 1) + ["true"]
    # One commit user per write, the chunks its identifiers 1..n (what makes a retry exact).
    assert {s.commit_user for s in snapshots} == {"test:r1"}
    assert [s.commit_identifier for s in snapshots] == list(range(1, chunks + 1))
    assert {s.commit_kind for s in snapshots} == {"APPEND"}
    # Write-only: nobody compacted, every commit left a level-0 file in every bucket.
    assert level0_per_bucket(orders, DAY) == [chunks] * 4
    assert sorted_rows(orders) == replay(changes)


def test_a_retried_write_resumes_after_the_landed_chunks(orders: pc.Table) -> None:
    changes = day_stream(DAY)

    def write(batches: Any) -> Any:
        return write_partition(orders, batches, mode="upsert", partition={"dt": DAY}, commit_user="test:r1",
                               commit_every_rows=CHUNK)

    def failing() -> Iterator[pa.RecordBatch]:
        yield from changes.slice(0, 2 * CHUNK + 100).to_batches(max_chunksize=400)
        raise OSError("source went away")

    with pytest.raises(OSError, match="went away"):
        write(failing())
    assert len(orders.snapshots()) == 2  # two whole chunks landed, the third never committed

    retry = write(changes.to_batches(max_chunksize=400))

    def must_not_be_read() -> Iterator[pa.RecordBatch]:
        raise AssertionError("a write retried after its day landed must not read the source")
        yield  # pragma: no cover

    again = write(must_not_be_read())

    assert retry.reused and retry.commits == 3
    assert retry.rows_written == changes.num_rows - 2 * CHUNK
    assert again.reused and again.commits == 0 and again.snapshot_id == retry.snapshot_id
    assert [s.properties[CHUNK_PROPERTY] for s in orders.snapshots()] == ["0", "1", "2", "3", "4"]
    assert sorted_rows(orders) == replay(changes)


def test_the_orders_asset_commits_every_n_changes(warehouse: str, instance: dg.DagsterInstance) -> None:
    defs = orders_defs(warehouse, commit_every_rows=CHUNK)

    result = JobRunner(defs, instance)(ORDERS_JOB, DAY)

    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == ORDERS_KEY]
    metadata = event.step_materialization_data.materialization.metadata
    assert value_of(metadata[keys.INGEST_COMMITS]) == 5
    table = PaimonCatalogResource(warehouse=warehouse).table(ORDERS_TABLE)
    assert metadata[keys.INGEST_SNAPSHOT_ID].value == str(table.latest_snapshot().id) == "5"
    assert level0_per_bucket(table, DAY) == [5] * 4


def test_ensure_table_makes_an_existing_table_write_only(catalog: PaimonCatalogResource,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    old = catalog.ensure_table(ORDERS_TABLE, schema=ORDERS_SCHEMA, partition_keys=["dt"],
                               primary_keys=ORDERS_PRIMARY_KEY,
                               options={**ORDERS_OPTIONS, "write-only": "false", "bucket": "2"})
    assert not old.options.write_only

    table = catalog.ensure_table(ORDERS_TABLE, schema=ORDERS_SCHEMA, partition_keys=["dt"],
                                 primary_keys=ORDERS_PRIMARY_KEY, options=ORDERS_OPTIONS)

    assert table.options.write_only
    assert table.schema.options["bucket"] == "2"  # the layout of existing files is never changed
    assert "options changed by its declaration: write-only false -> true" in caplog.text
    assert "bucket='2' (wanted '4')" in caplog.text


# ---- the sensor -------------------------------------------------------------------------------


def test_sensor_skips_a_table_that_does_not_exist(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                  catalog: PaimonCatalogResource) -> None:
    tick = sensor_tick(project_defs, instance, catalog)

    assert not tick.run_requests
    assert "does not exist yet" in tick.skip_message


def test_sensor_skips_a_table_without_snapshots(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                catalog: PaimonCatalogResource, orders: pc.Table) -> None:
    tick = sensor_tick(project_defs, instance, catalog)

    assert not tick.run_requests
    assert f"{ORDERS_TABLE} has no snapshot yet" in tick.skip_message


def test_sensor_waits_for_the_trigger_then_requests_one_run_per_state(
        project_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
        orders: pc.Table, target: TableTarget) -> None:
    ingest(orders, DAY, run_id="r1", chunk=300)  # 4 commits: below the trigger (5)
    below = sensor_tick(project_defs, instance, catalog)
    assert not below.run_requests
    assert "below the threshold 5" in below.skip_message
    assert below.cursor == "4"

    orders.write(day_stream(OTHER_DAY))  # another partition: 1 level-0 file per bucket
    ingest(orders, DAY, run_id="r2", chunk=1_000)  # 2 more commits: 6 level-0 files per bucket in DAY
    tick = sensor_tick(project_defs, instance, catalog, cursor=below.cursor)

    [request] = tick.run_requests
    latest = orders.latest_snapshot().id
    assert request.run_key == run_key(ORDERS_TABLE, latest) == f"{ORDERS_TABLE}@{latest}"
    assert request.job_name == COMPACTION_JOB
    assert request.run_config == compaction_run_config(target, partitions=[f"dt={DAY}"])
    assert request.tags[COMPACTION_TAG] == ORDERS_TABLE
    assert request.tags[keys.TRIGGER_LEVEL0_TAG] == "6"
    assert request.tags[keys.TRIGGER_REASON_TAG] == "level0"
    # Bounded by what the run may rewrite: the bytes of DAY's buckets (small here: the minimum).
    day_bytes = sum(b.total_bytes for b in orders.lsm_state().buckets if b.partition == f"dt={DAY}")
    assert request.tags[keys.MAX_RUNTIME_TAG] == str(compaction_bound_s(day_bytes)) == str(COMPACTION_MIN_S)
    assert tick.cursor == str(latest)
    # The same state is evaluated once; evaluated again (cursor reset) it has the same run key,
    # so the daemon launches no second run for it.
    quiet = sensor_tick(project_defs, instance, catalog, cursor=tick.cursor).skip_message
    assert "unchanged since the last tick: at most" in quiet
    [again] = sensor_tick(project_defs, instance, catalog).run_requests
    assert again.run_key == request.run_key


def test_a_failed_compaction_is_requested_again_without_a_new_commit(
        project_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
        orders: pc.Table, run_job: JobRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingestion has stopped: the run requested for the last state fails (a data file unreadable
    for a moment); the next ticks request it again after the backoff, and level 0 gets back down."""
    ingest(orders, DAY, run_id="r1")
    [request] = sensor_tick(project_defs, instance, catalog).run_requests
    [split] = [s for s in orders.plan() if s.files][:1]
    data_file = Path(orders.paths.root) / f"dt={DAY}" / f"bucket-{split.bucket}" / split.files[0].file_name
    hidden = data_file.with_name(data_file.name + ".away")
    data_file.rename(hidden)
    failed = run_job(request.job_name, run_config=request.run_config, tags=dict(request.tags), raise_on_error=False)
    assert not failed.success
    hidden.rename(data_file)

    waiting = sensor_tick(project_defs, instance, catalog, cursor=str(orders.latest_snapshot().id))
    assert not waiting.run_requests
    assert f"its run {failed.run_id} failed; retry 1 of 5 in " in waiting.skip_message
    monkeypatch.setattr(retries, "RETRY_BASE_S", 0.0)
    [retry] = sensor_tick(project_defs, instance, catalog, cursor=str(orders.latest_snapshot().id)).run_requests
    assert retry.run_key == f"{request.run_key}/retry-1" and retry.tags[keys.RETRY_TAG] == "1"
    assert retry.run_config == request.run_config

    assert run_job(retry.job_name, run_config=retry.run_config, tags=dict(retry.tags)).success
    assert level0_per_bucket(orders, DAY) == [0] * 4
    # Compacted: nothing left to retry for that state (and the table has moved on).
    quiet = sensor_tick(project_defs, instance, catalog, cursor=str(orders.latest_snapshot().id))
    assert not quiet.run_requests and "unchanged since the last tick" in quiet.skip_message


def test_planned_steps_without_a_result_are_done_by_the_commit_step(orders: pc.Table, target: TableTarget) -> None:
    """A re-execution from failure of a killed run runs the fanned-out steps that failed, not those
    that never started: the commit step does those, so no planned partition is left out."""
    ingest(orders, DAY, run_id="r1")
    ingest(orders, OTHER_DAY, run_id="r2")
    state = orders.lsm_state()
    tasks = plan_tasks(state, target, full=False, level0_threshold=1)
    assert [t.index for t in tasks] == [0, 1] and len({t.partition for t in tasks}) == 2
    plan = CompactionPlan(target, False, state.snapshot_id, state.max_level0_files, state.debt_bytes, 2,
                          tasks=tuple(tasks))
    context = dg.build_op_context()
    first = run_task(context, orders, tasks[0])  # the one step the re-execution ran
    done = complete(context, orders, plan, [first])
    assert [d.task for d in done] == [0, 1] and all(d.snapshot_id is not None for d in done)
    assert level0_per_bucket(orders, DAY) == level0_per_bucket(orders, OTHER_DAY) == [0] * 4
    assert complete(context, orders, plan, done) == done  # nothing missing: nothing done


def test_sensor_skips_while_a_compaction_run_is_queued(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                       catalog: PaimonCatalogResource, orders: pc.Table,
                                                       target: TableTarget) -> None:
    ingest(orders, DAY, run_id="r1")
    queued = instance.create_run_for_job(project_defs.resolve_job_def(COMPACTION_JOB),
                                         run_config=compaction_run_config(target),
                                         tags=compaction_tags(ORDERS_TABLE),
                                         status=dg.DagsterRunStatus.NOT_STARTED)

    tick = sensor_tick(project_defs, instance, catalog)

    assert not tick.run_requests
    assert f"compaction run {queued.run_id} is not started and will see them" in tick.skip_message
    instance.report_run_canceled(queued)
    assert sensor_tick(project_defs, instance, catalog).run_requests


def test_following_tables_launch_early_and_are_not_launched_twice(
        project_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
        orders: pc.Table, target: TableTarget) -> None:
    spec = dataclasses.replace(target, follow_seconds=60)
    orders.write(day_stream(DAY))  # one level-0 file per bucket

    with dg.build_sensor_context(instance=instance, resources={"paimon_catalog": catalog}) as context:
        request = evaluate(context, catalog, spec)
    assert isinstance(request, dg.RunRequest)
    assert request.run_config["ops"]["plan_compaction"]["config"]["follow_seconds"] == 60
    assert request.tags[FOLLOW_TAG] == "60"
    assert level0_threshold(spec, orders) == 1
    assert level0_threshold(dataclasses.replace(spec, level0_threshold=3), orders) == 3

    running = instance.create_run_for_job(project_defs.resolve_job_def(COMPACTION_JOB),
                                          run_config=request.run_config, tags=request.tags,
                                          status=dg.DagsterRunStatus.STARTED)
    orders.write(day_stream(OTHER_DAY))
    with dg.build_sensor_context(instance=instance, resources={"paimon_catalog": catalog}) as context:
        skipped = evaluate(context, catalog, spec)
    assert isinstance(skipped, dg.SkipReason)
    assert f"compaction run {running.run_id} is following the table" in (skipped.skip_message or "")


# ---- the jobs ---------------------------------------------------------------------------------


def test_sensor_run_folds_level0_and_keeps_every_row(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                     catalog: PaimonCatalogResource, orders: pc.Table,
                                                     run_job: JobRunner) -> None:
    ingest(orders, DAY, run_id="r1")
    ingest(orders, OTHER_DAY, run_id="r2")
    before = sorted_rows(orders)
    [request] = sensor_tick(project_defs, instance, catalog).run_requests

    result = compact(run_job, request.run_config, tags=dict(request.tags))

    assert result.success
    report = result.output_for_node("report_compaction")
    assert report["partitions_planned"] == report["partitions_compacted"] == 2
    assert report["max_level0_files_before"] == 5 and report["max_level0_files_after"] == 0
    assert report["files_in"] == 2 * 4 * 5 and report["files_out"] == 2 * 4
    state = orders.lsm_state()
    assert state.max_level0_files == 0 and state.debt_bytes == 0
    assert sorted_rows(orders) == before
    compacts = [s for s in orders.snapshots() if s.commit_kind == "COMPACT"]
    assert [s.id for s in compacts] == report["snapshots"]
    assert {s.commit_user for s in compacts} == {f"dagster-{result.run_id}"}
    # One observation on the asset (not on a partition): what each bucket's compaction did, the
    # totals, and the table's shape after as plottable numbers.
    shape = shape_after(result)
    assert (shape.asset_key, shape.partition) == (ORDERS_KEY, None)
    assert compacted_partitions(result) == [f"dt={OTHER_DAY}", f"dt={DAY}"]
    buckets = shape.metadata[keys.COMPACTION_BUCKETS].value
    day = [r.data for r in buckets.records if r.data["partition"] == f"dt={DAY}"]
    assert [r["files per level before"] for r in day] == ["5/0/0/0/0/0"] * 4
    assert [r["files per level after"] for r in day] == ["0/0/0/0/0/1"] * 4
    assert value_of(shape.metadata[keys.COMPACTION_LEVEL0_FILES_BEFORE]) == sum(
        int(r.data["files per level before"].split("/")[0]) for r in buckets.records)
    assert value_of(shape.metadata[keys.COMPACTION_LEVEL0_FILES_AFTER]) == 0
    assert shape.metadata[keys.COMPACTION_SNAPSHOT_ID].value == ", ".join(map(str, report["snapshots"]))
    assert shape.metadata[keys.LSM_MAX_LEVEL0_FILES].value == 0
    assert shape.metadata[keys.LSM_SNAPSHOT_ID].value == str(orders.latest_snapshot().id)
    assert shape.metadata[keys.LSM_FILES].value == 2 * 4
    # The LSM checks are recorded on the asset as of after the compaction.
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {LEVEL0_CHECK: True, SMALL_FILES_CHECK: True}
    assert {e.asset_key for e in result.get_asset_check_evaluations()} == {ORDERS_KEY}
    history = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(ORDERS_KEY, LEVEL0_CHECK), limit=1)
    assert history[0].run_id == result.run_id


def test_configured_partitions_limit_the_run(orders: pc.Table, target: TableTarget, run_job: JobRunner) -> None:
    ingest(orders, DAY, run_id="r1")
    ingest(orders, OTHER_DAY, run_id="r2")

    result = compact(run_job, compaction_run_config(target, partitions=[f"dt={OTHER_DAY}"]))

    assert result.output_for_node("report_compaction")["partitions_compacted"] == 1
    assert level0_per_bucket(orders, DAY) == [5] * 4
    assert level0_per_bucket(orders, OTHER_DAY) == [0] * 4


def test_level0_threshold_limits_the_buckets(orders: pc.Table, target: TableTarget, run_job: JobRunner) -> None:
    ingest(orders, DAY, run_id="r1")  # 5 level-0 files per bucket: the picker has work everywhere

    result = compact(run_job, compaction_run_config(target, level0_threshold=6))

    assert result.success
    assert result.output_for_node("report_compaction")["partitions_planned"] == 0
    assert level0_per_bucket(orders, DAY) == [5] * 4


def test_a_run_with_nothing_to_do_succeeds(orders: pc.Table, target: TableTarget, run_job: JobRunner) -> None:
    orders.write(day_stream(DAY))

    result = compact(run_job, compaction_run_config(target))

    assert result.success
    report = result.output_for_node("report_compaction")
    assert report["partitions_planned"] == report["partitions_compacted"] == 0
    assert [s.commit_kind for s in orders.snapshots()] == ["APPEND"]
    assert not observations(result)


def test_a_run_launched_without_tags_carries_the_tables_limit(instance: dg.DagsterInstance, orders: pc.Table,
                                                               target: TableTarget, run_job: JobRunner) -> None:
    """A bare launch (the launchpad, ``dagster job launch``) still holds the one-compaction limit."""
    orders.write(day_stream(DAY))

    result = compact(run_job, compaction_run_config(target), tags={})

    assert result.success and result.dagster_run.tags[COMPACTION_TAG] == ORDERS_TABLE


def test_full_compaction_leaves_one_file_per_bucket_at_the_max_level(
        orders: pc.Table, target: TableTarget, run_job: JobRunner) -> None:
    ingest(orders, DAY, run_id="r1")
    compact(run_job, compaction_run_config(target))
    ingest(orders, DAY, run_id="r2", chunk=600)  # 2 level-0 files on top of the max-level run
    before = sorted_rows(orders)

    result = compact(run_job, full_compaction_run_config(target), job=FULL_COMPACTION_JOB)

    assert result.success and result.output_for_node("report_compaction")["full"]
    assert [b.level_files for b in orders.lsm_state().buckets] == [(0, 0, 0, 0, 0, 1)] * 4
    assert orders.snapshots()[-1].properties["paimon-dagster.compaction"] == "full"
    assert sorted_rows(orders) == before
    assert compacted_partitions(result) == [f"dt={DAY}"]
    # Already one run at the max level: a second full compaction has nothing to do.
    again = compact(run_job, full_compaction_run_config(target), job=FULL_COMPACTION_JOB)
    assert again.output_for_node("report_compaction")["partitions_planned"] == 0
    # The level-0 check the run recorded names the last compaction: its COMPACT snapshot and time.
    [recorded] = [e for e in result.get_asset_check_evaluations() if e.check_name == names.LEVEL0_CHECK]
    compacted = orders.snapshots()[-1]
    assert recorded.metadata["last_compaction_snapshot"].value == str(compacted.id)
    assert recorded.metadata["last_compaction"].value == compacted.time_millis / 1000
    assert f"last compaction: snapshot {compacted.id} at " in (recorded.description or "")


def test_a_write_counts_the_whole_table_from_compacted_manifests_and_merged_reads(
        orders: pc.Table, target: TableTarget, run_job: JobRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    ingest(orders, OTHER_DAY, run_id="r1")
    compact(run_job, full_compaction_run_config(target), job=FULL_COMPACTION_JOB)  # OTHER_DAY: exact manifests
    ingest(orders, DAY, run_id="r2")
    latest = orders.latest_snapshot()
    assert latest is not None
    day_rows = orders.read(filter=[("dt", "=", DAY)]).num_rows

    metadata = write_metadata(orders, snapshot_id=latest.id, partition={"dt": DAY}, rows_written=1)

    assert metadata["dagster/partition_row_count"] == day_rows
    assert metadata["dagster/row_count"] == orders.read().num_rows > day_rows
    assert metadata[keys.INGEST_ROW_COUNT_SOURCE] == ("partition: merged read; table: 1 other partition(s) from "
                                                      "manifests, 0 by a merged read")
    # Another day still in level 0 is merged to count it; past the budget the table is not counted.
    ingest(orders, "2024-01-05", run_id="r3")
    latest = orders.latest_snapshot()
    assert latest is not None
    merged = write_metadata(orders, snapshot_id=latest.id, partition={"dt": DAY}, rows_written=1)
    assert merged["dagster/row_count"] == orders.read().num_rows
    assert merged[keys.INGEST_ROW_COUNT_SOURCE].endswith(
        "table: 1 other partition(s) from manifests, 1 by a merged read")
    monkeypatch.setattr(metadata_module, "TABLE_COUNT_MERGE_BUDGET", 10)
    skipped = write_metadata(orders, snapshot_id=latest.id, partition={"dt": DAY}, rows_written=1)
    assert "dagster/row_count" not in skipped and skipped["dagster/partition_row_count"] == day_rows
    assert "table: not counted: 1 partition(s) not fully compacted hold " in skipped[keys.INGEST_ROW_COUNT_SOURCE]


def test_append_table_small_files_are_compacted(project_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                catalog: PaimonCatalogResource, run_job: JobRunner) -> None:
    events = catalog.ensure_table(EVENTS_TABLE, schema=EVENTS_SCHEMA, partition_keys=["dt"], options=EVENTS_OPTIONS)
    day = pa.Table.from_batches(data.events(DAY, rows=2_500))
    for part in range(5):  # late deliveries appended to the day: one small file each
        events.write(day.slice(part * 500, 500))
    before = events.read().sort_by([("ts", "ascending"), ("message", "ascending")])

    [request] = sensor_tick(project_defs, instance, catalog, name=names.compaction_sensor(EVENTS_TABLE)).run_requests
    result = run_job(request.job_name, run_config=request.run_config, tags=dict(request.tags))

    assert result.success and request.job_name == names.compaction_job(EVENTS_TABLE)
    assert [b.files for b in events.lsm_state().buckets] == [1]
    assert events.read().sort_by([("ts", "ascending"), ("message", "ascending")]).equals(before)
    assert shape_after(result).asset_key == EVENTS_KEY and compacted_partitions(result) == [f"dt={DAY}"]


# ---- which table a run works on -----------------------------------------------------------------


def test_a_launch_with_the_launchpads_config_knows_its_table(orders: pc.Table, run_job: JobRunner,
                                                             project_defs: dg.Definitions) -> None:
    """The launchpad opens with only what a person chooses: the job carries its table (asset,
    partition mapping, fan-out) itself, so its observations land on the table's partitions."""
    opened = project_defs.resolve_job_def(COMPACTION_JOB).run_config
    assert opened == {"ops": {"plan_compaction": {"config": {"partitions": [], "full": False}}}}
    ingest(orders, DAY, run_id="r1")

    launched = compact(run_job, dict(opened), tags={})  # as the UI launches it: no tags of the sensor's

    assert launched.success and level0_per_bucket(orders, DAY) == [0] * 4
    assert shape_after(launched).asset_key == ORDERS_KEY and compacted_partitions(launched) == [f"dt={DAY}"]
    assert launched.dagster_run.tags[COMPACTION_TAG] == ORDERS_TABLE  # the job's own tag: one at a time
    assert {e.asset_key for e in launched.get_asset_check_evaluations()} == {ORDERS_KEY}


@pytest.mark.parametrize(("job", "op"), [(COMPACTION_JOB, "plan_compaction"),
                                         (FULL_COMPACTION_JOB, "plan_full_compaction")])
@pytest.mark.parametrize("table", ["sales.missing", "nodb.orders", "orders", "sales.bad name!"])
def test_a_run_naming_another_table_is_refused_in_one_line(catalog: PaimonCatalogResource, orders: pc.Table,
                                                           run_job: JobRunner, job: str, op: str, table: str) -> None:
    """A table's job compacts that table only: another in its config would escape both tables'
    one-compaction limit."""
    config = {"ops": {op: {"config": {"table": table, "asset_key": list(ORDERS_KEY.path)}}}}

    result = compact(run_job, config, job=job, tags={}, raise_on_error=False)

    assert f"{job} works on {ORDERS_TABLE}, but its run config names {table}" in one_line_failure(result)
    assert result.dagster_run.tags[COMPACTION_TAG] == ORDERS_TABLE  # the job's own tag, whoever launched it
    assert orders.snapshots() == []


@pytest.mark.parametrize("full", [False, True])
def test_a_table_not_created_yet_fails_the_run_in_one_line(target: TableTarget, run_job: JobRunner,
                                                           full: bool) -> None:
    job = FULL_COMPACTION_JOB if full else COMPACTION_JOB
    config = full_compaction_run_config(target) if full else compaction_run_config(target)

    result = compact(run_job, config, job=job, raise_on_error=False)

    assert f"Paimon table {ORDERS_TABLE}" in one_line_failure(result)


# ---- a table declared with a spec of its own --------------------------------------------------


def customer_rows(context: dg.AssetExecutionContext) -> pa.Table:
    """A few customers of the partition's day (the Paimon column day is filled by the write)."""
    return pa.table({"id": pa.array(range(1, 21), pa.int64()),
                     "name": [f"customer {i} of {context.partition_key}" for i in range(1, 21)]})


def customers_spec(*, options: dict[str, str] | None = None, compaction: Compaction | None = None
                   ) -> PaimonTableSpec:
    """crm.customers: compacted at 3 level-0 files (its own compaction trigger) unless told otherwise."""
    return PaimonTableSpec(
        table=CUSTOMERS_TABLE, asset_key=tuple(CUSTOMERS_KEY.path),
        columns=(Column("day", "STRING NOT NULL"), Column("id", "BIGINT NOT NULL"), Column("name", "STRING")),
        primary_key=("day", "id"), partition_keys=("day",),
        options=options if options is not None else {"bucket": "2", "num-sorted-run.compaction-trigger": "3"},
        partitions=Partitions(kind="daily", start="2024-01-01", end="2024-01-08", mapping={"day": "%Y%m%d"}),
        ingestion=Ingestion(mode="upsert", function=customer_rows),
        compaction=compaction or Compaction())


def three_runs_of_a_day(defs: dg.Definitions, instance: dg.DagsterInstance) -> JobRunner:
    """Three ingestion runs of DAY (three level-0 files per bucket) and one of OTHER_DAY."""
    runner = JobRunner(defs, instance)
    for day in (DAY, DAY, DAY, OTHER_DAY):
        assert runner(names.ingestion_job("crm.customers"), day).success
    return runner


def test_the_observation_lands_on_a_three_part_key_naming_the_paimon_partition(
        warehouse: str, instance: dg.DagsterInstance) -> None:
    defs = paimon_definitions([customers_spec()], warehouse=warehouse)
    runner = three_runs_of_a_day(defs, instance)
    table = PaimonCatalogResource(warehouse=warehouse).table(CUSTOMERS_TABLE)
    assert sorted(b.partition for b in table.lsm_state().buckets if b.level0_files == 3) == ["day=20240103"] * 2
    target = declared_targets(defs)[CUSTOMERS_TABLE]
    assert target.asset_key == CUSTOMERS_KEY and target.partition_key({"day": "20240103"}) == DAY

    tick = sensor_tick(defs, instance, defs.resources["paimon_catalog"], name=names.compaction_sensor("crm.customers"))

    [request] = tick.run_requests
    assert request.run_config == compaction_run_config(target, partitions=["day=20240103"])
    result = runner(request.job_name, run_config=request.run_config, tags=dict(request.tags))
    assert result.success
    observed = shape_after(result)
    assert (observed.asset_key, observed.partition) == (CUSTOMERS_KEY, None)
    assert compacted_partitions(result) == ["day=20240103"]
    assert {(e.asset_key, e.check_name) for e in result.get_asset_check_evaluations()} == {
        (CUSTOMERS_KEY, LEVEL0_CHECK), (CUSTOMERS_KEY, SMALL_FILES_CHECK)}
    # Stored on the asset, not on the partition: the partition's detail shows its writes only.
    stored = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=CUSTOMERS_KEY, asset_partitions=[DAY]),
                                         limit=10).records
    assert stored == []
    assert [r.run_id for r in instance.fetch_observations(CUSTOMERS_KEY, limit=10).records] == [result.run_id]
    assert table.read().num_rows == 40


def test_a_spec_threshold_below_the_trigger_is_refused_when_it_loads() -> None:
    """Runs launched below Paimon's trigger would find nothing the picker compacts."""
    with pytest.raises(TableDefinitionError, match="num-sorted-run.compaction-trigger to 3"):
        customers_spec(options={"bucket": "2"}, compaction=Compaction(level0_threshold=3))


def test_a_spec_threshold_at_the_trigger_gets_compacted(warehouse: str, instance: dg.DagsterInstance) -> None:
    spec = customers_spec(options={"bucket": "2", "num-sorted-run.compaction-trigger": "3"},
                          compaction=Compaction(level0_threshold=3))
    defs = paimon_definitions([spec], warehouse=warehouse)
    runner = three_runs_of_a_day(defs, instance)
    [request] = sensor_tick(defs, instance, defs.resources["paimon_catalog"],
                            name=names.compaction_sensor("crm.customers")).run_requests

    result = runner(request.job_name, run_config=request.run_config, tags=dict(request.tags))

    assert result.output_for_node("report_compaction")["partitions_compacted"] == 1


# ---- following --------------------------------------------------------------------------------




def test_a_following_run_keeps_level0_below_the_stop_trigger_while_a_writer_commits(
        catalog: PaimonCatalogResource, orders: pc.Table, target: TableTarget, run_job: JobRunner) -> None:
    """A writer commits every 0.3 s for 6 s while one following run compacts; level 0 stays bounded."""
    changes = day_stream(DAY, orders=1_000)
    writer_table = catalog.table(ORDERS_TABLE)
    seen: list[int] = []
    commits = 20

    def write() -> None:
        for i in range(commits):
            writer_table.write(changes.slice(i * 150, 150))
            seen.append(writer_table.lsm_state().max_level0_files)
            time.sleep(0.3)  # the writer's pace, not a wait

    writer = threading.Thread(target=write)
    writer.start()
    try:
        config = compaction_run_config(target, follow_seconds=30)
        config["ops"]["plan_compaction"]["config"]["idle_seconds"] = 2
        result = compact(run_job, config)
    finally:
        writer.join()

    summary = result.output_for_node("follow_compaction")
    assert result.success and summary["stopped_by"] == "idle"
    assert summary["compactions"] >= 2
    assert max(seen) < orders.lsm_state().stop_trigger
    assert summary["max_level0_files_seen"] < orders.lsm_state().stop_trigger
    assert len([s for s in orders.snapshots() if s.commit_kind == "APPEND"]) == commits
    assert sorted_rows(orders) == replay(changes.slice(0, commits * 150))


def test_follow_stops_at_its_deadline(instance: dg.DagsterInstance, orders: pc.Table, target: TableTarget) -> None:
    plan = CompactionPlan(target, full=False, snapshot_id=None, max_level0_files=0, debt_bytes=0,
                          partitions=0, follow_seconds=1, idle_seconds=60)
    context = dg.build_op_context(instance=instance)

    started = time.monotonic()
    summary, compacted = follow(context, orders, plan, [], poll_seconds=0.1)

    assert summary["stopped_by"] == "deadline" and summary["compactions"] == 0 and compacted == []
    assert 1.0 <= time.monotonic() - started < 5


# ---- checks and helpers -----------------------------------------------------------------------


def test_level0_check_warns_at_the_stop_trigger_and_errors_at_twice_it(orders: pc.Table,
                                                                       target: TableTarget) -> None:
    verdicts = []
    for run in range(4):  # 5, 10, 15, 20 level-0 files per bucket
        ingest(orders, DAY, run_id=f"r{run}")
        level0 = check_outcomes(orders, target)[0]
        verdicts.append((level0.passed, level0.severity, level0.metadata["max_level0_files"]))

    assert verdicts == [(True, dg.AssetCheckSeverity.WARN, 5), (False, dg.AssetCheckSeverity.WARN, 10),
                        (False, dg.AssetCheckSeverity.WARN, 15), (False, dg.AssetCheckSeverity.ERROR, 20)]


def test_the_checks_run_with_the_ingestion(warehouse: str, instance: dg.DagsterInstance) -> None:
    defs = orders_defs(warehouse, commit_every_rows=120)  # 10 commits: at the stop-trigger

    result = JobRunner(defs, instance)(ORDERS_JOB, DAY)

    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks[names.DATA_CHECK].passed
    assert not checks[LEVEL0_CHECK].passed
    assert checks[LEVEL0_CHECK].severity == dg.AssetCheckSeverity.WARN
    assert checks[LEVEL0_CHECK].metadata["max_level0_files"].value == 10
    assert checks[SMALL_FILES_CHECK].passed
    # The orphan check lists every directory of the table: the cleanup job records it instead.
    assert ORPHANS_CHECK not in checks and RETENTION_CHECK in checks








def test_partition_paths_become_specs(orders: pc.Table) -> None:
    assert partition_spec(orders, "dt=2024-01-03") == {"dt": "2024-01-03"}
    assert partition_spec(orders, "dt=a%2Fb%3Dc") == {"dt": "a/b=c"}
    assert partition_spec(orders, "dt=__DEFAULT_PARTITION__") == {"dt": None}
    assert partition_spec(orders, "") == {}
    with pytest.raises(ValueError, match="not a partition path"):
        partition_spec(orders, "2024-01-03")


def test_environment_settings(monkeypatch: pytest.MonkeyPatch, warehouse: str) -> None:
    monkeypatch.delenv(SENSOR_INTERVAL_ENV, raising=False)
    monkeypatch.delenv(FOLLOW_ENV, raising=False)
    assert sensor_interval_seconds() == 30 and follow_seconds() == 0
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "2")
    monkeypatch.setenv(FOLLOW_ENV, "90")
    assert sensor_interval_seconds() == 2 and follow_seconds() == 90
    assert sensor_interval_seconds(7) == 7 and follow_seconds(0) == 0  # what a spec says wins
    # Read when the definitions load: the project's sensors (whose specs say neither) take them.
    loaded = load(warehouse)
    assert loaded.resolve_sensor_def(SENSOR).minimum_interval_seconds == 2
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "0")
    with pytest.raises(dg.DagsterInvariantViolationError, match="at least 1"):
        sensor_interval_seconds()
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "soon")
    with pytest.raises(dg.DagsterInvariantViolationError, match="whole number"):
        sensor_interval_seconds()


def test_definitions_wire_sensors_jobs_and_checks(monkeypatch: pytest.MonkeyPatch, warehouse: str) -> None:
    monkeypatch.delenv(SENSOR_INTERVAL_ENV, raising=False)
    defs = load(warehouse)
    graph = defs.resolve_asset_graph()
    for table, key in ((ORDERS_TABLE, ORDERS_KEY), (EVENTS_TABLE, EVENTS_KEY)):
        sensor = defs.resolve_sensor_def(names.compaction_sensor(table))
        assert [t.job_name for t in sensor.targets] == [names.compaction_job(table), names.full_compaction_job(table)]
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
        assert sensor.minimum_interval_seconds == 30
        assert {LEVEL0_CHECK, SMALL_FILES_CHECK} <= {c.name for c in graph.get_check_keys_for_assets({key})}
    for name in (COMPACTION_JOB, FULL_COMPACTION_JOB):
        job = defs.resolve_job_def(name)
        assert job.executor_def is dg.in_process_executor
        # Every run of it, however launched: the table's limit, and a bound on how long it may run.
        assert job.tags == {COMPACTION_TAG: ORDERS_TABLE, keys.MAX_RUNTIME_TAG: str(COMPACTION_DEFAULT_S)}
