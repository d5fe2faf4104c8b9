"""Running one suite from the command line: shared options, engines, versions, report, JSON.

A suite module (``benchmarks/suites/NAME.py``) provides, besides its steps (``STEPS``) and its
engines' protocols:

* ``ENGINES``: the engines it can run, in report order (``--engines`` picks a subset; ours always runs);
* ``WORK_DIRS``: its folders under ``--work``, deleted after the run unless ``--keep``;
* ``add_arguments(parser)`` and ``configure(args, parser)`` (its own options, and what ``--quick`` means);
* ``run(SuiteRun) -> Result``;
* optionally ``DEFAULT_REPS`` (3 where absent; ``--quick`` runs 1).

:func:`run_suite` does the rest: the delta-rs virtualenv and the oracle's python, the versions and
code digest the report states (read before and after the run, to notice code that changed during
it), the printed report, the JSON under ``.bench/``, and exit status 1 when a correctness check
failed. Performance targets are reported as PASS or FAIL but never change the exit status, and
``--quick`` is a smoke run of the code path, not a measurement.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.harness import environment
from benchmarks.harness.report import print_report, save_json
from benchmarks.harness.runner import PSI_QUIET, REPO, Steps


@dataclass(slots=True)
class SuiteRun:
    """One run of a suite: its options, the engines it runs and their launchers, and its metadata."""

    name: str
    args: argparse.Namespace
    engines: tuple[str, ...]
    launchers: dict[str, list[str]]
    meta: dict[str, Any]

    @property
    def work(self) -> Path:
        return Path(self.args.work)

    def steps(self, data: Path) -> Steps:
        """Step processes of this suite over the input ``data``."""
        return Steps(self.name, self.launchers, data, self.args.quiet_wait)

    def runs(self, engine: str) -> bool:
        return engine in self.engines

    def checkpoint(self, document: dict[str, Any]) -> None:
        """Save the figures so far, before the run has finished (a long run that fails keeps them)."""
        save_json(Path(self.args.json), {"meta": self.meta, **document})


@dataclass(slots=True)
class Result:
    """What a suite's ``run`` returns: the report and what the JSON holds besides ``meta``."""

    title: str
    report: str
    document: dict[str, Any]
    problems: list[str] = field(default_factory=list)  # failed correctness checks: exit status 1
    profiles: dict[str, str] = field(default_factory=dict)
    profile_note: str = ""


def _parser(name: str, suite: ModuleType) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=suite.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run of the code path: tiny sizes, 1 repetition, no wait for a quiet CPU")
    parser.add_argument("--reps", type=int,
                        help=f"processes per step (default {getattr(suite, 'DEFAULT_REPS', 3)}, 1 with --quick)")
    parser.add_argument("--engines", nargs="+", choices=suite.ENGINES, default=list(suite.ENGINES),
                        help="engines to run (ours always runs)")
    parser.add_argument("--work", type=Path, default=REPO / ".bench" / name,
                        help="inputs and tables go here (deleted afterwards unless --keep)")
    parser.add_argument("--json", type=Path, default=REPO / ".bench" / f"{name}.json")
    parser.add_argument("--quiet-wait", type=float,
                        help=f"seconds to wait for CPU pressure below {PSI_QUIET:.0f}%% before each step "
                             "(default 5, 0 with --quick)")
    parser.add_argument("--keep", action="store_true", help="keep the inputs and tables")
    if "pypaimon" in suite.ENGINES:
        parser.add_argument("--oracle-python", type=Path, default=environment.ORACLE_PYTHON)
    if "delta" in suite.ENGINES:
        parser.add_argument("--delta-venv", type=Path, default=environment.DELTA_VENV,
                            help=f"virtualenv for deltalake {environment.DELTALAKE_VERSION} (created when missing)")
    suite.add_arguments(parser)
    return parser


def _remove_work(work: Path, names: Sequence[str]) -> None:
    """Delete ``work/name`` for each name (and ``work`` itself once it is empty)."""
    for name in names:
        shutil.rmtree(work / name, ignore_errors=True)
    if work.exists() and not any(work.iterdir()):
        work.rmdir()


def run_suite(name: str, suite: ModuleType, argv: Sequence[str]) -> None:
    """Parse ``argv``, run the suite, print its report and save its JSON."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    parser = _parser(name, suite)
    args = parser.parse_args(argv)
    args.reps = args.reps or (1 if args.quick else getattr(suite, "DEFAULT_REPS", 3))
    args.quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0.0 if args.quick else 5.0)
    args.work = args.work.resolve()
    suite.configure(args, parser)
    selected = tuple(e for e in suite.ENGINES if e in args.engines or e == "ours")
    launchers = environment.engine_launchers(
        selected, oracle_python=getattr(args, "oracle_python", None) or Path(),
        delta_venv=getattr(args, "delta_venv", None) or environment.DELTA_VENV)
    meta: dict[str, Any] = {"suite": name, "versions": environment.driver_versions(launchers),
                            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps,
                            "engines": list(selected), "quick": args.quick}
    try:
        result = suite.run(SuiteRun(name, args, selected, launchers, meta))
    finally:
        if not args.keep:
            _remove_work(args.work, suite.WORK_DIRS)
    meta["paimon_core sources after run"] = environment.source_digest()
    save_json(args.json, {"meta": meta, **result.document})
    report = result.report
    if args.quick:
        report = ("NOTE: --quick is a smoke run of the code path at tiny sizes; its figures and targets say "
                  f"nothing about performance.\n\n{report}")
    print_report(result.title, meta, report, args.json, result.profiles, result.profile_note)
    if result.problems:
        raise SystemExit(1)
