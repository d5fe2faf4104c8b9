"""The functions the fixture project's YAML names, and the resources they ask for by name.

They import ``data`` when called: ``data`` takes its schemas from the declarations, whose
resolution imports this module.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pyarrow as pa
from pydantic import Field


class EventSource(dg.ConfigurableResource):
    """How many events a day has, and in what batches they reach the writer."""

    rows_per_partition: int = Field(default=1_500, ge=0, description="Events per day.")
    batch_size: int = Field(default=500, ge=1, description="Rows per record batch.")


class OrderSource(dg.ConfigurableResource):
    """How many orders are created a day (about 3.5 changes each), and the batch size."""

    orders_per_partition: int = Field(default=300, ge=0, description="Orders created per day.")
    batch_size: int = Field(default=500, ge=1, description="Rows per record batch.")


def events(context: dg.AssetExecutionContext, event_source: EventSource) -> Iterator[pa.RecordBatch]:
    from tests.support.fixture_project import data

    return data.events(context.partition_key, rows=event_source.rows_per_partition,
                       batch_size=event_source.batch_size)


def order_changes(context: dg.AssetExecutionContext, order_source: OrderSource) -> Iterator[pa.RecordBatch]:
    from tests.support.fixture_project import data

    return data.order_batches(context.partition_key, orders=order_source.orders_per_partition,
                              batch_size=order_source.batch_size)


def user_totals(context: dg.AssetExecutionContext, orders: pa.Table) -> pa.Table:
    from tests.support.fixture_project import data

    return data.user_contributions(orders, context.partition_key)


def revenue_changes(changes: pa.Table) -> pa.Table:
    from tests.support.fixture_project import data

    return data.revenue_deltas(changes)


def resources(**changes: dg.ConfigurableResource) -> dict[str, dg.ConfigurableResource]:
    """The sources the functions ask for, at the tests' sizes, some replaced by ``changes``."""
    return {"event_source": EventSource(), "order_source": OrderSource(), **changes}
