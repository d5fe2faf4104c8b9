"""One step of one engine in a fresh process: the command line every suite's driver runs.

    python -m benchmarks.step SUITE ENGINE STEP [--input DATA] [--target DIR] [--profile OUT] [suite options]

Run from the repository root, by the driver, with the engine's virtualenv's python. It imports the
suite's module (its steps, in ``STEPS``, and its step options, from ``add_step_options``) and the
engine's module (its implementation of the suite, in ``SUITES``), and calls
``STEPS[STEP](implementation, args)``, which times what it measures and prints one result line
(:func:`benchmarks.harness.measure.report`). Nothing but the standard library is imported here,
so a step process imports only its suite and its engine.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import engines

StepFunction = Callable[[Any, argparse.Namespace], None]


def parser_for(suite: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.step", description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("engine", choices=sorted(engines.MODULES))
    parser.add_argument("step")
    parser.add_argument("--input", type=Path, help="the dataset (Arrow IPC file or folder)")
    parser.add_argument("--target", type=Path, help="dataset, table or warehouse directory")
    parser.add_argument("--profile", type=Path, help="dump cProfile stats of the timed call here")
    module = importlib.import_module(f"benchmarks.suites.{suite}")
    add_options: Callable[[argparse.ArgumentParser], None] | None = getattr(module, "add_step_options", None)
    if add_options is not None:
        add_options(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0].startswith("-"):
        raise SystemExit(__doc__)
    suite = argv[0]
    args = parser_for(suite).parse_args(argv)
    steps: dict[str, StepFunction] = getattr(importlib.import_module(f"benchmarks.suites.{suite}"), "STEPS", {})
    implementations: dict[str, Any] = engines.load(args.engine).SUITES
    if args.step not in steps or suite not in implementations:
        raise SystemExit(f"{args.engine} has no step {args.step!r} of suite {suite!r}")
    steps[args.step](implementations[suite], args)


if __name__ == "__main__":
    main()
    # The result line is out. Skip interpreter teardown: deltalake 1.6.6 sometimes aborts there
    # ("terminate called without an active exception") after a successful step, which would fail
    # a step whose measurement is complete.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
