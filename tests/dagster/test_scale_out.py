"""Scale-out on Dagster's executors: a partition written by many steps and committed once, compaction
fanned out per group of buckets, and the same jobs on the multiprocess executor and on a Dask cluster
(a ``distributed.LocalCluster`` of two worker processes on 127.0.0.1, started and stopped here).

The jobs that run in other processes are reconstructable: ``scale_out_job`` builds the definitions
from the environment (warehouse, write steps, executor), as a code location would.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.compaction.jobs import compaction_tags, full_compaction_run_config
from pipelines.factory import paimon_definitions
from pipelines.ingestion.fanout import IngestSlice
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.parts import Column, Compaction, Ingestion, Partitions
from resources import keys
from resources.landing_location import LandingLocation
from tests.support.dagster_runs import causes_of
from tests.support.dask_cluster import loopback_cluster

ENV = "PAIMON_SCALE_OUT"  # JSON: warehouse, landing, workers, executor, executor_config, compaction
DAYS = ("2024-03-01", "2024-03-02")
ACCOUNTS, CLICKS, PROFILES = "cdc.accounts", "web.clicks", "cdc.profiles"
SORT = [("dt", "ascending"), ("id", "ascending")]


def accounts_source(context: dg.AssetExecutionContext) -> pa.Table:
    """A day of account changes: repeated keys, so the merge engine has work."""
    day = context.partition_key
    rng = np.random.default_rng(int(day.replace("-", "")))
    n = 12_000
    return pa.table({"id": pa.array(rng.integers(0, 8_000, n)), "v": pa.array(rng.integers(0, 1 << 30, n)),
                     "name": pa.array([f"n{k}" for k in rng.integers(0, 500, n)])})


def accounts_in_slices(context: dg.AssetExecutionContext, ingest_slice: IngestSlice | None = None) -> pa.Table:
    """The day's account changes, or the part ``ingest_slice`` names of them (in stream order)."""
    changes = accounts_source(context)
    if ingest_slice is None:
        return changes
    bounds = np.linspace(0, changes.num_rows, ingest_slice.count + 1).astype(int)
    return changes.slice(bounds[ingest_slice.index], bounds[ingest_slice.index + 1] - bounds[ingest_slice.index])


def specs(settings: dict[str, Any]) -> list[PaimonTableSpec]:
    workers = int(settings.get("workers", 1))
    split = settings.get("fan_out", "slices")
    executor = settings.get("executor")
    config = settings.get("executor_config") or {}
    fan_out = settings.get("compaction", {})
    daily = Partitions("daily", start="2024-03-01", end="2024-03-05")
    return [
        PaimonTableSpec(
            table=ACCOUNTS, columns=(Column("dt", "STRING"), Column("id", "BIGINT"), Column("v", "BIGINT"),
                                     Column("name", "STRING")),
            primary_key=("dt", "id"), partition_keys=("dt",), partitions=daily,
            options={"bucket": "4", "write-only": "true", "changelog-producer": "full-compaction"},
            ingestion=Ingestion(mode="upsert", function=accounts_in_slices if settings.get("sliced_function")
                                else accounts_source, workers=workers, executor=executor, fan_out=split,
                                backfill_policy=settings.get("backfill_policy", "multi_run"),
                                executor_config=config, retries=1, retry_delay_seconds=0.1),
            compaction=Compaction(job="full", buckets_per_step=int(fan_out.get("buckets_per_step", 0)),
                                  commit_once=bool(fan_out.get("commit_once", False)))),
        PaimonTableSpec(
            table=CLICKS, columns=(Column("dt", "STRING"), Column("id", "BIGINT"), Column("url", "STRING")),
            partition_keys=("dt",), partitions=daily, options={"bucket": "-1", "write-only": "true"},
            ingestion=Ingestion(mode="overwrite", workers=workers, executor=executor, executor_config=config,
                                landing=LandingLocation(path=settings["landing"] + "/dt={partition}/*.parquet"))),
        PaimonTableSpec(
            table=PROFILES, columns=(Column("dt", "STRING"), Column("id", "BIGINT"), Column("v", "BIGINT"),
                                     Column("op", "STRING")),
            primary_key=("dt", "id"), partition_keys=("dt",), partitions=daily,
            options={"bucket": "3", "write-only": "true", "rowkind.field": "op"},
            ingestion=Ingestion(mode="upsert", workers=workers, executor=executor, executor_config=config,
                                fan_out=split, backfill_policy=settings.get("backfill_policy", "multi_run"),
                                landing=LandingLocation(
                                    path=settings["landing"] + "/profiles/dt={partition}/*.parquet"))),
    ]


def scale_out_definitions(described: str | None = None) -> dg.Definitions:
    settings = json.loads(described or os.environ[ENV])
    executor = None
    if settings.get("executor") == "dask":
        from pipelines.executors.dask import dask_executor

        executor = dask_executor.configured(settings["executor_config"])
    return paimon_definitions(specs(settings), warehouse=settings["warehouse"], executor=executor)


def scale_out_job(name: str, described: str | None = None) -> dg.JobDefinition:
    """A job of the definitions ``described`` (JSON; default ``$PAIMON_SCALE_OUT``) gives; reconstructable
    in other processes (Dask workers started before the test set its environment included)."""
    return scale_out_definitions(described).resolve_job_def(name)


def reconstructable(name: str, settings: dict[str, Any]) -> Any:
    return dg.build_reconstructable_job(__name__, "scale_out_job", reconstructable_args=(name, json.dumps(settings)))


def land_clicks(landing: Path, day: str, files: int = 5) -> None:
    folder = landing / f"dt={day}"
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(files):
        rows = 1_000 * (index + 1)
        ids = np.arange(index * 10_000, index * 10_000 + rows)
        pq.write_table(pa.table({"id": pa.array(ids), "url": pa.array([f"/p/{i % 13}" for i in ids])}),
                       folder / f"part-{index}.parquet")


def land_profiles(landing: Path, day: str, files: int = 5) -> None:
    """Profile changes in ``files`` files whose keys repeat across files, with every row kind:
    which version wins depends on the files' order."""
    folder = landing / "profiles" / f"dt={day}"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(int(day.replace("-", "")) + 7)
    for index in range(files):
        n = 1_500 + 500 * index
        pq.write_table(pa.table({"id": pa.array(rng.integers(0, 1_200, n)),
                                 "v": pa.array(rng.integers(0, 1 << 30, n)),
                                 "op": pa.array(rng.choice(["+I", "+U", "-U", "-D"], n, p=[.4, .35, .1, .15]))}),
                       folder / f"part-{index}.parquet")


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``configure(**settings)`` points the definitions at a fresh warehouse of this test."""
    landing = tmp_path / "landing"
    for day in DAYS:
        land_clicks(landing, day)
        land_profiles(landing, day)

    def configure(name: str = "warehouse", **settings: Any) -> dict[str, Any]:
        values = {"warehouse": str(tmp_path / name), "landing": str(landing), **settings}
        monkeypatch.setenv(ENV, json.dumps(values))
        return values

    yield configure


def materialize(job: str, day: str, instance: dg.DagsterInstance, **run: Any) -> dg.ExecuteInProcessResult:
    return scale_out_job(job).execute_in_process(partition_key=day, instance=instance, **run)


def table(settings: dict[str, Any], name: str) -> pc.Table:
    return pc.Catalog(settings["warehouse"]).get_table(name)


def placement(t: pc.Table) -> list[tuple[str, int, int, int, int, int]]:
    return sorted((str(s.partition), s.bucket, f.level, f.row_count, f.min_sequence_number, f.max_sequence_number)
                  for s in t.plan() for f in s.files)


def metadata_of(result: Any, key: dg.AssetKey) -> dict[str, Any]:
    [materialization] = [e.event_specific_data.materialization for e in result.all_events
                         if e.event_type_value == "ASSET_MATERIALIZATION"
                         and e.event_specific_data.materialization.asset_key == key]
    return {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}


# ---- planning (pure) ------------------------------------------------------------------------------




# ---- in-process: one snapshot per partition whatever the steps -------------------------------------


@pytest.mark.parametrize("workers", [2, 4])
def test_fanned_out_ingestion_makes_the_table_one_step_makes(setup: Any, instance: dg.DagsterInstance,
                                                             workers: int) -> None:
    single = setup("single", workers=1)
    assert keys.RETRY_STRATEGY_TAG not in scale_out_job(names.ingestion_job(ACCOUNTS)).tags
    for day in DAYS:
        for job in (names.ingestion_job(ACCOUNTS), names.ingestion_job(CLICKS)):
            materialize(job, day, instance)
    fanned = setup("fanned", workers=workers)
    # Retried (run_retries) as a whole: a re-execution from failure skips the write steps a killed
    # run never started, and the commit refuses an incomplete set of shares.
    assert scale_out_job(names.ingestion_job(ACCOUNTS)).tags[keys.RETRY_STRATEGY_TAG] == "ALL_STEPS"
    for day in DAYS:
        result = materialize(names.ingestion_job(ACCOUNTS), day, instance)
        metadata = metadata_of(result, dg.AssetKey(["cdc", "accounts"]))
        assert int(metadata[keys.INGEST_WRITE_STEPS]) == workers
        clicks = materialize(names.ingestion_job(CLICKS), day, instance)
        assert int(metadata_of(clicks, dg.AssetKey(["web", "clicks"]))[keys.INGEST_WRITE_STEPS]) == min(workers, 5)
    for name in (ACCOUNTS, CLICKS):
        one, many = table(single, name), table(fanned, name)
        assert len(many.snapshots()) == len(DAYS)  # one snapshot per partition run
        order = SORT if name == ACCOUNTS else [*SORT, ("url", "ascending")]
        assert many.read().sort_by(order).equals(one.read().sort_by(order))
    assert placement(table(fanned, ACCOUNTS)) == placement(table(single, ACCOUNTS))


def run_log(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [entry.user_message for entry in instance.all_logs(run_id)]


def level0_per_bucket(t: pc.Table) -> dict[tuple[str, int], int]:
    found: dict[tuple[str, int], int] = {}
    for split in t.plan():
        found[(str(split.partition), split.bucket)] = sum(f.level == 0 for f in split.files)
    return found


@pytest.mark.parametrize("workers", [2, 4])
def test_slice_writers_read_only_their_part_and_merge_as_one_writer(setup: Any, instance: dg.DagsterInstance,
                                                                    workers: int) -> None:
    """Bucketed tables from landed files, or from a function taking ingest_slice: each write step
    reads its slice of the input in input order and writes every bucket; the table is one
    writer's, before and after a full compaction, and the next writer numbers above the slices."""
    single = setup("single", workers=1, sliced_function=True)
    fanned = setup("fanned", workers=workers, sliced_function=True)
    for day in DAYS:
        for name in (PROFILES, ACCOUNTS):
            setup("single", workers=1, sliced_function=True)
            materialize(names.ingestion_job(name), day, instance)
            setup("fanned", workers=workers, sliced_function=True)
            result = materialize(names.ingestion_job(name), day, instance)
            metadata = metadata_of(result, dg.AssetKey(name.split(".")))
            assert int(metadata[keys.INGEST_WRITE_STEPS]) == workers
            assert any("writing its slice of the input (in input order) into every bucket" in m
                       for m in run_log(instance, result.run_id))
    for name in (PROFILES, ACCOUNTS):
        one, many = table(single, name), table(fanned, name)
        assert len(many.snapshots()) == len(DAYS)
        assert many.read().sort_by(SORT).equals(one.read().sort_by(SORT))
        # The price: a level-0 file per slice that met the bucket, one per bucket for one writer.
        assert set(level0_per_bucket(one).values()) == {1}
        assert max(level0_per_bucket(many).values()) == workers
        for t in (one, many):
            t.compact(full=True)
        assert many.read().sort_by(SORT).equals(one.read().sort_by(SORT))
        assert set(level0_per_bucket(many).values()) == {0}
    # A single-step write on top starts above every slice's sequence numbers: its version wins.
    setup("fanned", workers=1, sliced_function=True)
    materialize(names.ingestion_job(PROFILES), DAYS[0], instance)
    setup("single", workers=1, sliced_function=True)
    materialize(names.ingestion_job(PROFILES), DAYS[0], instance)
    assert table(fanned, PROFILES).read().sort_by(SORT).equals(table(single, PROFILES).read().sort_by(SORT))


RANGE = {"dagster/asset_partition_range_start": DAYS[0], "dagster/asset_partition_range_end": DAYS[-1]}


def test_a_run_of_several_partitions_fans_them_all_out_and_commits_each(setup: Any,
                                                                        instance: dg.DagsterInstance) -> None:
    """backfill_policy single_run with workers > 1: every partition's write steps in one run (so a
    second worker has work while a partition commits), each partition its own exactly-once commit
    and materialization, as a run per partition would make them."""
    single = setup("single", workers=1, sliced_function=True)
    for day in DAYS:
        for name in (PROFILES, ACCOUNTS):
            materialize(names.ingestion_job(name), day, instance)
    ranged = setup("ranged", workers=2, sliced_function=True, backfill_policy="single_run", executor="in_process")
    for name in (PROFILES, ACCOUNTS):
        key = dg.AssetKey(name.split("."))
        job = reconstructable(names.ingestion_job(name), ranged)
        with dg.execute_job(job, instance=instance, tags=RANGE) as result:
            assert result.success
            writes = sorted(e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"
                            and names.write_share_op(name) in (e.step_key or ""))
            run_id = result.run_id
        assert [w.rsplit("[", 1)[1] for w in writes] == [f"{d.replace('-', '_')}_w{i}]" for d in DAYS for i in range(2)]
        found = [m for m in materializations_of(instance, key) if m.tags and m.tags.get("dagster/run_id") == run_id] \
            or materializations_of(instance, key)[: len(DAYS)]
        assert sorted(m.partition for m in found) == list(DAYS)
        assert all(int(m.metadata[keys.INGEST_WRITE_STEPS].value) == 2 for m in found)
        one, many = table(single, name), table(ranged, name)
        assert len(many.snapshots()) == len(DAYS)  # a commit per partition
        assert many.read().sort_by(SORT).equals(one.read().sort_by(SORT))
        # Every step again (a re-execution): each partition's commit is found, nothing written twice.
        with dg.execute_job(job, instance=instance, tags=RANGE,
                            reexecution_options=dg.ReexecutionOptions(parent_run_id=run_id)) as again:
            assert again.success
        assert len(many.snapshots()) == len(DAYS)
        assert many.remove_orphan_files(older_than=2**62, force=True).orphans == ()


def materializations_of(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[Any]:
    records = instance.fetch_materializations(key, limit=100).records
    return [r.asset_materialization for r in records if r.asset_materialization is not None]


def test_fan_out_by_buckets_keeps_one_file_per_bucket(setup: Any, instance: dg.DagsterInstance) -> None:
    single = setup("single", workers=1)
    materialize(names.ingestion_job(PROFILES), DAYS[0], instance)
    fanned = setup("fanned", workers=3, fan_out="buckets")
    result = materialize(names.ingestion_job(PROFILES), DAYS[0], instance)
    assert any("each writing its buckets of the whole input" in m for m in run_log(instance, result.run_id))
    assert placement(table(fanned, PROFILES)) == placement(table(single, PROFILES))


def test_rerunning_a_partition_run_commits_nothing_twice(setup: Any, instance: dg.DagsterInstance) -> None:
    settings = setup(workers=3, executor="in_process")  # the fan-out, without a process per step
    job = reconstructable(names.ingestion_job(ACCOUNTS), settings)
    tags = {"dagster/partition": DAYS[0]}
    with dg.execute_job(job, instance=instance, tags=tags) as first:
        assert first.success
    with dg.execute_job(job, instance=instance, tags=tags, reexecution_options=dg.ReexecutionOptions(
            parent_run_id=first.run_id)) as again:  # every step again
        assert again.success
        metadata = metadata_of(again, dg.AssetKey(["cdc", "accounts"]))
    assert str(metadata[keys.INGEST_REUSED_COMMIT]).lower() == "true"
    accounts = table(settings, ACCOUNTS)
    assert len(accounts.snapshots()) == 1
    # with a cut-off after now every unreachable file is listed: the rerun wrote none
    assert accounts.remove_orphan_files(older_than=2**62, force=True).orphans == ()


def test_a_retried_write_step_rewrites_only_its_own_files(setup: Any, instance: dg.DagsterInstance,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    settings = setup(workers=2)
    from resources import write_shares

    real = write_shares.prepare_share
    attempts: list[int] = []

    def failing_once(t: pc.Table, data: Any, **kwargs: Any) -> Any:
        attempts.append(kwargs["index"])
        if kwargs["index"] == 1 and attempts.count(1) == 1:
            real(t, data, **kwargs)  # its files are written, then the step dies before handing them on
            raise OSError("connection reset while writing")
        return real(t, data, **kwargs)

    monkeypatch.setattr("pipelines.ingestion.fanout.prepare_share", failing_once)
    result = materialize(names.ingestion_job(ACCOUNTS), DAYS[0], instance)
    assert result.success and sorted(attempts) == [0, 1, 1]
    accounts = table(settings, ACCOUNTS)
    assert len(accounts.snapshots()) == 1
    reference = setup("reference", workers=1)
    materialize(names.ingestion_job(ACCOUNTS), DAYS[0], instance)
    assert accounts.read().sort_by(SORT).equals(table(reference, ACCOUNTS).read().sort_by(SORT))
    # the failed attempt's files are reachable from no snapshot: orphan cleanup reclaims them
    orphans = accounts.remove_orphan_files(older_than=2**62, force=True, dry_run=False)
    assert len(orphans.orphans) >= 1 and all(".parquet" in p for p in orphans.orphans)
    assert accounts.read().sort_by(SORT).equals(table(reference, ACCOUNTS).read().sort_by(SORT))


@pytest.mark.parametrize("commit_once", [False, True])
def test_compaction_fans_out_per_group_of_buckets(setup: Any, instance: dg.DagsterInstance,
                                                  commit_once: bool) -> None:
    reference = setup("reference")
    for day in DAYS:
        materialize(names.ingestion_job(ACCOUNTS), day, instance)
    target = specs(reference)[0].target()
    scale_out_job(names.full_compaction_job(ACCOUNTS)).execute_in_process(
        instance=instance, run_config=full_compaction_run_config(target), tags=compaction_tags(ACCOUNTS))
    settings = setup("fanned", compaction={"buckets_per_step": 1, "commit_once": commit_once})
    for day in DAYS:
        materialize(names.ingestion_job(ACCOUNTS), day, instance)
    target = specs(settings)[0].target()
    result = scale_out_job(names.full_compaction_job(ACCOUNTS)).execute_in_process(
        instance=instance, run_config=full_compaction_run_config(target), tags=compaction_tags(ACCOUNTS))
    steps = [e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"
             and e.step_key.startswith("compact_partition")]
    assert len(steps) == 8  # 2 partitions x 4 buckets
    one, many = table(reference, ACCOUNTS), table(settings, ACCOUNTS)
    kinds = [s.commit_kind for s in many.snapshots()]
    assert kinds == ["APPEND", "APPEND", *(["COMPACT"] if commit_once else ["COMPACT"] * 8)]
    assert many.read().sort_by(SORT).equals(one.read().sort_by(SORT))
    assert placement(many) == placement(one)
    order = [*SORT, (pc.ROW_KIND, "ascending")]
    assert many.read_changes(2, None).sort_by(order).equals(one.read_changes(2, None).sort_by(order))
    report = result.output_for_node("report_compaction")
    assert report["steps"] == 8 and report["partitions_compacted"] == 2


# ---- other executors ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_multiprocess_executor_runs_the_write_steps_in_processes(setup: Any, instance: dg.DagsterInstance) -> None:
    """A fanned-out table naming no executor gets the multiprocess one, its steps forked from a server."""
    reference = setup("reference", workers=1)
    materialize(names.ingestion_job(ACCOUNTS), DAYS[0], instance)
    settings = setup(workers=2)
    executor = scale_out_job(names.ingestion_job(ACCOUNTS)).executor_def
    assert executor.name == "multiprocess_executor_cdc_accounts"
    job = reconstructable(names.ingestion_job(ACCOUNTS), settings)
    with dg.execute_job(job, instance=instance, tags={"dagster/partition": DAYS[0]}) as result:
        assert result.success
        pids = {e.pid for e in result.all_events if e.event_type_value == "STEP_START"}
    assert len(pids) >= 3 and os.getpid() not in pids  # plan, 2 writes, commit: each its own process
    accounts = table(settings, ACCOUNTS)
    assert len(accounts.snapshots()) == 1
    assert accounts.read().sort_by(SORT).equals(table(reference, ACCOUNTS).read().sort_by(SORT))


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Any]:
    """Two worker processes on loopback; the workers import this repository's packages."""
    pytest.importorskip("distributed")
    with loopback_cluster(2) as cluster:
        yield cluster


@pytest.mark.slow
def test_dask_executor_writes_compacts_and_reads_on_the_cluster(setup: Any, instance: dg.DagsterInstance,
                                                                dask_cluster: Any) -> None:
    reference = setup("reference", workers=1)
    for day in DAYS:
        materialize(names.ingestion_job(ACCOUNTS), day, instance)
        materialize(names.ingestion_job(CLICKS), day, instance)
    config = {"cluster": {"existing": {"address": dask_cluster.scheduler_address}}}
    settings = setup(workers=2, executor="dask", executor_config=config,
                     compaction={"buckets_per_step": 2, "commit_once": True})
    from distributed import Client

    with Client(dask_cluster) as client:
        worker_pids = set(client.run(os.getpid).values())
    assert len(worker_pids) == 2
    step_pids: set[int] = set()
    for name in (names.ingestion_job(ACCOUNTS), names.ingestion_job(CLICKS)):
        job = reconstructable(name, settings)
        for day in DAYS:
            with dg.execute_job(job, instance=instance, tags={"dagster/partition": day}) as result:
                assert result.success
                step_pids |= {e.pid for e in result.all_events if e.event_type_value == "STEP_START"}
    compaction = reconstructable(names.full_compaction_job(ACCOUNTS), settings)
    target = specs(settings)[0].target()
    with dg.execute_job(compaction, instance=instance, run_config=full_compaction_run_config(target),
                        tags=compaction_tags(ACCOUNTS)) as result:
        assert result.success
        step_pids |= {e.pid for e in result.all_events if e.event_type_value == "STEP_START"}
    assert step_pids and step_pids <= worker_pids  # every step ran on the cluster's workers (the scheduler picks which)
    # Each worker opened the instance once, for its first step, and kept it for the others.
    with Client(dask_cluster) as client:
        opened = client.run(lambda: len(__import__("pipelines.executors.dask").executors.dask._INSTANCES))
    assert set(opened.values()) <= {0, 1} and sum(opened.values()) == len(step_pids)
    accounts, clicks = table(settings, ACCOUNTS), table(settings, CLICKS)
    assert [s.commit_kind for s in accounts.snapshots()] == ["APPEND", "APPEND", "COMPACT"]
    assert accounts.read().sort_by(SORT).equals(table(reference, ACCOUNTS).read().sort_by(SORT))
    order = [*SORT, ("url", "ascending")]
    assert clicks.read().sort_by(order).equals(table(reference, CLICKS).read().sort_by(order))

    # the tables read back as Dask DataFrames on the same cluster, pruned by partition and column
    with Client(dask_cluster) as client:
        frame = accounts.to_dask(columns=["id", "v"], filter=[("dt", "=", DAYS[1])])
        assert frame.npartitions == len(accounts.plan(filter=[("dt", "=", DAYS[1])])) == 4
        computed = client.compute(frame).result()
        expected = accounts.read(columns=["id", "v"], filter=[("dt", "=", DAYS[1])]).to_pandas()
        assert sorted(map(tuple, computed.to_numpy())) == sorted(map(tuple, expected.to_numpy()))
        everything = client.compute(clicks.to_dask()[["id"]]).result()
        assert sorted(everything["id"]) == sorted(clicks.read(columns=["id"]).column("id").to_pylist())



def _without_in_process_step_body() -> None:
    """On a Dask worker: act as a Dagster release that moved the in-process step body would."""
    import pipelines.executors.dask as dask_module

    dask_module.execute_step_body = lambda: None  # type: ignore[assignment]


def _with_in_process_step_body() -> None:
    import pipelines.dagster_internals as internals
    import pipelines.executors.dask as dask_module

    dask_module.execute_step_body = internals.execute_step_body


@pytest.mark.slow
def test_dask_steps_run_through_the_public_execute_step_command_when_the_internal_body_is_gone(
        setup: Any, instance: dg.DagsterInstance, dask_cluster: Any) -> None:
    reference = setup("reference", workers=1)
    materialize(names.ingestion_job(ACCOUNTS), DAYS[0], instance)
    config = {"cluster": {"existing": {"address": dask_cluster.scheduler_address}}}
    settings = setup(workers=2, executor="dask", executor_config=config)
    from distributed import Client

    with Client(dask_cluster) as client:
        worker_pids = set(client.run(os.getpid).values())
        client.run(_without_in_process_step_body)
        try:
            with dg.execute_job(reconstructable(names.ingestion_job(ACCOUNTS), settings), instance=instance,
                                tags={"dagster/partition": DAYS[0]}) as result:
                assert result.success
                starts = [e.pid for e in result.all_events if e.event_type_value == "STEP_START"]
        finally:
            client.run(_with_in_process_step_body)
    # every step (plan, two write shares, commit, checks) ran in a `dagster api execute_step` process
    # of its own that a worker started, not in the worker
    assert len(starts) >= 4 and len(set(starts)) == len(starts) and not set(starts) & worker_pids
    accounts = table(settings, ACCOUNTS)
    assert accounts.read().sort_by(SORT).equals(table(reference, ACCOUNTS).read().sort_by(SORT))

def test_k8s_and_celery_executor_config_is_validated_when_definitions_load(setup: Any) -> None:
    k8s = {"job_namespace": "data", "env_secrets": ["paimon-s3"], "max_concurrent": 8,
           "step_k8s_config": {"container_config": {"resources": {"limits": {"memory": "4Gi"}}}}}
    setup(workers=4, executor="k8s", executor_config=k8s)
    defs = scale_out_definitions()
    executor = defs.resolve_job_def(names.ingestion_job(ACCOUNTS)).executor_def
    assert executor.name.startswith("k8s")
    setup(workers=4, executor="celery", executor_config={"broker": {"env": "CELERY_BROKER_URL"}})
    assert scale_out_definitions().resolve_job_def(names.ingestion_job(CLICKS)).executor_def.name.startswith("celery")
    from pipelines.errors import TableDefinitionError

    setup(workers=4, executor="k8s", executor_config={"job_namespac": "data"})
    with pytest.raises(TableDefinitionError, match=r'ingestion.executor_config is not valid for k8s.*"job_namespac"'):
        scale_out_definitions()
    setup(workers=4, executor="kubernetes")
    with pytest.raises(TableDefinitionError, match="'kubernetes' is not one of in_process, multiprocess, dask"):
        scale_out_definitions()


def test_fan_out_declarations_are_checked() -> None:
    from pipelines.errors import TableDefinitionError

    def no_slice(context: Any) -> pa.Table:
        return pa.table({"id": [1]})

    with pytest.raises(TableDefinitionError, match="give the function a parameter 'ingest_slice'"):
        PaimonTableSpec(table="web.raw", columns=(Column("id", "BIGINT"),), options={"bucket": "-1"},
                        ingestion=Ingestion(mode="append", function=no_slice, workers=2))
    with pytest.raises(TableDefinitionError, match="ingestion.workers"):
        PaimonTableSpec(table="web.raw", columns=(Column("id", "BIGINT"),), primary_key=("id",),
                        options={"bucket": "2"}, ingestion=Ingestion(mode="upsert", function=no_slice, workers=0))
    with pytest.raises(TableDefinitionError, match="commit_every_rows"):
        PaimonTableSpec(table="web.raw", columns=(Column("id", "BIGINT"),), primary_key=("id",),
                        options={"bucket": "2"},
                        ingestion=Ingestion(mode="upsert", function=no_slice, workers=2, commit_every_rows=10))


def test_the_readme_kubernetes_code_location_loads_and_validates(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The Dagster guide's k8s ``defs.yaml`` as a user would apply it: the project loads, the executors are
    dagster-k8s's with the config checked against its schema, the fan-out is as declared."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "pipelines" / "README.md").read_text()
    [body] = re.findall(r"<!-- scale-out-example: k8s -->\n```yaml\n(.*?)```", readme, re.DOTALL)
    project = tmp_path / "k8s_project"
    (project / "k8s_project" / "defs" / "accounts").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\n'
                                            'root_module = "k8s_project"\ndefs_module = "k8s_project.defs"\n')
    for package in (project / "k8s_project", project / "k8s_project" / "defs"):
        (package / "__init__.py").write_text("")
    (project / "k8s_project" / "defs" / "accounts" / "defs.yaml").write_text(body)
    monkeypatch.syspath_prepend(str(project))
    try:
        defs = dg.load_from_defs_folder(path_within_project=project)
        ingest = defs.resolve_job_def(names.ingestion_job(ACCOUNTS))
        assert ingest.executor_def.name == "k8s_cdc_accounts"
        assert defs.resolve_job_def(names.full_compaction_job(ACCOUNTS)).executor_def.name.startswith("k8s")
        steps = {node.name for node in defs.resolve_assets_def(dg.AssetKey(["cdc", "accounts"])).node_def.nodes}
        assert steps == {names.plan_writes_op(ACCOUNTS), names.write_share_op(ACCOUNTS), names.commit_op(ACCOUNTS)}
        broken = body.replace("job_namespace: data\n    env_secrets", "job_namespac: data\n    env_secrets")
        (project / "k8s_project" / "defs" / "accounts" / "defs.yaml").write_text(broken)
        with pytest.raises(Exception) as error:
            dg.load_from_defs_folder(path_within_project=project)
        causes = causes_of(error.value)
        assert any('is not valid for k8s: Received unexpected config entry "job_namespac"' in c for c in causes)
    finally:
        for module in [m for m in sys.modules if m.split(".")[0] == "k8s_project"]:
            del sys.modules[module]
