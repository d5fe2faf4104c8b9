"""Sensor-driven compaction in process: chunked write-only ingestion, the sensors, the jobs, the checks.

Real Dagster runs (``execute_in_process`` into ``instance_for_test``) and real tables in tmp_path.
Expected table contents come from a plain-Python replay of the change stream, or from a read
taken before compacting; never from the compaction code itself.

shop.orders here is created without its changelog options, so the sensor takes the minor
compaction path; the full-compaction changelog path is in test_changelog.py.
"""

import threading
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from cdc_truth import replay

import paimon_core as pc
from paimon_core.compaction.state import BucketState, LsmState
from pipelines.compaction import (
    COMPACTION_JOB,
    FULL_COMPACTION_JOB,
    CompactionPlan,
    FollowState,
    compaction_run_config,
    compaction_tags,
    follow,
    mapping_key,
    needs_work,
    plan_tasks,
)
from pipelines.definitions import build_resources, defs
from pipelines.log_events import SCHEMA as LOG_SCHEMA
from pipelines.log_events import TABLE as LOG_TABLE
from pipelines.log_events import TABLE_OPTIONS as LOG_OPTIONS
from pipelines.log_events import synthetic_batches as log_batches
from pipelines.lsm import (
    COMPACTION_TAG,
    FOLLOW_ENV,
    FOLLOW_TAG,
    LEVEL0_CHECK,
    SENSOR_INTERVAL_ENV,
    SMALL_FILES_CHECK,
    CompactedTable,
    check_outcomes,
    follow_seconds,
    level0_threshold,
    partition_spec,
    sensor_interval_seconds,
    small_files_outcome,
)
from pipelines.order_assets import (
    CHUNK_PROPERTY,
    FINAL_CHUNK_PROPERTY,
    ORDERS_KEY,
    apply_day,
    chunk_user,
    chunked,
)
from pipelines.orders import (
    ORDERS_CHANGELOG_OPTIONS,
    ORDERS_OPTIONS,
    ORDERS_PRIMARY_KEY,
    ORDERS_SCHEMA,
    ORDERS_TABLE,
    synthetic_cdc,
)
from pipelines.sensors import evaluate, run_key
from resources import OrderEventSource, PaimonCatalogResource

DAY = "2024-01-03"
OTHER_DAY = "2024-01-04"
ORDERS = 300  # about 1,100 changes a day
CHUNK = 250  # 5 commits a day: the default compaction trigger
SENSOR = "compact_shop_orders_sensor"
# shop.orders as it was before it produced a changelog: minor compactions only.
MINOR_OPTIONS = {key: value for key, value in ORDERS_OPTIONS.items() if key not in ORDERS_CHANGELOG_OPTIONS}


# ---- helpers --------------------------------------------------------------------------------


@pytest.fixture
def catalog(resources: dict[str, Any]) -> PaimonCatalogResource:
    return resources["catalog"]


@pytest.fixture
def orders(catalog: PaimonCatalogResource) -> pc.Table:
    return catalog.ensure_table(ORDERS_TABLE, schema=ORDERS_SCHEMA, partition_keys=["dt"],
                                primary_keys=ORDERS_PRIMARY_KEY, options=MINOR_OPTIONS)


@pytest.fixture
def job_defs(resources: dict[str, Any]) -> dg.Definitions:
    """The code location's definitions on the test warehouse."""
    return dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=defs.jobs,
                          sensors=defs.sensors, resources=resources)


def day_stream(day: str, orders: int = ORDERS) -> pa.Table:
    return synthetic_cdc(day, orders=orders)


def ingest(table: pc.Table, day: str, *, run_id: str, chunk: int = CHUNK) -> None:
    apply_day(table, day_stream(day).to_batches(max_chunksize=400), day=day, run_id=run_id,
              commit_every_rows=chunk)


def sorted_rows(table: pc.Table) -> list[dict[str, Any]]:
    return table.read().sort_by([("dt", "ascending"), ("order_id", "ascending")]).to_pylist()


def sensor_tick(job_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
                name: str = SENSOR, cursor: str | None = None) -> Any:
    sensor = job_defs.resolve_sensor_def(name)
    context = dg.build_sensor_context(instance=instance, definitions=job_defs, cursor=cursor,
                                      resources={"catalog": catalog})
    return sensor.evaluate_tick(context)


def run_job(job_defs: dg.Definitions, instance: dg.DagsterInstance, run_config: dict[str, Any], *,
            job: str = COMPACTION_JOB, tags: dict[str, str] | None = None) -> dg.ExecuteInProcessResult:
    return job_defs.resolve_job_def(job).execute_in_process(run_config=run_config, instance=instance,
                                                           tags=tags if tags is not None else
                                                           compaction_tags(ORDERS_TABLE))


def level0_per_bucket(table: pc.Table, day: str) -> list[int]:
    return [b.level0_files for b in table.lsm_state(partitions={"dt": day}).buckets]


# ---- chunked write-only ingestion -------------------------------------------------------------


def test_chunks_cut_the_stream_at_fixed_row_positions() -> None:
    batches = [pa.record_batch({"x": list(range(n))}) for n in (3, 7, 1, 9)]

    pieces = list(chunked(batches, 5))

    assert [(chunk, piece.num_rows) for chunk, piece in pieces] == [
        (0, 3), (0, 2), (1, 5), (2, 1), (2, 4), (3, 5)]
    assert [c for c, _ in chunked(batches, 0)] == [0, 0, 0, 0]


def test_a_day_lands_as_one_commit_per_chunk(orders: pc.Table) -> None:
    changes = day_stream(DAY)

    applied = apply_day(orders, changes.to_batches(max_chunksize=400), day=DAY, run_id="r1",
                        commit_every_rows=CHUNK)

    chunks = -(-changes.num_rows // CHUNK)
    snapshots = orders.snapshots()
    assert applied.commits == len(snapshots) == chunks == 5
    assert applied.receipt.rows_written == changes.num_rows == sum(applied.kinds.values())
    assert [s.properties[CHUNK_PROPERTY] for s in snapshots] == [str(i) for i in range(chunks)]
    assert [s.properties[FINAL_CHUNK_PROPERTY] for s in snapshots] == ["false"] * (chunks - 1) + ["true"]
    assert [s.commit_user for s in snapshots] == [chunk_user("r1", i) for i in range(chunks)]
    assert {s.commit_kind for s in snapshots} == {"APPEND"}
    # Write-only: nobody compacted, every commit left a level-0 file in every bucket.
    assert level0_per_bucket(orders, DAY) == [chunks] * 4
    assert sorted_rows(orders) == replay(changes)


def test_a_retried_step_resumes_after_the_landed_chunks(orders: pc.Table) -> None:
    changes = day_stream(DAY)

    def failing() -> Iterator[pa.RecordBatch]:
        yield from changes.slice(0, 2 * CHUNK + 100).to_batches(max_chunksize=400)
        raise OSError("source went away")

    with pytest.raises(OSError, match="went away"):
        apply_day(orders, failing(), day=DAY, run_id="r1", commit_every_rows=CHUNK)
    assert len(orders.snapshots()) == 2  # two whole chunks landed, the third never committed

    retry = apply_day(orders, changes.to_batches(max_chunksize=400), day=DAY, run_id="r1",
                      commit_every_rows=CHUNK)

    def must_not_be_read() -> Iterator[pa.RecordBatch]:
        raise AssertionError("a step retried after its day landed must not read the source")
        yield  # pragma: no cover

    again = apply_day(orders, must_not_be_read(), day=DAY, run_id="r1", commit_every_rows=CHUNK)

    assert retry.reused and retry.commits == 3
    assert retry.receipt.rows_written == changes.num_rows - 2 * CHUNK
    assert again.reused and again.commits == 0 and again.receipt.snapshot_id == retry.receipt.snapshot_id
    assert [s.properties[CHUNK_PROPERTY] for s in orders.snapshots()] == ["0", "1", "2", "3", "4"]
    assert sorted_rows(orders) == replay(changes)


def test_the_orders_asset_commits_every_n_changes(materialize_orders: Any, warehouse: str) -> None:
    resources = build_resources(warehouse=warehouse, order_source=OrderEventSource(
        orders_per_partition=ORDERS, commit_every_rows=CHUNK))

    result = materialize_orders(DAY, resources=resources)

    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == ORDERS_KEY]
    metadata = event.step_materialization_data.materialization.metadata
    assert metadata["commits"].value == 5
    table = resources["catalog"].table(ORDERS_TABLE)
    assert metadata["snapshot_id"].value == table.latest_snapshot().id == 5
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
    assert "write-only=true (was write-only=false)" in caplog.text
    assert "bucket='2' (wanted '4')" in caplog.text


# ---- the sensor -------------------------------------------------------------------------------


def test_sensor_skips_a_table_that_does_not_exist(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                  catalog: PaimonCatalogResource) -> None:
    tick = sensor_tick(job_defs, instance, catalog)

    assert not tick.run_requests
    assert "does not exist yet" in tick.skip_message


def test_sensor_waits_for_the_trigger_then_requests_one_run_per_state(
        job_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
        orders: pc.Table) -> None:
    ingest(orders, DAY, run_id="r1", chunk=300)  # 4 commits: below the trigger (5)
    below = sensor_tick(job_defs, instance, catalog)
    assert not below.run_requests
    assert "below the threshold 5" in below.skip_message
    assert below.cursor == "4"

    orders.write(day_stream(OTHER_DAY))  # another partition: 1 level-0 file per bucket
    ingest(orders, DAY, run_id="r2", chunk=1_000)  # 2 more commits: 6 level-0 files per bucket in DAY
    tick = sensor_tick(job_defs, instance, catalog, cursor=below.cursor)

    [request] = tick.run_requests
    latest = orders.latest_snapshot().id
    assert request.run_key == run_key(ORDERS_TABLE, latest) == f"shop.orders@{latest}"
    assert request.run_config == compaction_run_config(ORDERS_TABLE, partitions=[f"dt={DAY}"])
    assert request.tags[COMPACTION_TAG] == ORDERS_TABLE
    assert request.tags["paimon/trigger-level0"] == "6"
    assert tick.cursor == str(latest)
    # The same state is evaluated once; evaluated again (cursor reset) it has the same run key,
    # so the daemon launches no second run for it.
    assert "evaluated already" in sensor_tick(job_defs, instance, catalog, cursor=tick.cursor).skip_message
    [again] = sensor_tick(job_defs, instance, catalog).run_requests
    assert again.run_key == request.run_key


def test_sensor_skips_while_a_compaction_run_is_queued(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                       catalog: PaimonCatalogResource, orders: pc.Table) -> None:
    ingest(orders, DAY, run_id="r1")
    queued = instance.create_run_for_job(job_defs.resolve_job_def(COMPACTION_JOB),
                                         run_config=compaction_run_config(ORDERS_TABLE),
                                         tags=compaction_tags(ORDERS_TABLE),
                                         status=dg.DagsterRunStatus.NOT_STARTED)

    tick = sensor_tick(job_defs, instance, catalog)

    assert not tick.run_requests
    assert f"compaction run {queued.run_id} is not started and will see them" in tick.skip_message
    instance.report_run_canceled(queued)
    assert sensor_tick(job_defs, instance, catalog).run_requests


def test_following_tables_launch_early_and_are_not_launched_twice(
        job_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
        orders: pc.Table) -> None:
    spec = CompactedTable(ORDERS_TABLE, ORDERS_KEY, follow_seconds=60)
    orders.write(day_stream(DAY))  # one level-0 file per bucket

    with dg.build_sensor_context(instance=instance, resources={"catalog": catalog}) as context:
        request = evaluate(context, catalog, spec)
    assert isinstance(request, dg.RunRequest)
    assert request.run_config["ops"]["plan_compaction"]["config"]["follow_seconds"] == 60
    assert request.tags[FOLLOW_TAG] == "60"
    assert level0_threshold(spec, orders) == 1

    running = instance.create_run_for_job(job_defs.resolve_job_def(COMPACTION_JOB),
                                          run_config=request.run_config, tags=request.tags,
                                          status=dg.DagsterRunStatus.STARTED)
    orders.write(day_stream(OTHER_DAY))
    with dg.build_sensor_context(instance=instance, resources={"catalog": catalog}) as context:
        skipped = evaluate(context, catalog, spec)
    assert isinstance(skipped, dg.SkipReason)
    assert f"compaction run {running.run_id} is following the table" in (skipped.skip_message or "")


# ---- the jobs ---------------------------------------------------------------------------------


def test_sensor_run_folds_level0_and_keeps_every_row(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                     catalog: PaimonCatalogResource, orders: pc.Table) -> None:
    ingest(orders, DAY, run_id="r1")
    ingest(orders, OTHER_DAY, run_id="r2")
    before = sorted_rows(orders)
    [request] = sensor_tick(job_defs, instance, catalog).run_requests

    result = run_job(job_defs, instance, request.run_config, tags=dict(request.tags))

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
    # Each partition's compaction is observed on the asset's partition, with levels before/after.
    observations = [e.event_specific_data.asset_observation for e in result.all_events
                    if e.event_type_value == "ASSET_OBSERVATION"]
    assert sorted(o.partition for o in observations) == [DAY, OTHER_DAY]
    assert {o.asset_key for o in observations} == {ORDERS_KEY}
    [buckets] = [o.metadata["buckets"].value for o in observations if o.partition == DAY]
    assert [r.data["files per level before"] for r in buckets.records] == ["5/0/0/0/0/0"] * 4
    assert [r.data["files per level after"] for r in buckets.records] == ["0/0/0/0/0/1"] * 4
    # The LSM checks are recorded on the asset as of after the compaction.
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {LEVEL0_CHECK: True, SMALL_FILES_CHECK: True}
    history = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(ORDERS_KEY, LEVEL0_CHECK), limit=1)
    assert history[0].run_id == result.run_id


def test_configured_partitions_limit_the_run(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                             orders: pc.Table) -> None:
    ingest(orders, DAY, run_id="r1")
    ingest(orders, OTHER_DAY, run_id="r2")

    result = run_job(job_defs, instance, compaction_run_config(ORDERS_TABLE, partitions=[f"dt={OTHER_DAY}"]))

    assert result.output_for_node("report_compaction")["partitions_compacted"] == 1
    assert level0_per_bucket(orders, DAY) == [5] * 4
    assert level0_per_bucket(orders, OTHER_DAY) == [0] * 4


def test_level0_threshold_limits_the_buckets(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                             orders: pc.Table) -> None:
    ingest(orders, DAY, run_id="r1")  # 5 level-0 files per bucket: the picker has work everywhere

    result = run_job(job_defs, instance, compaction_run_config(ORDERS_TABLE, level0_threshold=6))

    assert result.success
    assert result.output_for_node("report_compaction")["partitions_planned"] == 0
    assert level0_per_bucket(orders, DAY) == [5] * 4


def test_a_run_with_nothing_to_do_succeeds(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                           orders: pc.Table) -> None:
    orders.write(day_stream(DAY))

    result = run_job(job_defs, instance, compaction_run_config(ORDERS_TABLE))

    assert result.success
    report = result.output_for_node("report_compaction")
    assert report["partitions_planned"] == report["partitions_compacted"] == 0
    assert [s.commit_kind for s in orders.snapshots()] == ["APPEND"]


def test_a_run_without_the_tag_warns(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                     orders: pc.Table) -> None:
    orders.write(day_stream(DAY))

    result = run_job(job_defs, instance, compaction_run_config(ORDERS_TABLE), tags={})

    messages = [record.user_message for record in instance.all_logs(result.run_id)]
    assert any(f"no tag {COMPACTION_TAG}={ORDERS_TABLE}" in m for m in messages)


def test_full_compaction_leaves_one_file_per_bucket_at_the_max_level(
        job_defs: dg.Definitions, instance: dg.DagsterInstance, orders: pc.Table) -> None:
    ingest(orders, DAY, run_id="r1")
    run_job(job_defs, instance, compaction_run_config(ORDERS_TABLE))
    ingest(orders, DAY, run_id="r2", chunk=600)  # 2 level-0 files on top of the max-level run
    before = sorted_rows(orders)

    result = run_job(job_defs, instance, {"ops": {"plan_full_compaction": {"config": {"table": ORDERS_TABLE}}}},
                     job=FULL_COMPACTION_JOB)

    assert result.success and result.output_for_node("report_compaction")["full"]
    assert [b.level_files for b in orders.lsm_state().buckets] == [(0, 0, 0, 0, 0, 1)] * 4
    assert orders.snapshots()[-1].properties["paimon-dagster.compaction"] == "full"
    assert sorted_rows(orders) == before
    # Already one run at the max level: a second full compaction has nothing to do.
    again = run_job(job_defs, instance, {"ops": {"plan_full_compaction": {"config": {"table": ORDERS_TABLE}}}},
                    job=FULL_COMPACTION_JOB)
    assert again.output_for_node("report_compaction")["partitions_planned"] == 0


def test_append_table_small_files_are_compacted(job_defs: dg.Definitions, instance: dg.DagsterInstance,
                                                catalog: PaimonCatalogResource) -> None:
    events = catalog.ensure_table(LOG_TABLE, schema=LOG_SCHEMA, partition_keys=["dt"], options=LOG_OPTIONS)
    day = pa.Table.from_batches(log_batches(DAY, rows=2_500))
    for part in range(5):  # late deliveries appended to the day: one small file each
        events.write(day.slice(part * 500, 500))
    before = events.read().sort_by([("ts", "ascending"), ("message", "ascending")])

    [request] = sensor_tick(job_defs, instance, catalog, name="compact_logs_events_sensor").run_requests
    result = run_job(job_defs, instance, request.run_config, tags=dict(request.tags))

    assert result.success
    assert [b.files for b in events.lsm_state().buckets] == [1]
    assert events.read().sort_by([("ts", "ascending"), ("message", "ascending")]).equals(before)


# ---- following --------------------------------------------------------------------------------


def test_follow_state_counts_only_other_writers_as_activity() -> None:
    watch = FollowState(last_seen=10, last_activity=0.0, own={11, 13})

    watch.observe(11, now=1.0)
    assert watch.last_activity == 0.0 and watch.last_seen == 11
    watch.observe(13, now=2.0)  # 12 is someone else's
    assert watch.last_activity == 2.0
    watch.observe(13, now=3.0)
    assert watch.last_activity == 2.0


def test_a_following_run_keeps_level0_below_the_stop_trigger_while_a_writer_commits(
        job_defs: dg.Definitions, instance: dg.DagsterInstance, catalog: PaimonCatalogResource,
        orders: pc.Table) -> None:
    """A writer commits every 0.3 s for 6 s while one following run compacts; level 0 stays bounded."""
    changes = day_stream(DAY, orders=1_000)
    writer_table = catalog.table(ORDERS_TABLE)
    seen: list[int] = []
    commits = 20

    def write() -> None:
        for i in range(commits):
            writer_table.write(changes.slice(i * 150, 150))
            seen.append(writer_table.lsm_state().max_level0_files)
            time.sleep(0.3)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        config = compaction_run_config(ORDERS_TABLE, follow_seconds=30)
        config["ops"]["plan_compaction"]["config"]["idle_seconds"] = 2
        result = run_job(job_defs, instance, config)
    finally:
        writer.join()

    summary = result.output_for_node("follow_compaction")
    assert result.success and summary["stopped_by"] == "idle"
    assert summary["compactions"] >= 2
    assert max(seen) < orders.lsm_state().stop_trigger
    assert summary["max_level0_files_seen"] < orders.lsm_state().stop_trigger
    assert len([s for s in orders.snapshots() if s.commit_kind == "APPEND"]) == commits
    assert sorted_rows(orders) == replay(changes.slice(0, commits * 150))


def test_follow_stops_at_its_deadline(resources: dict[str, Any], instance: dg.DagsterInstance,
                                      orders: pc.Table) -> None:
    plan = CompactionPlan(ORDERS_TABLE, full=False, snapshot_id=None, max_level0_files=0, debt_bytes=0,
                          partitions=0, follow_seconds=1, idle_seconds=60)
    context = dg.build_op_context(instance=instance)

    started = time.monotonic()
    summary = follow(context, orders, plan, [], poll_seconds=0.1)

    assert summary["stopped_by"] == "deadline" and summary["compactions"] == 0
    assert 1.0 <= time.monotonic() - started < 5


# ---- checks and helpers -----------------------------------------------------------------------


def test_level0_check_warns_at_the_stop_trigger_and_errors_at_twice_it(orders: pc.Table) -> None:
    verdicts = []
    for run in range(4):  # 5, 10, 15, 20 level-0 files per bucket
        ingest(orders, DAY, run_id=f"r{run}")
        level0 = check_outcomes(orders)[0]
        verdicts.append((level0.passed, level0.severity, level0.metadata["max_level0_files"]))

    assert verdicts == [(True, dg.AssetCheckSeverity.WARN, 5), (False, dg.AssetCheckSeverity.WARN, 10),
                        (False, dg.AssetCheckSeverity.WARN, 15), (False, dg.AssetCheckSeverity.ERROR, 20)]


def test_the_checks_run_with_the_ingestion(warehouse: str, instance: dg.DagsterInstance) -> None:
    resources = build_resources(warehouse=warehouse, order_source=OrderEventSource(
        orders_per_partition=ORDERS, commit_every_rows=120))  # 10 commits: at the stop-trigger
    job_defs = dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=defs.jobs,
                              resources=resources)

    result = job_defs.resolve_job_def("ingest_orders_job").execute_in_process(partition_key=DAY, instance=instance)

    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert checks["orders_partition_valid"].passed
    assert not checks[LEVEL0_CHECK].passed
    assert checks[LEVEL0_CHECK].severity == dg.AssetCheckSeverity.WARN
    assert checks[LEVEL0_CHECK].metadata["max_level0_files"].value == 10
    assert checks[SMALL_FILES_CHECK].passed


def bucket(level_files: tuple[int, ...], small: int) -> BucketState:
    return BucketState(partition="dt=2024-01-03", bucket=0, level0_files=level_files[0],
                       sorted_runs=level_files[0] + sum(1 for n in level_files[1:] if n),
                       level_files=level_files, level_bytes=tuple(n * 100 for n in level_files),
                       rows=10, small_files=small, debt_bytes=0, pending=None)


@pytest.mark.parametrize(("level_files", "small", "primary_key", "passed"), [
    ((4, 1, 1, 1, 1, 0), 8, True, True),  # 4 small files above level 0
    ((0, 1, 1, 1, 1, 1), 5, True, False),  # a run of one small file on each level: merge them
    ((9,), 9, False, True),
    ((10,), 10, False, False),  # append tables: twice compaction.min.file-num
])
def test_small_files_check(level_files: tuple[int, ...], small: int, primary_key: bool, passed: bool) -> None:
    state = LsmState("db.t", 1, 8, (bucket(level_files, small),))

    outcome = small_files_outcome(state, min_file_num=5, primary_key=primary_key)

    assert outcome.passed is passed
    assert outcome.metadata["small_file_ratio"] == round(small / sum(level_files), 4)


def test_plan_tasks_group_buckets_needing_work_by_partition() -> None:
    pending = BucketState("dt=2024-01-03", 1, 5, 5, (5, 0), (500, 0), 10, 5, 500, "size-amplification")
    quiet = BucketState("dt=2024-01-03", 0, 1, 1, (1, 0), (100, 0), 10, 1, 0, None)
    other = BucketState("dt=2024-01-04", 2, 6, 6, (6, 0), (600, 0), 10, 6, 600, "size-amplification")
    state = LsmState(ORDERS_TABLE, 3, 8, (quiet, pending, other))

    tasks = plan_tasks(state, full=False)

    assert [(t.partition, t.buckets, t.level0_files) for t in tasks] == [
        ("dt=2024-01-03", (1,), (5,)), ("dt=2024-01-04", (2,), (6,))]
    assert [t.partition for t in plan_tasks(state, full=False, level0_threshold=6)] == ["dt=2024-01-04"]
    assert needs_work(quiet, full=True, level0_threshold=0)  # a level-0 file to move to the max level
    done = BucketState("dt=2024-01-03", 0, 0, 1, (0, 1), (0, 100), 10, 1, 0, None)
    assert not needs_work(done, full=True, level0_threshold=0)
    assert mapping_key(3, "dt=2024-01-03/region=eu west") == "p3_dt_2024_01_03_region_eu_west"


def test_partition_paths_become_specs(orders: pc.Table) -> None:
    assert partition_spec(orders, "dt=2024-01-03") == {"dt": "2024-01-03"}
    assert partition_spec(orders, "dt=a%2Fb%3Dc") == {"dt": "a/b=c"}
    assert partition_spec(orders, "dt=__DEFAULT_PARTITION__") == {"dt": None}
    assert partition_spec(orders, "") == {}
    with pytest.raises(ValueError, match="not a partition path"):
        partition_spec(orders, "2024-01-03")


def test_environment_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = CompactedTable(ORDERS_TABLE, ORDERS_KEY)
    assert sensor_interval_seconds() == 30 and follow_seconds(spec) == 0
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "2")
    monkeypatch.setenv(FOLLOW_ENV, "90")
    assert sensor_interval_seconds() == 2 and follow_seconds(spec) == 90
    assert follow_seconds(CompactedTable(ORDERS_TABLE, ORDERS_KEY, follow_seconds=0)) == 0
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "0")
    with pytest.raises(dg.DagsterInvariantViolationError, match="at least 1"):
        sensor_interval_seconds()
    monkeypatch.setenv(SENSOR_INTERVAL_ENV, "soon")
    with pytest.raises(dg.DagsterInvariantViolationError, match="whole number"):
        sensor_interval_seconds()


def test_definitions_wire_sensors_jobs_and_checks() -> None:
    graph = defs.resolve_asset_graph()
    for table, key in ((ORDERS_TABLE, ORDERS_KEY), (LOG_TABLE, dg.AssetKey(["logs", "events"]))):
        sensor = defs.resolve_sensor_def(f"compact_{table.replace('.', '_')}_sensor")
        assert [target.job_name for target in sensor.targets] == [COMPACTION_JOB, FULL_COMPACTION_JOB]
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
        assert sensor.minimum_interval_seconds == 30
        assert {LEVEL0_CHECK, SMALL_FILES_CHECK} <= {c.name for c in graph.get_check_keys_for_assets({key})}
    for name in (COMPACTION_JOB, FULL_COMPACTION_JOB):
        job = defs.resolve_job_def(name)
        assert job.executor_def is dg.in_process_executor
        assert job.tags["paimon/operation"] == "compact"
