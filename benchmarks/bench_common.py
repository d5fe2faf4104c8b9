"""Shared by the benchmark drivers and their step processes.

Step side: the append benchmark's dataset, the step command line, timing and result lines.
Driver side: running steps in fresh processes (interleaved repetitions), CPU pressure, medians,
ratios and performance targets, Markdown, profiles, versions, and the delta-rs virtualenv.

This module must run in every benchmark virtualenv (ours with pyarrow 26, the oracle with pyarrow
19, the delta-rs one), so it imports nothing but the standard library, numpy and pyarrow.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import logging
import os
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import thread as futures_thread
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger("bench_common")

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent
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


def random_hex(rng: np.random.Generator, n: int, width: int = TRACE_CHARS) -> pa.Array:
    """``n`` random lowercase hex strings of ``width`` characters, built without Python loops."""
    chars = HEX[rng.integers(0, len(HEX), n * width)]
    offsets = np.arange(0, n * width + 1, width, dtype=np.int32)
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
        pc.binary_join_element_wise("trace=", random_hex(rng, n), ""),
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


def load_mapped_batch(path: Path, index: int) -> pa.Table:
    """Record batch ``index`` of an Arrow IPC file, zero-copy over a memory map."""
    batch = pa.ipc.open_file(pa.memory_map(str(path), "r")).get_batch(index)
    return pa.Table.from_batches([batch])


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
    peak_rss_mib: float  # peak RSS when the step returned (later checks do not count)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _WorkerProfiles:
    """cProfile of the work items that run on ``ThreadPoolExecutor`` threads during a step.

    cProfile only sees the thread that enabled it, so a step that hands work to a thread pool
    shows the main thread waiting on a lock. While active, every work item runs under its own
    profiler; :meth:`dump` merges them (times are then summed over the worker threads).
    """

    def __init__(self) -> None:
        self.profilers: list[cProfile.Profile] = []
        self._lock = threading.Lock()
        self._original = futures_thread._WorkItem.run

    def __enter__(self) -> _WorkerProfiles:
        original, profilers, lock = self._original, self.profilers, self._lock

        def run(item: Any) -> None:
            profiler = cProfile.Profile()
            try:
                profiler.runcall(original, item)
            finally:
                with lock:
                    profilers.append(profiler)

        futures_thread._WorkItem.run = run  # type: ignore[method-assign, assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        futures_thread._WorkItem.run = self._original  # type: ignore[method-assign]

    def dump(self, path: Path) -> None:
        if not self.profilers:
            return
        stats = pstats.Stats(self.profilers[0])
        for profiler in self.profilers[1:]:
            stats.add(profiler)
        stats.dump_stats(str(path))


def worker_profile_path(profile: Path) -> Path:
    """Where :func:`measure` puts the merged profile of thread-pool work items."""
    return profile.with_name(profile.stem + ".workers" + profile.suffix)


def measure(action: Callable[[], T], profile: Path | None = None) -> tuple[T, Timing]:
    """Run ``action`` once and time it.

    With ``profile`` the call runs under cProfile and the stats are dumped there, and those of the
    work items it ran on thread pools to :func:`worker_profile_path` (the time then includes the
    profilers' overhead).
    """
    base = peak_rss_mib()
    if profile is None:
        cpu, start = _cpu_seconds(), time.perf_counter()
        result = action()
        return result, Timing(time.perf_counter() - start, _cpu_seconds() - cpu, base, peak_rss_mib())
    profiler = cProfile.Profile()
    with _WorkerProfiles() as workers:
        cpu, start = _cpu_seconds(), time.perf_counter()
        result = profiler.runcall(action)
        timing = Timing(time.perf_counter() - start, _cpu_seconds() - cpu, base, peak_rss_mib())
    profiler.dump_stats(str(profile))
    workers.dump(worker_profile_path(profile))
    return result, timing


def report(timing: Timing, check: dict[str, Any]) -> None:
    """Print the one result line the driver parses."""
    record = {"seconds": round(timing.seconds, 4), "cpu_seconds": round(timing.cpu_seconds, 3),
              "base_rss_mib": round(timing.base_rss_mib, 1), "peak_rss_mib": round(timing.peak_rss_mib, 1),
              "check": check}
    print(RESULT_PREFIX + json.dumps(record), flush=True)


def report_read(action: Callable[[], pa.Table], profile: Path | None,
                check: Callable[[pa.Table], dict[str, int]] = fingerprint) -> None:
    """Time a read and report it with the fingerprint (``check``) of what it returned."""
    result, timing = measure(action, profile)
    report(timing, check(result))


StepFunction = Callable[[argparse.Namespace], None]


def run_step(doc: str | None, steps: dict[str, StepFunction],
             configure: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """The command line of every step script: ``STEP --input --target [--buffer] [--profile]``.

    ``configure`` adds a benchmark's own options.
    """
    parser = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    parser.add_argument("step", choices=sorted(steps))
    parser.add_argument("--input", type=Path, required=True, help="the dataset (Arrow IPC file or folder)")
    parser.add_argument("--target", type=Path, required=True, help="dataset or warehouse directory")
    parser.add_argument("--buffer", default="64 mb", help="write-buffer-size of a streaming step")
    parser.add_argument("--profile", type=Path, help="dump cProfile stats of the timed call here")
    if configure is not None:
        configure(parser)
    args = parser.parse_args()
    steps[args.step](args)


# ---- driver side: one step in a fresh process, repetitions, report ----------------------------

PSI_QUIET = 25.0  # % of time some task waited for a CPU (avg10); wait for less before each step
CHILD_TIMEOUT_S = 1800


def cpu_pressure() -> float | None:
    try:
        return float(Path("/proc/pressure/cpu").read_text().split("avg10=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return None


def wait_quiet(max_wait_s: float) -> float | None:
    """Wait up to ``max_wait_s`` for CPU pressure to fall below PSI_QUIET; return the last reading."""
    deadline = time.monotonic() + max_wait_s
    pressure = cpu_pressure()
    while pressure is not None and pressure >= PSI_QUIET and time.monotonic() < deadline:
        time.sleep(1)
        pressure = cpu_pressure()
    return pressure


def run_child(argv: list[str]) -> tuple[dict[str, Any], float]:
    """Run one step process; (its parsed result line, its wall seconds). Aborts if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if proc.returncode != 0 or len(lines) != 1:
        raise SystemExit(f"step failed (rc {proc.returncode}): {' '.join(argv)}\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[0][len(RESULT_PREFIX):]), wall


@dataclass(slots=True)
class Rep:
    """One repetition of one step, as its process reported it."""

    seconds: float
    cpu_seconds: float
    peak_rss_mib: float
    base_rss_mib: float
    process_wall_s: float
    cpu_pressure: float | None


def run_measured(argv: list[str], quiet_wait: float) -> tuple[Rep, dict[str, Any]]:
    """Wait for a quiet CPU, run one step process; (its repetition, its correctness check)."""
    pressure = wait_quiet(quiet_wait)
    result, wall = run_child(argv)
    rep = Rep(result["seconds"], result["cpu_seconds"], result["peak_rss_mib"], result["base_rss_mib"],
              round(wall, 3), pressure)
    return rep, result["check"]


class StepLike(Protocol):
    """What the shared driver helpers need of a benchmark's own step description (a dataclass)."""

    @property
    def engine(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def key(self) -> Hashable:
        """The step's identity across engines: the same key is the same step of another engine."""


S = TypeVar("S", bound=StepLike)


@dataclass(slots=True)
class Outcome(Generic[S]):
    """Every repetition of one step (a benchmark's own step description)."""

    step: S
    reps: list[Rep] = field(default_factory=list)
    check: dict[str, Any] = field(default_factory=dict)

    def median(self, name: str) -> float:
        return statistics.median(getattr(rep, name) for rep in self.reps)

    def spread(self) -> str:
        """``min-max`` of the step seconds."""
        return f"{min(r.seconds for r in self.reps):.3f}-{max(r.seconds for r in self.reps):.3f}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self.step), "check": self.check,  # type: ignore[call-overload]
                "reps": [asdict(r) for r in self.reps], "median_seconds": self.median("seconds"),
                "median_cpu_seconds": self.median("cpu_seconds"),
                "median_peak_rss_mib": self.median("peak_rss_mib"), "name": self.step.name}


def run_interleaved(outcomes: Sequence[Outcome[Any]], run_rep: Callable[[Any], tuple[Rep, dict[str, Any]]], *,
                    reps: Callable[[Any], int], describe: Callable[[Any], str]) -> None:
    """Run ``reps(step)`` repetitions of every step, the steps alternating within each repetition.

    Machine load that drifts over a run then falls on all of them alike. ``run_rep`` runs one
    repetition and returns it with its correctness check; the last check is kept.
    """
    for index in range(max((reps(o.step) for o in outcomes), default=0)):
        for outcome in outcomes:
            total = reps(outcome.step)
            if index >= total:
                continue
            rep, outcome.check = run_rep(outcome.step)
            outcome.reps.append(rep)
            log.info("%s rep %d/%d: %7.3f s  peak RSS %6.0f MiB", describe(outcome.step), index + 1, total,
                     rep.seconds, rep.peak_rss_mib)


# ---- ratios and performance targets -------------------------------------------------------------

def find(outcomes: Iterable[Outcome[Any]], engine: str, key: Hashable) -> Outcome[Any] | None:
    """The outcome of ``engine``'s step ``key``, if it ran."""
    return next((o for o in outcomes if o.step.engine == engine and o.step.key == key), None)


def peer_ratio(outcomes: Sequence[Outcome[Any]], key: Hashable, peer: str, engine: str = "ours") -> float | None:
    """``engine`` / ``peer`` median seconds of the step ``key``, if both ran."""
    ours, other = find(outcomes, engine, key), find(outcomes, peer, key)
    return None if ours is None or other is None else ours.median("seconds") / other.median("seconds")


def ratio_cells(outcomes: Sequence[Outcome[Any]], step: StepLike, peers: Sequence[str], *, digits: int = 3,
                missing: str = "") -> list[str]:
    """A table row's ratio columns: ours / each peer on ours' rows (``missing`` where the peer did
    not run), blank on the peers' rows."""
    if step.engine != "ours":
        return [""] * len(peers)
    ratios = (peer_ratio(outcomes, step.key, peer) for peer in peers)
    return [missing if r is None else f"{r:.{digits}f}x" for r in ratios]


@dataclass(frozen=True, slots=True)
class Target(Generic[S]):
    """ours / ``peer`` median seconds of ours' ``step`` must not exceed ``max_ratio`` (or stay below it)."""

    label: str
    step: S  # ours' step; the peer's is the one with the same key
    peer: str
    max_ratio: float
    strict: bool = False  # the ratio must stay below max_ratio
    throughput: bool = False  # stated as ours' rows/s relative to the peer's (= 1 / ratio)

    def met(self, ratio: float | None) -> bool:
        return ratio is not None and (ratio < self.max_ratio if self.strict else ratio <= self.max_ratio)


@dataclass(frozen=True, slots=True)
class Verdict(Generic[S]):
    """A target and the ratio measured for it (None when a side did not run)."""

    target: Target[S]
    ratio: float | None

    @property
    def passed(self) -> bool:
        return self.target.met(self.ratio)

    def render(self) -> str:
        target, ratio = self.target, self.ratio
        if ratio is None:
            return f"FAIL  {target.label}: not measured"
        passed = "PASS" if self.passed else "FAIL"
        if target.throughput:
            return (f"{passed}  {target.label}: ours' rows/s = {100 / ratio:.0f}% of {target.peer}'s "
                    f"(ours/{target.peer} seconds {ratio:.3f}x; target >= {100 / target.max_ratio:.0f}%)")
        bound = "<" if target.strict else "<="
        return (f"{passed}  {target.label}: ours/{target.peer} = {ratio:.3f}x "
                f"(target {bound} {target.max_ratio:.3f}x)")

    def to_json(self) -> dict[str, Any]:
        target = self.target
        where = {k: v for k, v in asdict(target.step).items() if k != "engine"}  # type: ignore[call-overload]
        return {"label": target.label, **where, "peer": target.peer, "max_ratio": target.max_ratio,
                "strict": target.strict, "throughput": target.throughput, "ratio": self.ratio,
                "passed": self.passed}


def cross_check(outcomes: Sequence[Outcome[Any]], keys: Iterable[Hashable], where: str = "") -> None:
    """Every engine must have returned the same check for each step in ``keys``; aborts if not."""
    for key in keys:
        checks = {o.step.engine: o.check for o in outcomes if o.step.key == key}
        if len({json.dumps(c, sort_keys=True) for c in checks.values()}) > 1:
            raise SystemExit(f"CORRECTNESS FAILURE{where}: {key} results differ: {checks}")


def verdicts(outcomes: Sequence[Outcome[Any]], targets: Iterable[Target[Any]]) -> list[Verdict[Any]]:
    return [Verdict(t, peer_ratio(outcomes, t.step.key, t.peer, t.step.engine)) for t in targets]


def render_verdicts(results: Iterable[Verdict[Any]]) -> str:
    """The PASS/FAIL lines, fenced, under a ``Targets:`` heading."""
    lines = "\n".join(v.render() for v in results)
    return f"Targets:\n\n```\n{lines}\n```"


# ---- report -------------------------------------------------------------------------------------

def markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def pressure_note(outcomes: Iterable[Outcome[Any]]) -> str:
    readings = [r.cpu_pressure for o in outcomes for r in o.reps if r.cpu_pressure is not None]
    if not readings:
        return ""
    return (f"CPU pressure (PSI some avg10) as the steps started: median "
            f"{statistics.median(readings):.0f}%, max {max(readings):.0f}%.")


def top_functions(path: Path, top: int, orders: Sequence[str] = ("cumulative",)) -> str:
    """The ``top`` functions of a cProfile dump, sorted by each of ``orders`` in turn."""
    buffer = io.StringIO()
    stats = pstats.Stats(str(path), stream=buffer)
    for order in orders:
        stats.sort_stats(order).print_stats(top)
    return buffer.getvalue()


def profile_texts(profile: Path, name: str, top: int, orders: Sequence[str] = ("cumulative",)) -> dict[str, str]:
    """:func:`top_functions` of a step's profile and of its thread-pool work items, by title.

    Each text is also saved next to its ``.prof`` file, as ``.txt``.
    """
    texts = {}
    for title, path in ((name, profile), (f"{name}, thread-pool work items", worker_profile_path(profile))):
        if path.exists():
            texts[title] = top_functions(path, top, orders)
            path.with_suffix(".txt").write_text(texts[title])
    return texts


def save_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1))


# ---- code and package versions ------------------------------------------------------------------

def source_digest() -> str:
    """Digest of paimon_core's sources, to notice when the code under test changes during a run."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "paimon_core").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def print_report(title: str, meta: dict[str, Any], report: str, json_path: Path,
                 profiles: dict[str, str] | None = None, profile_note: str = "") -> None:
    """Print a run's title with the versions in ``meta``, a warning if paimon_core's sources changed
    during the run, the report, the profile texts (titled ``profile_note``) and where the JSON went."""
    print(f"\n{title}; " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()))
    if meta.get("paimon_core sources after run") != meta["versions"]["paimon_core sources"]:
        print("\nWARNING: paimon_core's sources changed during this run; its results mix code versions.")
    print(f"\n{report}")
    for name, text in (profiles or {}).items():
        print(f"\ncProfile of ours, {name} ({profile_note}):\n{text}")
    print(f"\nsaved {json_path}")


def git_head() -> str:
    probe = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=False)
    return probe.stdout.strip() or "unknown"


def host_versions() -> dict[str, str]:
    """Python, pyarrow, code version and machine of the driver (the versions of this venv)."""
    return {"python": platform.python_version(), "pyarrow": pa.__version__, "git HEAD": git_head(),
            "paimon_core sources": source_digest(), "cpus": str(os.cpu_count()),
            "machine": platform.platform()}


def venv_versions(python: Path, packages: Sequence[str]) -> list[str]:
    """Installed versions of ``packages`` in the virtualenv of ``python``."""
    names = ", ".join(repr(p) for p in packages)
    probe = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(*(m.version(p) for p in ({names},)))"],
        capture_output=True, text=True, check=True)
    return probe.stdout.split()


def driver_versions(paimon_core_version: str, *, oracle_python: Path | None = None,
                    delta_python: Path | None = None) -> dict[str, str]:
    """The versions a report states: this venv's, paimon_core's, and those of the peers' venvs.

    ``paimon_core_version`` comes from the caller, since this module must not import paimon_core.
    """
    host = host_versions()
    versions = {"python": host.pop("python"), "pyarrow": host.pop("pyarrow"), "paimon_core": paimon_core_version}
    if oracle_python is not None:
        pypaimon, oracle_pyarrow = venv_versions(oracle_python, ["pypaimon", "pyarrow"])
        versions.update({"pypaimon": pypaimon, "pyarrow (oracle venv)": oracle_pyarrow})
    if delta_python is not None:
        deltalake, delta_pyarrow = venv_versions(delta_python, ["deltalake", "pyarrow"])
        versions.update({"deltalake": deltalake, "pyarrow (delta venv)": delta_pyarrow})
    return {**versions, **host}


# ---- driver command line, work directories, the delta-rs virtualenv ------------------------------

DELTALAKE_VERSION = "1.6.6"
DELTA_VENV_PACKAGES = (f"deltalake=={DELTALAKE_VERSION}", "pyarrow", "numpy")


def add_driver_options(parser: argparse.ArgumentParser, name: str, *, delta: bool = False) -> None:
    """The options every benchmark driver shares: --reps, --work, --json, --quiet-wait, --keep, and
    with ``delta`` --delta-venv. ``name`` names the benchmark's work folder and JSON under .bench/."""
    parser.add_argument("--reps", type=int, help="processes per step (default 3, 1 with --quick)")
    parser.add_argument("--work", type=Path, default=REPO / ".bench" / name,
                        help="inputs and tables go here (deleted afterwards unless --keep)")
    parser.add_argument("--json", type=Path, default=REPO / ".bench" / f"{name}.json")
    if delta:
        parser.add_argument("--delta-venv", type=Path, default=REPO / ".venv-bench",
                            help=f"virtualenv for deltalake {DELTALAKE_VERSION} (created when missing)")
    parser.add_argument("--quiet-wait", type=float, default=5.0,
                        help=f"seconds to wait for CPU pressure below {PSI_QUIET:.0f}%% before each step")
    parser.add_argument("--keep", action="store_true", help="keep the inputs and tables")


def ensure_delta_venv(venv: Path) -> Path:
    """The python of ``venv``, created (from this interpreter's base) with deltalake if needed."""
    python = venv / "bin" / "python"
    if python.exists():
        try:
            if venv_versions(python, ["deltalake"]) == [DELTALAKE_VERSION]:
                return python
        except subprocess.CalledProcessError:
            pass
    else:
        log.info("creating virtualenv %s", venv)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log.info("installing %s into %s", " ".join(DELTA_VENV_PACKAGES), venv)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    *DELTA_VENV_PACKAGES], check=True)
    return python


def remove_work(work: Path, names: Sequence[str]) -> None:
    """Delete ``work/name`` for each name (and ``work`` itself once it is empty)."""
    for name in names:
        shutil.rmtree(work / name, ignore_errors=True)
    if work.exists() and not any(work.iterdir()):
        work.rmdir()
