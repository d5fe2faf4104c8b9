"""How each engine's step processes start, what versions a report states, the delta-rs virtualenv.

pypaimon 2.1.0 pins pyarrow < 20, so it lives in ``.venv-oracle`` (``make oracle``); deltalake
lives in ``.venv-bench``, which :func:`ensure_delta_venv` creates from this interpreter on first use.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import platform
import runpy
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from benchmarks import engines
from benchmarks.harness import jvm
from benchmarks.harness.runner import REPO, python_launcher

log = logging.getLogger("benchmarks")

ORACLE_PYTHON = REPO / ".venv-oracle" / "bin" / "python"
DELTA_VENV = REPO / ".venv-bench"
DELTALAKE_VERSION = "1.6.6"
DELTA_VENV_PACKAGES = (f"deltalake=={DELTALAKE_VERSION}", "pyarrow", "numpy")


def source_digest() -> str:
    """Digest of paimon_core's sources, to notice when the code under test changes during a run."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "paimon_core").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def paimon_core_version() -> str:
    """paimon_core's ``__version__``, read from its file: the harness does not import paimon_core."""
    return str(runpy.run_path(str(REPO / "paimon_core" / "version.py"))["__version__"])


def git_head() -> str:
    probe = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=False)
    return probe.stdout.strip() or "unknown"


def host_versions() -> dict[str, str]:
    """Python, pyarrow, code version and machine of the driver (the versions of this venv)."""
    return {"python": platform.python_version(), "pyarrow": pa.__version__, "git HEAD": git_head(),
            "paimon_core sources": source_digest(), "cpus": str(os.cpu_count()),
            "machine": platform.platform()}


def venv_versions(python: Path, packages: Sequence[str]) -> list[str]:
    """Installed versions of ``packages`` in the virtualenv of ``python``."""
    names = ", ".join(repr(p) for p in packages)
    probe = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(*(m.version(p) for p in ({names},)))"],
        capture_output=True, text=True, check=True)
    return probe.stdout.split()


def driver_versions(launchers: dict[str, list[str]]) -> dict[str, str]:
    """The versions a report states: this venv's, paimon_core's, and those of the peers' venvs and JVM."""
    host = host_versions()
    versions = {"python": host.pop("python"), "pyarrow": host.pop("pyarrow"),
                "paimon_core": paimon_core_version()}
    if "pypaimon" in launchers:
        pypaimon, oracle_pyarrow = venv_versions(Path(launchers["pypaimon"][0]), ["pypaimon", "pyarrow"])
        versions.update({"pypaimon": pypaimon, "pyarrow (oracle venv)": oracle_pyarrow})
    if "delta" in launchers:
        deltalake, delta_pyarrow = venv_versions(Path(launchers["delta"][0]), ["deltalake", "pyarrow"])
        versions.update({"deltalake": deltalake, "pyarrow (delta venv)": delta_pyarrow})
    if "java" in launchers:
        versions.update({"Paimon Java": jvm.PAIMON_JAVA_VERSION, "JVM": jvm.java_version()})
    return {**versions, **host}


def oracle_problem(python: Path) -> str | None:
    """Why pypaimon cannot run in the virtualenv of ``python`` (None when it can)."""
    if not python.exists():
        return f"{python} does not exist (run `make oracle`)"
    probe = subprocess.run([str(python), "-c", "import pypaimon"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"pypaimon does not import in {python}: {probe.stderr.strip()[-300:]}"
    return None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path``: parallel runs (pytest workers) create the venv once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_delta_venv(venv: Path = DELTA_VENV) -> Path:
    """The python of ``venv``, created (from this interpreter's base) with deltalake if needed."""
    python = venv / "bin" / "python"
    with _locked(REPO / ".bench" / "delta-venv.lock"):
        if python.exists():
            try:
                if venv_versions(python, ["deltalake"]) == [DELTALAKE_VERSION]:
                    return python
            except subprocess.CalledProcessError:
                pass
        else:
            log.info("creating virtualenv %s", venv)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        log.info("installing %s into %s", " ".join(DELTA_VENV_PACKAGES), venv)
        uv = Path(sys.executable).parent / "uv"
        if uv.exists():  # the Makefile's venv has uv: seconds instead of a minute of pip
            install = [str(uv), "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python)]
        else:
            install = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*install, *DELTA_VENV_PACKAGES], check=True)
    return python


def engine_launchers(selected: Sequence[str], *, oracle_python: Path, delta_venv: Path) -> dict[str, list[str]]:
    """The command that runs each selected engine's step processes (creating the delta venv, or
    compiling the Java step program, if needed).

    Raises SystemExit naming the engine when pypaimon or Java cannot run.
    """
    launchers = {}
    for engine in selected:
        venv = engines.VENVS[engine]
        if venv == "oracle":
            problem = oracle_problem(oracle_python)
            if problem is not None:
                raise SystemExit(f"pypaimon cannot run: {problem}; leave it out with --engines")
            launchers[engine] = python_launcher(oracle_python)
        elif venv == "delta":
            launchers[engine] = python_launcher(ensure_delta_venv(delta_venv))
        elif venv == "jvm":
            try:
                launchers[engine] = jvm.bench_launcher()
            except jvm.JavaUnavailable as problem:
                raise SystemExit(f"Java Paimon cannot run: {problem}; leave it out with --engines") from None
        else:
            launchers[engine] = python_launcher(Path(sys.executable))
    return launchers
