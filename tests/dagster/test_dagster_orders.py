"""The shop assets end to end: real Dagster runs writing real primary-key tables in tmp_path.

Expected table contents come from a pure-Python replay of the change stream (one dict per key,
+I/+U set the row, -U/-D remove it), never from paimon_core itself.
"""

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
from cdc_truth import replay

import paimon_core as pc
from pipelines.definitions import build_resources, defs
from pipelines.order_assets import (
    ORDERS_KEY,
    ORDERS_RUN_TAGS,
    USER_ORDER_TOTALS_KEY,
    apply_day,
    replace_partition,
)
from pipelines.orders import (
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
from resources import OrderEventSource

DAY = "2024-01-03"
OTHER_DAY = "2024-01-04"


# ---- helpers --------------------------------------------------------------------------------


def table_of(resources: dict[str, Any], name: str = ORDERS_TABLE) -> pc.Table:
    return resources["catalog"].table(name)


def metadata_of(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict[str, Any]:
    """Plain values of the run's materialization of ``key``."""
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == key]
    metadata = event.step_materialization_data.materialization.metadata
    return {name: getattr(value, "value", value) for name, value in metadata.items()}


def day_changes(resources: dict[str, Any], day: str) -> pa.Table:
    return pa.Table.from_batches(order_batches(resources["order_source"], day), schema=ORDERS_SCHEMA)


def day_rows(table: pc.Table, day: str) -> pa.Table:
    return table.read(filter=[("dt", "=", day)]).sort_by("order_id")


# ---- orders ---------------------------------------------------------------------------------


def test_rematerializing_a_day_leaves_the_same_orders(materialize_orders: Any,
                                                      resources: dict[str, Any]) -> None:
    first = materialize_orders(DAY)
    table = table_of(resources)
    before = day_rows(table, DAY)

    second = materialize_orders(DAY)

    after = day_rows(table, DAY)
    assert after.equals(before)
    assert pac.count_distinct(after["order_id"]).as_py() == after.num_rows
    snapshots = table.snapshots()
    assert [s.commit_kind for s in snapshots] == ["APPEND", "APPEND"]  # no overwrite needed
    assert snapshots[1].total_record_count == 2 * snapshots[0].total_record_count  # stored twice, read once
    changes = day_changes(resources, DAY).num_rows
    assert metadata_of(first, ORDERS_KEY)["rows_written"] == metadata_of(second, ORDERS_KEY)["rows_written"] == changes
    assert metadata_of(second, ORDERS_KEY)["live_orders"] == after.num_rows


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
    catalog = resources["catalog"]
    table = catalog.ensure_table(ORDERS_TABLE, schema=ORDERS_SCHEMA, partition_keys=["dt"],
                                 primary_keys=ORDERS_PRIMARY_KEY, options=ORDERS_OPTIONS)
    first = apply_day(table, synthetic_batches(DAY, orders=50), day=DAY, run_id="run-1")

    def must_not_be_read() -> Iterator[pa.RecordBatch]:
        raise AssertionError("a retried step must not regenerate an already committed day")
        yield  # pragma: no cover

    retry = apply_day(table, must_not_be_read(), day=DAY, run_id="run-1")
    rerun = apply_day(table, synthetic_batches(DAY, orders=50), day=DAY, run_id="run-2")

    assert retry.reused and not first.reused
    assert retry.receipt.snapshot_id == first.receipt.snapshot_id
    assert rerun.receipt.snapshot_id == first.receipt.snapshot_id + 1  # another run does apply again
    assert sum(first.kinds.values()) == first.receipt.rows_written == rerun.receipt.rows_written
    assert len(table.snapshots()) == 2
    expected = replay(pa.Table.from_batches(synthetic_batches(DAY, orders=50)))
    assert table.read().sort_by("order_id").to_pylist() == expected


def test_commit_and_run_are_tagged(materialize_orders: Any, resources: dict[str, Any]) -> None:
    result = materialize_orders(DAY)

    snapshot = table_of(resources).latest_snapshot()
    assert snapshot.commit_user == f"dagster-{result.run_id}"
    assert snapshot.commit_identifier == 20240103
    assert snapshot.properties["dagster.partition"] == DAY
    assert snapshot.properties["dagster.asset_key"] == "shop/orders"
    assert result.dagster_run.tags["paimon/table"] == ORDERS_TABLE


def test_orders_materialization_metadata(materialize_orders: Any, resources: dict[str, Any]) -> None:
    materialize_orders(OTHER_DAY)
    result = materialize_orders(DAY)

    metadata = metadata_of(result, ORDERS_KEY)
    table = table_of(resources)
    changes = day_changes(resources, DAY)
    kinds = {r["op"]: r["op_count"] for r in changes.group_by("op").aggregate([("op", "count")]).to_pylist()}
    live = len(replay(changes))
    assert metadata["rows_written"] == changes.num_rows
    assert (metadata["cdc_inserts"], metadata["cdc_update_befores"], metadata["cdc_update_afters"],
            metadata["cdc_deletes"]) == (kinds["+I"], kinds["-U"], kinds["+U"], kinds["-D"])
    assert metadata["live_orders"] == metadata["dagster/partition_row_count"] == live
    assert metadata["snapshot_id"] == table.latest_snapshot().id == 2
    assert metadata["commit_kind"] == "APPEND"
    assert metadata["stored_records"] == table.latest_snapshot().total_record_count
    assert metadata["table_uri"] == metadata["dagster/uri"] == table.uri
    assert metadata["dagster/table_name"] == ORDERS_TABLE
    assert metadata["reused_commit"] is False
    assert "dagster/row_count" not in metadata  # would need a merged read of the whole table
    schema = metadata["dagster/column_schema"]
    assert [(c.name, c.type) for c in schema.columns] == [(f.name, str(f.type)) for f in ORDERS_SCHEMA]


def test_asset_check_passes(materialize_orders: Any) -> None:
    result = materialize_orders(DAY)

    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == "orders_partition_valid"
    assert evaluation.passed
    assert evaluation.metadata["duplicate_orders"].value == 0
    assert evaluation.metadata["bad_status_orders"].value == 0
    assert set(evaluation.metadata["orders_by_status"].value) == {"new", "paid", "shipped"}


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
    result = materialize_orders(OTHER_DAY)

    for day in (DAY, OTHER_DAY):
        orders = day_rows(table_of(resources), day)
        assert totals_rows(resources, day) == expected_totals(orders)
    metadata = metadata_of(result, USER_ORDER_TOTALS_KEY)
    assert metadata["rows_written"] == day_rows(table_of(resources), OTHER_DAY).num_rows  # one per order
    assert metadata["users"] == len(totals_rows(resources, OTHER_DAY))
    assert metadata["commit_kind"] == "OVERWRITE"


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
    totals = resources["catalog"].ensure_table(TOTALS_TABLE, schema=TOTALS_SCHEMA, partition_keys=["dt"],
                                               primary_keys=TOTALS_PRIMARY_KEY, options=TOTALS_OPTIONS)
    changes = synthetic_cdc(DAY, orders=40)
    contributions = user_contributions(pa.Table.from_pylist(replay(changes), schema=ORDERS_SCHEMA), DAY)

    first = replace_partition(totals, contributions, day=DAY, run_id="run-1", asset_key=USER_ORDER_TOTALS_KEY)
    retry = replace_partition(totals, contributions, day=DAY, run_id="run-1", asset_key=USER_ORDER_TOTALS_KEY)

    assert retry == first
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

    result = materialize_orders(DAY, resources=landing_resources(warehouse, landing))

    assert day_rows(table_of(resources), DAY).num_rows == 0
    assert totals_rows(resources, DAY) == []
    assert metadata_of(result, USER_ORDER_TOTALS_KEY)["users"] == 0
    assert result.get_asset_check_evaluations()[0].passed


def test_job_writes_both_tables(resources: dict[str, Any], instance: dg.DagsterInstance) -> None:
    job_defs = dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=defs.jobs,
                              resources=resources)

    result = job_defs.resolve_job_def("ingest_orders_job").execute_in_process(partition_key=DAY, instance=instance)

    assert result.dagster_run.tags.items() >= {**ORDERS_RUN_TAGS, "dagster/partition": DAY}.items()
    assert {e.asset_key for e in result.get_asset_materialization_events()} == {ORDERS_KEY, USER_ORDER_TOTALS_KEY}
    assert {e.check_name: e.passed for e in result.get_asset_check_evaluations()} == {
        "orders_partition_valid": True, "level0_below_stop_trigger": True, "small_files": True,
        "snapshots_within_retention": True}  # no_orphan_files runs with the cleanup job only
    assert instance.get_materialized_partitions(USER_ORDER_TOTALS_KEY) == {DAY}


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
    (root / f"orders-{OTHER_DAY}.jsonl").write_text(json.dumps(lines[0]) + "\n")  # another day
    (root / DAY / "_SUCCESS").write_text("")


def landing_resources(warehouse: str, landing: Path) -> dict[str, Any]:
    return build_resources(warehouse=warehouse,
                           order_source=OrderEventSource(mode="landing", landing_dir=str(landing)))


def test_landing_mode_applies_parquet_and_jsonl_changes(materialize_orders: Any, warehouse: str,
                                                        tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    write_landing_files(landing)
    resources = landing_resources(warehouse, landing)

    result = materialize_orders(DAY, resources=resources)
    materialize_orders(DAY, resources=resources)  # idempotent in landing mode too

    rows = day_rows(table_of(resources), DAY).to_pylist()
    assert [(r["order_id"], r["user_id"], r["status"], r["amount"], r["op"]) for r in rows] == [
        (1, 7, "paid", Decimal("10.00"), "+U"), (3, 7, "paid", Decimal("6.25"), "+U")]
    assert str(rows[0]["updated_at"]) == "2024-01-03 09:05:00"
    metadata = metadata_of(result, ORDERS_KEY)
    assert (metadata["rows_written"], metadata["cdc_inserts"], metadata["cdc_update_afters"],
            metadata["cdc_deletes"], metadata["live_orders"]) == (8, 3, 2, 1, 2)
    assert result.get_asset_check_evaluations()[0].passed
    assert totals_rows(resources, DAY) == [{
        "dt": DAY, "user_id": 7, "order_count": 2, "total_amount": Decimal("16.25"),
        "max_amount": Decimal("10.00"), "last_status": "paid", "statuses": {"paid"},
        "last_updated_at": dt_.datetime(2024, 1, 3, 9, 30)}]


def test_failing_check_blocks_the_totals(materialize_orders: Any, warehouse: str, tmp_path: Path) -> None:
    landing = tmp_path / "landing"
    (landing / DAY).mkdir(parents=True)
    lines = [{"order_id": 1, "user_id": 1, "status": "new", "op": "+I"},
             {"order_id": 2, "user_id": 2, "status": "cancelled", "op": "+I"}]
    (landing / DAY / "orders.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    resources = landing_resources(warehouse, landing)

    result = materialize_orders(DAY, resources=resources, raise_on_error=False)

    [evaluation] = result.get_asset_check_evaluations()
    assert not evaluation.passed
    assert evaluation.metadata["bad_status_orders"].value == 1
    assert not result.success
    assert [e.asset_key for e in result.get_asset_materialization_events()] == [ORDERS_KEY]
    assert not resources["catalog"].catalog().table_exists(TOTALS_TABLE)


@pytest.mark.parametrize(("line", "message"), [
    ({"order_id": 1, "op": "U"}, "has op 'U'"),
    ({"order_id": 1, "op": "+I", "dt": OTHER_DAY}, "an order of 2024-01-04, not of 2024-01-03"),
    ({"op": "+I"}, "rows without 'order_id'"),
])
def test_bad_landing_changes_fail_and_keep_the_table(materialize_orders: Any, warehouse: str, tmp_path: Path,
                                                     line: dict[str, Any], message: str) -> None:
    materialize_orders(DAY)  # synthetic first: the table and one snapshot exist
    landing = tmp_path / "landing"
    landing.mkdir()
    good = {"order_id": 5, "user_id": 1, "status": "new", "op": "+I"}
    (landing / f"{DAY}.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
    resources = landing_resources(warehouse, landing)

    result = materialize_orders(DAY, resources=resources, raise_on_error=False)

    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert message in str(failure.step_failure_data.error)
    assert len(table_of(resources).snapshots()) == 1
