"""Fixtures for the Dagster layer: a temp warehouse, a test instance and the real resources."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from pipelines.assets import RUN_TAGS, log_events
from pipelines.checks import log_events_partition_valid, orders_partition_valid
from pipelines.definitions import build_resources
from pipelines.order_assets import ORDERS_RUN_TAGS, shop_orders, user_order_totals
from resources import LogEventSource, OrderEventSource

# Small partitions keep every materialization well under a second.
ROWS = 1_500
# About 1,100 changes a day, streamed in batches of 500 so the writer sees several batches.
ORDERS = 300


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def resources(warehouse: str) -> dict[str, Any]:
    return build_resources(warehouse=warehouse,
                           log_source=LogEventSource(rows_per_partition=ROWS, batch_size=500),
                           order_source=OrderEventSource(orders_per_partition=ORDERS, batch_size=500))


class DayMaterializer:
    """Materializes the log-events asset (and its check) for one day, tagged like the job's runs."""

    def __init__(self, resources: dict[str, Any], instance: dg.DagsterInstance) -> None:
        self.resources = resources
        self.instance = instance

    def __call__(self, day: str, *, extra: Sequence[dg.AssetsDefinition] = (),
                 resources: dict[str, Any] | None = None,
                 raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        return dg.materialize([log_events, log_events_partition_valid, *extra], partition_key=day,
                              resources=resources or self.resources, instance=self.instance,
                              tags=RUN_TAGS, raise_on_error=raise_on_error)


@pytest.fixture
def materialize_day(resources: dict[str, Any], instance: dg.DagsterInstance) -> DayMaterializer:
    return DayMaterializer(resources, instance)


class OrdersDayMaterializer:
    """Materializes the shop assets (orders, their check, the per-user totals) for one day,
    tagged like the runs of ingest_orders_job."""

    def __init__(self, resources: dict[str, Any], instance: dg.DagsterInstance) -> None:
        self.resources = resources
        self.instance = instance

    def __call__(self, day: str, *, resources: dict[str, Any] | None = None,
                 raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        return dg.materialize([shop_orders, orders_partition_valid, user_order_totals], partition_key=day,
                              resources=resources or self.resources, instance=self.instance,
                              tags=ORDERS_RUN_TAGS, raise_on_error=raise_on_error)


@pytest.fixture
def materialize_orders(resources: dict[str, Any], instance: dg.DagsterInstance) -> OrdersDayMaterializer:
    return OrdersDayMaterializer(resources, instance)
