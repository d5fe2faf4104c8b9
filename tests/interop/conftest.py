"""Fixtures driving the independent oracles: pypaimon 2.1.0 (in .venv-oracle), Apache Paimon's Java
core 0.9.0 (jars in .java-oracle, driver compiled here) and, as a third reader, pypaimon-rust 0.4.0
(in .venv-oracle), all run by subprocess on JSON step lists."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pyarrow as pa
import pytest
from pyarrow import ipc

from benchmarks.harness import jvm

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("oracle_driver.py")
RUST_DRIVER = Path(__file__).with_name("rust_driver.py")
ORACLE_PYTHON = Path(os.environ.get("PAIMON_ORACLE_PYTHON", ROOT / ".venv-oracle" / "bin" / "python"))
JAVA_ORACLE = jvm.JAVA_ORACLE
JAVA_DRIVER = Path(__file__).with_name("java") / "PaimonJavaOracle.java"
# Each spec is little work, so the client compiler alone (TieredStopAtLevel=1) and the serial
# collector cost the least CPU.
JAVA_FLAGS = (*jvm.ARROW_FLAGS, "-Xmx2g", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


# An oracle run is seconds of work; ten minutes means it hangs.
RUN_TIMEOUT_S = 600


class StepOracle:
    """Runs a driver's JSON step lists, exchanging tables as Arrow IPC files.

    One driver process per test session serves every spec (``--serve``: a line
    ``SPEC<TAB>RESULT`` in, ``ok`` or ``error`` out, the traceback then in ``RESULT.error``):
    starting an interpreter with pypaimon, or a JVM with Paimon and Hadoop, costs about a CPU
    second per step list otherwise. The drivers give each spec a catalog (and writers) of its own,
    as a process of its own would; a driver that dies or hangs is stopped and the next spec
    starts a fresh one.
    """

    name = "oracle"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._count = 0
        self._server: subprocess.Popen[bytes] | None = None
        self._log = workdir / "driver.log"
        self._lock = threading.Lock()

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

    def serve_command(self) -> list[str]:
        """The driver serving specs on stdin."""
        raise NotImplementedError

    def prepare(self, step: dict[str, Any]) -> dict[str, Any]:
        """The step as this driver takes it."""
        return step

    def run(self, warehouse: Path | str, steps: list[dict[str, Any]],
            catalog_options: dict[str, str] | None = None) -> list[Any]:
        """The oracle's results of ``steps``; ``catalog_options`` e.g. reach an S3 endpoint."""
        spec, result = self._path(".json"), self._path(".result.json")
        spec.write_text(json.dumps({"warehouse": str(warehouse), "steps": [self.prepare(s) for s in steps],
                                    "catalog_options": catalog_options or {}}))
        self.execute(spec, result)
        return list(json.loads(result.read_text()))

    def execute(self, spec: Path, result: Path) -> None:
        """Have the serving driver run one spec; a failure raises with its traceback and log."""
        with self._lock:
            server = self._running()
            logged = self._log.stat().st_size
            assert server.stdin is not None and server.stdout is not None
            try:
                server.stdin.write(f"{spec}\t{result}\n".encode())
                server.stdin.flush()
            except BrokenPipeError:
                pass  # it died: reported below, as it gives no answer
            ready, _, _ = select.select([server.stdout], [], [], RUN_TIMEOUT_S)
            answer = server.stdout.readline().decode().strip() if ready else ""
            if answer == "ok":
                return
            if answer == "error":
                trace = Path(f"{result}.error").read_text()
                raise AssertionError(f"{self.name} failed:\n{self._log_since(logged)}{trace[-6000:]}")
            self.close()
            what = f"did not answer within {RUN_TIMEOUT_S} s" if not ready else "exited"
            raise AssertionError(f"{self.name} {what} on {spec}:\n{self._log_since(logged)}")

    def _running(self) -> subprocess.Popen[bytes]:
        if self._server is None or self._server.poll() is not None:
            with self._log.open("ab") as log:
                self._server = subprocess.Popen(self.serve_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=log)
        return self._server

    def _log_since(self, offset: int) -> str:
        with self._log.open("rb") as log:
            log.seek(offset)
            return log.read()[-6000:].decode(errors="replace")

    def close(self) -> None:
        """Stop the serving driver (end of its input, then by its PID if it does not exit)."""
        server, self._server = self._server, None
        if server is None:
            return
        assert server.stdin is not None
        try:
            server.stdin.close()
            server.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            server.kill()
            server.wait()

    def read_snapshots(self, warehouse: Path | str, table: str, snapshot_ids: list[int],
                       catalog_options: dict[str, str] | None = None, **options: Any) -> dict[int, pa.Table]:
        """The oracle's read of ``table`` at each snapshot id."""
        outs = {sid: str(self._path(".arrow")) for sid in snapshot_ids}
        self.run(warehouse, [{"op": "read", "table": table, "snapshot_id": sid, "out": out, **options}
                             for sid, out in outs.items()], catalog_options)
        return {sid: self.load(out) for sid, out in outs.items()}

    def read_changes(self, warehouse: Path | str, table: str, start: int, end: int,
                     **options: Any) -> dict[int, pa.Table]:
        """The oracle's streaming read of each snapshot's changes in [start, end] (snapshots with changes)."""
        out = str(self._path(".changes"))
        [ids] = self.run(warehouse, [{"op": "changes", "table": table, "start": start, "end": end, "out": out,
                                      **options}])
        return {sid: self.load(f"{out}-{i}") for i, sid in enumerate(ids)}


class Oracle(StepOracle):
    """pypaimon 2.1.0 in the oracle virtualenv (tests/interop/oracle_driver.py)."""

    name = "pypaimon"
    driver = DRIVER

    def __init__(self, python: Path, workdir: Path) -> None:
        super().__init__(workdir)
        self.python = python

    def serve_command(self) -> list[str]:
        return [str(self.python), str(self.driver), "--serve"]


class RustOracle(Oracle):
    """pypaimon-rust 0.4.0 (Paimon's Rust reader) in the oracle virtualenv: batch reads only."""

    name = "pypaimon-rust"
    driver = RUST_DRIVER


def java_fields(schema: pa.Schema) -> list[dict[str, Any]]:
    """Paimon's JSON types of an Arrow schema, for the Java driver's create_table."""
    from paimon_core.types import from_arrow_type, type_to_json

    counter = [len(schema)]
    return [{"name": f.name, "type": type_to_json(from_arrow_type(f.type, f.nullable, counter))} for f in schema]


class JavaOracle(StepOracle):
    """Apache Paimon 0.9.0's Java core (tests/interop/java/PaimonJavaOracle.java)."""

    name = "Java Paimon"

    def __init__(self, java: str, classpath: str, workdir: Path) -> None:
        super().__init__(workdir)
        self.java = java
        self.classpath = classpath

    def serve_command(self) -> list[str]:
        return [self.java, *JAVA_FLAGS, "-cp", self.classpath, "PaimonJavaOracle", "--serve"]

    def prepare(self, step: dict[str, Any]) -> dict[str, Any]:
        if step["op"] == "create_table" and "schema" in step:
            step = {**step, "fields": java_fields(self.load(step["schema"]).schema)}
            del step["schema"]
        return step


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


def _java_oracle(workdir: Path) -> JavaOracle | str:
    """The compiled Java oracle, or why it cannot be had (a driver that does not compile fails)."""
    try:
        jars = jvm.jar_classpath(JAVA_ORACLE)
        classes = jvm.compiled(JAVA_DRIVER, jars, JAVA_ORACLE / "classes")
    except jvm.JavaUnavailable as problem:
        return str(problem)
    return JavaOracle(shutil.which("java") or "java", f"{jars}:{classes}", workdir)


def _skip_loudly(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    warnings.warn(message, stacklevel=1)
    pytest.skip(message)


@pytest.fixture(scope="session")
def java_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaOracle]:
    made = _java_oracle(tmp_path_factory.mktemp("java-oracle"))
    if isinstance(made, str):
        _skip_loudly(f"JAVA INTEROP TESTS SKIPPED: the Java Paimon oracle cannot be used: {made}")
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="session")
def rust_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RustOracle]:
    code = "import importlib.metadata as m, pypaimon_rust; print(m.version('pypaimon-rust'))"
    probe = subprocess.run([str(ORACLE_PYTHON), "-c", code], capture_output=True, text=True, check=False) \
        if ORACLE_PYTHON.exists() else None
    if probe is None or probe.returncode != 0 or probe.stdout.strip() != "0.4.0":
        found = "no oracle virtualenv" if probe is None else (probe.stderr.strip()[-300:] or probe.stdout.strip())
        _skip_loudly(f"RUST READER TESTS SKIPPED: pypaimon-rust 0.4.0 cannot be used in {ORACLE_PYTHON}: {found} "
                     "(run `make oracle`)")
    made = RustOracle(ORACLE_PYTHON, tmp_path_factory.mktemp("rust-oracle"))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    reason = _oracle_available()
    if reason is not None:
        _skip_loudly(f"INTEROP TESTS SKIPPED: the pypaimon oracle cannot be used: {reason}")
    made = Oracle(ORACLE_PYTHON, tmp_path_factory.mktemp("oracle"))
    try:
        yield made
    finally:
        made.close()
