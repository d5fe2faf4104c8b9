"""The fixture project's code location: its ``defs`` folder on ``$PAIMON_WAREHOUSE``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from pipelines.code_location import load as load_folder
from pipelines.factory import paimon_definitions
from resources import PaimonCatalogResource
from tests.support.fixture_project.sources import resources as source_resources
from tests.support.fixture_project.tables import specs

PROJECT_ROOT = Path(__file__).parent
WORKSPACE = PROJECT_ROOT / "workspace.yaml"
CODE_LOCATION = "fixture"  # its name in WORKSPACE


def load(warehouse: str | None = None, **resources: Any) -> dg.Definitions:
    """The project's definitions on ``warehouse``, some resources replaced (``event_source``,
    ``order_source``)."""
    return load_folder(warehouse, project_root=PROJECT_ROOT, **resources)


defs = load()


def python_definitions(warehouse: str | None = None, *, catalog: PaimonCatalogResource | None = None,
                       sources: dict[str, Any] | None = None, **changes: Any) -> dg.Definitions:
    """The project's tables declared in Python: its declarations through ``paimon_definitions``
    (the factory its YAML component calls) with fast step retries and what ``specs`` changes,
    on ``warehouse`` or ``catalog``, with some sources replaced by ``sources``."""
    return paimon_definitions(specs(**changes), warehouse=warehouse, catalog=catalog,
                              resources=source_resources(**(sources or {})))
