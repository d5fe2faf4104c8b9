"""The Dagster integration for Paimon tables: declare your tables, get their assets and automation.

In Python, ``paimon_definitions([PaimonTableSpec(...), ...], warehouse=...)``; in YAML, the
``pipelines.component.PaimonTables`` component. The demo (``pipelines.demo``) is one user of this
surface.

The house: at the top what users import or name (``factory``, ``component``, ``definitions``,
``target``), the shared modules every room meets through (``names``: every definition name;
``errors``; ``verdicts``: a check's verdict; ``cron``; ``target``: the table a run acts on; the
tag and metadata keys are ``resources.keys``, since ``resources`` reads them too), and rooms by
concern: ``spec`` (the declaration and its validation), ``ingestion``, ``compaction``,
``maintenance`` and ``executors``. The rooms import ``spec``, ``executors`` and the shared
modules, never each other; ``factory`` composes them. ``pipelines`` is everything built from a
spec; ``resources`` is what runs inside a step for any asset and never imports ``pipelines``
(``make lint`` enforces both with import-linter's contracts in ``pyproject.toml``).
"""

from pipelines.factory import paimon_asset, paimon_definitions
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.parts import Column, Compaction, DataChecks, Ingestion, Input, Maintenance, Partitions
from resources.landing_location import LandingLocation

__all__ = [
    "Column", "Compaction", "DataChecks", "Ingestion", "Input", "LandingLocation", "Maintenance", "PaimonTableSpec",
    "Partitions", "paimon_asset", "paimon_definitions",
]
