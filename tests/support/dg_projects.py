"""A user's ``dg`` project written into a test's directory, importable, and its commands run as
its user runs them (this environment's ``dg`` and ``dagster``, a ``DAGSTER_HOME`` of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def dg_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, package: str,
               files: Mapping[str, str]) -> Iterator[Path]:
    """``files`` laid out under ``tmp_path/<package>_project``, importable while the block runs,
    with ``PAIMON_WAREHOUSE`` and ``LANDING_ROOT`` (created) set beside it."""
    root = tmp_path / f"{package}_project"
    for path, body in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    monkeypatch.setenv("PAIMON_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("LANDING_ROOT", str(tmp_path / "landing"))
    (tmp_path / "landing").mkdir(exist_ok=True)
    monkeypatch.syspath_prepend(str(root))
    try:
        yield root
    finally:
        for module in [m for m in sys.modules if m.split(".")[0] == package]:
            del sys.modules[module]


def dagster_home_of(project: Path) -> Path:
    """The project's instance directory (telemetry off), beside it."""
    home = project.parent / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home


def command(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command of this environment's ``bin`` in the project, on its own instance."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(REPO)]),
           "DAGSTER_HOME": str(dagster_home_of(project))}
    return subprocess.run([str(Path(sys.executable).parent / args[0]), *args[1:]], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
