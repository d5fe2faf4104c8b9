"""Log events: the table schema, a deterministic synthetic generator and a landing-folder reader.

Both sources yield ``pyarrow.RecordBatch``es already shaped like the table, one batch at a time,
so ingesting a day needs memory for one batch (plus the writer's buffer), whatever its size.
"""

from __future__ import annotations

import datetime as dt_
import logging
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pac

from pipelines.demo.landing import (
    SourceDataError,
    landing_files,
    parse_day,
    read_file,
    require_landing_files,
    shape_batch,
)
from pipelines.demo.log_source import LogEventSource

log = logging.getLogger(__name__)

# Re-exported: the landing helpers used to live here and callers import them from this module.
__all__ = ["SCHEMA", "TABLE", "SourceDataError", "event_batches", "landing_batches", "landing_files",
           "parse_day", "synthetic_batches", "to_table_shape"]

TABLE = "logs.events"
PARTITION_COLUMN = "dt"
# Append table with unaware buckets; write-only because compaction is scheduled separately.
TABLE_OPTIONS = {"bucket": "-1", "write-only": "true"}

SCHEMA = pa.schema([
    pa.field("ts", pa.timestamp("us")),
    pa.field("level", pa.string()),
    pa.field("service", pa.string()),
    pa.field("host", pa.string()),
    pa.field("message", pa.string()),
    pa.field("user_id", pa.int64()),
    pa.field("latency_ms", pa.float64()),
    pa.field(PARTITION_COLUMN, pa.string()),
])
# What a landing file may carry: everything but the partition column, which the layout decides.
PAYLOAD_SCHEMA = pa.schema([f for f in SCHEMA if f.name != PARTITION_COLUMN])

LEVELS = ("DEBUG", "INFO", "WARN", "ERROR")
LEVEL_WEIGHTS = (0.10, 0.76, 0.09, 0.05)
LEVEL_PHRASES = ("cache lookup finished", "request completed", "slow response from upstream",
                 "request failed with upstream error")
# Status codes per level (rows follow LEVELS); one column is drawn uniformly.
LEVEL_STATUS = np.array([[200, 200, 304], [200, 201, 204], [404, 429, 408], [500, 502, 503]])
# Latency multiplier per level: warnings and errors are slow.
LEVEL_LATENCY = np.array([0.3, 1.0, 4.0, 6.0])
SERVICES = ("api-gateway", "auth", "billing", "catalog", "checkout", "inventory", "notifications",
            "search")
HOSTS_PER_SERVICE = 3
HOSTS = tuple(f"{service}-{n:02d}" for service in SERVICES for n in range(1, HOSTS_PER_SERVICE + 1))
ROUTES = ("/api/v1/orders", "/api/v1/cart/items", "/api/v1/users/me", "/api/v1/search",
          "/api/v1/payments", "/api/v1/products", "/healthz", "/api/v1/sessions")
METHODS = ("GET", "POST", "PUT", "DELETE")
METHOD_WEIGHTS = (0.70, 0.20, 0.07, 0.03)
ANONYMOUS_SHARE = 0.03
SEED_SALT = 0x5041494D  # "PAIM": keeps these streams apart from other seeded generators
MICROS_PER_DAY = 86_400_000_000
EPOCH = dt_.date(1970, 1, 1)


def day_seed(day: str) -> np.random.SeedSequence:
    """The root seed of a day: the same date always gives the same events."""
    date = parse_day(day)
    return np.random.SeedSequence([SEED_SALT, date.year, date.month, date.day])


# ---- synthetic ------------------------------------------------------------------------------


def synthetic_batches(day: str, *, rows: int, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    """``rows`` deterministic events for ``day``, as batches of at most ``batch_size`` rows.

    Batch ``i`` draws from its own child seed and covers a slice of the day proportional to
    its rows, so timestamps increase across batches at an even rate and no batch depends on
    another being generated. Arguments are checked now, the batches are generated lazily.
    """
    if rows < 0 or batch_size < 1:
        raise ValueError(f"need rows >= 0 and batch_size >= 1, got {rows} and {batch_size}")
    start_us = (parse_day(day) - EPOCH).days * MICROS_PER_DAY
    seeds = day_seed(day).spawn(math.ceil(rows / batch_size))
    return _generate(day, seeds, rows=rows, batch_size=batch_size, start_us=start_us)


def _generate(day: str, seeds: list[np.random.SeedSequence], *, rows: int, batch_size: int,
              start_us: int) -> Iterator[pa.RecordBatch]:
    for seed, first in zip(seeds, range(0, rows, batch_size), strict=True):
        last = min(first + batch_size, rows)
        window = (start_us + MICROS_PER_DAY * first // rows, start_us + MICROS_PER_DAY * last // rows)
        yield _synthetic_batch(np.random.default_rng(seed), day, size=last - first, window=window)


def _synthetic_batch(rng: np.random.Generator, day: str, *, size: int,
                     window: tuple[int, int]) -> pa.RecordBatch:
    """One batch of events: every column drawn with vectorized numpy, strings built by Arrow."""
    ts = np.sort(rng.integers(window[0], window[1], size=size, dtype=np.int64))
    level = rng.choice(len(LEVELS), size=size, p=LEVEL_WEIGHTS)
    service = (rng.zipf(1.6, size=size) - 1) % len(SERVICES)
    host = service * HOSTS_PER_SERVICE + rng.integers(0, HOSTS_PER_SERVICE, size=size)
    latency = rng.lognormal(mean=math.log(35.0), sigma=0.7, size=size) * LEVEL_LATENCY[level]
    user_id = rng.integers(1, 250_000, size=size, dtype=np.int64)
    anonymous = rng.random(size) < ANONYMOUS_SHARE
    return pa.RecordBatch.from_arrays([
        pa.array(ts, pa.timestamp("us")),
        _pick(LEVELS, level),
        _pick(SERVICES, service),
        _pick(HOSTS, host),
        _messages(rng, level),
        pa.array(user_id, pa.int64(), mask=anonymous),
        pa.array(np.round(latency, 3), pa.float64()),
        pa.repeat(pa.scalar(day, pa.string()), size),
    ], schema=SCHEMA)


def _pick(values: tuple[str, ...], indices: np.ndarray) -> pa.Array:
    """Strings by index through an Arrow ``take`` (no per-row Python objects)."""
    return pa.array(values, pa.string()).take(pa.array(indices))


def _messages(rng: np.random.Generator, level: np.ndarray) -> pa.Array:
    """Messages of about 80 characters: method, route, phrase per level, status and request id."""
    size = len(level)
    method = rng.choice(len(METHODS), size=size, p=METHOD_WEIGHTS)
    route = rng.integers(0, len(ROUTES), size=size)
    status = LEVEL_STATUS[level, rng.integers(0, LEVEL_STATUS.shape[1], size=size)]
    request_id = rng.integers(10**15, 10**16, size=size, dtype=np.int64)
    return pac.binary_join_element_wise(
        _pick(METHODS, method), " ", _pick(ROUTES, route), " ", _pick(LEVEL_PHRASES, level),
        " status=", pac.cast(pa.array(status), pa.string()),
        " request_id=", pac.cast(pa.array(request_id), pa.string()), "")


# ---- landing folder -------------------------------------------------------------------------


def landing_batches(root: Path, day: str, *, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
    """Stream the day's landing files as table-shaped batches.

    Raises:
        SourceDataError: no file for ``day`` (raised here, before any batch is requested, so a
            missing delivery fails the run instead of committing an empty partition).
    """
    files = require_landing_files(root, day)
    log.info("reading %d landing file(s) for %s from %s", len(files), day, root)
    return _stream_files(files, day, batch_size=batch_size)


def _stream_files(files: list[Path], day: str, *, batch_size: int) -> Iterator[pa.RecordBatch]:
    for path in files:
        for batch in read_file(path, PAYLOAD_SCHEMA, batch_size=batch_size):
            yield to_table_shape(batch, day, source=path)


def to_table_shape(batch: pa.RecordBatch, day: str, *, source: Path | str) -> pa.RecordBatch:
    """Select, order and safely cast the payload columns; missing ones become nulls, ``dt`` is ``day``."""
    return shape_batch(batch, SCHEMA, partition_column=PARTITION_COLUMN, day=day, source=source)


# ---- dispatch -------------------------------------------------------------------------------


def event_batches(source: LogEventSource, day: str) -> Iterator[pa.RecordBatch]:
    """The day's events from whichever source the resource is configured for."""
    if source.mode == "synthetic":
        return synthetic_batches(day, rows=source.rows_per_partition, batch_size=source.batch_size)
    return landing_batches(source.landing_path(), day, batch_size=source.batch_size)
