"""Dagster resources for Paimon: the catalog, the IO manager and the per-table sources."""

from resources.catalog import PaimonCatalogResource
from resources.io_manager import PaimonTableIOManager, PaimonWrite
from resources.landing import DailySource
from resources.log_source import LogEventSource
from resources.metadata import column_schema, write_metadata
from resources.order_source import OrderEventSource

__all__ = [
    "DailySource",
    "LogEventSource",
    "OrderEventSource",
    "PaimonCatalogResource",
    "PaimonTableIOManager",
    "PaimonWrite",
    "column_schema",
    "write_metadata",
]
