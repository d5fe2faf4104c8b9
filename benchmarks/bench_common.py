"""Shared by the benchmark driver and its step processes: dataset, step CLI, timing, result lines.

This module must run in both virtualenvs (ours with pyarrow 26, the oracle with pyarrow 19), so it
imports nothing but the standard library, numpy and pyarrow.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

T = TypeVar("T")
RESULT_PREFIX = "BENCH_RESULT "
SEED = 20240101
BATCH_ROWS = 65_536  # record batches in the IPC input, also the streaming-ingest batch size
CHUNK_ROWS = 1_048_576  # rows generated at a time, to bound the generator's memory
DAYS = [f"2024-01-0{d}" for d in range(1, 8)]
FILTER_DAY = "2024-01-03"
FILTER_LEVEL = "ERROR"
TABLE = "bench.logs"
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
HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
TRACE_CHARS = 12
T0_US = int(np.datetime64("2024-01-01T00:00:00", "us").astype(np.int64))
DAY_US = 86_400_000_000

SCHEMA = pa.schema([
    ("ts", pa.timestamp("us")),
    ("level", pa.string()),
    ("service", pa.string()),
    ("host", pa.string()),
    ("message", pa.string()),
    ("user_id", pa.int64()),
    ("latency_ms", pa.float64()),
    ("dt", pa.string()),
])


@dataclass(frozen=True, slots=True)
class Expected:
    """Fingerprints of a generated dataset, and of its filtered subset, that reads must match."""

    full: dict[str, int]
    filtered: dict[str, int]

    def to_json(self) -> str:
        return json.dumps({"full": self.full, "filtered": self.filtered})

    @staticmethod
    def from_json(text: str) -> Expected:
        data = json.loads(text)
        return Expected(data["full"], data["filtered"])


def _pick(values: list[str], codes: np.ndarray) -> pa.Array:
    return pa.array(values).take(pa.array(codes))


def _fixed_width_hex(rng: np.random.Generator, n: int) -> pa.Array:
    chars = HEX[rng.integers(0, len(HEX), n * TRACE_CHARS)]
    offsets = np.arange(0, n * TRACE_CHARS + 1, TRACE_CHARS, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes()))


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
        pc.binary_join_element_wise("trace=", _fixed_width_hex(rng, n), ""),
        _pick(NOTES, rng.integers(0, len(NOTES), n)), " ")


def _chunk(rng: np.random.Generator, n: int) -> pa.Table:
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
    return pa.Table.from_arrays(columns, schema=SCHEMA)


def filter_mask(table: pa.Table) -> pa.ChunkedArray:
    """The benchmark's filter, ``dt = FILTER_DAY AND level = FILTER_LEVEL``, evaluated directly."""
    return pc.and_(pc.equal(table["dt"], FILTER_DAY), pc.equal(table["level"], FILTER_LEVEL))


def fingerprint(table: pa.Table) -> dict[str, int]:
    """Row count and user_id sum of a table (reads compute it after their timer stops)."""
    return {"rows": table.num_rows, "sum_user_id": int(pc.sum(table["user_id"]).as_py() or 0)}


def _add(total: dict[str, int], part: dict[str, int]) -> dict[str, int]:
    return {key: total.get(key, 0) + value for key, value in part.items()}


def generate(path: Path, rows: int) -> Expected:
    """Write ``rows`` events to an uncompressed Arrow IPC file of 64k-row batches."""
    rng = np.random.default_rng(SEED)
    path.parent.mkdir(parents=True, exist_ok=True)
    full: dict[str, int] = {}
    filtered: dict[str, int] = {}
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        for start in range(0, rows, CHUNK_ROWS):
            chunk = _chunk(rng, min(CHUNK_ROWS, rows - start))
            writer.write_table(chunk, max_chunksize=BATCH_ROWS)
            full = _add(full, fingerprint(chunk))
            filtered = _add(filtered, fingerprint(chunk.filter(filter_mask(chunk))))
    return Expected(full, filtered)


def load_mapped(path: Path) -> pa.Table:
    """The input as a zero-copy table over a memory map (pages are touched only when used)."""
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()


def peak_rss_mib() -> float:
    """Peak resident set size of this process image so far, in MiB.

    Read from VmHWM: on Linux ``getrusage(RUSAGE_SELF).ru_maxrss`` of a freshly exec'd process
    starts at the RSS its parent had when it forked, so it would report the driver's memory.
    """
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) / 1024


@dataclass(frozen=True, slots=True)
class Timing:
    """What the step process measured around the step itself."""

    seconds: float  # wall
    cpu_seconds: float  # user + system, all threads
    base_rss_mib: float  # peak RSS before the step: interpreter, imports, setup


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(action: Callable[[], T], profile: Path | None = None) -> tuple[T, Timing]:
    """Run ``action`` once and time it.

    With ``profile`` the call runs under cProfile and the stats are dumped there (the time then
    includes the profiler's overhead).
    """
    base = peak_rss_mib()
    profiler = cProfile.Profile() if profile is not None else None
    cpu, start = _cpu_seconds(), time.perf_counter()
    result = profiler.runcall(action) if profiler is not None else action()
    timing = Timing(time.perf_counter() - start, _cpu_seconds() - cpu, base)
    if profiler is not None:
        profiler.dump_stats(str(profile))
    return result, timing


def report(timing: Timing, check: dict[str, int]) -> None:
    """Print the one result line the driver parses."""
    record = {"seconds": round(timing.seconds, 4), "cpu_seconds": round(timing.cpu_seconds, 3),
              "base_rss_mib": round(timing.base_rss_mib, 1), "peak_rss_mib": round(peak_rss_mib(), 1),
              "check": check}
    print(RESULT_PREFIX + json.dumps(record), flush=True)


def report_read(action: Callable[[], pa.Table], profile: Path | None) -> None:
    """Time a read and report it with the fingerprint of what it returned."""
    result, timing = measure(action, profile)
    report(timing, fingerprint(result))


def run_step(doc: str | None, steps: dict[str, Callable[[argparse.Namespace], None]]) -> None:
    """The command line of every step script: ``STEP --input --target [--buffer] [--profile]``."""
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    parser.add_argument("step", choices=sorted(steps))
    parser.add_argument("--input", type=Path, required=True, help="Arrow IPC file of the dataset")
    parser.add_argument("--target", type=Path, required=True, help="dataset or warehouse directory")
    parser.add_argument("--buffer", default="64 mb", help="write-buffer-size of a streaming step")
    parser.add_argument("--profile", type=Path, help="dump cProfile stats of the timed call here")
    args = parser.parse_args()
    steps[args.step](args)
