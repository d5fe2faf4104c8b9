"""The Paimon IO manager writes what an asset returns, exactly once, and reads inputs back pruned.

Real tables in ``tmp_path``, real Dagster runs (``dg.materialize``, ``dg.execute_job``), no mocks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pac
import pytest

import paimon_core as pc
from resources import PaimonCatalogResource, PaimonTableIOManager, PaimonWrite, commit_user_for, keys, write_partition
from resources.partition_mapping import time_mapping
from tests.support.metadata_values import value_of

DAY, OTHER_DAY = "2024-01-02", "2024-01-03"
daily = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-10")
EVENTS = pa.schema([("id", pa.int64()), ("msg", pa.string()), ("dt", pa.string())])
USERS = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                   ("name", pa.string()), ("op", pa.string())])
IO = "paimon_io"


def rows(ids: list[int], dt: str | None = DAY) -> pa.Table:
    data: dict[str, Any] = {"id": ids, "msg": [f"m{i}" for i in ids]}
    if dt is not None:
        data["dt"] = [dt] * len(ids)
    return pa.table(data)


@pytest.fixture
def catalog(warehouse: str) -> pc.Catalog:
    catalog = pc.Catalog(warehouse)
    catalog.create_database("db")
    # write-only: no compaction snapshot after the writes, so snapshot counts are the commits.
    catalog.create_table("db.events", schema=EVENTS, partition_keys=["dt"], options={"write-only": "true"})
    catalog.create_table("db.users", schema=USERS, partition_keys=["dt"], primary_keys=["dt", "id"],
                         options={"bucket": "1", "rowkind.field": "op", "write-only": "true"})
    catalog.create_table("db.totals", schema=pa.schema([("k", pa.string()), ("n", pa.int64())]),
                         options={"write-only": "true"})
    return catalog


@pytest.fixture
def io(warehouse: str, catalog: pc.Catalog) -> dict[str, Any]:
    return {IO: PaimonTableIOManager(catalog=PaimonCatalogResource(warehouse=warehouse))}


def events_asset(produce: Callable[[], Any], *, mode: str | None = None, key: str = "events",
                 partitioned: bool = True, extra: dict[str, Any] | None = None) -> dg.AssetsDefinition:
    metadata = {keys.WRITE_MODE_METADATA_KEY: mode} if mode else {}

    @dg.asset(key=["db", key], partitions_def=daily if partitioned else None, io_manager_key=IO,
              metadata={**metadata, **(extra or {})})
    def asset():  # type: ignore[no-untyped-def]  # unannotated: the producer may return a dg.Output
        return produce()

    return asset


def materialize(assets: list[Any], io: dict[str, Any], *, partition: str | None = DAY,
                **kwargs: Any) -> dg.ExecuteInProcessResult:
    return dg.materialize(assets, partition_key=partition, resources=io, **kwargs)


def output_metadata(result: dg.ExecuteInProcessResult, node: str = "db__events") -> dict[str, Any]:
    [materialization] = result.asset_materializations_for_node(node)
    return {k: value_of(v) for k, v in materialization.metadata.items()}


def failure(result: dg.ExecuteInProcessResult) -> str:
    [event] = result.get_step_failure_events()
    assert event.step_failure_data is not None
    error = event.step_failure_data.error
    assert error is not None
    while error.cause is not None and error.cls_name != "Failure":
        error = error.cause
    return error.message.removeprefix(f"{dg.Failure.__module__}.Failure: ").strip()


def table_rows(catalog: pc.Catalog, name: str, **kwargs: Any) -> list[dict[str, Any]]:
    return sorted(catalog.get_table(name).read(**kwargs).to_pylist(), key=lambda r: (r.get("dt"), r["id"]))


# ---- each accepted type ------------------------------------------------------------------


def _polars() -> Any:
    pl = pytest.importorskip("polars")
    return pl.from_arrow(rows([1, 2, 3]))


PRODUCERS: dict[str, Callable[[], Any]] = {
    "table": lambda: rows([1, 2, 3]),
    "record_batch": lambda: rows([1, 2, 3]).to_batches()[0],
    "reader": lambda: pa.RecordBatchReader.from_batches(EVENTS, rows([1, 2, 3]).to_batches(max_chunksize=1)),
    "list_of_batches": lambda: rows([1, 2, 3]).to_batches(max_chunksize=2),
    "iterator_of_tables": lambda: iter([rows([1]), rows([2, 3])]),
    # A generator must travel in an Output: Dagster takes a returned generator for a stream of events.
    "generator_in_output": lambda: dg.Output(b for b in rows([1, 2, 3]).to_batches(max_chunksize=1)),
    "pandas": lambda: rows([1, 2, 3]).to_pandas(),
    "polars": _polars,
    "polars_lazy": lambda: _polars().lazy(),
}


@pytest.mark.parametrize("kind", list(PRODUCERS))
def test_each_accepted_type_is_written(kind: str, io: dict[str, Any], catalog: pc.Catalog) -> None:
    result = materialize([events_asset(PRODUCERS[kind])], io)

    assert table_rows(catalog, "db.events") == rows([1, 2, 3]).to_pylist()
    metadata = output_metadata(result)
    assert metadata[keys.INGEST_ROWS_WRITTEN] == 3
    assert metadata[keys.INGEST_MODE] == "overwrite"
    assert metadata[keys.INGEST_REUSED_COMMIT] is False
    assert metadata["dagster/partition_row_count"] == 3
    snapshot = catalog.get_table("db.events").latest_snapshot()
    assert snapshot is not None and snapshot.commit_kind == "OVERWRITE"
    assert snapshot.commit_user == f"dagster:{result.run_id}:db/events:{DAY}"
    assert snapshot.properties is not None
    assert {k: v for k, v in snapshot.properties.items() if k.startswith("dagster.")} == {
        keys.RUN_ID_PROPERTY: result.run_id, keys.ASSET_KEY_PROPERTY: "db/events", keys.PARTITION_PROPERTY: DAY,
        keys.WRITE_MODE_PROPERTY: "overwrite"}


@pytest.mark.parametrize("obj", [{"id": [1]}, "id,msg", 42])
def test_unsupported_type_fails_naming_the_asset_and_the_accepted_types(
        obj: Any, io: dict[str, Any], catalog: pc.Catalog) -> None:
    result = materialize([events_asset(lambda: obj)], io, raise_on_error=False)

    message = failure(result)
    assert f"asset db/events: cannot write a {type(obj).__name__} to table db.events" in message
    assert "pyarrow Table" in message and "pandas DataFrame" in message and "PaimonWrite" in message
    assert catalog.get_table("db.events").latest_snapshot() is None


def test_a_receipt_or_none_writes_nothing(io: dict[str, Any], catalog: pc.Catalog) -> None:
    materialize([events_asset(lambda: None)], io)
    materialize([events_asset(lambda: PaimonWrite("db.events", None, 0))], io)

    assert catalog.get_table("db.events").latest_snapshot() is None


# ---- partition values --------------------------------------------------------------------


def test_missing_partition_column_is_filled_from_the_partition(io: dict[str, Any], catalog: pc.Catalog) -> None:
    materialize([events_asset(lambda: rows([1, 2], dt=None))], io, partition=OTHER_DAY)

    assert table_rows(catalog, "db.events") == rows([1, 2], dt=OTHER_DAY).to_pylist()


def test_rows_of_another_partition_are_refused_and_nothing_is_committed(
        io: dict[str, Any], catalog: pc.Catalog, warehouse: str) -> None:
    batches = [rows([1, 2]), rows([3], dt=OTHER_DAY)]  # the second batch is wrong: the first is buffered
    result = materialize([events_asset(lambda: iter(batches))], io, raise_on_error=False)

    message = failure(result)
    assert message.startswith("asset db/events: writing db.events failed: table db.events: a row has "
                              f"dt='{OTHER_DAY}', outside the partition {{'dt': '{DAY}'}}")
    assert "\n" not in message
    assert catalog.get_table("db.events").latest_snapshot() is None
    assert not list(Path(warehouse).rglob("data-*"))  # the buffered first batch was discarded


def test_a_time_mapping_fills_a_date_column(warehouse: str, catalog: pc.Catalog, io: dict[str, Any]) -> None:
    schema = pa.schema([("id", pa.int64()), ("day", pa.date32())])
    catalog.create_table("db.dated", schema=schema, partition_keys=["day"])
    mapping = time_mapping({"day": "%Y-%m-%d"}, "%Y-%m-%d", daily.get_partition_keys(), table="db.dated")

    @dg.asset(key=["db", "dated"], partitions_def=daily, io_manager_key=IO,
              metadata={keys.PARTITION_MAPPING_METADATA_KEY: mapping.to_metadata()})
    def dated() -> pa.Table:
        return pa.table({"id": [1, 2]})

    materialize([dated], io)

    table = catalog.get_table("db.dated")
    assert [str(d) for d in table.read()["day"].to_pylist()] == [DAY, DAY]
    assert table.plan(filter=[("day", "=", DAY)])


# ---- modes -------------------------------------------------------------------------------


def test_overwrite_replaces_only_its_partition(io: dict[str, Any], catalog: pc.Catalog) -> None:
    materialize([events_asset(lambda: rows([1, 2], dt=None))], io, partition=DAY)
    materialize([events_asset(lambda: rows([3], dt=None))], io, partition=OTHER_DAY)

    materialize([events_asset(lambda: rows([7], dt=None))], io, partition=DAY)

    assert table_rows(catalog, "db.events") == [*rows([7]).to_pylist(), *rows([3], dt=OTHER_DAY).to_pylist()]
    assert [s.commit_kind for s in catalog.get_table("db.events").snapshots()] == ["OVERWRITE"] * 3


def test_overwrite_with_no_rows_of_a_partition_holding_rows_is_refused(io: dict[str, Any],
                                                                     catalog: pc.Catalog) -> None:
    materialize([events_asset(lambda: rows([1, 2], dt=None))], io, partition=DAY)
    materialize([events_asset(lambda: rows([3], dt=None))], io, partition=OTHER_DAY)
    table = catalog.get_table("db.events")
    before = (table.latest_snapshot().id, table_rows(catalog, "db.events"))  # type: ignore[union-attr]

    result = materialize([events_asset(EVENTS.empty_table)], io, partition=DAY, raise_on_error=False)

    assert not result.success
    assert re.search(r"the overwrite of partition \{'dt': '2024-01-02'\} has no rows, but it holds 2 row\(s\) "
                     r"now, so the write would empty it; nothing was written.*allow_empty_partitions: true",
                     failure(result))
    assert (table.latest_snapshot().id, table_rows(catalog, "db.events")) == before  # type: ignore[union-attr]
    assert len(result.get_step_failure_events()) == 1, "refused once, not retried"


def test_overwrite_with_no_rows_empties_the_partition_when_allowed(io: dict[str, Any], catalog: pc.Catalog) -> None:
    materialize([events_asset(lambda: rows([1, 2], dt=None))], io, partition=DAY)
    materialize([events_asset(lambda: rows([3], dt=None))], io, partition=OTHER_DAY)
    allowed = {keys.ALLOW_EMPTY_METADATA_KEY: True}

    result = materialize([events_asset(EVENTS.empty_table, extra=allowed)], io, partition=DAY)

    assert table_rows(catalog, "db.events") == rows([3], dt=OTHER_DAY).to_pylist()
    assert output_metadata(result)["dagster/partition_row_count"] == 0
    assert len(catalog.get_table("db.events").snapshots()) == 3
    third_day = "2024-01-04"  # a partition without rows may always be overwritten with none
    assert materialize([events_asset(EVENTS.empty_table)], io, partition=third_day).success


def test_extra_columns_are_refused_or_ignored_as_declared(io: dict[str, Any], catalog: pc.Catalog) -> None:
    def drifted() -> pa.Table:
        data = rows([1, 2], dt=None)
        return data.append_column("temperature", pa.array([20.5, 21.0]))

    result = materialize([events_asset(drifted)], io, raise_on_error=False)
    assert re.search(r"the data has column\(s\) \['temperature'\] that the table does not have .*extra_columns: "
                     "ignore", failure(result))
    assert catalog.get_table("db.events").latest_snapshot() is None

    materialize([events_asset(drifted, extra={keys.EXTRA_COLUMNS_METADATA_KEY: "ignore"})], io)
    assert [r["id"] for r in table_rows(catalog, "db.events")] == [1, 2]


def test_append_adds_to_the_partition(io: dict[str, Any], catalog: pc.Catalog) -> None:
    materialize([events_asset(lambda: rows([1]), mode="append")], io)
    result = materialize([events_asset(lambda: rows([2]), mode="append")], io)

    assert table_rows(catalog, "db.events") == rows([1, 2]).to_pylist()
    assert output_metadata(result)[keys.INGEST_MODE] == "append"
    assert [s.commit_kind for s in catalog.get_table("db.events").snapshots()] == ["APPEND", "APPEND"]


def test_unpartitioned_overwrite_replaces_the_table(io: dict[str, Any], catalog: pc.Catalog) -> None:
    def totals(data: pa.Table) -> dg.AssetsDefinition:
        @dg.asset(key=["db", "totals"], io_manager_key=IO)
        def asset() -> pa.Table:
            return data
        return asset

    materialize([totals(pa.table({"k": ["a", "b"], "n": [1, 2]}))], io, partition=None)
    materialize([totals(pa.table({"k": ["c"], "n": [3]}))], io, partition=None)

    table = catalog.get_table("db.totals")
    assert table.read().to_pylist() == [{"k": "c", "n": 3}]
    latest = table.latest_snapshot()
    assert latest is not None and latest.commit_user.endswith(":db/totals:-")
    assert keys.PARTITION_PROPERTY not in (latest.properties or {})


def users(data: dict[str, list[Any]]) -> pa.Table:
    return pa.table(data, schema=pa.schema([f for f in USERS if f.name in data]))


def test_upsert_writes_row_kinds_of_the_rowkind_field(io: dict[str, Any], catalog: pc.Catalog) -> None:
    def users_asset(data: pa.Table) -> dg.AssetsDefinition:
        return events_asset(lambda: data, mode="upsert", key="users")

    materialize([users_asset(users({"id": [1, 2, 3], "name": ["a", "b", "c"], "op": ["+I"] * 3}))], io)
    materialize([users_asset(users({"id": [2, 3, 4], "name": ["b", "C", "d"], "op": ["-D", "+U", "+I"]}))], io)

    assert table_rows(catalog, "db.users", columns=["dt", "id", "name"]) == [
        {"dt": DAY, "id": 1, "name": "a"}, {"dt": DAY, "id": 3, "name": "C"}, {"dt": DAY, "id": 4, "name": "d"}]


def test_overwrite_of_a_primary_key_partition(io: dict[str, Any], catalog: pc.Catalog) -> None:
    first = users({"id": [1, 2], "name": ["a", "b"], "op": ["+I", "+I"]})
    materialize([events_asset(lambda: first, mode="upsert", key="users")], io)
    materialize([events_asset(lambda: first, mode="upsert", key="users")], io, partition=OTHER_DAY)

    again = users({"id": [5], "name": ["e"], "op": ["+I"]})
    result = materialize([events_asset(lambda: again, key="users")], io)

    assert [(r["dt"], r["id"]) for r in table_rows(catalog, "db.users")] == [
        (DAY, 5), (OTHER_DAY, 1), (OTHER_DAY, 2)]
    [materialization] = result.asset_materializations_for_node("db__users")
    assert materialization.metadata["dagster/partition_row_count"].value == 1


def test_upsert_into_an_append_table_is_refused(io: dict[str, Any], catalog: pc.Catalog) -> None:
    result = materialize([events_asset(lambda: rows([1]), mode="upsert")], io, raise_on_error=False)

    assert "table db.events has no primary key, so it cannot be upserted into; use append or overwrite" \
        in failure(result)
    assert catalog.get_table("db.events").latest_snapshot() is None


def test_an_unknown_write_mode_is_refused(io: dict[str, Any]) -> None:
    result = materialize([events_asset(lambda: rows([1]), mode="merge")], io, raise_on_error=False)

    assert failure(result) == (f"asset db/events: {keys.WRITE_MODE_METADATA_KEY} 'merge' is not one of append, "
                               "overwrite, upsert")


@pytest.mark.parametrize("key", [["db", "nope"], ["nodb", "nope"]], ids=["table", "database"])
def test_a_missing_table_is_not_created(key: list[str], io: dict[str, Any], catalog: pc.Catalog) -> None:
    @dg.asset(key=key, io_manager_key=IO)
    def missing() -> pa.Table:
        return rows([1])

    result = materialize([missing], io, partition=None, raise_on_error=False)

    assert f"Paimon table {'.'.join(key)} does not exist" in failure(result)
    assert "nope" not in catalog.list_tables("db")
    assert "nodb" not in catalog.list_databases()


def test_several_partitions_in_one_output_are_refused(io: dict[str, Any], catalog: pc.Catalog) -> None:
    asset = events_asset(lambda: rows([1], dt=None))
    result = dg.materialize([asset], resources=io, raise_on_error=False, tags={
        "dagster/asset_partition_range_start": DAY, "dagster/asset_partition_range_end": OTHER_DAY})

    assert failure(result).startswith("asset db/events: one output holds 2 partitions")
    assert "materialize one partition per run" in failure(result)
    assert catalog.get_table("db.events").latest_snapshot() is None


# ---- exactly once ------------------------------------------------------------------------


def test_the_same_commit_user_writes_once_and_does_not_read_the_data_again(catalog: pc.Catalog) -> None:
    table = catalog.get_table("db.events")
    user = commit_user_for("run-1", "db/events", DAY)

    first = write_partition(table, rows([1, 2]), mode="append", partition={"dt": DAY}, commit_user=user)

    def explode() -> Iterator[pa.RecordBatch]:
        raise AssertionError("the data of a landed commit was read")
        yield  # pragma: no cover

    second = write_partition(table, explode(), mode="append", partition={"dt": DAY}, commit_user=user)

    assert (first.reused, first.commits, first.rows_written, first.mode) == (False, 1, 2, "append")
    assert (second.reused, second.commits, second.rows_written) == (True, 0, 0)
    assert second.snapshot_id == first.snapshot_id
    assert table.read().num_rows == 2
    other = write_partition(table, rows([3], dt=OTHER_DAY), mode="append", partition={"dt": OTHER_DAY},
                            commit_user=commit_user_for("run-1", "db/events", OTHER_DAY))
    assert not other.reused and table.read().num_rows == 3


def test_commit_user_names_root_run_asset_and_partition() -> None:
    assert commit_user_for("r", "db/events", DAY) == f"dagster:r:db/events:{DAY}"
    assert commit_user_for("r", "db/totals", None) == "dagster:r:db/totals:-"


def test_a_retried_step_finds_the_landed_commit(io: dict[str, Any], catalog: pc.Catalog) -> None:
    attempts: list[int] = []

    @dg.asset(key=["db", "events"], partitions_def=daily, io_manager_key=IO,
              metadata={keys.WRITE_MODE_METADATA_KEY: "append"}, retry_policy=dg.RetryPolicy(max_retries=1))
    def flaky(context) -> Iterator[dg.Output[pa.Table]]:
        attempts.append(context.retry_number)
        yield dg.Output(rows([1, 2]))  # handled (written) by the IO manager right here
        if context.retry_number == 0:
            raise RuntimeError("lost the worker after the commit")

    result = materialize([flaky], io)

    assert attempts == [0, 1]
    assert table_rows(catalog, "db.events") == rows([1, 2]).to_pylist()  # appended once
    assert len(catalog.get_table("db.events").snapshots()) == 1
    reused = [m.metadata[keys.INGEST_REUSED_COMMIT].value
              for m in result.asset_materializations_for_node("db__events")]
    assert reused == [False, True]  # the first attempt's materialization, then the retry's


# Re-execution needs a reconstructable job: the definitions below are module level, the warehouse
# and the failure come from the environment.
FAIL_ENV, WAREHOUSE_ENV = "PAIMON_TEST_FAIL_AFTER_WRITE", "PAIMON_TEST_WAREHOUSE"


@dg.asset(key=["db", "events"], partitions_def=daily, io_manager_key=IO,
          metadata={keys.WRITE_MODE_METADATA_KEY: "append"})
def written_then_failing() -> Iterator[dg.Output[pa.Table]]:
    yield dg.Output(rows([1, 2]))
    if os.environ.get(FAIL_ENV) == "1":
        raise RuntimeError("failed after the commit")


def reexecution_job() -> dg.JobDefinition:
    defs = dg.Definitions(
        assets=[written_then_failing],
        jobs=[dg.define_asset_job("write_events", executor_def=dg.in_process_executor)],
        resources={IO: PaimonTableIOManager(catalog=PaimonCatalogResource(warehouse=dg.EnvVar(WAREHOUSE_ENV)))})
    return defs.resolve_job_def("write_events")


def test_reexecution_from_failure_finds_the_landed_commit(
        warehouse: str, catalog: pc.Catalog, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WAREHOUSE_ENV, warehouse)
    monkeypatch.setenv(FAIL_ENV, "1")
    job = dg.reconstructable(reexecution_job)
    with dg.execute_job(job, instance=instance, tags={"dagster/partition": DAY}) as failed:
        assert not failed.success
    monkeypatch.setenv(FAIL_ENV, "0")

    with dg.execute_job(job, instance=instance, tags=failed.dagster_run.tags,
                        reexecution_options=dg.ReexecutionOptions.from_failure(failed.run_id, instance)) as again:
        assert again.success
        [materialization] = again.asset_materializations_for_node("db__events")

    assert again.dagster_run.root_run_id == failed.run_id
    assert materialization.metadata[keys.INGEST_REUSED_COMMIT].value is True
    assert table_rows(catalog, "db.events") == rows([1, 2]).to_pylist()
    [snapshot] = catalog.get_table("db.events").snapshots()
    assert snapshot.commit_user == f"dagster:{failed.run_id}:db/events:{DAY}"


# ---- reading -----------------------------------------------------------------------------


@pytest.fixture
def two_days(catalog: pc.Catalog) -> None:
    table = catalog.get_table("db.events")
    for day, ids in ((DAY, [1, 2]), (OTHER_DAY, [3])):
        write_partition(table, rows(ids, dt=None), mode="overwrite", partition={"dt": day},
                        commit_user=commit_user_for("setup", "db/events", day))


def typed_sink(annotation: type | None) -> Callable[[dict[str, Any]], Any]:
    def run(io: dict[str, Any]) -> Any:
        seen: dict[str, Any] = {}
        ins = {"events": dg.AssetIn(key=["db", "events"], metadata={"columns": ["id", "dt"]})}

        if annotation is pa.Table:
            @dg.asset(partitions_def=daily, ins=ins)
            def sink(events: pa.Table) -> None:
                seen["events"] = events
        elif annotation is pa.RecordBatchReader:
            @dg.asset(partitions_def=daily, ins=ins)
            def sink(events: pa.RecordBatchReader) -> None:
                seen["events"] = events.read_all()  # streamed: read while the run is open
                seen["type"] = type(events)
        elif annotation is pd.DataFrame:
            @dg.asset(partitions_def=daily, ins=ins)
            def sink(events: pd.DataFrame) -> None:
                seen["events"] = events
        else:
            @dg.asset(partitions_def=daily, ins=ins)
            def sink(events) -> None:  # type: ignore[no-untyped-def]  # no annotation: Any
                seen["events"] = events

        dg.materialize([events_asset(lambda: None), sink], selection=[sink], partition_key=OTHER_DAY,
                       resources=io)
        return seen
    return run


@pytest.mark.usefixtures("two_days")
@pytest.mark.parametrize("annotation", [pa.Table, pa.RecordBatchReader, pd.DataFrame, None],
                         ids=["table", "reader", "pandas", "none"])
def test_inputs_are_read_pruned_as_annotated(annotation: type | None, io: dict[str, Any]) -> None:
    seen = typed_sink(annotation)(io)

    events = seen["events"]
    if annotation is pd.DataFrame:
        assert isinstance(events, pd.DataFrame)
        events = pa.Table.from_pandas(events, preserve_index=False)
    elif annotation is pa.RecordBatchReader:
        assert issubclass(seen["type"], pa.RecordBatchReader)
    else:
        assert isinstance(events, pa.Table)
    assert events.schema.names == ["id", "dt"]
    assert events.to_pylist() == [{"id": 3, "dt": OTHER_DAY}]
    assert pac.unique(events["dt"]).to_pylist() == [OTHER_DAY]


@pytest.mark.usefixtures("two_days")
def test_an_unloadable_annotation_is_refused(io: dict[str, Any]) -> None:
    @dg.asset(partitions_def=daily, ins={"events": dg.AssetIn(key=["db", "events"])})
    def sink(events: dict) -> None:
        pass

    result = dg.materialize([events_asset(lambda: None), sink], selection=[sink], partition_key=OTHER_DAY,
                            resources=io, raise_on_error=False)

    assert "the Paimon IO manager loads pyarrow.Table (the default), pyarrow.RecordBatchReader" in failure(result)


@pytest.mark.usefixtures("two_days")
def test_an_unpartitioned_input_reads_every_partition(io: dict[str, Any]) -> None:
    seen: dict[str, pa.Table] = {}

    @dg.asset(ins={"events": dg.AssetIn(key=["db", "events"], metadata={"columns": ["id"]})})
    def everything(events: pa.Table) -> None:
        seen["events"] = events

    dg.materialize([events_asset(lambda: None), everything], selection=[everything], resources=io)

    assert sorted(seen["events"]["id"].to_pylist()) == [1, 2, 3]


def test_output_metadata_counts_the_partition(io: dict[str, Any]) -> None:
    result = materialize([events_asset(lambda: rows([1, 2, 3]))], io)

    metadata = output_metadata(result)
    assert metadata[keys.INGEST_SNAPSHOT_ID] == 1  # shown as text: read, not plotted
    assert metadata[keys.INGEST_COMMIT_KIND] == "OVERWRITE"
    assert metadata["dagster/table_name"] == "db.events"


def test_a_partitioned_asset_run_without_a_partition_writes_nothing(
        io: dict[str, Any], catalog: pc.Catalog) -> None:
    result = materialize([events_asset(lambda: rows([1]))], io, partition=None, raise_on_error=False)

    assert failure(result).startswith("asset db/events is partitioned but this run names no partition")
    assert catalog.get_table("db.events").latest_snapshot() is None
