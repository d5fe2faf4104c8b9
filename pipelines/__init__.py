"""The Dagster integration for Paimon tables: declare your tables, get their assets and automation.

In Python, ``paimon_definitions([PaimonTableSpec(...), ...], warehouse=...)``; in YAML, the
``pipelines.component.PaimonTables`` component. The demo (``pipelines.demo``) is one user of this
surface.
"""

from pipelines.factory import paimon_asset, paimon_definitions
from pipelines.spec import (
    Column,
    Compaction,
    DataChecks,
    Ingestion,
    Input,
    Maintenance,
    PaimonTableSpec,
    Partitions,
)
from resources.landing_location import LandingLocation

__all__ = [
    "Column", "Compaction", "DataChecks", "Ingestion", "Input", "LandingLocation", "Maintenance", "PaimonTableSpec",
    "Partitions", "paimon_asset", "paimon_definitions",
]
