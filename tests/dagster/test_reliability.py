"""Reliability of the Dagster layer, on real runs against a real instance and real tables in tmp_path.

1. Step retries (``ingestion.retries`` of each table's spec) after a fault injected on the commit
   path, in this process (``FileStoreCommit._commit`` wrapped to fail once): before the snapshot
   is published (the retry commits once; the failed attempt's files are unreferenced and
   reclaimable) and after it was published (the retry, same root run, finds the commit of its
   user ``dagster:<root run>:<asset>:<partition>`` and does not commit again). Chunked writes
   (``commit_every_rows``) resume after the chunks that landed (identifiers 1..n). A re-execution
   from failure is a new run with the same root run: it finds the landed commits too. A full
   re-run of the day (another run) then writes it again, leaving one copy.
2. Two backfill runs of one partition in two OS processes, their commits racing for the same
   snapshot id: the table reads the source's rows once and every retained snapshot reads.
3. Sensors ticked by the sensor daemon's own code (``execute_sensor_iteration``) with the same
   table state, again after the cursor update was lost: one run per run key in the instance.
4. Bad configuration and input: a typed error naming the problem, no retry, nothing written.
5. Secrets as ``dg.EnvVar`` in ``PaimonCatalogResource.storage_options``: resolved into the S3
   filesystem at run time, shown and stored nowhere.
"""

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import dagster as dg
import pyarrow as pa
import pydantic
import pytest
import yaml
from conftest import EVENTS_JOB, ORDERS_JOB, ORDERS_PER_DAY, ROWS, TOTALS_JOB
from dagster._core.definitions.dependency import NodeHandle
from dagster._core.execution.job_execution_result import JobExecutionResult
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster._core.scheduler.instigation import InstigatorState, InstigatorTick, SensorInstigatorData, TickStatus
from dagster._core.storage.tags import RUN_KEY_TAG
from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.sensor import execute_sensor_iteration

import paimon_core as pc
from paimon_core.commit import FileStoreCommit
from pipelines import names
from pipelines.code_location import REPO_ROOT
from pipelines.compaction.jobs import (
    compaction_run_config,
    compaction_tags,
    full_compaction_run_config,
)
from pipelines.factory import paimon_definitions
from pipelines.ingestion.asset import ensure_table
from pipelines.maintenance.expiry import expire_run_config
from pipelines.maintenance.orphans import orphans_run_config
from pipelines.maintenance.runs import maintenance_tags
from pipelines.target import declared_targets
from resources import PaimonCatalogResource, commit_user_for, keys, write_partition
from resources.writes import CHUNK_PROPERTY, FINAL_PROPERTY
from tests.support.dagster_runs import JobRunner, orphans_now
from tests.support.fixture_project import data
from tests.support.fixture_project.definitions import python_definitions
from tests.support.fixture_project.sources import resources as fixture_resources
from tests.support.fixture_project.tables import (
    EVENTS_KEY,
    EVENTS_TABLE,
    FAST_RETRY_DELAY_S,
    ORDERS_KEY,
    ORDERS_TABLE,
    REVENUE_TABLE,
    TOTALS_TABLE,
    path,
    specs,
)
from tests.support.fixture_project.tables import spec as declared_spec
from tests.support.metadata_values import value_of

DAY = "2024-01-03"
# What dg.execute_in_process and dg.execute_job return.
RunResult = dg.ExecuteInProcessResult | JobExecutionResult
# Changes per commit of sales.orders in these tests: a day of about 1,100 changes lands as 5 commits.
CHUNK = 250
LOG_SENSOR = names.compaction_sensor(EVENTS_TABLE)
REVENUE_SENSOR = names.changes_sensor(REVENUE_TABLE)
REVENUE_JOB = names.ingestion_job(REVENUE_TABLE)
INGESTED = (EVENTS_TABLE, ORDERS_TABLE, TOTALS_TABLE, REVENUE_TABLE)
SORT_EVENTS = [("ts", "ascending"), ("message", "ascending"), ("host", "ascending")]
SORT_ORDERS = [("dt", "ascending"), ("order_id", "ascending")]


class InjectedFault(ConnectionResetError):
    """A transient failure (as an object store's dropped connection) injected on the commit path."""


# ---- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def fast_retries() -> float:
    """The retry delay the fixture project's ``specs`` give every ingestion step (the YAML's is 5 s): the same
    retries, backoff and jitter, so the tests wait milliseconds per retry."""
    return FAST_RETRY_DELAY_S


@pytest.fixture
def project_defs(warehouse: str, fast_retries: float) -> dg.Definitions:
    """The project's tables declared in Python on the test warehouse, fast step retries (replaces
    conftest's)."""
    return python_definitions(warehouse)


class CommitFault:
    """``FileStoreCommit._commit`` of one table, failing at its ``on_call``-th call.

    ``before``: raises before anything is published, like a process dying between writing its
    data files and committing them (they stay on disk, referenced by nothing). ``after``: lets
    the real commit publish its snapshot, then raises, like a step dying before it reports.
    Every other call goes to the real method.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, table: str, when: Literal["before", "after"],
                 on_call: int = 1) -> None:
        self.calls = 0
        self.orphaned: list[str] = []  # data files of the failed attempt ("before")
        self.landed: list[int | None] = []  # snapshot the failed attempt published ("after")
        original = FileStoreCommit._commit
        fault = self

        def _commit(commit: FileStoreCommit, changes: Any, data_paths: list[str], commit_identifier: int,
                    properties: Any) -> int | None:
            if commit.table != table:
                return original(commit, changes, data_paths, commit_identifier, properties)
            fault.calls += 1
            if fault.calls != on_call:
                return original(commit, changes, data_paths, commit_identifier, properties)
            if when == "before":
                fault.orphaned = list(data_paths)
                raise InjectedFault(f"injected: connection lost before committing to {table}")
            fault.landed.append(original(commit, changes, data_paths, commit_identifier, properties))
            raise InjectedFault(f"injected: connection lost after committing to {table}")

        monkeypatch.setattr(FileStoreCommit, "_commit", _commit)


def event_types(result: RunResult) -> list[dg.DagsterEventType]:
    return [event.event_type for event in result.all_events]


def retried_steps(result: RunResult) -> list[str]:
    """Keys of the steps that were retried (one entry per retry)."""
    return [event.step_key or "" for event in result.all_events
            if event.event_type == dg.DagsterEventType.STEP_RESTARTED]


def metadata_of(result: RunResult) -> dict[str, Any]:
    [event] = result.get_asset_materialization_events()
    metadata = event.step_materialization_data.materialization.metadata
    return {name: value_of(value) for name, value in metadata.items()}


def checks_passed(result: RunResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def expected_events(day: str) -> pa.Table:
    return pa.Table.from_batches(data.events(day, rows=ROWS, batch_size=500)).sort_by(SORT_EVENTS)


def day_events(table: pc.Table, day: str, snapshot_id: int | None = None) -> pa.Table:
    return table.read(filter=[("dt", "=", day)], snapshot_id=snapshot_id).sort_by(SORT_EVENTS)


def assert_snapshots_read(table: pc.Table) -> list[pc.Snapshot]:
    """Every retained snapshot has a distinct id, ids are contiguous and each one reads (an append
    table's snapshot: exactly the rows it counts; a primary-key table merges its rows)."""
    snapshots = table.snapshots()
    ids = [s.id for s in snapshots]
    assert len(ids) == len(set(ids))
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    for snapshot in snapshots:
        rows = table.read(snapshot_id=snapshot.id).num_rows
        assert rows == snapshot.total_record_count if not table.schema.primary_keys else rows > 0
    return snapshots


def chunked_orders_defs(warehouse: str, *, retries: int = 3) -> dg.Definitions:
    """The project's definitions with sales.orders committed every ``CHUNK`` changes."""
    return python_definitions(warehouse, commit_every_rows={ORDERS_TABLE: CHUNK}, retries={ORDERS_TABLE: retries})


def reference_orders(warehouse: str, day: str = DAY) -> tuple[pa.Table, int]:
    """The day written once as the asset writes it, without Dagster or faults, in its own
    warehouse: its rows and commits."""
    table = ensure_table(PaimonCatalogResource(warehouse=warehouse), declared_spec(ORDERS_TABLE))
    changes = data.order_batches(day, orders=ORDERS_PER_DAY, batch_size=500)
    written = write_partition(table, changes, mode="upsert", partition={"dt": day}, commit_user="reference",
                              commit_every_rows=CHUNK)
    return table.read().sort_by(SORT_ORDERS), written.commits


def orders_user(run: RunResult | str, day: str = DAY) -> str:
    run_id = run if isinstance(run, str) else run.run_id
    return commit_user_for(run_id, path(ORDERS_TABLE), day)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


# ---- 1. step retries ------------------------------------------------------------------------------


def test_the_ingestion_steps_declare_their_specs_retry_policy(tmp_path: Path) -> None:
    defs = paimon_definitions(specs(retries={REVENUE_TABLE: 0}), warehouse=str(tmp_path / "unused"),
                              resources=fixture_resources())
    targets = declared_targets(defs)
    for table in INGESTED:
        key = targets[table].asset_key
        policy = defs.resolve_assets_def(key).op.retry_policy
        assert policy is not None
        assert policy.max_retries == (0 if table == REVENUE_TABLE else 3)  # the YAML's default, or the spec's
        assert policy.backoff == dg.Backoff.EXPONENTIAL
        assert policy.jitter == dg.Jitter.PLUS_MINUS
        assert policy.delay == FAST_RETRY_DELAY_S  # the tests' specs' (the YAML says 5 s)
        # The table's ingestion job takes the step's own policy.
        job = defs.resolve_job_def(names.ingestion_job(table))
        assert job.get_retry_policy_for_handle(NodeHandle.from_string("__".join(key.path))) == policy
    assert not Path(tmp_path / "unused").exists()


def test_a_retry_after_a_failure_before_the_commit_commits_once(
        monkeypatch: pytest.MonkeyPatch, materialize_day: Any, run_job: JobRunner, project_defs: dg.Definitions,
        catalog: PaimonCatalogResource) -> None:
    fault = CommitFault(monkeypatch, table=EVENTS_TABLE, when="before")

    result = materialize_day(DAY)

    assert result.success
    types = event_types(result)
    assert dg.DagsterEventType.STEP_UP_FOR_RETRY in types
    assert retried_steps(result) == ["__".join(EVENTS_KEY.path)]
    assert fault.calls == 2  # the failed attempt, then the retry's commit
    table = catalog.table(EVENTS_TABLE)
    [snapshot] = assert_snapshots_read(table)
    user = commit_user_for(result.run_id, path(EVENTS_TABLE), DAY)
    assert (snapshot.commit_user, snapshot.commit_identifier) == (user, 1)
    assert snapshot.commit_kind == "OVERWRITE"
    assert day_events(table, DAY).equals(expected_events(DAY))
    assert all(checks_passed(result).values()) and names.DATA_CHECK in checks_passed(result)
    # The failed attempt's data files are on disk, referenced by no snapshot, and reclaimable.
    assert fault.orphaned and all(Path(p).exists() for p in fault.orphaned)
    assert orphans_now(table) == set(fault.orphaned)
    target = declared_targets(project_defs)[EVENTS_TABLE]
    cleanup = run_job(names.orphans_job(EVENTS_TABLE), tags=maintenance_tags(EVENTS_TABLE),
                      run_config=orphans_run_config(target, older_than="now", force=True))
    assert set(cleanup.output_for_node("remove_orphan_files").orphans) == set(fault.orphaned)
    assert not any(Path(p).exists() for p in fault.orphaned)
    assert day_events(table, DAY).equals(expected_events(DAY))

    # A full re-run of the day (another run id) overwrites it: one copy of the source's rows.
    again = materialize_day(DAY)

    assert again.run_id != result.run_id
    assert [s.commit_kind for s in assert_snapshots_read(table)] == ["OVERWRITE", "OVERWRITE"]
    assert day_events(table, DAY).equals(expected_events(DAY))
    assert table.read(["dt"]).num_rows == ROWS


def test_a_retry_after_the_commit_landed_finds_it_and_commits_nothing(
        monkeypatch: pytest.MonkeyPatch, materialize_day: Any, catalog: PaimonCatalogResource) -> None:
    fault = CommitFault(monkeypatch, table=EVENTS_TABLE, when="after")

    result = materialize_day(DAY)

    assert result.success
    assert retried_steps(result) == ["__".join(EVENTS_KEY.path)]
    assert fault.calls == 1  # the retry found the landed commit and never reached the commit path
    table = catalog.table(EVENTS_TABLE)
    [snapshot] = assert_snapshots_read(table)
    assert fault.landed == [snapshot.id]
    assert snapshot.commit_user == commit_user_for(result.run_id, path(EVENTS_TABLE), DAY)  # a step retry keeps the run
    metadata = metadata_of(result)
    assert metadata[keys.INGEST_SNAPSHOT_ID] == snapshot.id
    assert metadata[keys.INGEST_REUSED_COMMIT] is True
    assert (metadata[keys.INGEST_ROWS_WRITTEN], metadata[keys.INGEST_COMMITS]) == (0, 0)
    assert metadata["dagster/row_count"] == ROWS
    assert day_events(table, DAY).equals(expected_events(DAY))
    assert orphans_now(table) == set()

    again = materialize_day(DAY)  # a full re-run overwrites the day

    assert len(assert_snapshots_read(table)) == 2
    assert day_events(table, DAY).equals(expected_events(DAY))
    assert again.success


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_retried_chunked_write_resumes_after_its_landed_chunks(
        monkeypatch: pytest.MonkeyPatch, fast_retries: float, tmp_path: Path, instance: dg.DagsterInstance,
        when: Literal["before", "after"]) -> None:
    defs = chunked_orders_defs(str(tmp_path / "warehouse"))
    runner = JobRunner(defs, instance)
    expected, chunks = reference_orders(str(tmp_path / "reference"))
    assert chunks == 5
    fault = CommitFault(monkeypatch, table=ORDERS_TABLE, when=when, on_call=3)  # the third chunk

    result = runner(ORDERS_JOB, DAY)

    assert result.success
    assert retried_steps(result) == ["__".join(ORDERS_KEY.path)]
    # "before": chunk 3 failed unpublished and was committed by the retry; "after": it landed
    # and the retry went on with chunk 4.
    assert fault.calls == (chunks + 1 if when == "before" else chunks)
    table = defs.resources["paimon_catalog"].table(ORDERS_TABLE)
    snapshots = assert_snapshots_read(table)
    assert len(snapshots) == chunks  # one commit per chunk, none twice
    assert [(s.commit_user, s.commit_identifier) for s in snapshots] == [
        (orders_user(result), chunk) for chunk in range(1, chunks + 1)]
    assert [(s.properties or {})[CHUNK_PROPERTY] for s in snapshots] == [str(c) for c in range(chunks)]
    assert [(s.properties or {})[FINAL_PROPERTY] for s in snapshots] == ["false"] * (chunks - 1) + ["true"]
    assert table.read().sort_by(SORT_ORDERS).equals(expected)  # each change applied once, in order
    metadata = metadata_of(result)
    assert metadata[keys.INGEST_REUSED_COMMIT] is True
    assert metadata[keys.INGEST_COMMITS] == (3 if when == "before" else 2)
    assert metadata[keys.INGEST_SNAPSHOT_ID] == snapshots[-1].id
    assert orphans_now(table) == set(fault.orphaned)
    assert all(checks_passed(result).values())
    totals = runner(TOTALS_JOB, DAY)
    assert totals.success and len(defs.resources["paimon_catalog"].table(TOTALS_TABLE).snapshots()) == 1

    # A full re-run (another run id) applies the same changes again: the same orders.
    again = runner(ORDERS_JOB, DAY)

    assert again.success
    assert len(assert_snapshots_read(table)) == 2 * chunks
    assert table.read().sort_by(SORT_ORDERS).equals(expected)


# ---- re-execution from failure --------------------------------------------------------------------

REEXECUTION_ENV = "PAIMON_RELIABILITY_REEXECUTION_WAREHOUSE"


def reexecution_job(table: str) -> Any:
    """The ingestion job of ``table`` without step retries (a failure fails the run), sales.orders
    chunked: reconstructable (``dg.execute_job``) on the warehouse in ``$REEXECUTION_ENV``."""
    defs = python_definitions(os.environ[REEXECUTION_ENV], commit_every_rows={ORDERS_TABLE: CHUNK},
                            retries={EVENTS_TABLE: 0, ORDERS_TABLE: 0})
    return defs.resolve_job_def(names.ingestion_job(table))


@pytest.mark.parametrize("table", [EVENTS_TABLE, ORDERS_TABLE])
def test_a_reexecution_from_failure_finds_the_landed_commit(
        table: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """A step that died after its commit (the last of a single write; the third of sales.orders'
    five chunks) failed its run; re-executed from failure, the new run (same root) finds what
    landed and writes only the rest."""
    warehouse = str(tmp_path / "warehouse")
    monkeypatch.setenv(REEXECUTION_ENV, warehouse)
    chunked = table == ORDERS_TABLE
    fault = CommitFault(monkeypatch, table=table, when="after", on_call=3 if chunked else 1)
    job = dg.build_reconstructable_job("test_reliability", "reexecution_job", reconstructable_args=(table,))
    partition = {"dagster/partition": DAY}

    with dg.execute_job(job, instance=instance, tags=partition, raise_on_error=False) as failed:
        assert not failed.success
        assert retried_steps(failed) == [] and len(fault.landed) == 1
    paimon = PaimonCatalogResource(warehouse=warehouse).table(table)
    landed = assert_snapshots_read(paimon)
    assert len(landed) == (3 if chunked else 1)

    with dg.execute_job(job, instance=instance, tags=partition, reexecution_options=dg.ReexecutionOptions.from_failure(
            failed.run_id, instance)) as again:
        assert again.success
        run = instance.get_run_by_id(again.run_id)
        assert run is not None and run.root_run_id == failed.run_id and run.parent_run_id == failed.run_id
        metadata = metadata_of(again)
    assert fault.calls == (5 if chunked else 1)  # the re-execution never commits what landed again
    snapshots = assert_snapshots_read(paimon)
    user = commit_user_for(failed.run_id, path(table), DAY)
    assert {s.commit_user for s in snapshots} == {user}  # the root run's user, not the re-execution's
    assert metadata[keys.INGEST_REUSED_COMMIT] is True
    if chunked:
        assert [s.commit_identifier for s in snapshots] == [1, 2, 3, 4, 5]
        assert metadata[keys.INGEST_COMMITS] == 2
        expected, _ = reference_orders(str(tmp_path / "reference"))
        assert paimon.read().sort_by(SORT_ORDERS).equals(expected)
    else:
        assert snapshots == landed and metadata[keys.INGEST_COMMITS] == 0
        assert day_events(paimon, DAY).equals(expected_events(DAY))
    assert instance.get_materialized_partitions(dg.AssetKey(table.split("."))) == {DAY}


# ---- 2. concurrent backfills of one partition -----------------------------------------------------

# One run of a partition in its own process, against the shared instance ($DAGSTER_HOME). Its
# first attempt to publish a snapshot of the table waits until every racer is about to publish
# its own: all built on the same latest snapshot, so they race for the same snapshot id and all
# but one lose and retry on top of the winner. The racer reports its lost attempts. The fixture
# project's tables are read from its YAML by the component's own models, sales.orders chunked.
RACER = r'''
import json, sys, time
from pathlib import Path

import dagster as dg
import yaml

from paimon_core.commit import _Attempt

spec = json.loads(sys.argv[1])
barrier = Path(spec["barrier"])
original = _Attempt._publish
published = []


def _publish(self, snapshot):
    if self.c.table != spec["table"]:
        return original(self, snapshot)
    if not published:
        (barrier / f"ready-{spec['name']}").touch()
        deadline = time.monotonic() + 90
        while len(list(barrier.glob("ready-*"))) < spec["racers"]:
            if time.monotonic() > deadline:
                raise TimeoutError("the other racer never reached its commit")
            time.sleep(0.002)
    won = original(self, snapshot)
    published.append(won)
    return won


_Attempt._publish = _publish

from tests.support.fixture_project.definitions import python_definitions
from tests.support.fixture_project.sources import EventSource, OrderSource

defs = python_definitions(spec["warehouse"], commit_every_rows={spec["chunked"]: spec["chunk"]}, sources={
    "event_source": EventSource(rows_per_partition=spec["rows"], batch_size=500),
    "order_source": OrderSource(orders_per_partition=spec["orders"], batch_size=500)})
instance = dg.DagsterInstance.get()
result = defs.resolve_job_def(spec["job"]).execute_in_process(partition_key=spec["day"], instance=instance,
                                                               raise_on_error=False)
print(json.dumps({"run_id": result.run_id, "success": result.success, "lost": published.count(False)}))
'''


@pytest.fixture
def dagster_home(tmp_path: Path) -> Path:
    """A DAGSTER_HOME with the project's dagster.yaml, its SQLite storage created up front (two
    processes creating it at once can collide)."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(yaml.safe_load((REPO_ROOT / "dagster_home" /
                                                                       "dagster.yaml").read_text())))
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        instance.get_runs(limit=1)
    finally:
        instance.dispose()
    return home


def race(tmp_path: Path, home: Path, *, job: str, table: str, warehouse: str, racers: int = 2) -> list[str]:
    """Run ``racers`` runs of ``job`` for DAY in as many processes at once; their run ids.

    Checks that the racers really raced: every one reached its commit before any published, and
    at least one lost a publication and had to retry.
    """
    barrier = tmp_path / f"barrier-{table}"
    barrier.mkdir()
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    env = {**os.environ, "DAGSTER_HOME": str(home),
           "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    processes = []
    for index in range(racers):
        spec = {"name": str(index), "racers": racers, "barrier": str(barrier), "job": job, "table": table,
                "warehouse": warehouse, "day": DAY, "rows": ROWS, "orders": ORDERS_PER_DAY, "chunk": CHUNK,
                "chunked": ORDERS_TABLE}
        processes.append(subprocess.Popen([sys.executable, str(script), json.dumps(spec)], cwd=REPO_ROOT, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outcomes, lost = [], 0
    for process in processes:
        try:
            out, err = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            raise
        assert process.returncode == 0, err.decode()[-3000:]
        outcome = json.loads(out.decode().strip().splitlines()[-1])
        assert outcome["success"], err.decode()[-3000:]
        outcomes.append(outcome["run_id"])
        lost += outcome["lost"]
    assert len(list(barrier.glob("ready-*"))) == racers
    assert lost >= racers - 1
    return outcomes


def test_two_concurrent_backfills_of_a_day_leave_one_copy(tmp_path: Path, dagster_home: Path) -> None:
    warehouse = str(tmp_path / "warehouse")

    run_ids = race(tmp_path, dagster_home, job=EVENTS_JOB, table=EVENTS_TABLE, warehouse=warehouse)

    instance = dg.DagsterInstance.from_config(str(dagster_home))
    try:
        runs = [instance.get_run_by_id(run_id) for run_id in run_ids]
        assert len(set(run_ids)) == 2
        assert all(run is not None and run.status == dg.DagsterRunStatus.SUCCESS for run in runs)
        assert instance.get_materialized_partitions(EVENTS_KEY) == {DAY}
    finally:
        instance.dispose()
    table = PaimonCatalogResource(warehouse=warehouse).table(EVENTS_TABLE)
    snapshots = assert_snapshots_read(table)
    # Both overwrote the day, one after the other: each snapshot holds the day exactly once.
    assert [s.commit_kind for s in snapshots] == ["OVERWRITE", "OVERWRITE"]
    users = {commit_user_for(run_id, path(EVENTS_TABLE), DAY) for run_id in run_ids}
    assert {s.commit_user for s in snapshots} == users
    for snapshot in snapshots:
        assert day_events(table, DAY, snapshot.id).equals(expected_events(DAY))
    assert day_events(table, DAY).equals(expected_events(DAY))
    # The loser of the race for a snapshot id left nothing behind.
    assert orphans_now(table) == set()


def test_two_concurrent_backfills_of_an_orders_day_leave_the_same_orders(tmp_path: Path,
                                                                         dagster_home: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    expected, chunks = reference_orders(str(tmp_path / "reference"))

    run_ids = race(tmp_path, dagster_home, job=ORDERS_JOB, table=ORDERS_TABLE, warehouse=warehouse)

    table = PaimonCatalogResource(warehouse=warehouse).table(ORDERS_TABLE)
    snapshots = assert_snapshots_read(table)
    # Each run committed each of its chunks once (identifiers 1..n of its user); the newest
    # change of every order wins.
    assert len(snapshots) == 2 * chunks
    assert sorted((s.commit_user, s.commit_identifier) for s in snapshots) == sorted(
        (orders_user(run_id), chunk) for run_id in run_ids for chunk in range(1, chunks + 1))
    assert table.read().sort_by(SORT_ORDERS).equals(expected)
    assert orphans_now(table) == set()


# ---- 3. sensor ticks through the daemon's code ----------------------------------------------------

# The fixture project's code location as `dagster dev` loads it, on the test warehouse.
SENSOR_DEFS = """
import os

from tests.support.fixture_project.definitions import load

defs = load(os.environ["{env}"])
"""
WAREHOUSE_ENV = "PAIMON_RELIABILITY_WAREHOUSE"


class SensorDaemon:
    """The sensor daemon's iteration (``execute_sensor_iteration``), in this process, over the
    code location's sensors on the test warehouse: it evaluates every running sensor, creates
    and submits the runs they request after checking their run keys against the instance, and
    stores cursors and ticks, exactly as ``dagster-daemon`` does. Each tick is a minute after
    the last (frozen clock), so the sensors' minimum intervals have passed."""

    def __init__(self, instance: dg.DagsterInstance, context: WorkspaceProcessContext) -> None:
        self.instance = instance
        self.context = context
        self.now = time.time()

    def tick(self) -> None:
        self.now += 60
        with freeze_time(self.now):
            list(execute_sensor_iteration(self.context, logging.getLogger("sensor-daemon"), None, None))

    def state(self, name: str) -> InstigatorState:
        [state] = [s for s in self.instance.all_instigator_state() if s.instigator_name == name]
        return state

    def last_tick(self, name: str) -> InstigatorTick:
        state = self.state(name)
        return self.instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=1)[0]

    def lose_cursor(self, name: str, cursor: str | None) -> None:
        """Put the cursor back, as when a tick's cursor update was lost (or ``dagster sensor
        cursor --set``): the next tick sees the same state from the same cursor again."""
        state = self.state(name)
        data = state.instigator_data
        assert isinstance(data, SensorInstigatorData)
        self.instance.update_instigator_state(state.with_data(data._replace(cursor=cursor)))

    def runs_with_key(self, run_key: str) -> list[dg.DagsterRun]:
        return list(self.instance.get_runs(filters=dg.RunsFilter(tags={RUN_KEY_TAG: run_key})))


@pytest.fixture
def sensor_daemon(tmp_path: Path, warehouse: str, instance: dg.DagsterInstance,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[SensorDaemon]:
    monkeypatch.setenv(WAREHOUSE_ENV, warehouse)
    code = tmp_path / "sensor_defs.py"
    code.write_text(SENSOR_DEFS.replace("{env}", WAREHOUSE_ENV))
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(executable_path=sys.executable, python_file=str(code), attribute="defs",
                             working_directory=str(REPO_ROOT)), location_name="paimon")
    with create_test_daemon_workspace_context(InProcessWorkspaceLoadTarget(origin), instance) as context:
        yield SensorDaemon(instance, context)



def assert_one_run_per_key(daemon: SensorDaemon, name: str, run_key: str, *, cursor: str,
                           sensor_guard: str) -> None:
    """Ticks of ``name`` with the table unchanged launch nothing more than the run for ``run_key``:
    from the saved cursor, from the cursor before the first tick while the run waits (the
    sensor's own guard, ``sensor_guard``) and after it ended (the daemon's run-key check)."""
    [run] = daemon.runs_with_key(run_key)
    assert daemon.state(name).instigator_data.cursor == cursor  # type: ignore[union-attr]

    daemon.tick()  # the same state, from the saved cursor
    said = daemon.last_tick(name).skip_reason or ""
    assert "unchanged since the last tick" in said or "evaluated already" in said, said

    daemon.lose_cursor(name, None)
    daemon.tick()  # the same state again from the old cursor, while the run is queued
    assert sensor_guard in (daemon.last_tick(name).skip_reason or "")

    daemon.instance.report_run_canceled(run)  # the run ended: only the run key stops a second one
    daemon.lose_cursor(name, None)
    daemon.tick()
    tick = daemon.last_tick(name)
    assert tick.status == TickStatus.SKIPPED
    assert tick.run_keys == [run_key]  # the sensor asked again, with the same key ...
    assert tick.run_ids == []
    assert [r.run_id for r in daemon.runs_with_key(run_key)] == [run.run_id]  # ... and nothing launched



def test_the_compaction_sensor_launches_one_run_per_table_state(sensor_daemon: SensorDaemon,
                                                                catalog: PaimonCatalogResource,
                                                                project_defs: dg.Definitions) -> None:
    events = ensure_table(catalog, declared_spec(EVENTS_TABLE))
    day = pa.Table.from_batches(data.events(DAY, rows=2_500, batch_size=500))
    for part in range(5):  # five small files in one bucket: the compaction trigger
        events.write(day.slice(part * 500, 500))
    run_key = f"{EVENTS_TABLE}@5"

    sensor_daemon.tick()

    tick = sensor_daemon.last_tick(LOG_SENSOR)
    assert tick.status == TickStatus.SUCCESS and tick.run_keys == [run_key]
    [run] = sensor_daemon.runs_with_key(run_key)
    assert run.job_name == names.compaction_job(EVENTS_TABLE) and run.status == dg.DagsterRunStatus.QUEUED
    target = declared_targets(project_defs)[EVENTS_TABLE]
    assert run.run_config == compaction_run_config(target, partitions=[f"dt={DAY}"])
    assert_one_run_per_key(sensor_daemon, LOG_SENSOR, run_key, cursor="5",
                           sensor_guard=f"compaction run {run.run_id} is queued")
    assert len(events.snapshots()) == 5  # sensors only read


def test_the_revenue_sensor_launches_one_run_per_orders_state(sensor_daemon: SensorDaemon,
                                                              materialize_orders: Any,
                                                              catalog: PaimonCatalogResource,
                                                              project_defs: dg.Definitions) -> None:
    orders_run, totals_run = materialize_orders(DAY)
    assert orders_run.success and totals_run is not None and totals_run.success
    orders = catalog.table(ORDERS_TABLE)
    orders.compact(full=True)  # full compaction: sales.orders' changelog, what the consumer reads
    latest = orders.latest_snapshot()
    assert latest is not None
    run_key = f"{REVENUE_TABLE}@{latest.id}"

    sensor_daemon.tick()

    assert sensor_daemon.last_tick(REVENUE_SENSOR).run_keys == [run_key]
    [run] = sensor_daemon.runs_with_key(run_key)
    assert run.job_name == REVENUE_JOB and run.status == dg.DagsterRunStatus.QUEUED
    assert_one_run_per_key(sensor_daemon, REVENUE_SENSOR, run_key, cursor=str(latest.id),
                           sensor_guard=f"run {run.run_id} of {REVENUE_JOB} is queued")
    # Evaluated directly twice from the same starting cursor, the request is the same.
    sensor = project_defs.resolve_sensor_def(REVENUE_SENSOR)
    ticks = [sensor.evaluate_tick(dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(), cursor=None,
                                                          resources={"paimon_catalog": catalog}))
             for _ in range(2)]
    assert [[r.run_key for r in tick.run_requests or []] for tick in ticks] == [[run_key], [run_key]]
    assert [tick.cursor for tick in ticks] == [str(latest.id)] * 2


# ---- 4. bad configuration and input ---------------------------------------------------------------


@pytest.mark.parametrize(("warehouse", "message"), [
    ("", "warehouse is empty"),
    ("   ", "warehouse is empty"),
    ("../warehouse", "has a '..' segment"),
    ("/data/lake/../../etc", "has a '..' segment"),
    ("s3://bucket/lake/../other", "has a '..' segment"),
    ("foo://bucket/x", "fsspec cannot open protocol 'foo'"),
])
def test_a_bad_warehouse_is_refused_when_the_resource_is_built(
        warehouse: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # an empty warehouse used to mean the current directory

    with pytest.raises(pydantic.ValidationError, match=message) as raised:
        PaimonCatalogResource(warehouse=warehouse)

    assert raised.value.errors()[0]["loc"] == ("warehouse",)
    assert files_under(tmp_path) == set()


def definitions_on(catalog: PaimonCatalogResource) -> dg.Definitions:
    """The project's tables on a catalog resource of the test's own."""
    return python_definitions(catalog=catalog)


def test_a_bad_warehouse_from_an_env_var_fails_the_run_before_anything_is_written(
        instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAIMON_RELIABILITY_BAD_WAREHOUSE", "")
    defs = definitions_on(PaimonCatalogResource(warehouse=dg.EnvVar("PAIMON_RELIABILITY_BAD_WAREHOUSE")))

    with pytest.raises(dg.DagsterResourceFunctionError) as raised:
        JobRunner(defs, instance)(EVENTS_JOB, DAY)

    assert "warehouse is empty" in str(raised.value.__cause__)
    assert files_under(tmp_path) == set()


def test_storage_options_must_be_strings() -> None:
    with pytest.raises(pydantic.ValidationError, match="Input should be a valid string") as raised:
        PaimonCatalogResource(warehouse="s3://bucket/warehouse", storage_options={"anon": True})  # type: ignore[dict-item]

    assert raised.value.errors()[0]["loc"] == ("storage_options", "anon")


def test_an_unset_env_var_in_storage_options_names_the_variable(instance: dg.DagsterInstance,
                                                                warehouse: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PAIMON_RELIABILITY_UNSET", raising=False)
    defs = definitions_on(PaimonCatalogResource(warehouse=warehouse,
                                                storage_options={"key": dg.EnvVar("PAIMON_RELIABILITY_UNSET")}))

    with pytest.raises(dg.DagsterInvalidConfigError,
                       match='environment variable "PAIMON_RELIABILITY_UNSET" which is not set'):
        JobRunner(defs, instance)(EVENTS_JOB, DAY)

    assert not Path(warehouse).exists()


@pytest.mark.parametrize("day", ["2024-13-45", "2024/01/03", "yesterday"])
def test_a_partition_key_that_is_not_a_day_is_refused_before_the_run(
        day: str, project_defs: dg.Definitions, resources: dict[str, Any], instance: dg.DagsterInstance,
        warehouse: str) -> None:
    with pytest.raises(dg.DagsterUnknownPartitionError, match=f"key `{day}`"):
        dg.materialize([project_defs.resolve_assets_def(EVENTS_KEY)], partition_key=day,
                       instance=instance)
    with pytest.raises(dg.DagsterUnknownPartitionError, match=f"key `{day}`"):
        project_defs.resolve_job_def(EVENTS_JOB).execute_in_process(partition_key=day, instance=instance)

    assert not Path(warehouse).exists()
    assert instance.get_runs() == []  # refused before a run was created


@pytest.mark.parametrize(("full", "table"), [(False, ORDERS_TABLE), (True, ORDERS_TABLE), (False, TOTALS_TABLE)])
def test_a_compaction_of_a_table_that_does_not_exist_fails_and_writes_nothing(
        full: bool, table: str, materialize_day: Any, run_job: JobRunner, warehouse: str,
        project_defs: dg.Definitions) -> None:
    materialize_day(DAY)  # the warehouse and app.events exist; the sales database does not
    before = files_under(Path(warehouse))
    target = declared_targets(project_defs)[table]
    job = names.full_compaction_job(table) if full else names.compaction_job(table)
    run_config = full_compaction_run_config(target) if full else compaction_run_config(target)

    result = run_job(job, run_config=run_config, tags=compaction_tags(table), raise_on_error=False)

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert f"Paimon table {table}" in str(failure.step_failure_data.error)
    assert "does not exist" in str(failure.step_failure_data.error)
    assert dg.DagsterEventType.STEP_UP_FOR_RETRY not in event_types(result)
    assert files_under(Path(warehouse)) == before


@pytest.mark.parametrize(("override", "value"), [("retain_min", -1), ("retain_max", 0), ("max_deletes", -5)])
def test_an_expiry_with_negative_retention_is_refused_and_expires_nothing(
        override: str, value: int, materialize_day: Any, run_job: JobRunner, project_defs: dg.Definitions,
        catalog: PaimonCatalogResource, warehouse: str) -> None:
    materialize_day(DAY)
    materialize_day(DAY)
    before = files_under(Path(warehouse))

    run_config = expire_run_config(declared_targets(project_defs)[EVENTS_TABLE], older_than="now")
    run_config["ops"]["expire_snapshots"]["config"][override] = value

    with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1") as raised:
        run_job(names.expire_job(EVENTS_TABLE), run_config=run_config, tags=maintenance_tags(EVENTS_TABLE))

    assert raised.value.errors()[0]["loc"] == (override,)
    assert files_under(Path(warehouse)) == before
    assert len(catalog.table(EVENTS_TABLE).snapshots()) == 2


# ---- 5. secrets as EnvVar storage options ---------------------------------------------------------

KEY_ENV, SECRET_ENV = "PAIMON_RELIABILITY_S3_KEY", "PAIMON_RELIABILITY_S3_SECRET"
KEY, SECRET = "AKIARELIABILITYTEST", "reliability-secret-4f8a2c"


def test_s3_credentials_come_from_env_vars_and_are_shown_nowhere(instance: dg.DagsterInstance,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv(SECRET_ENV, SECRET)
    resource = PaimonCatalogResource(
        warehouse="s3://paimon-reliability/warehouse",
        storage_options={"key": dg.EnvVar(KEY_ENV), "secret": dg.EnvVar(SECRET_ENV),
                         "endpoint_url": "http://127.0.0.1:9"})  # never contacted: no I/O here
    seen: dict[str, Any] = {}

    @dg.asset
    def s3_probe(context: dg.AssetExecutionContext, paimon_catalog: PaimonCatalogResource) -> None:
        fs = paimon_catalog.catalog().file_io.fs
        seen.update(protocol=fs.protocol, key=fs.key, secret=fs.secret, endpoint=fs.endpoint_url)
        context.log.info(f"catalog resource: {paimon_catalog!r}")

    result = dg.materialize([s3_probe], resources={"paimon_catalog": resource}, instance=instance)

    assert result.success
    assert seen == {"protocol": ("s3", "s3a"), "key": KEY, "secret": SECRET, "endpoint": "http://127.0.0.1:9"}
    # Outside a run the values are resolved the same way, on request.
    assert resource.process_config_and_initialize().catalog().file_io.fs.secret == SECRET
    with pytest.raises(dg.DagsterInvariantViolationError,
                       match=r"storage_options\['key'\], storage_options\['secret'\]: dg.EnvVar values"):
        resource.catalog()  # unresolved: the fields hold the variables' names, not credentials
    # Displayed: the UI's view of the resource names the variables; the repr leaves the options out.
    repository = dg.Definitions(assets=[s3_probe], resources={"paimon_catalog": resource}).get_repository_def()
    [snap] = [r for r in RepositorySnap.from_def(repository).resources or [] if r.name == "paimon_catalog"]
    shown = json.dumps(snap.configured_values, default=repr)
    assert KEY_ENV in shown and SECRET_ENV in shown
    assert SECRET not in repr(resource) and SECRET not in str(resource.storage_options)
    # Stored: nothing the instance keeps for the run (runs, event log, captured logs) has it.
    stored = [p for p in Path(instance.root_directory).rglob("*") if p.is_file()]
    assert stored
    assert not [p for p in stored if SECRET.encode() in p.read_bytes() or KEY.encode() in p.read_bytes()]
