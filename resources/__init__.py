"""Dagster resources for Paimon: the catalog, the IO manager, and what they write and read with.

What runs inside a step for any asset, declared by this package's specs or not: writes with
their input checks, landed files, partition mappings, metadata, and the tag and metadata keys
(``resources.keys``) both halves read. It depends on ``paimon_core``'s public API only and never
imports ``pipelines`` (an import-linter contract in ``pyproject.toml``).
"""

from resources.catalog import PaimonCatalogResource
from resources.io_manager import PaimonTableIOManager, PaimonWrite
from resources.metadata import column_schema, write_metadata
from resources.writes import WRITE_MODES, commit_user_for, write_partition

__all__ = [
    "WRITE_MODES",
    "PaimonCatalogResource",
    "PaimonTableIOManager",
    "PaimonWrite",
    "column_schema",
    "commit_user_for",
    "write_metadata",
    "write_partition",
]
