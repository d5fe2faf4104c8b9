"""Every benchmark suite's smoke run, ``python -m benchmarks SUITE --quick``, so that none rots.

A quick run is the suite's whole code path at tiny sizes (data generation, builds, every engine's
step processes, checks, report, JSON), not a measurement: its performance targets are printed but
never change its exit status, so a busy machine cannot fail it, while its correctness guards
(``CORRECTNESS FAILURE``, failed changelog checks, torture invariants) do.

Suites that need pypaimon skip, loudly, when ``.venv-oracle`` cannot run it (``make oracle``);
those that need delta-rs create ``.venv-bench`` as the benchmarks do, and skip if that fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import NoReturn

import pytest

from benchmarks import suites
from benchmarks.harness import environment

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUICK_TIMEOUT_S = 600  # a quick run takes seconds to a minute; ten minutes means it hangs
MARKS = {"torture": [pytest.mark.torture]}  # racing processes, like tests/torture


def _skip_loudly(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    warnings.warn(message, stacklevel=1)
    pytest.skip(message)


def _engines_usable(name: str) -> None:
    """Skip unless the oracle venvs that the suite's engines run in can be used."""
    engines = suites.load(name).ENGINES
    if "pypaimon" in engines:
        problem = environment.oracle_problem(environment.ORACLE_PYTHON)
        if problem is not None:
            _skip_loudly(f"BENCHMARK SMOKE SKIPPED: {name} needs pypaimon: {problem}")
    if "delta" in engines:
        try:
            environment.ensure_delta_venv()
        except (OSError, subprocess.CalledProcessError) as error:
            _skip_loudly(f"BENCHMARK SMOKE SKIPPED: {name} needs deltalake in {environment.DELTA_VENV}: {error}")


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in suites.NAMES])
def test_quick_run(name: str, tmp_path: Path) -> None:
    _engines_usable(name)
    report = tmp_path / f"{name}.json"
    command = [sys.executable, "-m", "benchmarks", name, "--quick", "--work", str(tmp_path / "work"),
               "--json", str(report)]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=QUICK_TIMEOUT_S, check=False)
    assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n" \
                                 f"{proc.stderr[-6000:]}"
    document = json.loads(report.read_text())
    assert document["meta"]["suite"] == name
    assert document["meta"]["quick"] is True
    assert f"saved {report}" in proc.stdout
    assert "CORRECTNESS FAILURE" not in proc.stdout + proc.stderr
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir()), "work left behind"
