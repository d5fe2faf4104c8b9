"""The benchmark suites, one module each (see :mod:`benchmarks.harness.suite` for what a module provides).

Step processes import a suite's module in its engines' virtualenvs, so a suite module that names
pypaimon or delta-rs among its engines imports only the standard library, numpy, pyarrow and the
harness's step side at module level.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# In the order ``python -m benchmarks --list`` shows them.
NAMES = ("append", "pk", "compaction", "changelog", "lookup", "metadata", "bucket_hash", "scale_out", "torture")


def load(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")
