"""``python -m benchmarks SUITE [--quick] [options]``: run one benchmark suite (``--list`` names them).

Run from the repository root with ``.venv/bin/python``; ``python -m benchmarks SUITE --help`` gives
a suite's options. See benchmarks/README.md for the methods and figures.
"""

from __future__ import annotations

import signal
import sys

from benchmarks import suites
from benchmarks.harness.suite import run_suite


def main(argv: list[str]) -> None:
    # Started with SIGINT ignored (a background job of a script), every process of the run would
    # inherit the ignore; Dagster maps SIGTERM to SIGINT's handler, and its compute-log helpers in
    # the scale_out suite's Dask workers would then outlive their steps.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip() + "\n\nsuites: " + ", ".join(suites.NAMES))
        return
    if argv[0] == "--list":
        for name in suites.NAMES:
            print(f"{name:<12} {(suites.load(name).__doc__ or '').strip().splitlines()[0]}")
        return
    if argv[0] not in suites.NAMES:
        raise SystemExit(f"unknown suite {argv[0]!r}; one of: {', '.join(suites.NAMES)}")
    run_suite(argv[0], suites.load(argv[0]), argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
