"""Fixtures driving the official pypaimon 2.1.0 (in .venv-oracle) as an independent oracle."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyarrow import ipc

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("oracle_driver.py")
ORACLE_PYTHON = Path(os.environ.get("PAIMON_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))


class Oracle:
    """Runs pypaimon steps in the oracle virtualenv, exchanging tables as Arrow IPC files."""

    def __init__(self, python: Path, workdir: Path) -> None:
        self.python = python
        self.workdir = workdir
        self._count = 0

    def _path(self, suffix: str) -> Path:
        self._count += 1
        return self.workdir / f"oracle-{self._count}{suffix}"

    def save(self, table: pa.Table) -> str:
        path = self._path(".arrow")
        with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return str(path)

    @staticmethod
    def load(path: str) -> pa.Table:
        with pa.memory_map(path) as source:
            return ipc.open_file(source).read_all()

    def run(self, warehouse: Path | str, steps: list[dict[str, Any]],
            catalog_options: dict[str, str] | None = None) -> list[Any]:
        """pypaimon's results of ``steps``; ``catalog_options`` e.g. reach an S3 endpoint."""
        spec, result = self._path(".json"), self._path(".result.json")
        spec.write_text(json.dumps({"warehouse": str(warehouse), "steps": steps,
                                    "catalog_options": catalog_options or {}}))
        proc = subprocess.run([str(self.python), str(DRIVER), str(spec), str(result)],
                              capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"pypaimon failed:\n{proc.stderr[-4000:]}")
        return list(json.loads(result.read_text()))

    def read_snapshots(self, warehouse: Path | str, table: str, snapshot_ids: list[int],
                       catalog_options: dict[str, str] | None = None, **options: Any) -> dict[int, pa.Table]:
        """pypaimon's read of ``table`` at each snapshot id."""
        outs = {sid: str(self._path(".arrow")) for sid in snapshot_ids}
        self.run(warehouse, [{"op": "read", "table": table, "snapshot_id": sid, "out": out, **options}
                             for sid, out in outs.items()], catalog_options)
        return {sid: self.load(out) for sid, out in outs.items()}


    def read_changes(self, warehouse: Path, table: str, start: int, end: int) -> dict[int, pa.Table]:
        """pypaimon's streaming read of each snapshot's changes in [start, end] (snapshots with changes)."""
        out = str(self._path(".changes"))
        [ids] = self.run(warehouse, [{"op": "changes", "table": table, "start": start, "end": end, "out": out}])
        return {sid: self.load(f"{out}-{i}") for i, sid in enumerate(ids)}


def _oracle_available() -> str | None:
    if not ORACLE_PYTHON.exists():
        return f"{ORACLE_PYTHON} does not exist (run `make oracle`)"
    code = "import importlib.metadata as m, pypaimon; print(m.version('pypaimon'))"
    probe = subprocess.run([str(ORACLE_PYTHON), "-c", code], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"pypaimon does not import in {ORACLE_PYTHON}: {probe.stderr.strip()[-300:]}"
    if not probe.stdout.strip().startswith("2.1.0"):
        return f"oracle has pypaimon {probe.stdout.strip()}, expected 2.1.0"
    return None


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Oracle:
    reason = _oracle_available()
    if reason is not None:
        message = f"INTEROP TESTS SKIPPED: the pypaimon oracle cannot be used: {reason}"
        print(message, file=sys.stderr)
        warnings.warn(message, stacklevel=1)
        pytest.skip(message)
    return Oracle(ORACLE_PYTHON, tmp_path_factory.mktemp("oracle"))
