"""An IO manager for assets that *are* Paimon tables: outputs are already written, inputs are read.

Writing happens inside the op, streamed and committed there (one snapshot per run, with the
run id in its properties). The IO manager therefore stores nothing on output, so no data is
ever pickled, and on input reads exactly the requested partitions back from the table.

Conventions (shared with dagster-deltalake / dagster-iceberg):
    - table identifier: definition metadata ``paimon/table`` (``"db.table"``), else the asset
      key ``[db, table]``;
    - partition column: definition metadata ``partition_expr``, else the table's only
      partition key;
    - column pruning: input metadata ``columns`` (``dg.AssetIn(metadata={"columns": [...]})``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from resources.catalog import PaimonCatalogResource

log = logging.getLogger(__name__)

TABLE_METADATA_KEY = "paimon/table"
PARTITION_EXPR_KEY = "partition_expr"
COLUMNS_METADATA_KEY = "columns"


@dataclass(frozen=True, slots=True)
class PaimonWrite:
    """What an op committed to a table: a receipt for the IO manager, never the data itself."""

    table: str
    snapshot_id: int | None
    rows_written: int
    partition: Mapping[str, str] = field(default_factory=dict)


def table_identifier(asset_key: dg.AssetKey | None, metadata: Mapping[str, Any]) -> str:
    """``db.table`` from metadata, else from a two-part asset key; anything else is ambiguous."""
    explicit = metadata.get(TABLE_METADATA_KEY)
    if explicit:
        return str(explicit)
    if asset_key is not None and len(asset_key.path) == 2:
        return ".".join(asset_key.path)
    raise dg.DagsterInvariantViolationError(
        f"cannot tell which Paimon table backs {asset_key.to_user_string() if asset_key else 'this output'}: "
        f"set definition metadata {TABLE_METADATA_KEY!r} or use an asset key [database, table]")


def partition_column(table: pc.Table, metadata: Mapping[str, Any]) -> str:
    """The table column that holds the Dagster partition key."""
    explicit = metadata.get(PARTITION_EXPR_KEY)
    if explicit:
        return str(explicit)
    keys = list(table.schema.partition_keys)
    if len(keys) != 1:
        raise dg.DagsterInvariantViolationError(
            f"table {table.name} is partitioned by {keys}; set definition metadata "
            f"{PARTITION_EXPR_KEY!r} to name the column that holds the Dagster partition key")
    return keys[0]


def partitions_filter(column: str, keys: Sequence[str]) -> list[tuple[str, str, Any]]:
    """One partition by equality (best pruning), several by membership."""
    if len(keys) == 1:
        return [(column, "=", keys[0])]
    return [(column, "in", list(keys))]


class PaimonTableIOManager(dg.ConfigurableIOManager):
    """Loads Paimon-table assets as ``pyarrow.Table`` and leaves writing to the producing op."""

    catalog: PaimonCatalogResource

    def handle_output(self, context: dg.OutputContext, obj: PaimonWrite | None) -> None:
        """Record nothing: the op has committed the data already, and pickling it would duplicate it."""
        source = context.asset_key.to_user_string() if context.has_asset_key else context.name
        if obj is not None and not isinstance(obj, PaimonWrite):
            raise dg.DagsterInvariantViolationError(
                f"PaimonTableIOManager got a {type(obj).__name__} for {source}; it does not write "
                "data. Write to the table in the op and return a PaimonWrite (or None).")
        if obj is not None:
            log.debug("%s committed snapshot %s of %s (%d rows)", source, obj.snapshot_id,
                      obj.table, obj.rows_written)

    def load_input(self, context: dg.InputContext) -> pa.Table:
        """Read the upstream asset's requested partitions (all of it when unpartitioned)."""
        upstream = context.upstream_output
        upstream_metadata = upstream.definition_metadata if upstream is not None else {}
        asset_key = context.asset_key if context.has_asset_key else None
        table = self.catalog.table(table_identifier(asset_key, upstream_metadata or {}))
        columns = (context.definition_metadata or {}).get(COLUMNS_METADATA_KEY)
        row_filter = None
        if context.has_asset_partitions:
            column = partition_column(table, upstream_metadata or {})
            row_filter = partitions_filter(column, context.asset_partition_keys)
        data = table.read(columns, row_filter)
        log.info("loaded %d rows of %s (filter %s)", data.num_rows, table.name, row_filter)
        return data
