"""The demo's source functions: what its tables' YAML declarations name as ``ingestion.function``.

Each takes the asset's context (and the resources it names) and returns the partition's rows;
the integration writes them with the table's mode. The generators behind them are seeded by the
day, so re-running a day reproduces the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg
import pyarrow as pa

from pipelines.demo.log_events import event_batches
from pipelines.demo.log_source import LogEventSource
from pipelines.demo.order_source import OrderEventSource
from pipelines.demo.orders import order_batches, revenue_deltas, user_contributions


def log_events(context: dg.AssetExecutionContext, log_source: LogEventSource) -> Iterator[pa.RecordBatch]:
    """One day of log events, generated or read from the landing folder (batch by batch)."""
    return event_batches(log_source, context.partition_key)


def order_changes(context: dg.AssetExecutionContext, order_source: OrderEventSource) -> Iterator[pa.RecordBatch]:
    """One day's order change stream (+I/-U/+U/-D in its op column), in the order it happened."""
    return order_batches(order_source, context.partition_key)


def user_totals(context: dg.AssetExecutionContext, orders: pa.Table) -> pa.Table:
    """One aggregation row per live order of the day; Paimon folds them per user."""
    return user_contributions(orders, context.partition_key)


def revenue_changes(changes: pa.Table) -> pa.Table:
    """Signed revenue and order count per (dt, status) of one batch of shop.orders' changes."""
    return revenue_deltas(changes)
