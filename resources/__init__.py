"""Dagster resources for Paimon: the catalog, the IO manager, and what they write and read with."""

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
