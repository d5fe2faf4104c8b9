"""The shop assets end to end: real Dagster runs writing real primary-key tables in tmp_path.

Expected table contents come from a pure-Python replay of the change stream (one dict per key,
+I/+U set the row, -U/-D remove it), never from paimon_core itself.
"""

import dataclasses
import datetime as dt_
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pytest
import yaml

import paimon_core as pc
from pipelines import names
from pipelines.component import table_spec
from pipelines.definitions import REPO_ROOT, load
from pipelines.demo.order_source import OrderEventSource
from pipelines.demo.orders import (
    ORDERS_OPTIONS,
    ORDERS_PRIMARY_KEY,
    ORDERS_SCHEMA,
    ORDERS_TABLE,
    TOTALS_OPTIONS,
    TOTALS_PRIMARY_KEY,
    TOTALS_SCHEMA,
    TOTALS_TABLE,
    order_batches,
    synthetic_batches,
    synthetic_cdc,
    user_contributions,
)
from pipelines.factory import paimon_definitions
from resources import commit_user_for, keys, write_partition
from resources.keys import TABLE_TAG
from tests.demo.conftest import ORDERS_JOB, TOTALS_JOB, JobRunner, small_sources
from tests.support.cdc_truth import replay
from tests.support.metadata_values import value_of

DAY = "2024-01-03"
OTHER_DAY = "2024-01-02"
ORDERS_KEY = dg.AssetKey(["shop", "orders"])
TOTALS_KEY = dg.AssetKey(["shop", "user_order_totals"])
DATA_CHECK = names.DATA_CHECK
# shop.orders commits every this many changes (ingestion.commit_every_rows in the YAML).
COMMIT_EVERY = 1_500


# ---- helpers --------------------------------------------------------------------------------


def table_of(defs_or_resources: dg.Definitions | dict[str, Any], name: str = ORDERS_TABLE) -> pc.Table:
    resources = defs_or_resources if isinstance(defs_or_resources, dict) else dict(defs_or_resources.resources or {})
    return resources["paimon_catalog"].table(name)


def latest(table: pc.Table) -> pc.Snapshot:
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    return snapshot


def metadata_of(result: dg.ExecuteInProcessResult | None, key: dg.AssetKey) -> dict[str, Any]:
    """Plain values of the run's materialization of ``key``."""
    assert result is not None
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == key]
    metadata = event.step_materialization_data.materialization.metadata
    return {name: value_of(value) for name, value in metadata.items()}


def evaluation_of(result: dg.ExecuteInProcessResult, name: str = DATA_CHECK) -> Any:
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def day_changes(resources: dict[str, Any], day: str) -> pa.Table:
    return pa.Table.from_batches(order_batches(resources["order_source"], day), schema=ORDERS_SCHEMA)


def day_rows(table: pc.Table, day: str) -> pa.Table:
    return table.read(filter=[("dt", "=", day)]).sort_by("order_id")


def kind_counts(changes: pa.Table) -> dict[str, int]:
    return {r["op"]: r["op_count"] for r in changes.group_by("op").aggregate([("op", "count")]).to_pylist()}


def declared_orders() -> Any:
    """shop.orders as the demo's YAML declares it."""
    document = yaml.safe_load((REPO_ROOT / "pipelines/demo/defs/tables/defs.yaml").read_text())
    [entry] = [t for t in document["attributes"]["tables"] if t["table"] == ORDERS_TABLE]
    return table_spec(entry)


# ---- orders ---------------------------------------------------------------------------------


def test_rematerializing_a_day_leaves_the_same_orders(materialize_orders: Any,
                                                      resources: dict[str, Any]) -> None:
    first, _ = materialize_orders(DAY)
    table = table_of(resources)
    before = day_rows(table, DAY)

    second, _ = materialize_orders(DAY)

    after = day_rows(table, DAY)
    assert after.equals(before)
    assert pac.count_distinct(after["order_id"]).as_py() == after.num_rows
    snapshots = table.snapshots()
    assert [s.commit_kind for s in snapshots] == ["APPEND", "APPEND"]  # no overwrite needed
    assert snapshots[1].total_record_count == 2 * snapshots[0].total_record_count  # stored twice, read once
    changes = day_changes(resources, DAY).num_rows
    assert metadata_of(first, ORDERS_KEY)[keys.INGEST_ROWS_WRITTEN] == changes
    assert metadata_of(second, ORDERS_KEY)[keys.INGEST_ROWS_WRITTEN] == changes
    assert metadata_of(second, ORDERS_KEY)["dagster/partition_row_count"] == after.num_rows


def test_merged_orders_match_a_replay_of_the_stream(materialize_orders: Any,
                                                    resources: dict[str, Any]) -> None:
    materialize_orders(DAY)
    materialize_orders(OTHER_DAY)

    table = table_of(resources)
    for day in (DAY, OTHER_DAY):
        changes = day_changes(resources, day)
        rows = day_rows(table, day).to_pylist()
        assert rows == replay(changes)
        deleted = set(changes.filter(pac.equal(changes["op"], "-D"))["order_id"].to_pylist())
        updated = set(changes.filter(pac.equal(changes["op"], "+U"))["order_id"].to_pylist()) - deleted
        live = {r["order_id"] for r in rows}
        assert deleted and updated
        assert not deleted & live
        assert updated <= live
        assert {r["op"] for r in rows if r["order_id"] in updated} == {"+U"}


def test_changes_are_read_once_per_step_retry(resources: dict[str, Any]) -> None:
    catalog = resources["paimon_catalog"]
    table = catalog.ensure_table(ORDERS_TABLE, schema=ORDERS_SCHEMA, partition_keys=["dt"],
                                 primary_keys=ORDERS_PRIMARY_KEY, options=ORDERS_OPTIONS)
    partition = {"dt": DAY}
    user = commit_user_for("run-1", "shop/orders", DAY)
    first = write_partition(table, synthetic_batches(DAY, orders=50), mode="upsert", partition=partition,
                            commit_user=user, commit_every_rows=COMMIT_EVERY)

    def must_not_be_read() -> Iterator[pa.RecordBatch]:
        raise AssertionError("a retried step must not regenerate an already committed day")
        yield  # pragma: no cover

    retry = write_partition(table, must_not_be_read(), mode="upsert", partition=partition, commit_user=user,
                            commit_every_rows=COMMIT_EVERY)
    rerun = write_partition(table, synthetic_batches(DAY, orders=50), mode="upsert", partition=partition,
                            commit_user=commit_user_for("run-2", "shop/orders", DAY), commit_every_rows=COMMIT_EVERY)

    assert retry.reused and not first.reused and retry.rows_written == 0
    assert retry.snapshot_id == first.snapshot_id
    assert first.snapshot_id is not None and rerun.snapshot_id == first.snapshot_id + 1  # another run applies again
    assert sum(first.kinds.values()) == first.rows_written == rerun.rows_written
    assert len(table.snapshots()) == 2
    expected = replay(pa.Table.from_batches(synthetic_batches(DAY, orders=50)))
    assert table.read().sort_by("order_id").to_pylist() == expected


def test_commit_and_run_are_tagged(materialize_orders: Any, resources: dict[str, Any]) -> None:
    result, _ = materialize_orders(DAY)

    snapshot = latest(table_of(resources))
    properties = dict(snapshot.properties or {})
    assert snapshot.commit_user == f"dagster:{result.run_id}:shop/orders:{DAY}"
    assert snapshot.commit_identifier == 1  # one chunk: the day has fewer changes than a commit holds
    assert properties[keys.RUN_ID_PROPERTY] == result.run_id
    assert properties[keys.PARTITION_PROPERTY] == DAY
    assert properties[keys.ASSET_KEY_PROPERTY] == "shop/orders"
    assert properties[keys.WRITE_MODE_PROPERTY] == "upsert"
    assert result.dagster_run.tags[TABLE_TAG] == ORDERS_TABLE
    assert result.dagster_run.tags["dagster/partition"] == DAY


def test_orders_materialization_metadata(materialize_orders: Any, resources: dict[str, Any]) -> None:
    materialize_orders(OTHER_DAY)
    result, _ = materialize_orders(DAY)

    metadata = metadata_of(result, ORDERS_KEY)
    table = table_of(resources)
    changes = day_changes(resources, DAY)
    kinds = kind_counts(changes)
    live = len(replay(changes))
    assert metadata[keys.INGEST_ROWS_WRITTEN] == changes.num_rows
    assert (metadata[keys.INGEST_INSERTS], metadata[keys.INGEST_UPDATE_BEFORES],
            metadata[keys.INGEST_UPDATE_AFTERS], metadata[keys.INGEST_DELETES]) == (
        kinds["+I"], kinds["-U"], kinds["+U"], kinds["-D"])
    assert metadata["dagster/partition_row_count"] == live
    # Level-0 files overlap in both days: each is counted by a merged read of its keys.
    assert metadata[keys.INGEST_ROW_COUNT_SOURCE] == ("partition: merged read; table: 0 other partition(s) from "
                                                      "manifests, 1 by a merged read")
    assert metadata["dagster/row_count"] == table.read().num_rows == live + len(replay(day_changes(resources,
                                                                                                   OTHER_DAY)))
    assert metadata[keys.INGEST_SNAPSHOT_ID] == latest(table).id == 2  # shown as text: read, not plotted
    assert metadata[keys.INGEST_COMMIT_KIND] == "APPEND"
    # The partition's rows and the table's, besides the rows written: no stored-record counts.
    assert {k for k in metadata if "record" in k or "row_count" in k} == {
        "dagster/partition_row_count", "dagster/row_count", keys.INGEST_ROW_COUNT_SOURCE}
    assert metadata[keys.INGEST_MODE] == "upsert"
    assert metadata[keys.INGEST_COMMITS] == 1
    assert metadata["dagster/uri"] == table.uri
    assert metadata["dagster/table_name"] == ORDERS_TABLE
    assert metadata[keys.INGEST_REUSED_COMMIT] is False
    schema = metadata["dagster/column_schema"]  # as declared: Paimon types, the primary key marked
    assert [c.name for c in schema.columns] == ORDERS_SCHEMA.names
    columns = {c.name: c for c in schema.columns}
    assert columns["amount"].type == "DECIMAL(12, 2)"
    assert "primary key" in columns["order_id"].constraints.other
    # The table's shape is its level-0 check's (current after compactions too), not the write's:
    # two days, each one level-0 file in each of the 4 buckets.
    assert not any(key.startswith(keys.LSM_PREFIX) for key in metadata)
    shape = next(e for e in result.get_asset_check_evaluations() if e.check_name == names.LEVEL0_CHECK).metadata
    assert shape["max_level0_files"].value == 1


def test_asset_check_passes(materialize_orders: Any, resources: dict[str, Any]) -> None:
    result, _ = materialize_orders(DAY)

    evaluation = evaluation_of(result)
    assert evaluation.passed
    assert evaluation.metadata["rows"].value == len(replay(day_changes(resources, DAY)))
    assert evaluation.metadata["duplicate_order_id"].value == 0
    assert evaluation.metadata["unexpected_status"].value == 0
    assert evaluation.metadata["null_user_id"].value == 0


def orders_defs(warehouse: str, *, orders: int, commit_every_rows: int | None = None) -> dg.Definitions:
    """Definitions writing ``orders`` orders a day: the demo's, or shop.orders alone with another
    ``commit_every_rows``."""
    sources = small_sources(order_source=OrderEventSource(orders_per_partition=orders, batch_size=500))
    if commit_every_rows is None:
        return load(warehouse, **sources)
    spec = declared_orders()
    spec = spec.with_options(ingestion=dataclasses.replace(spec.ingestion, commit_every_rows=commit_every_rows))
    return paimon_definitions([spec], warehouse=warehouse, resources=sources)


@pytest.mark.parametrize(("commit_every_rows", "expected_commits"), [(None, 3), (0, 1)])
def test_a_day_is_committed_every_commit_every_rows_changes(instance: dg.DagsterInstance, warehouse: str,
                                                            commit_every_rows: int | None,
                                                            expected_commits: int) -> None:
    """Like a streaming CDC sink committing at each checkpoint; 0 applies a day in one commit."""
    defs = orders_defs(warehouse, orders=1_000, commit_every_rows=commit_every_rows)
    result = JobRunner(defs, instance)(ORDERS_JOB, DAY)

    changes = day_changes(dict(defs.resources or {}), DAY)
    assert COMMIT_EVERY * 2 < changes.num_rows <= COMMIT_EVERY * 3
    table = table_of(defs)
    snapshots = table.snapshots()
    assert [s.commit_kind for s in snapshots] == ["APPEND"] * expected_commits
    assert {s.commit_user for s in snapshots} == {f"dagster:{result.run_id}:shop/orders:{DAY}"}
    assert [s.commit_identifier for s in snapshots] == list(range(1, expected_commits + 1))
    if expected_commits > 1:
        assert [(s.properties or {})["dagster.final_chunk"] for s in snapshots] == ["false", "false", "true"]
    metadata = metadata_of(result, ORDERS_KEY)
    assert metadata[keys.INGEST_COMMITS] == expected_commits
    assert metadata[keys.INGEST_ROWS_WRITTEN] == changes.num_rows
    assert metadata[keys.INGEST_SNAPSHOT_ID] == snapshots[-1].id
    assert day_rows(table, DAY).to_pylist() == replay(changes)


# ---- per-user totals ------------------------------------------------------------------------


def expected_totals(orders: pa.Table) -> list[dict[str, Any]]:
    """What the aggregation table must hold, from a pyarrow group_by of the live orders.

    ``last_status`` is the status of the user's most recently updated order (ties: higher id).
    """
    grouped = orders.group_by(["dt", "user_id"]).aggregate([
        ("order_id", "count"), ("amount", "sum"), ("amount", "max"), ("updated_at", "max"),
        ("status", "distinct")])
    latest = orders.sort_by([("updated_at", "descending"), ("order_id", "descending")]).group_by(
        "user_id", use_threads=False).aggregate([("status", "first")])
    last_status = dict(zip(latest["user_id"].to_pylist(), latest["status_first"].to_pylist()))
    return [{"dt": r["dt"], "user_id": r["user_id"], "order_count": r["order_id_count"],
             "total_amount": r["amount_sum"], "max_amount": r["amount_max"],
             "last_status": last_status[r["user_id"]], "statuses": set(r["status_distinct"]),
             "last_updated_at": r["updated_at_max"]}
            for r in grouped.sort_by("user_id").to_pylist()]


def totals_rows(resources: dict[str, Any], day: str) -> list[dict[str, Any]]:
    rows = table_of(resources, TOTALS_TABLE).read(filter=[("dt", "=", day)]).sort_by("user_id").to_pylist()
    return [{**r, "statuses": set(r["statuses"].split(","))} for r in rows]


def test_user_totals_equal_a_group_by_of_the_orders(materialize_orders: Any, resources: dict[str, Any]) -> None:
    materialize_orders(DAY)
    _, result = materialize_orders(OTHER_DAY)

    for day in (DAY, OTHER_DAY):
        orders = day_rows(table_of(resources), day)
        assert totals_rows(resources, day) == expected_totals(orders)
    metadata = metadata_of(result, TOTALS_KEY)
    assert metadata[keys.INGEST_ROWS_WRITTEN] == day_rows(table_of(resources), OTHER_DAY).num_rows  # one per order
    assert metadata["dagster/partition_row_count"] == len(totals_rows(resources, OTHER_DAY))  # one per user
    assert metadata[keys.INGEST_COMMIT_KIND] == "OVERWRITE"
    assert metadata[keys.INGEST_MODE] == "overwrite"


def test_rerunning_the_totals_does_not_double_count(materialize_orders: Any,
                                                    resources: dict[str, Any]) -> None:
    materialize_orders(OTHER_DAY)
    materialize_orders(DAY)
    before = totals_rows(resources, DAY)

    materialize_orders(DAY)

    assert totals_rows(resources, DAY) == before
    assert sum(r["order_count"] for r in before) == day_rows(table_of(resources), DAY).num_rows
    assert totals_rows(resources, OTHER_DAY)  # the other day is untouched
    totals = table_of(resources, TOTALS_TABLE)
    assert [s.commit_kind for s in totals.snapshots()] == ["OVERWRITE"] * 3
    assert totals.schema.options["merge-engine"] == "aggregation"


def test_retried_totals_step_does_not_replace_again(resources: dict[str, Any]) -> None:
    totals = resources["paimon_catalog"].ensure_table(TOTALS_TABLE, schema=TOTALS_SCHEMA, partition_keys=["dt"],
                                                      primary_keys=TOTALS_PRIMARY_KEY, options=TOTALS_OPTIONS)
    changes = synthetic_cdc(DAY, orders=40)
    contributions = user_contributions(pa.Table.from_pylist(replay(changes), schema=ORDERS_SCHEMA), DAY)
    user = commit_user_for("run-1", "shop/user_order_totals", DAY)

    first = write_partition(totals, contributions, mode="overwrite", partition={"dt": DAY}, commit_user=user)
    retry = write_partition(totals, contributions, mode="overwrite", partition={"dt": DAY}, commit_user=user)

    assert not first.reused and first.rows_written == contributions.num_rows
    assert retry.reused and retry.snapshot_id == first.snapshot_id and retry.rows_written == 0
    assert len(totals.snapshots()) == 1
    assert pac.sum(totals.read(["order_count"])["order_count"]).as_py() == contributions.num_rows


def test_a_day_whose_orders_were_all_cancelled_empties_its_totals(
        materialize_orders: Any, warehouse: str, tmp_path: Path, resources: dict[str, Any]) -> None:
    materialize_orders(DAY)
    assert totals_rows(resources, DAY)
    landing = tmp_path / "landing"
    (landing / DAY).mkdir(parents=True)
    lines = [{"order_id": 1, "user_id": 1, "status": "new", "amount": 3, "op": "+I"}, {"order_id": 1, "op": "-D"}]
    (landing / DAY / "orders.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    table_of(resources).delete(day_rows(table_of(resources), DAY).select(["dt", "order_id"]))  # a new delivery

    orders, totals = materialize_orders(DAY, defs=landing_defs(warehouse, landing))

    assert day_rows(table_of(resources), DAY).num_rows == 0
    assert totals_rows(resources, DAY) == []
    assert metadata_of(totals, TOTALS_KEY)["dagster/partition_row_count"] == 0
    assert metadata_of(totals, TOTALS_KEY)[keys.INGEST_COMMIT_KIND] == "OVERWRITE"  # the day was replaced
    assert evaluation_of(orders).passed  # shop.orders allows an empty day (min_rows 0)


def test_the_two_jobs_write_both_tables(run_job: Any, instance: dg.DagsterInstance) -> None:
    orders = run_job(ORDERS_JOB, DAY)
    totals = run_job(TOTALS_JOB, DAY)

    assert orders.dagster_run.tags.items() >= {TABLE_TAG: ORDERS_TABLE, "dagster/partition": DAY}.items()
    assert totals.dagster_run.tags.items() >= {TABLE_TAG: TOTALS_TABLE, "dagster/partition": DAY}.items()
    assert [e.asset_key for e in orders.get_asset_materialization_events()] == [ORDERS_KEY]
    assert [e.asset_key for e in totals.get_asset_materialization_events()] == [TOTALS_KEY]
    lsm_and_retention = {names.LEVEL0_CHECK: True, names.SMALL_FILES_CHECK: True, names.RETENTION_CHECK: True}
    assert {e.check_name: e.passed for e in orders.get_asset_check_evaluations()} == {
        DATA_CHECK: True, **lsm_and_retention}  # no_orphan_files runs with the cleanup job only
    assert {e.check_name: e.passed for e in totals.get_asset_check_evaluations()} == lsm_and_retention
    assert instance.get_materialized_partitions(ORDERS_KEY) == {DAY}
    assert instance.get_materialized_partitions(TOTALS_KEY) == {DAY}


# ---- landing mode ---------------------------------------------------------------------------


def write_landing_files(root: Path) -> None:
    """A Parquet file in the day folder, then a JSON-lines file named after the day (applied second)."""
    (root / DAY).mkdir(parents=True)
    at = [dt_.datetime(2024, 1, 3, 9, minute, tzinfo=dt_.UTC) for minute in (0, 1, 2, 0, 5)]
    pq.write_table(pa.table({
        "dt": [DAY] * 5,
        "order_id": [1, 2, 3, 1, 1],
        "user_id": pa.array([7, 8, 7, 7, 7], pa.int32()),
        "status": ["new", "new", "new", "new", "paid"],
        "amount": [10.0, 20.0, 5.5, 10.0, 10.0],
        "updated_at": pa.array(at, pa.timestamp("us", tz="UTC")),
        "op": ["+I", "+I", "+I", "-U", "+U"],
        "source_offset": [1, 2, 3, 4, 5],
    }), root / DAY / "part-0.parquet")
    lines = [{"order_id": 2, "op": "-D"},  # a delete may carry the key only
             {"order_id": 3, "user_id": 7, "status": "new", "amount": 5.5,
              "updated_at": "2024-01-03T09:02:00", "op": "-U"},
             {"dt": DAY, "order_id": 3, "user_id": 7, "status": "paid", "amount": "6.25",
              "updated_at": "2024-01-03 09:30:00", "op": "+U", "unknown": True}]
    (root / f"orders-{DAY}.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (root / "orders-2024-01-04.jsonl").write_text(json.dumps(lines[0]) + "\n")  # another day
    (root / DAY / "_SUCCESS").write_text("")


def landing_defs(warehouse: str, landing: Path) -> dg.Definitions:
    return load(warehouse, **small_sources(order_source=OrderEventSource(mode="landing", landing_dir=str(landing))))


def test_landing_mode_applies_parquet_and_jsonl_changes(materialize_orders: Any, warehouse: str,
                                                        tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    write_landing_files(landing)
    defs = landing_defs(warehouse, landing)

    orders, _ = materialize_orders(DAY, defs=defs)
    materialize_orders(DAY, defs=defs)  # idempotent in landing mode too

    resources = dict(defs.resources or {})
    rows = day_rows(table_of(resources), DAY).to_pylist()
    assert [(r["order_id"], r["user_id"], r["status"], r["amount"], r["op"]) for r in rows] == [
        (1, 7, "paid", Decimal("10.00"), "+U"), (3, 7, "paid", Decimal("6.25"), "+U")]
    assert str(rows[0]["updated_at"]) == "2024-01-03 09:05:00"
    metadata = metadata_of(orders, ORDERS_KEY)
    assert (metadata[keys.INGEST_ROWS_WRITTEN], metadata[keys.INGEST_INSERTS],
            metadata[keys.INGEST_UPDATE_AFTERS], metadata[keys.INGEST_DELETES],
            metadata["dagster/partition_row_count"]) == (8, 3, 2, 1, 2)
    assert evaluation_of(orders).passed
    assert totals_rows(resources, DAY) == [{
        "dt": DAY, "user_id": 7, "order_count": 2, "total_amount": Decimal("16.25"),
        "max_amount": Decimal("10.00"), "last_status": "paid", "statuses": {"paid"},
        "last_updated_at": dt_.datetime(2024, 1, 3, 9, 30)}]


def write_bad_status(landing: Path) -> None:
    (landing / DAY).mkdir(parents=True)
    lines = [{"order_id": 1, "user_id": 1, "status": "new", "op": "+I"},
             {"order_id": 2, "user_id": 2, "status": "cancelled", "op": "+I"}]
    (landing / DAY / "orders.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def test_failing_check_fails_the_orders_run(materialize_orders: Any, warehouse: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    write_bad_status(landing)
    defs = landing_defs(warehouse, landing)

    orders, totals = materialize_orders(DAY, defs=defs, raise_on_error=False)

    evaluation = evaluation_of(orders)
    assert not evaluation.passed
    assert evaluation.metadata["unexpected_status"].value == 1
    assert "cancelled" in (evaluation.description or "")
    assert not orders.success  # the check is blocking
    assert totals is None
    assert [e.asset_key for e in orders.get_asset_materialization_events()] == [ORDERS_KEY]
    assert not pc.Catalog(warehouse).table_exists(TOTALS_TABLE)


def test_failing_check_blocks_the_totals_in_the_same_run(warehouse: str, tmp_path: Path,
                                                         instance: dg.DagsterInstance) -> None:
    landing = tmp_path / "landing"
    write_bad_status(landing)
    both = dg.define_asset_job("shop_day", selection=dg.AssetSelection.assets(ORDERS_KEY, TOTALS_KEY))
    defs = dg.Definitions.merge(landing_defs(warehouse, landing), dg.Definitions(jobs=[both]))

    result = defs.resolve_job_def("shop_day").execute_in_process(partition_key=DAY, instance=instance,
                                                                 raise_on_error=False)

    assert not result.success
    assert not evaluation_of(result).passed
    assert [e.asset_key for e in result.get_asset_materialization_events()] == [ORDERS_KEY]
    assert not pc.Catalog(warehouse).table_exists(TOTALS_TABLE)


@pytest.mark.parametrize(("line", "message"), [
    ({"order_id": 1, "op": "U"}, "has op 'U'"),
    ({"order_id": 1, "op": "+I", "dt": "2024-01-04"}, "an order of 2024-01-04, not of 2024-01-03"),
    ({"op": "+I"}, "rows without 'order_id'"),
])
def test_bad_landing_changes_fail_and_keep_the_table(materialize_orders: Any, warehouse: str, tmp_path: Path,
                                                     line: dict[str, Any], message: str) -> None:
    materialize_orders(DAY)  # synthetic first: the table and one snapshot exist
    landing = tmp_path / "landing"
    landing.mkdir()
    good = {"order_id": 5, "user_id": 1, "status": "new", "op": "+I"}
    (landing / f"{DAY}.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    defs = landing_defs(warehouse, landing)

    orders, totals = materialize_orders(DAY, defs=defs, raise_on_error=False)

    assert not orders.success and totals is None
    failure = next(e for e in orders.all_events if e.is_step_failure)
    assert message in str(failure.step_failure_data.error)
    assert ORDERS_TABLE in str(failure.step_failure_data.error)
    assert not any(e.event_type == dg.DagsterEventType.STEP_RESTARTED for e in orders.all_events)  # not retried
    assert len(table_of(defs).snapshots()) == 1
