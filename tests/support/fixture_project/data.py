"""The fixture project's rows: app events, a day's order changes, and what the derived tables
compute from them.

Deliberately plain (a few vectorized numpy draws per day, seeded by the date) and independent of
the demo's generators: the Dagster tests need deterministic days of a known shape, not realistic
data, and a change to the demo must not move them. Same day, same arguments: same rows.
"""

from __future__ import annotations

import datetime as dt_
import decimal
import zlib
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pac

from tests.support.fixture_project.tables import (
    CONTRIBUTION_SCHEMA,
    EVENTS_SCHEMA,
    ORDERS_SCHEMA,
    REVENUE_SCHEMA,
    TOTAL_TYPE,
)

LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
SERVICES = ("api", "auth", "billing", "search")
STATUSES = ("new", "paid", "shipped")
USERS = 200
MICROS_PER_DAY = 86_400_000_000
EPOCH = dt_.date(1970, 1, 1)
# Of the orders created in a day: the share paid, the share of the paid then shipped, and the
# share of the unshipped cancelled (about 3.6 changes per order in all).
P_PAID, P_SHIPPED, P_CANCELLED = 0.75, 0.6, 0.15
RETRACTIONS = ("-U", "-D")
CENT = decimal.Decimal("0.01")


def _rng(day: str, salt: str) -> np.random.Generator:
    date = dt_.date.fromisoformat(day)
    return np.random.default_rng([zlib.crc32(salt.encode()), date.year, date.month, date.day])


def _day_start_us(day: str) -> int:
    return (dt_.date.fromisoformat(day) - EPOCH).days * MICROS_PER_DAY


def events(day: str, *, rows: int, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    """``rows`` events of ``day`` in time order, as batches of at most ``batch_size`` rows."""
    if rows < 0 or batch_size < 1:
        raise ValueError(f"need rows >= 0 and batch_size >= 1, got {rows} and {batch_size}")
    rng = _rng(day, "events")
    start = _day_start_us(day)
    ts = np.sort(rng.integers(start, start + MICROS_PER_DAY, size=rows, dtype=np.int64))
    level = rng.integers(0, len(LEVELS), size=rows)
    service = rng.integers(0, len(SERVICES), size=rows)
    user = rng.integers(1, USERS + 1, size=rows, dtype=np.int64)
    day_events = pa.Table.from_arrays([
        pa.array(ts, pa.timestamp("us")),
        pa.array(LEVELS).take(pa.array(level)),
        pa.array(SERVICES).take(pa.array(service)),
        pac.binary_join_element_wise(pa.array(SERVICES).take(pa.array(service)), pa.scalar("1"), "-"),
        pac.binary_join_element_wise(pa.scalar("event"), pac.cast(pa.array(np.arange(rows)), pa.string()), " "),
        pa.array(user, mask=rng.random(rows) < 0.05),
        pa.array(np.round(rng.exponential(40.0, size=rows), 3)),
        pa.repeat(pa.scalar(day), rows),
    ], schema=EVENTS_SCHEMA)
    return iter(day_events.to_batches(max_chunksize=batch_size))


def order_changes(day: str, *, orders: int) -> pa.Table:
    """The day's change stream of ``orders`` new orders in the order it happened: each order's
    ``+I`` (status new), then for some a ``-U``/``+U`` pair to paid, for some of those another
    to shipped, and for some of the unshipped a ``-D``. Order ids are the date's digits followed
    by a running number; every change is timed inside the day."""
    if orders < 0:
        raise ValueError(f"orders must be >= 0, got {orders}")
    rng = _rng(day, "orders")
    start, end = _day_start_us(day), _day_start_us(day) + MICROS_PER_DAY - 1
    created = np.sort(rng.integers(start, start + MICROS_PER_DAY // 2, size=orders, dtype=np.int64))
    users = rng.integers(1, USERS + 1, size=orders, dtype=np.int64)
    cents = rng.integers(100, 20_000, size=orders, dtype=np.int64)
    paid = rng.random(orders) < P_PAID
    shipped = paid & (rng.random(orders) < P_SHIPPED)
    cancelled = ~shipped & (rng.random(orders) < P_CANCELLED)
    paid_at = np.minimum(created + rng.integers(1, 3_600_000_000, size=orders), end)
    shipped_at = np.minimum(paid_at + rng.integers(1, 3_600_000_000, size=orders), end)
    last_status = np.where(shipped, 2, np.where(paid, 1, 0))
    last_at = np.where(shipped, shipped_at, np.where(paid, paid_at, created))
    cancelled_at = np.minimum(last_at + rng.integers(1, 3_600_000_000, size=orders), end)
    # (who, when, status, kind) per step; the step number orders a key's changes at equal times.
    steps = [
        (np.arange(orders), created, 0, "+I"),
        (np.flatnonzero(paid), paid_at, 0, "-U"), (np.flatnonzero(paid), paid_at, 1, "+U"),
        (np.flatnonzero(shipped), shipped_at, 1, "-U"), (np.flatnonzero(shipped), shipped_at, 2, "+U"),
    ]
    who = [members for members, _, _, _ in steps] + [np.flatnonzero(cancelled)]
    when = [at[members] for members, at, _, _ in steps] + [cancelled_at[cancelled]]
    status = [np.full(len(m), s) for m, _, s, _ in steps] + [last_status[cancelled]]
    kind = [np.full(len(m), k, dtype=object) for m, _, _, k in steps] + [np.full(cancelled.sum(), "-D", dtype=object)]
    step = [np.full(len(m), n) for n, m in enumerate(who)]
    index, at, number = np.concatenate(who), np.concatenate(when), np.concatenate(step)
    order = np.lexsort((number, index, at))
    index = index[order]
    return pa.Table.from_arrays([
        pa.repeat(pa.scalar(day), len(index)),
        pa.array(day_ids(day, orders)[index]),
        pa.array(users[index]),
        pa.array(STATUSES).take(pa.array(np.concatenate(status)[order])),
        amounts(cents).take(pa.array(index)),
        pa.array(at[order], pa.timestamp("us")),
        pa.array(np.concatenate(kind)[order].tolist(), pa.string()),
    ], schema=ORDERS_SCHEMA)


def amounts(cents: np.ndarray) -> pa.Array:
    """Cents as the orders' DECIMAL amounts, exactly (an Arrow cast and a product, no Python loop)."""
    exact = pac.multiply(pa.array(cents).cast(pa.decimal128(19, 0)), pa.scalar(CENT, pa.decimal128(2, 2)))
    return exact.cast(ORDERS_SCHEMA.field("amount").type)


def day_ids(day: str, orders: int) -> np.ndarray:
    """The order ids of a day: its date's digits followed by a six-digit running number."""
    return int(day.replace("-", "")) * 1_000_000 + np.arange(orders, dtype=np.int64)


def order_batches(day: str, *, orders: int, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    """``order_changes`` as batches of at most ``batch_size`` rows."""
    return iter(order_changes(day, orders=orders).to_batches(max_chunksize=batch_size))


def user_contributions(live_orders: pa.Table, day: str) -> pa.Table:
    """One row per live order for the per-user aggregate, oldest update first (the write order
    is the merge order, so ``last_status`` is that of the user's latest order)."""
    ordered = live_orders.sort_by([("updated_at", "ascending"), ("order_id", "ascending")])
    amount = ordered.column("amount")
    return pa.table({
        "dt": pa.repeat(pa.scalar(day), ordered.num_rows),
        "user_id": ordered.column("user_id"),
        "order_count": pa.repeat(pa.scalar(1, pa.int64()), ordered.num_rows),
        "total_amount": pac.cast(amount, TOTAL_TYPE),
        "max_amount": amount,
        "last_status": ordered.column("status"),
        "statuses": ordered.column("status"),
        "last_updated_at": ordered.column("updated_at"),
    }, schema=CONTRIBUTION_SCHEMA)


def revenue_deltas(changes: pa.Table, *, kind_column: str = "_row_kind") -> pa.Table:
    """Signed order count and revenue per (dt, status) of a batch of order changes: ``+I``/``+U``
    add their order, ``-U``/``-D`` take it away; groups that net to nothing are left out."""
    retract = pac.is_in(changes.column(kind_column), pa.array(RETRACTIONS))
    amount = pac.fill_null(pac.cast(changes.column("amount"), TOTAL_TYPE), decimal.Decimal(0))
    signed = pa.table({"dt": changes.column("dt"), "status": pac.fill_null(changes.column("status"), "unknown"),
                       "order_count": pac.if_else(retract, pa.scalar(-1, pa.int64()), pa.scalar(1, pa.int64())),
                       "revenue": pac.if_else(retract, pac.negate(amount), amount)})
    sums = signed.group_by(["dt", "status"]).aggregate([("order_count", "sum"), ("revenue", "sum")])
    moved = pac.or_(pac.not_equal(sums["order_count_sum"], 0), pac.not_equal(sums["revenue_sum"], decimal.Decimal(0)))
    sums = sums.filter(moved).sort_by([("dt", "ascending"), ("status", "ascending")])
    return pa.Table.from_arrays([sums["dt"], sums["status"], sums["order_count_sum"],
                                 pac.cast(sums["revenue_sum"], TOTAL_TYPE)], schema=REVENUE_SCHEMA)
