"""Dagster resources for Paimon: the catalog, the IO manager and the log-event source."""

from resources.catalog import PaimonCatalogResource
from resources.io_manager import PaimonTableIOManager, PaimonWrite
from resources.log_source import LogEventSource
from resources.metadata import column_schema, write_metadata

__all__ = [
    "LogEventSource",
    "PaimonCatalogResource",
    "PaimonTableIOManager",
    "PaimonWrite",
    "column_schema",
    "write_metadata",
]
