"""The orders CDC sources on their own: the synthetic stream's shape and the landing reader."""

import datetime as dt_
import itertools
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pydantic
import pytest
import yaml

from pipelines.component import table_spec
from pipelines.definitions import REPO_ROOT
from pipelines.demo.landing import SourceDataError
from pipelines.demo.order_source import OrderEventSource
from pipelines.demo.orders import (
    ORDERS_OPTIONS,
    ORDERS_PRIMARY_KEY,
    ORDERS_SCHEMA,
    ORDERS_TABLE,
    REVENUE_OPTIONS,
    REVENUE_PRIMARY_KEY,
    REVENUE_SCHEMA,
    REVENUE_TABLE,
    TOTALS_OPTIONS,
    TOTALS_PRIMARY_KEY,
    TOTALS_SCHEMA,
    TOTALS_TABLE,
    landing_batches,
    order_batches,
    synthetic_batches,
    synthetic_cdc,
    user_contributions,
)

DAY = "2024-02-29"
DECLARATION = REPO_ROOT / "pipelines" / "demo" / "defs" / "tables" / "defs.yaml"
# What one order's changes of a day may look like: created, changed any times, maybe cancelled.
LIFECYCLE = re.compile(r"\+I(-U\+U)*(-D)?")


def histories(changes: pa.Table) -> dict[int, list[dict[str, Any]]]:
    per_order: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in changes.to_pylist():
        per_order[row["order_id"]].append(row)
    return per_order


def test_synthetic_day_is_deterministic_and_days_differ() -> None:
    first, again = synthetic_cdc(DAY, orders=400), synthetic_cdc(DAY, orders=400)
    other = synthetic_cdc("2024-03-01", orders=400)

    assert first.equals(again)
    assert not first.column("amount").equals(other.column("amount"))
    assert first.schema.equals(ORDERS_SCHEMA)


def test_every_order_has_a_well_formed_history() -> None:
    changes = synthetic_cdc(DAY, orders=400)

    per_order = histories(changes)
    assert sorted(per_order) == [20240229000001 + i for i in range(400)]
    for history in per_order.values():
        kinds = "".join(row["op"] for row in history)
        assert LIFECYCLE.fullmatch(kinds), kinds
        for before, after in itertools.pairwise(history):
            if after["op"] in ("-U", "-D"):  # the before image repeats the row it retracts
                assert {**after, "op": before["op"]} == before
            else:
                assert after["updated_at"] >= before["updated_at"]
        assert [row["status"] for row in history if row["op"] != "-U"][:1] == ["new"]
        statuses = [row["status"] for row in history if row["op"] in ("+I", "+U")]
        assert statuses == sorted(statuses, key=["new", "paid", "shipped"].index)
        assert len({row["user_id"] for row in history}) == 1
        assert not (history[-1]["op"] == "-D" and history[-1]["status"] == "shipped")


def test_stream_is_time_ordered_and_stays_in_its_day() -> None:
    changes = synthetic_cdc(DAY, orders=2_000)

    per_order = histories(changes)
    kinds = dict(zip(*changes.group_by("op").aggregate([("op", "count")]).to_pydict().values()))
    updated = sum(1 for h in per_order.values() if any(r["op"] == "+U" for r in h))
    assert kinds["+I"] == 2_000 and kinds["-U"] == kinds["+U"]
    assert 0.6 < updated / 2_000 < 0.9 and 0.05 < kinds["-D"] / 2_000 < 0.2
    bounds = pac.min_max(changes.column("updated_at"))
    assert bounds["min"].as_py().date() == bounds["max"].as_py().date() == dt_.date(2024, 2, 29)
    # A +I/+U carries the time of its change, so the stream is in time order...
    after_images = changes.filter(pac.is_in(changes["op"], value_set=pa.array(["+I", "+U"])))
    times = after_images.column("updated_at").to_pylist()
    assert times == sorted(times)
    # ...and therefore interleaves the orders instead of grouping them.
    assert changes.column("order_id").to_pylist() != sorted(changes.column("order_id").to_pylist())
    assert pac.min(changes.column("amount")).as_py() >= Decimal("1.00")


def test_synthetic_batches_are_bounded() -> None:
    batches = list(synthetic_batches(DAY, orders=300, batch_size=400))

    assert {b.num_rows for b in batches[:-1]} == {400}
    assert pa.Table.from_batches(batches).equals(synthetic_cdc(DAY, orders=300).combine_chunks())


def test_bad_arguments_are_rejected_before_generating() -> None:
    with pytest.raises(ValueError, match="not a YYYY-MM-DD date"):
        synthetic_batches("2024/01/01", orders=10)
    with pytest.raises(ValueError, match="orders <= 999999"):
        synthetic_batches(DAY, orders=1_000_000)
    with pytest.raises(pydantic.ValidationError):
        OrderEventSource(orders_per_partition=1_000_000)


def test_contributions_are_one_row_per_order_oldest_update_first() -> None:
    changes = synthetic_cdc(DAY, orders=50)
    live = changes.filter(pac.is_in(changes["op"], value_set=pa.array(["+I", "+U"])))

    rows = user_contributions(live, DAY)

    assert rows.num_rows == live.num_rows
    assert rows.column("last_updated_at").to_pylist() == sorted(live.column("updated_at").to_pylist())
    assert set(rows.column("order_count").to_pylist()) == {1}
    assert pac.sum(rows.column("total_amount")).as_py() == pac.sum(live.column("amount")).as_py()


def test_landing_reader_casts_fills_and_keeps_row_order(tmp_path: Path) -> None:
    (tmp_path / DAY).mkdir()
    pq.write_table(pa.table({"order_id": pa.array([3, 1, 3], pa.int32()), "op": ["+I", "+I", "-D"],
                             "amount": ["1.5", "2", None], "dt": pa.array([dt_.date(2024, 2, 29)] * 3)}),
                   tmp_path / DAY / "a.parquet", row_group_size=2)

    batches = list(landing_batches(tmp_path, DAY, batch_size=2))

    table = pa.Table.from_batches(batches)
    assert [b.num_rows for b in batches] == [2, 1]
    assert table.schema.equals(ORDERS_SCHEMA)
    assert table.column("order_id").to_pylist() == [3, 1, 3]
    assert [str(v) for v in table.column("amount").to_pylist()] == ["1.50", "2.00", "None"]
    assert table.column("status").null_count == 3
    assert table.column("dt").to_pylist() == [DAY] * 3


@pytest.mark.parametrize(("rows", "message"), [
    ({"order_id": [1], "op": ["+X"]}, "has op '\\+X'"),
    ({"order_id": [1], "op": [None]}, "rows without 'op'"),
    ({"order_id": [1]}, "has no 'op' column"),
    ({"order_id": [1], "op": ["+I"], "dt": ["2024-03-01"]}, "an order of 2024-03-01, not of 2024-02-29"),
    ({"order_id": ["x"], "op": ["+I"]}, "'order_id' of .* does not cast"),
])
def test_landing_reader_rejects_bad_changes(tmp_path: Path, rows: dict[str, list[Any]], message: str) -> None:
    pq.write_table(pa.table(rows), tmp_path / f"orders-{DAY}.parquet")

    with pytest.raises(SourceDataError, match=message):
        list(landing_batches(tmp_path, DAY))


def test_missing_landing_day_fails_before_reading(tmp_path: Path) -> None:
    (tmp_path / "orders-2024-03-01.jsonl").write_text(json.dumps({"order_id": 1, "op": "+I"}) + "\n")

    with pytest.raises(SourceDataError, match="no Parquet or JSON-lines files for 2024-02-29"):
        landing_batches(tmp_path, DAY)


def test_source_resource_dispatches_and_validates(tmp_path: Path) -> None:
    synthetic = pa.Table.from_batches(order_batches(OrderEventSource(orders_per_partition=7), DAY))

    assert pac.sum(pac.equal(synthetic["op"], "+I")).as_py() == 7
    with pytest.raises(dg.Failure, match="OrderEventSource is in 'landing' mode but landing_dir is empty"):
        order_batches(OrderEventSource(mode="landing"), DAY)
    with pytest.raises(dg.Failure, match="does not exist"):
        order_batches(OrderEventSource(mode="landing", landing_dir=str(tmp_path / "nope")), DAY)


@pytest.mark.parametrize(("table", "schema", "primary_key", "options"), [
    (ORDERS_TABLE, ORDERS_SCHEMA, ORDERS_PRIMARY_KEY, ORDERS_OPTIONS),
    (TOTALS_TABLE, TOTALS_SCHEMA, TOTALS_PRIMARY_KEY, TOTALS_OPTIONS),
    (REVENUE_TABLE, REVENUE_SCHEMA, REVENUE_PRIMARY_KEY, REVENUE_OPTIONS),
])
def test_the_sources_are_shaped_like_the_declared_tables(table: str, schema: pa.Schema, primary_key: tuple[str, ...],
                                                         options: dict[str, str]) -> None:
    """The YAML declares the shop tables; the generators, readers and aggregates shape rows by these schemas."""
    [entry] = [t for t in yaml.safe_load(DECLARATION.read_text())["attributes"]["tables"] if t["table"] == table]
    spec = table_spec(entry)

    assert [(f.name, f.type, f.nullable) for f in spec.arrow_schema()] == [
        (f.name, f.type, f.nullable) for f in schema]
    assert spec.primary_key == primary_key
    assert spec.table_options() == options
