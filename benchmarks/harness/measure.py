"""The step side of the harness: time one call, read its peak RSS, profile it, report it.

Runs inside every step process, in every benchmark virtualenv (ours with pyarrow 26, the oracle's
with pyarrow 19, the delta-rs one), so it imports nothing but the standard library.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import resource
import threading
import time
from collections.abc import Callable
from concurrent.futures import thread as futures_thread
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
RESULT_PREFIX = "BENCH_RESULT "


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


def measure(action: Callable[[], T], profile: Path | None = None, *, warm: int = 0) -> tuple[T, Timing]:
    """Run ``action`` once and time it; with ``warm``, after that many unmeasured runs of it.

    Warm runs are for actions that leave nothing behind (reads): the measured call then finds its
    process's memory already touched, as a long-running reader's (or a JVM's after its warm-up) is.
    The peak RSS is reset after them (``clear_refs`` 5), so it still measures the call alone.
    With ``profile`` the call runs under cProfile and the stats are dumped there, and those of the
    work items it ran on thread pools to :func:`worker_profile_path` (the time then includes the
    profilers' overhead).
    """
    for _ in range(warm):
        action()
    if warm:
        _reset_peak_rss()
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


def _reset_peak_rss() -> None:
    """VmHWM back to the current RSS (Linux 4.0+); elsewhere the peak keeps the warm runs'."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def report(timing: Timing, check: dict[str, Any]) -> None:
    """Print the one result line the driver parses: the timing, and what the step did or returned
    (``check``: what the driver compares with the expected result, or the step's own figures)."""
    record = {"seconds": round(timing.seconds, 4), "cpu_seconds": round(timing.cpu_seconds, 3),
              "base_rss_mib": round(timing.base_rss_mib, 1), "peak_rss_mib": round(timing.peak_rss_mib, 1),
              "check": check}
    print(RESULT_PREFIX + json.dumps(record), flush=True)


def measure_and_report(action: Callable[[], T], profile: Path | None, check: Callable[[T], dict[str, Any]],
                       *, warm: int = 0) -> None:
    """Time ``action`` (after ``warm`` unmeasured runs) and report it with ``check`` of its result
    (computed after the timer)."""
    result, timing = measure(action, profile, warm=warm)
    report(timing, check(result))


def parse_result(stdout: str) -> dict[str, Any] | None:
    """The result line of a step process's output, if it printed exactly one."""
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    return json.loads(lines[0][len(RESULT_PREFIX):]) if len(lines) == 1 else None
