"""The engines under test, one module each, and which virtualenv runs each one.

An engine module implements the protocols of the suites it takes part in and lists them in
``SUITES`` (suite name -> implementation). It runs in its own virtualenv and imports only what that
virtualenv has: ``pypaimon_oracle`` runs in ``.venv-oracle`` (pypaimon 2.1.0, pyarrow 19) and
``delta_rs`` in ``.venv-bench`` (deltalake), so neither may import paimon_core.
"""

from __future__ import annotations

import importlib
from types import ModuleType

MODULES = {"ours": "ours", "pyarrow": "raw_pyarrow", "pypaimon": "pypaimon_oracle", "delta": "delta_rs",
           "duckdb": "duckdb_sql"}
# Where each engine's step processes run: main is .venv (the driver's), oracle .venv-oracle, delta
# .venv-bench (created on first use), jvm a JVM with Paimon's Java core (benchmarks/harness/jvm.py;
# its steps are benchmarks/engines/java/PaimonBench.java, not a module here).
VENVS = {"ours": "main", "pyarrow": "main", "duckdb": "main", "pypaimon": "oracle", "delta": "delta", "java": "jvm"}


def load(engine: str) -> ModuleType:
    """The module of ``engine`` (imported only now, so a process imports only its own engines)."""
    return importlib.import_module(f"{__name__}.{MODULES[engine]}")
