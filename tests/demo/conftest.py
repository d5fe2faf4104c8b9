"""Fixtures for the demo's own tests: its definitions (``pipelines/demo/defs``) on a temp
warehouse and test instance, with its sources at small sizes."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from pipelines import names
from pipelines.definitions import load
from pipelines.demo.log_source import LogEventSource
from pipelines.demo.order_source import OrderEventSource
from tests.support.dagster_runs import DayMaterializer, JobRunner, OrdersDayMaterializer

# Small partitions keep every materialization well under a second.
ROWS = 1_500
# About 1,100 changes a day, streamed in batches of 500 so the writer sees several batches.
ORDERS = 300
LOGS_JOB = names.ingestion_job("logs.events")
ORDERS_JOB = names.ingestion_job("shop.orders")
TOTALS_JOB = names.ingestion_job("shop.user_order_totals")


def small_sources(**changes: Any) -> dict[str, Any]:
    """The demo's sources with small partitions (``log_source`` / ``order_source`` overrides)."""
    return {"log_source": LogEventSource(rows_per_partition=ROWS, batch_size=500),
            "order_source": OrderEventSource(orders_per_partition=ORDERS, batch_size=500), **changes}


@pytest.fixture
def demo_defs(warehouse: str) -> dg.Definitions:
    """The demo's definitions (its YAML tables) on the test's warehouse, with small sources."""
    return load(warehouse, **small_sources())


@pytest.fixture
def definitions(demo_defs: dg.Definitions) -> dg.Definitions:
    """What ``resources``, ``catalog`` and ``run_job`` (``tests.support.dagster_runs``) run here."""
    return demo_defs


@pytest.fixture
def materialize_day(run_job: JobRunner) -> DayMaterializer:
    """One day of logs.events through its ingestion job."""
    return DayMaterializer(run_job, LOGS_JOB)


@pytest.fixture
def materialize_orders(run_job: JobRunner) -> OrdersDayMaterializer:
    """One day of shop.orders, then of shop.user_order_totals."""
    return OrdersDayMaterializer(run_job, ORDERS_JOB, TOTALS_JOB)
