"""Ratios, performance targets, Markdown, profiles and the printed report of a suite run."""

from __future__ import annotations

import io
import json
import pstats
import statistics
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Generic

from benchmarks.harness.measure import worker_profile_path
from benchmarks.harness.runner import Outcome, S, StepLike, find

# ---- ratios and performance targets -------------------------------------------------------------


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
    skipped: bool = False  # the peer was left out of this run (``--engines``)

    @property
    def passed(self) -> bool:
        return self.target.met(self.ratio)

    def render(self) -> str:
        target, ratio = self.target, self.ratio
        if self.skipped:
            return f"SKIP  {target.label}: {target.peer} was not run"
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
                "passed": self.passed, "skipped": self.skipped}


def verdicts(outcomes: Sequence[Outcome[Any]], targets: Iterable[Target[Any]],
             engines: Iterable[str] | None = None) -> list[Verdict[Any]]:
    """Each target's verdict; a target whose peer is not among ``engines`` (when given) is skipped."""
    run = None if engines is None else set(engines)
    return [Verdict(t, peer_ratio(outcomes, t.step.key, t.peer, t.step.engine),
                    skipped=run is not None and t.peer not in run) for t in targets]


def render_verdicts(results: Iterable[Verdict[Any]]) -> str:
    """The PASS/FAIL lines, fenced, under a ``Targets:`` heading."""
    lines = "\n".join(v.render() for v in results)
    return f"Targets:\n\n```\n{lines}\n```"


def cross_check(outcomes: Sequence[Outcome[Any]], keys: Iterable[Hashable], where: str = "") -> None:
    """Every engine must have returned the same check for each step in ``keys``; aborts if not."""
    for key in keys:
        checks = {o.step.engine: o.check for o in outcomes if o.step.key == key}
        if len({json.dumps(c, sort_keys=True) for c in checks.values()}) > 1:
            raise SystemExit(f"CORRECTNESS FAILURE{where}: {key} results differ: {checks}")


# ---- Markdown -----------------------------------------------------------------------------------


def markdown(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def pressure_note(outcomes: Iterable[Outcome[Any]]) -> str:
    readings = [r.cpu_pressure for o in outcomes for r in o.reps if r.cpu_pressure is not None]
    if not readings:
        return ""
    return (f"CPU pressure (PSI some avg10) as the steps started: median "
            f"{statistics.median(readings):.0f}%, max {max(readings):.0f}%.")


def joined(parts: Iterable[str], separator: str = "\n\n") -> str:
    """The non-empty ``parts``, joined."""
    return separator.join(p for p in parts if p)


# ---- profiles -----------------------------------------------------------------------------------


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


# ---- the run's report -----------------------------------------------------------------------------


def save_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, default=str))


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
