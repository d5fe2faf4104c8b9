"""The fixture project's tables: their names, asset keys and declarations, read from its YAML as
the component reads them, and what the tests change in them."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import yaml

from pipelines.component import table_spec
from pipelines.spec.declaration import PaimonTableSpec

DECLARATION = Path(__file__).parent / "defs" / "tables" / "defs.yaml"
EVENTS_TABLE = "app.events"
ORDERS_TABLE = "sales.orders"
TOTALS_TABLE = "sales.user_totals"
REVENUE_TABLE = "sales.revenue_by_status"
# The retry delay the tests give every ingestion step (the same retries, backoff and jitter as
# the YAML's default 5 s, milliseconds apart).
FAST_RETRY_DELAY_S = 0.01


@functools.cache
def declared() -> tuple[PaimonTableSpec, ...]:
    """Every table as the YAML declares it."""
    return tuple(table_spec(raw) for raw in yaml.safe_load(DECLARATION.read_text())["attributes"]["tables"])


def spec(table: str) -> PaimonTableSpec:
    [found] = [s for s in declared() if s.table == table]
    return found


def specs(*, retries: dict[str, int] | None = None, commit_every_rows: dict[str, int] | None = None,
          retry_delay_seconds: float = FAST_RETRY_DELAY_S) -> list[PaimonTableSpec]:
    """The declared tables with fast step retries, ``retries`` / ``commit_every_rows`` changing
    those ingestion fields of the tables they name."""
    changed = []
    for table in declared():
        if table.ingestion is not None:
            fields: dict[str, Any] = {"retry_delay_seconds": retry_delay_seconds}
            for name, values in (("retries", retries), ("commit_every_rows", commit_every_rows)):
                if values and table.table in values:
                    fields[name] = values[table.table]
            table = table.with_options(ingestion=dataclasses.replace(table.ingestion, **fields))
        changed.append(table)
    return changed


def key(table: str) -> dg.AssetKey:
    return spec(table).key


def path(table: str) -> str:
    """The asset key as a path (``sales/orders``), as commit users and snapshot properties carry it."""
    return key(table).to_user_string()


EVENTS_KEY, ORDERS_KEY, TOTALS_KEY, REVENUE_KEY = (
    key(t) for t in (EVENTS_TABLE, ORDERS_TABLE, TOTALS_TABLE, REVENUE_TABLE))
EVENTS_SCHEMA = spec(EVENTS_TABLE).arrow_schema()
ORDERS_SCHEMA = spec(ORDERS_TABLE).arrow_schema()
TOTALS_SCHEMA = spec(TOTALS_TABLE).arrow_schema()
REVENUE_SCHEMA = spec(REVENUE_TABLE).arrow_schema()
# What the tables are created with (write-only added: the sensors' jobs compact them).
EVENTS_OPTIONS = spec(EVENTS_TABLE).table_options()
ORDERS_OPTIONS = spec(ORDERS_TABLE).table_options()
ORDERS_PRIMARY_KEY = spec(ORDERS_TABLE).primary_key
# The options that make sales.orders produce its changelog from full compactions.
ORDERS_CHANGELOG_OPTIONS = {k: v for k, v in ORDERS_OPTIONS.items()
                            if k.startswith(("changelog-producer", "full-compaction"))}
TOTAL_TYPE = TOTALS_SCHEMA.field("total_amount").type
# The per-order rows the aggregate is fed are nullable: the table refuses a null key on write.
CONTRIBUTION_SCHEMA = pa.schema([f.with_nullable(True) for f in TOTALS_SCHEMA])
