"""The driver side of the harness: step processes, CPU pressure, interleaved repetitions.

Every repetition of every step runs in a fresh process (``python -m benchmarks.step``) in its
engine's virtualenv: a process imports only its engine, its memory is its own, and nothing one
engine leaves behind (caches, heap, threads) reaches the next. Repetitions interleave the engines
so that load drifting over a run falls on all of them alike.
"""

from __future__ import annotations

import logging
import statistics
import subprocess
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from benchmarks.harness.measure import parse_result

log = logging.getLogger("benchmarks")

REPO = Path(__file__).resolve().parents[2]
PSI_QUIET = 25.0  # % of time some task waited for a CPU (avg10); wait for less before each step
CHILD_TIMEOUT_S = 1800


def cpu_pressure() -> float | None:
    """``/proc/pressure/cpu`` some avg10, in %, or None where the kernel has no PSI."""
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
    """Run one step process from the repository root; (its parsed result line, its wall seconds).

    Aborts the run if the process fails or does not print exactly one result line.
    """
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False, cwd=REPO)
    wall = time.perf_counter() - start
    result = parse_result(proc.stdout)
    if proc.returncode != 0 or result is None:
        raise SystemExit(f"step failed (rc {proc.returncode}): {' '.join(argv)}\n"
                         f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return result, wall


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
    """Wait for a quiet CPU, run one step process; (its repetition, its check)."""
    pressure = wait_quiet(quiet_wait)
    result, wall = run_child(argv)
    rep = Rep(result["seconds"], result["cpu_seconds"], result["peak_rss_mib"], result["base_rss_mib"],
              round(wall, 3), pressure)
    return rep, result["check"]


def python_launcher(python: Path) -> list[str]:
    """The command that runs a step of an engine written in Python, in ``python``'s virtualenv."""
    return [str(python), "-m", "benchmarks.step"]


@dataclass(frozen=True, slots=True)
class Steps:
    """How a suite runs its step processes: the suite, each engine's launcher, the input.

    A launcher is the command a step's arguments follow: :func:`python_launcher` for the Python
    engines, ``java ... PaimonBench`` for Java's (:mod:`benchmarks.harness.jvm`).
    """

    suite: str
    launchers: dict[str, list[str]]
    data: Path
    quiet_wait: float

    def command(self, engine: str, step: str, target: Path, *extra: str) -> list[str]:
        """``LAUNCHER SUITE ENGINE STEP --input DATA --target TARGET ...``."""
        return [*self.launchers[engine], self.suite, engine, step, "--input", str(self.data), "--target",
                str(target), *extra]

    def prepare(self, engine: str, step: str, target: Path, *extra: str) -> dict[str, Any]:
        """Run an unmeasured step (a build) at once; its result line."""
        result, _ = run_child(self.command(engine, step, target, *extra))
        return result

    def measured(self, engine: str, step: str, target: Path, *extra: str) -> tuple[Rep, dict[str, Any]]:
        """Run a measured repetition after waiting for a quiet CPU."""
        return run_measured(self.command(engine, step, target, *extra), self.quiet_wait)


class StepLike(Protocol):
    """What the shared helpers need of a suite's own step description (a frozen dataclass)."""

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
    """Every repetition of one step (a suite's own step description)."""

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


RunRep = Callable[[Any], tuple[Rep, dict[str, Any]]]


def run_interleaved(outcomes: Sequence[Outcome[Any]], run_rep: RunRep, *, reps: Callable[[Any], int],
                    describe: Callable[[Any], str]) -> None:
    """Run ``reps(step)`` repetitions of every step, the steps alternating within each repetition.

    Machine load that drifts over a run then falls on all of them alike. ``run_rep`` runs one
    repetition and returns it with its check; the last check is kept.
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


def run_phases(phases: Sequence[Sequence[S]], run_rep: RunRep, *, reps: Callable[[Any], int],
               describe: Callable[[Any], str], after: Callable[[list[Outcome[S]]], None] | None = None,
               ) -> list[Outcome[S]]:
    """Run every phase in order, its steps interleaved; ``after`` sees each phase's outcomes."""
    outcomes: list[Outcome[S]] = []
    for phase in phases:
        results = [Outcome(step) for step in phase]
        run_interleaved(results, run_rep, reps=reps, describe=describe)
        if after is not None:
            after(results)
        outcomes.extend(results)
    return outcomes


def find(outcomes: Sequence[Outcome[Any]], engine: str, key: Hashable) -> Outcome[Any] | None:
    """The outcome of ``engine``'s step ``key``, if it ran."""
    return next((o for o in outcomes if o.step.engine == engine and o.step.key == key), None)


def require(got: dict[str, Any], want: dict[str, Any], what: str) -> None:
    """Abort with ``CORRECTNESS FAILURE`` unless ``got`` has ``want``'s values for ``want``'s keys."""
    if {k: got.get(k) for k in want} != want:
        raise SystemExit(f"CORRECTNESS FAILURE: {what} returned {got}, expected {want}")
