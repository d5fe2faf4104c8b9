"""The serving loop of the Python oracle drivers (``--serve``), in the oracle virtualenv.

A line ``SPEC<TAB>RESULT`` on stdin runs one spec; the answer is a line ``ok``, or ``error``
with the traceback in ``RESULT.error``. Output of the engine goes to stderr, so it cannot be
taken for an answer. Standard library only: it runs beside pypaimon's pyarrow, not ours.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable


def serve(run_spec: Callable[[str, str], None]) -> None:
    answers, sys.stdout = sys.stdout, sys.stderr
    for line in sys.stdin:
        spec, result = line.rstrip("\n").split("\t")
        try:
            run_spec(spec, result)
            answer = "ok"
        except Exception:  # reported to the caller; the next spec runs on
            with open(f"{result}.error", "w") as error:
                error.write(traceback.format_exc())
            answer = "error"
        answers.write(answer + "\n")
        answers.flush()


def main(run_spec: Callable[[str, str], None]) -> None:
    """``DRIVER SPEC RESULT`` runs one spec (by hand, to debug); ``DRIVER --serve`` serves."""
    if sys.argv[1:] == ["--serve"]:
        serve(run_spec)
    else:
        run_spec(sys.argv[1], sys.argv[2])
