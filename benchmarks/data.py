"""The rows that several suites share, and the Arrow IPC files they are stored in.

* Log events (:func:`log_events`): the append suite's dataset, and the compaction suite's append
  scenario.
* Keyed rows (:func:`keyed_rows`): the primary-key suite's dataset, and the compaction and
  changelog suites' keyed tables.

Everything is generated with numpy from a seed the suite picks, so a dataset is the same on every
run. Step processes read these files in every virtualenv (pyarrow 19 and 26), so this module
imports nothing but the standard library, numpy and pyarrow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger("benchmarks")

BATCH_ROWS = 65_536  # record batches of a dataset written whole (the streaming-ingest batch size too)
T0_US = int(np.datetime64("2024-01-01T00:00:00", "us").astype(np.int64))
DAY_US = 86_400_000_000
HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def random_hex(rng: np.random.Generator, n: int, width: int) -> pa.Array:
    """``n`` random lowercase hex strings of ``width`` characters, built without Python loops."""
    chars = HEX[rng.integers(0, len(HEX), n * width)]
    offsets = np.arange(0, n * width + 1, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


def _pick(values: list[str], codes: np.ndarray) -> pa.Array:
    return pa.array(values).take(pa.array(codes))


# ---- log events ----------------------------------------------------------------------------------

DAYS = [f"2024-01-0{d}" for d in range(1, 8)]
LEVELS = ["INFO", "DEBUG", "WARN", "ERROR"]
LEVEL_WEIGHTS = [0.80, 0.12, 0.05, 0.03]
SERVICES = [f"svc-{name}" for name in (
    "gateway", "auth", "users", "orders", "billing", "payments", "search", "catalog", "cart",
    "inventory", "shipping", "notify", "email", "reports", "media", "geo", "pricing", "reviews",
    "ads", "audit")]
HOSTS = [f"ip-10-{i // 50}-{i % 50}-{7 * i % 250}.eu-west-1.compute.internal" for i in range(200)]
METHODS = ["GET", "GET", "GET", "POST", "PUT", "DELETE"]
RESOURCES = ["orders", "users", "carts", "items", "payments", "sessions", "invoices", "reviews"]
OUTCOMES = ["200", "200", "200", "201", "204", "304", "400", "404", "500", "503"]
NOTES = ["ok", "cache hit", "cache miss", "retry 1/3", "slow upstream", "db pool wait",
         "rate limited", "compressed", "token refreshed", "fallback replica"]
TRACE_CHARS = 12
LOG_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")),
    ("level", pa.string()),
    ("service", pa.string()),
    ("host", pa.string()),
    ("message", pa.string()),
    ("user_id", pa.int64()),
    ("latency_ms", pa.float64()),
    ("dt", pa.string()),
])


def _messages(rng: np.random.Generator, n: int, user_id: np.ndarray, latency: np.ndarray) -> pa.Array:
    """Request-log lines of about 80 characters, e.g.
    ``GET /api/orders/4711 200 12.345ms user=81234 trace=9f0c... cache miss``."""
    path = pc.binary_join_element_wise(
        "/api/", _pick(RESOURCES, rng.integers(0, len(RESOURCES), n)), "/",
        pc.cast(pa.array(rng.integers(1, 10_000_000, n)), pa.string()), "")
    return pc.binary_join_element_wise(
        _pick(METHODS, rng.integers(0, len(METHODS), n)), path,
        _pick(OUTCOMES, rng.integers(0, len(OUTCOMES), n)),
        pc.binary_join_element_wise(pc.cast(pa.array(latency), pa.string()), "ms", ""),
        pc.binary_join_element_wise("user=", pc.cast(pa.array(user_id), pa.string()), ""),
        pc.binary_join_element_wise("trace=", random_hex(rng, n, TRACE_CHARS), ""),
        _pick(NOTES, rng.integers(0, len(NOTES), n)), " ")


def log_events(rng: np.random.Generator, n: int) -> pa.Table:
    """``n`` log events in arrival order over seven days (so every batch spans every partition)."""
    offset = rng.integers(0, len(DAYS) * DAY_US, n)
    service_weights = 1.0 / np.arange(1, len(SERVICES) + 1)
    user_id = rng.integers(1, 2_000_000, n, dtype=np.int64)
    latency = np.round(rng.lognormal(2.5, 1.0, n), 3)
    columns = [
        pa.array(T0_US + offset, pa.timestamp("us")),
        _pick(LEVELS, rng.choice(len(LEVELS), n, p=LEVEL_WEIGHTS)),
        _pick(SERVICES, rng.choice(len(SERVICES), n, p=service_weights / service_weights.sum())),
        _pick(HOSTS, rng.integers(0, len(HOSTS), n)),
        _messages(rng, n, user_id, latency),
        pa.array(user_id),
        pa.array(latency),
        _pick(DAYS, offset // DAY_US),
    ]
    return pa.Table.from_arrays(columns, schema=LOG_SCHEMA)


# ---- keyed rows ----------------------------------------------------------------------------------

KEY = "id"
STR_PREFIX = "cust-"
STR_HEX = 15  # v_str is "cust-" + 15 hex characters: 20 characters
YEAR_US = 365 * DAY_US
KEYED_SCHEMA = pa.schema([
    pa.field(KEY, pa.int64(), nullable=False),  # primary keys are NOT NULL in Paimon
    ("v_int", pa.int64()),
    ("v_float", pa.float64()),
    ("v_str", pa.string()),
    ("v_ts", pa.timestamp("us")),
    ("v_i32", pa.int32()),
])


def keyed_rows(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    """Rows with the given keys and fresh random values in every other column."""
    n = len(ids)
    return pa.Table.from_arrays([
        pa.array(ids, pa.int64()),
        pa.array(rng.integers(0, 1_000_000_000, n, dtype=np.int64)),
        pa.array(np.round(rng.random(n) * 1000, 3)),
        pc.binary_join_element_wise(STR_PREFIX, random_hex(rng, n, STR_HEX), ""),
        pa.array(T0_US + rng.integers(0, YEAR_US, n), pa.timestamp("us")),
        pa.array(rng.integers(0, 2**31 - 1, n, dtype=np.int32)),
    ], schema=KEYED_SCHEMA)


def keyed_fingerprint(table: pa.Table) -> dict[str, int]:
    """Row count and integer sums of keyed rows: stale or duplicated versions of a key change them."""
    def total(name: str) -> int:
        return int(pc.sum(table[name]).as_py() or 0)
    return {"rows": table.num_rows, "sum_id": total(KEY), "sum_v_int": total("v_int"),
            "sum_v_i32": total("v_i32")}


# ---- Arrow IPC files -----------------------------------------------------------------------------


def write_table(path: Path, table: pa.Table) -> None:
    """``table`` as an uncompressed Arrow IPC file of BATCH_ROWS-row record batches."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=BATCH_ROWS)


def write_batches(path: Path, schema: pa.Schema, tables: Iterable[pa.Table]) -> list[pa.Table]:
    """Each table as one record batch (a commit, an upsert batch) of an Arrow IPC file; the batches."""
    written = []
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for table in tables:
            batch = table.combine_chunks().to_batches()[0]
            writer.write_batch(batch)
            written.append(pa.Table.from_batches([batch]))
    return written


def load_mapped(path: Path) -> pa.Table:
    """An Arrow IPC file as a zero-copy table over a memory map (pages are touched only when used)."""
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()


def load_mapped_batch(path: Path, index: int) -> pa.Table:
    """Record batch ``index`` of an Arrow IPC file, zero-copy over a memory map."""
    batch = pa.ipc.open_file(pa.memory_map(str(path), "r")).get_batch(index)
    return pa.Table.from_batches([batch])


def mapped_batches(path: Path) -> Iterator[pa.Table]:
    """Every record batch of an Arrow IPC file in order, each zero-copy over a memory map."""
    reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
    for index in range(reader.num_record_batches):
        yield pa.Table.from_batches([reader.get_batch(index)])


# ---- a dataset kept between runs ------------------------------------------------------------------

FACTS_FILE = "facts.json"  # a dataset's plan and expected results, next to its files


class Facts(Protocol):
    @property
    def plan(self) -> Any: ...

    def to_json(self) -> str: ...


F = TypeVar("F", bound=Facts)


def kept_or_generated(directory: Path, plan: Any, *, load: Callable[[str], F],
                      generate: Callable[[Path, Any], F], what: str) -> F:
    """The facts of the dataset in ``directory`` if an earlier ``--keep`` run left one of the same
    ``plan`` there, else those of a newly generated one, saved next to its files."""
    if (directory / FACTS_FILE).exists():
        facts = load((directory / FACTS_FILE).read_text())
        if facts.plan == plan:
            return facts
    log.info("generating %s into %s", what, directory)
    facts = generate(directory, plan)
    (directory / FACTS_FILE).write_text(facts.to_json())
    return facts
