"""Every benchmark suite's smoke run, ``python -m benchmarks SUITE --quick``, so that none rots.

A quick run is the suite's whole code path at tiny sizes (data generation, builds, every engine's
step processes, checks, report, JSON), not a measurement: its performance targets are printed but
never change its exit status, so a busy machine cannot fail it, while its correctness guards
(``CORRECTNESS FAILURE``, failed changelog checks, torture invariants) do.

Suites that need pypaimon skip, loudly, when ``.venv-oracle`` cannot run it (``make oracle``), and
those that run Java Paimon when its jars are missing (``make java-oracle``);
those that need delta-rs create ``.venv-bench`` as the benchmarks do, and skip if that fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import NoReturn

import pytest

from benchmarks import suites
from benchmarks.harness import environment, jvm

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
    if "java" in engines:
        try:
            jvm.jar_classpath()
        except jvm.JavaUnavailable as problem:
            _skip_loudly(f"BENCHMARK SMOKE SKIPPED: {name} needs Java Paimon: {problem}")
    if "delta" in engines:
        try:
            environment.ensure_delta_venv()
        except (OSError, subprocess.CalledProcessError) as error:
            _skip_loudly(f"BENCHMARK SMOKE SKIPPED: {name} needs deltalake in {environment.DELTA_VENV}: {error}")


def _run(command: list[str], directory: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in a session of its own, its output to files, and stop what it leaves behind.

    Output goes to files, not pipes: a process the run leaked (a Dask worker outliving its
    cluster's close) would hold a pipe open and make the wait for its end last until the timeout,
    though the run itself had exited. Whatever is left in the session afterwards is killed.
    """
    out, err = directory / "stdout.txt", directory / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(command, cwd=ROOT, stdout=stdout, stderr=stderr, text=True, start_new_session=True)
        try:
            returncode = child.wait(timeout=QUICK_TIMEOUT_S)
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            child.wait()
    return subprocess.CompletedProcess(command, returncode, out.read_text(), err.read_text())


@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in suites.NAMES])
def test_quick_run(name: str, tmp_path: Path) -> None:
    _engines_usable(name)
    report = tmp_path / f"{name}.json"
    command = [sys.executable, "-m", "benchmarks", name, "--quick", "--work", str(tmp_path / "work"),
               "--json", str(report)]
    proc = _run(command, tmp_path)
    assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n" \
                                 f"{proc.stderr[-6000:]}"
    document = json.loads(report.read_text())
    assert document["meta"]["suite"] == name
    assert document["meta"]["quick"] is True
    assert f"saved {report}" in proc.stdout
    assert "CORRECTNESS FAILURE" not in proc.stdout + proc.stderr
    assert not (tmp_path / "work").exists() or not any((tmp_path / "work").iterdir()), "work left behind"


def test_scale_out_on_postgres(tmp_path: Path) -> None:
    """The scale_out suite on a Dagster instance stored in a PostgreSQL server it starts and stops."""
    from benchmarks.harness import postgres

    if postgres.binaries() is None:
        _skip_loudly("BENCHMARK SMOKE SKIPPED: scale_out --instance postgres needs PostgreSQL's initdb and postgres")
    report = tmp_path / "scale_out.json"
    command = [sys.executable, "-m", "benchmarks", "scale_out", "--quick", "--instance", "postgres", "--variants",
               "dask x1", "dask x2", "--work", str(tmp_path / "work"), "--json", str(report)]
    proc = _run(command, tmp_path)
    assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n" \
                                 f"{proc.stderr[-6000:]}"
    document = json.loads(report.read_text())
    assert document["meta"]["instance"] == "postgres"
    results = {r["variant"]: r for r in document["results"]}
    assert set(results) == {"dask x1", "dask x2"}
    for result in results.values():
        assert result["rows"] > 0 and result["worker_warmup_s"] > 0
        assert 0 < result["backfill_fanned_s"] < result["backfill_s"]
        assert 0 < result["compaction_fanned_s"] < result["compaction_s"]
    assert "bound at 2 workers" in proc.stdout
