"""Shop orders: the CDC stream of a day, the primary-key tables it feeds and their schemas.

A day's change stream holds, in the order the changes happened, one ``+I`` per order created
that day, a ``-U``/``+U`` pair (before and after image) for every later change of it that day
(an amount correction, ``new`` -> ``paid`` -> ``shipped``) and a ``-D`` (with the before image)
when it is cancelled. Applied to a deduplicate primary-key table with ``rowkind.field = op``,
the newest change of each key wins and a ``-D`` removes the key, so applying the same stream
again leaves exactly the same table: that is what makes re-materializing a day idempotent.

Two sources produce the stream as table-shaped ``pyarrow.RecordBatch``es: a deterministic
generator (vectorized numpy, seeded by the date) and a landing folder of Parquet/JSON-lines
files with an ``op`` column.
"""

from __future__ import annotations

import datetime as dt_
import decimal
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pac

from pipelines.demo.landing import SourceDataError, parse_day, read_file, require_landing_files, shape_batch
from pipelines.demo.order_source import MAX_ORDERS_PER_DAY, OrderEventSource

log = logging.getLogger(__name__)

ORDERS_TABLE = "shop.orders"
TOTALS_TABLE = "shop.user_order_totals"
PARTITION_COLUMN = "dt"
OP_COLUMN = "op"
ORDERS_PRIMARY_KEY = (PARTITION_COLUMN, "order_id")
TOTALS_PRIMARY_KEY = (PARTITION_COLUMN, "user_id")

# Change kinds as Paimon names them; the index of a kind is its code in the generator.
CDC_KINDS = ("+I", "-U", "+U", "-D")
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = range(len(CDC_KINDS))
# Statuses a live order can have; a cancellation deletes the order instead of setting a status.
ORDER_STATUSES = ("new", "paid", "shipped")

AMOUNT_TYPE = pa.decimal128(12, 2)
TOTAL_TYPE = pa.decimal128(18, 2)  # still <= 18 digits, so Paimon's sum stays exact and vectorized

ORDERS_SCHEMA = pa.schema([
    pa.field(PARTITION_COLUMN, pa.string(), nullable=False),
    pa.field("order_id", pa.int64(), nullable=False),
    pa.field("user_id", pa.int64()),
    pa.field("status", pa.string()),
    pa.field("amount", AMOUNT_TYPE),
    pa.field("updated_at", pa.timestamp("us")),
    pa.field(OP_COLUMN, pa.string()),
])
# Deduplicate: the newest change of a key wins and -D removes it. The op column is stored as a
# normal column too, so a reader sees whether a live order was last inserted or updated.
# Fixed buckets keep the key -> file placement stable; write-only as compaction runs elsewhere.
#
# Changelog: every full compaction (output at the max level) compares each key's old max-level
# row with the merged one and writes -U/+U, +I or -D rows for the keys that changed, which
# downstream consumers stream (shop/order_revenue_by_status). A full compaction rewrites every
# written partition's buckets whole, so Paimon's default for this producer (one full compaction
# per commit) would rewrite the current day at each of its ~5 commits. 5 commits between full
# compactions is the level-0 compaction trigger (num-sorted-run.compaction-trigger): the
# compaction sensor launches about as many runs as minor compactions alone would, each folding
# a day's worth of level-0 files once, and a change reaches the changelog at most 5 commits
# (one synthetic day, or 5 checkpoints of a streaming writer) after it was written.
# Row-deduplicate: a key rewritten with the same values (a day re-applied, an idempotent retry)
# is no change, so it writes no -U/+U pair.
ORDERS_CHANGELOG_OPTIONS = {
    "changelog-producer": "full-compaction",
    "full-compaction.delta-commits": "5",
    "changelog-producer.row-deduplicate": "true",
}
ORDERS_OPTIONS = {
    "bucket": "4",
    "merge-engine": "deduplicate",
    "rowkind.field": OP_COLUMN,
    "write-only": "true",
    **ORDERS_CHANGELOG_OPTIONS,
}
# A landing file may omit any column (a -D often carries the key only) and may carry dt.
LANDING_SCHEMA = pa.schema([f.with_nullable(True) for f in ORDERS_SCHEMA])

TOTALS_SCHEMA = pa.schema([
    pa.field(PARTITION_COLUMN, pa.string(), nullable=False),
    pa.field("user_id", pa.int64(), nullable=False),
    pa.field("order_count", pa.int64()),
    pa.field("total_amount", TOTAL_TYPE),
    pa.field("max_amount", AMOUNT_TYPE),
    pa.field("last_status", pa.string()),
    pa.field("statuses", pa.string()),
    pa.field("last_updated_at", pa.timestamp("us")),
])
# Aggregation: every row written is one order's contribution and the merge engine folds the
# contributions of a user per column. Re-runs overwrite the day's partition, so they replace
# the contributions instead of adding them a second time.
TOTALS_OPTIONS = {
    "bucket": "2",
    "merge-engine": "aggregation",
    "fields.order_count.aggregate-function": "sum",
    "fields.total_amount.aggregate-function": "sum",
    "fields.max_amount.aggregate-function": "max",
    "fields.last_status.aggregate-function": "last_non_null_value",
    "fields.statuses.aggregate-function": "listagg",
    "fields.statuses.distinct": "true",
    "fields.last_updated_at.aggregate-function": "max",
    "write-only": "true",
}
# Contributions are built nullable; the table refuses a null key on write, naming the column.
CONTRIBUTION_SCHEMA = pa.schema([f.with_nullable(True) for f in TOTALS_SCHEMA])
# What the aggregation needs from an orders partition (the IO manager reads only these).
CONTRIBUTION_COLUMNS = (PARTITION_COLUMN, "order_id", "user_id", "status", "amount", "updated_at")

REVENUE_TABLE = "shop.order_revenue_by_status"
REVENUE_PRIMARY_KEY = (PARTITION_COLUMN, "status")
REVENUE_SCHEMA = pa.schema([
    pa.field(PARTITION_COLUMN, pa.string(), nullable=False),
    pa.field("status", pa.string(), nullable=False),
    pa.field("order_count", pa.int64()),
    pa.field("revenue", TOTAL_TYPE),
])
# Aggregation: each batch of order changes consumed from shop.orders' changelog is written as one
# signed row per (day, status) it touched, and Paimon sums them. A few rows per day: one bucket,
# no partitions. Write-only like the other tables: its own compaction sensor compacts it.
REVENUE_OPTIONS = {
    "bucket": "1",
    "merge-engine": "aggregation",
    "fields.order_count.aggregate-function": "sum",
    "fields.revenue.aggregate-function": "sum",
    "write-only": "true",
}
# What the revenue aggregate reads from a change batch (besides the row kind).
REVENUE_SOURCE_COLUMNS = (PARTITION_COLUMN, "status", "amount")
# The group of an order without a status (a landing file's -D may carry the key only).
UNKNOWN_STATUS = "unknown"
# Change kinds that take an order's previous version away; +I and +U add the new one.
RETRACT_KINDS = ("-U", "-D")

# ---- synthetic stream parameters ------------------------------------------------------------

SEED_SALT = 0x4F524453  # "ORDS": keeps these streams apart from the log-event generator's
MICROS_PER_DAY = 86_400_000_000
MICROS_PER_MINUTE = 60_000_000
EPOCH = dt_.date(1970, 1, 1)
USERS = 1_000
# Orders are created in the first 80% of the day, so most of their changes land the same day;
# changes that would fall after midnight are clamped to the day's last microsecond.
CREATION_WINDOW = 0.8
# Version slots of an order: created, amount corrected, paid, shipped (status per slot).
SLOT_STATUS = ("new", "new", "paid", "shipped")
P_CORRECTION, P_PAID, P_SHIPPED_IF_PAID, P_CANCEL_IF_NOT_SHIPPED = 0.10, 0.75, 0.60, 0.15
# Mean minutes from the previous version to each slot's version (exponentially distributed).
SLOT_DELAY_MINUTES = np.array([0.0, 5.0, 20.0, 240.0])
CANCEL_DELAY_MINUTES = 60.0
AMOUNT_MEDIAN_CENTS = 4_000
MIN_CENTS = 100
# Step of a -D among an order's changes: after every -U/+U pair (slots give steps 0..6).
DELETE_STEP = 2 * len(SLOT_STATUS)


def day_seed(day: str) -> np.random.SeedSequence:
    """The root seed of a day: the same date always gives the same stream."""
    date = parse_day(day)
    return np.random.SeedSequence([SEED_SALT, date.year, date.month, date.day])


def first_order_id(day: str) -> int:
    """Order ids of a day are ``YYYYMMDDnnnnnn``: unique across days, readable, increasing."""
    return int(parse_day(day).strftime("%Y%m%d")) * (MAX_ORDERS_PER_DAY + 1) + 1


# ---- synthetic ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Versions:
    """Every version of every order of a day, grouped by order, oldest version first.

    ``order`` indexes the day's orders; ``slot`` is 0 (created), 1 (corrected), 2 (paid) or 3
    (shipped); ``first`` and ``last`` give each order's first and last version index.
    """

    order: np.ndarray
    slot: np.ndarray
    time: np.ndarray
    cents: np.ndarray
    first: np.ndarray
    last: np.ndarray


@dataclass(frozen=True, slots=True)
class Changes:
    """The change events: whose values they carry (a version), their kind, time and step."""

    version: np.ndarray
    order: np.ndarray
    kind: np.ndarray
    time: np.ndarray
    step: np.ndarray


def synthetic_cdc(day: str, *, orders: int) -> pa.Table:
    """The day's complete change stream for ``orders`` new orders, in the order it happened.

    Every draw is a vectorized numpy call in a fixed sequence from the day's seed, so the same
    day always yields the same stream, and no row is built in Python.
    """
    if not 0 <= orders <= MAX_ORDERS_PER_DAY:
        raise ValueError(f"orders must be in 0..{MAX_ORDERS_PER_DAY}, got {orders}")
    rng = np.random.default_rng(day_seed(day))
    start_us = (parse_day(day) - EPOCH).days * MICROS_PER_DAY
    end_us = start_us + MICROS_PER_DAY - 1
    created = np.sort(rng.integers(start_us, start_us + int(MICROS_PER_DAY * CREATION_WINDOW), size=orders))
    user_id = rng.integers(1, USERS + 1, size=orders, dtype=np.int64)
    versions = _versions(rng, created, end_us=end_us)
    cancelled = (versions.slot[versions.last] < 3) & (rng.random(orders) < P_CANCEL_IF_NOT_SHIPPED)
    cancel_delay = rng.exponential(CANCEL_DELAY_MINUTES * MICROS_PER_MINUTE, size=orders).astype(np.int64)
    changes = _changes(versions, cancelled=cancelled,
                       cancel_time=np.minimum(versions.time[versions.last] + cancel_delay, end_us))
    return _to_table(day, versions, changes, order_id=first_order_id(day) + np.arange(orders), user_id=user_id)


def _versions(rng: np.random.Generator, created: np.ndarray, *, end_us: int) -> Versions:
    """Which of the four version slots each order goes through, when, and at what amount."""
    n = len(created)
    paid = rng.random(n) < P_PAID
    present = np.column_stack([np.ones(n, dtype=bool), rng.random(n) < P_CORRECTION, paid,
                               paid & (rng.random(n) < P_SHIPPED_IF_PAID)])
    delays = rng.exponential(SLOT_DELAY_MINUTES * MICROS_PER_MINUTE, size=(n, len(SLOT_STATUS)))
    times = np.minimum(created[:, None] + np.cumsum(delays * present, axis=1).astype(np.int64), end_us)
    original = np.maximum(MIN_CENTS, np.round(rng.lognormal(math.log(AMOUNT_MEDIAN_CENTS), 0.8, size=n)))
    corrected = np.maximum(MIN_CENTS, np.round(original * rng.uniform(0.8, 1.2, size=n)))
    settled = np.where(present[:, 1], corrected, original)
    cents = np.column_stack([original, corrected, settled, settled]).astype(np.int64)
    order, slot = np.nonzero(present)  # row-major: grouped by order, slots ascending
    first = np.flatnonzero(slot == 0)  # slot 0 (created) is always present
    last = np.append(first[1:], len(slot))[:len(first)] - 1
    return Versions(order=order, slot=slot, time=times[order, slot], cents=cents[order, slot],
                    first=first, last=last)


def _changes(versions: Versions, *, cancelled: np.ndarray, cancel_time: np.ndarray) -> Changes:
    """+I per created version, a -U/+U pair per later version, -D per cancelled order; time-ordered.

    A -U carries the previous version (the before image) and a -D the last one, as CDC tools
    such as Debezium emit them. Sorting by (time, order, step) interleaves the orders as they
    happened while keeping each order's changes in their own order, even on equal times.
    """
    created = np.flatnonzero(versions.slot == 0)
    updated = np.flatnonzero(versions.slot > 0)
    rank = np.arange(len(versions.slot)) - versions.first[versions.order]
    gone = np.flatnonzero(cancelled)
    version = np.concatenate([created, updated - 1, updated, versions.last[gone]])
    order = np.concatenate([versions.order[created], versions.order[updated], versions.order[updated], gone])
    kind = np.concatenate([np.full(len(created), INSERT), np.full(len(updated), UPDATE_BEFORE),
                           np.full(len(updated), UPDATE_AFTER), np.full(len(gone), DELETE)])
    time = np.concatenate([versions.time[created], versions.time[updated], versions.time[updated],
                           cancel_time[gone]])
    step = np.concatenate([np.zeros(len(created), dtype=np.int64), 2 * rank[updated] - 1, 2 * rank[updated],
                           np.full(len(gone), DELETE_STEP)])
    ordering = np.lexsort((step, order, time))
    return Changes(version=version[ordering], order=order[ordering], kind=kind[ordering],
                   time=time[ordering], step=step[ordering])


def _to_table(day: str, versions: Versions, changes: Changes, *, order_id: np.ndarray,
              user_id: np.ndarray) -> pa.Table:
    """The change rows, each column gathered with Arrow ``take`` from the version arrays."""
    version = changes.version
    return pa.Table.from_arrays([
        pa.repeat(pa.scalar(day, pa.string()), len(version)),
        pa.array(order_id[changes.order], pa.int64()),
        pa.array(user_id[changes.order], pa.int64()),
        _pick(SLOT_STATUS, versions.slot[version]),
        cents_to_amount(versions.cents[version]),
        pa.array(versions.time[version], pa.timestamp("us")),
        _pick(CDC_KINDS, changes.kind),
    ], schema=ORDERS_SCHEMA)


def _pick(values: tuple[str, ...], indices: np.ndarray) -> pa.Array:
    """Strings by index through an Arrow ``take`` (no per-row Python objects)."""
    return pa.array(values, pa.string()).take(pa.array(indices))


def cents_to_amount(cents: np.ndarray) -> pa.Array:
    """Exact decimals from integer cents (no float rounding on the way)."""
    unscaled = pa.array(cents, pa.int64()).cast(pa.decimal128(19, 0))
    return pac.multiply(unscaled, pa.scalar(decimal.Decimal("0.01"), pa.decimal128(3, 2))).cast(AMOUNT_TYPE)


def synthetic_batches(day: str, *, orders: int, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    """The day's synthetic stream as batches of at most ``batch_size`` rows, generated lazily.

    Arguments are checked now; the day is generated when the first batch is requested, so a
    retried step that finds its commit already landed never pays for generating it.
    """
    parse_day(day)
    if not 0 <= orders <= MAX_ORDERS_PER_DAY or batch_size < 1:
        raise ValueError(f"need 0 <= orders <= {MAX_ORDERS_PER_DAY} and batch_size >= 1, "
                         f"got {orders} and {batch_size}")
    return _slices(day, orders=orders, batch_size=batch_size)


def _slices(day: str, *, orders: int, batch_size: int) -> Iterator[pa.RecordBatch]:
    yield from synthetic_cdc(day, orders=orders).to_batches(max_chunksize=batch_size)


# ---- landing folder -------------------------------------------------------------------------


def landing_batches(root: Path, day: str, *, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    """Stream the day's CDC files as table-shaped batches, in file-name then row order.

    Raises:
        SourceDataError: no file for ``day`` (raised here, before any batch is requested), or,
            while streaming, a batch without ``order_id`` or ``op``, an ``op`` other than
            +I/-U/+U/-D, or a ``dt`` other than ``day``. Nothing is committed then.
    """
    files = require_landing_files(root, day)
    log.info("reading %d CDC file(s) for %s from %s", len(files), day, root)
    return _stream_files(files, day, batch_size=batch_size)


def _stream_files(files: list[Path], day: str, *, batch_size: int) -> Iterator[pa.RecordBatch]:
    for path in files:
        for batch in read_file(path, LANDING_SCHEMA, batch_size=batch_size):
            yield to_table_shape(batch, day, source=path)


def to_table_shape(batch: pa.RecordBatch, day: str, *, source: Path | str) -> pa.RecordBatch:
    """Check the change rows of one raw batch, then select, order and cast them like the table."""
    _check_required(batch, source)
    _check_kinds(batch.column(OP_COLUMN), source)
    if PARTITION_COLUMN in batch.schema.names:
        _check_day(batch.column(PARTITION_COLUMN), day, source)
    return shape_batch(batch, ORDERS_SCHEMA, partition_column=PARTITION_COLUMN, day=day, source=source)


def _check_required(batch: pa.RecordBatch, source: Path | str) -> None:
    """A change without its key or its kind cannot be applied."""
    for name in ("order_id", OP_COLUMN):
        if name not in batch.schema.names:
            raise SourceDataError(f"{source} has no {name!r} column; CDC files need order_id and op")
        if batch.column(name).null_count:
            raise SourceDataError(f"{source} has rows without {name!r}")


def _check_kinds(op: pa.Array, source: Path | str) -> None:
    known = pac.is_in(pac.cast(op, pa.string()), value_set=pa.array(CDC_KINDS))
    if not pac.all(known).as_py():
        bad = op.filter(pac.invert(known))[0].as_py()
        raise SourceDataError(f"{source} has op {bad!r}; expected one of {', '.join(CDC_KINDS)}")


def _check_day(column: pa.Array, day: str, source: Path | str) -> None:
    """A change of another day's order would create a phantom order in this partition."""
    values = pac.cast(column, pa.string())
    other = pac.fill_null(pac.not_equal(values, day), False)
    if pac.any(other).as_py():
        bad = values.filter(other)[0].as_py()
        raise SourceDataError(f"{source} holds a change of an order of {bad}, not of {day}; a day's "
                              "files may only change the orders created that day")


# ---- dispatch -------------------------------------------------------------------------------


def order_batches(source: OrderEventSource, day: str) -> Iterator[pa.RecordBatch]:
    """The day's change stream from whichever source the resource is configured for."""
    if source.mode == "synthetic":
        return synthetic_batches(day, orders=source.orders_per_partition, batch_size=source.batch_size)
    return landing_batches(source.landing_path(), day, batch_size=source.batch_size)


# ---- per-user totals ------------------------------------------------------------------------


def user_contributions(live_orders: pa.Table, day: str) -> pa.Table:
    """One aggregation-table row per live order, oldest update first.

    The aggregation merge engine sums, maxes and concatenates these rows per (dt, user_id); the
    write order is the merge order, so sorting by ``updated_at`` makes ``last_status`` the
    status of the user's most recently updated order.
    """
    ordered = live_orders.sort_by([("updated_at", "ascending"), ("order_id", "ascending")])
    rows = ordered.num_rows
    return pa.Table.from_arrays([
        pa.repeat(pa.scalar(day, pa.string()), rows),
        ordered.column("user_id"),
        pa.repeat(pa.scalar(1, pa.int64()), rows),
        pac.cast(ordered.column("amount"), TOTAL_TYPE),
        ordered.column("amount"),
        ordered.column("status"),
        ordered.column("status"),
        ordered.column("updated_at"),
    ], schema=CONTRIBUTION_SCHEMA)


# ---- revenue by status (from the changelog) -------------------------------------------------


def revenue_deltas(changes: pa.Table, *, kind_column: str = "_row_kind") -> pa.Table:
    """What ``changes`` add to revenue and order count per (dt, status), one row per group.

    ``+I``/``+U`` rows add their order (+1, +amount) to their status, ``-U``/``-D`` rows take
    it away (-1, -amount), so an order moving from ``new`` to ``paid`` (a -U/+U pair) moves
    its count and amount between the two groups. Groups whose changes cancel out are left out.
    A missing amount counts as 0, a missing status as ``unknown``. Sorted by (dt, status).
    """
    retract = pac.is_in(changes.column(kind_column), value_set=pa.array(RETRACT_KINDS))
    count = pac.if_else(retract, pa.scalar(-1, pa.int64()), pa.scalar(1, pa.int64()))
    amount = pac.fill_null(pac.cast(changes.column("amount"), TOTAL_TYPE), pa.scalar(decimal.Decimal(0), TOTAL_TYPE))
    signed = pa.table({
        PARTITION_COLUMN: changes.column(PARTITION_COLUMN),
        "status": pac.fill_null(changes.column("status"), UNKNOWN_STATUS),
        "order_count": count,
        "revenue": pac.if_else(retract, pac.negate(amount), amount),
    })
    sums = signed.group_by([PARTITION_COLUMN, "status"]).aggregate([("order_count", "sum"), ("revenue", "sum")])
    changed = pac.or_(pac.not_equal(sums["order_count_sum"], 0),
                      pac.not_equal(sums["revenue_sum"], pa.scalar(decimal.Decimal(0), sums["revenue_sum"].type)))
    sums = sums.filter(changed).sort_by([(PARTITION_COLUMN, "ascending"), ("status", "ascending")])
    return pa.Table.from_arrays([sums[PARTITION_COLUMN], sums["status"], sums["order_count_sum"],
                                 pac.cast(sums["revenue_sum"], TOTAL_TYPE)], schema=REVENUE_SCHEMA)
