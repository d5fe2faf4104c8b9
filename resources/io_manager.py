"""An IO manager for assets that *are* Paimon tables: it writes what an asset returns, exactly
once, and reads inputs back pruned to the partitions and columns asked for.

Outputs:
    - ``None`` or a :class:`PaimonWrite` receipt: the op wrote and committed the table itself;
      nothing is stored (no data is ever pickled).
    - data (pyarrow Table/RecordBatch/RecordBatchReader, an iterable of batches, pandas or
      polars): written into the asset's partition by :func:`resources.writes.write_partition`,
      as one commit whose user names the (root run, asset, partition), so a retried step or a
      re-execution from failure finds the landed commit instead of writing the rows twice.
      A generator must be returned inside ``dg.Output(...)``: Dagster takes a bare returned
      generator for a stream of events.

Conventions (shared with dagster-deltalake / dagster-iceberg), all definition metadata:
    - ``paimon/table``: the table identifier (``"db.table"``), else the asset key ``[db, table]``.
      The table must exist; the asset's factory creates it.
    - ``paimon/write_mode``: ``overwrite`` (default: re-materializing a partition replaces it),
      ``append`` or ``upsert`` (primary-key tables).
    - ``paimon/partition_mapping`` (:mod:`resources.partition_mapping`): how a Dagster partition
      key becomes Paimon partition values; the older ``partition_expr`` (one column holding the
      key) is still read, and a table with a single partition key needs neither.
    - ``paimon/extra_columns``: ``refuse`` (default) or ``ignore`` columns the table does not
      have; ``paimon/allow_empty_partitions``: ``true`` lets an overwrite with no rows empty a
      partition that holds rows (:class:`resources.writes.InputPolicy`).
    - input metadata ``columns`` (``dg.AssetIn(metadata={"columns": [...]})``): column pruning.
"""

from __future__ import annotations

import logging
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from paimon_core.errors import DatabaseNotFoundError, TableNotFoundError
from resources.catalog import PaimonCatalogResource
from resources.keys import (
    ALLOW_EMPTY_METADATA_KEY,
    EXTRA_COLUMNS_METADATA_KEY,
    INGEST_MODE,
    INGEST_REUSED_COMMIT,
    PARTITION_MAPPING_METADATA_KEY,
    TABLE_METADATA_KEY,
    WRITE_MODE_METADATA_KEY,
)
from resources.metadata import INGEST_PLOTTED, plottable, write_metadata
from resources.partition_mapping import PartitionMapping, static_mapping
from resources.writes import (
    WRITE_MODES,
    InputPolicy,
    PaimonWrite,
    check_writable,
    commit_user_for,
    snapshot_properties,
    write_partition,
)

log = logging.getLogger(__name__)

PARTITION_EXPR_KEY = "partition_expr"
COLUMNS_METADATA_KEY = "columns"
DEFAULT_WRITE_MODE = "overwrite"
LOAD_TYPES = "pyarrow.Table (the default), pyarrow.RecordBatchReader, pandas.DataFrame, polars.DataFrame"

__all__ = [
    "COLUMNS_METADATA_KEY",
    "PARTITION_EXPR_KEY",
    "TABLE_METADATA_KEY",
    "WRITE_MODE_METADATA_KEY",
    "PaimonTableIOManager",
    "PaimonWrite",
    "partition_column",
    "partitions_filter",
    "table_identifier",
]


def _raw(value: Any) -> Any:
    """A metadata value as given, also once Dagster normalised it into a ``MetadataValue``."""
    return getattr(value, "value", value)


def table_identifier(asset_key: dg.AssetKey | None, metadata: Mapping[str, Any]) -> str:
    """``db.table`` from metadata, else from a two-part asset key; anything else is ambiguous."""
    explicit = _raw(metadata.get(TABLE_METADATA_KEY))
    if explicit:
        return str(explicit)
    if asset_key is not None and len(asset_key.path) == 2:
        return ".".join(asset_key.path)
    raise dg.DagsterInvariantViolationError(
        f"cannot tell which Paimon table backs {asset_key.to_user_string() if asset_key else 'this output'}: "
        f"set definition metadata {TABLE_METADATA_KEY!r} or use an asset key [database, table]")


def mapping_for(table: pc.Table, metadata: Mapping[str, Any]) -> PartitionMapping:
    """The asset's mapping from its metadata, else the table's only partition key holds the key."""
    mapping = PartitionMapping.from_metadata(metadata)
    if mapping is not None:
        return mapping
    keys = list(table.schema.partition_keys)
    if len(keys) != 1:
        raise dg.Failure(description=(
            f"table {table.name} is partitioned by {keys}; set definition metadata "
            f"{PARTITION_MAPPING_METADATA_KEY!r} (or {PARTITION_EXPR_KEY!r}) to map the Dagster partition key onto it"),
            allow_retries=False)
    return static_mapping(keys[0])


def partition_column(table: pc.Table, metadata: Mapping[str, Any]) -> str:
    """The table column that holds the Dagster partition key (the legacy one-column mapping)."""
    explicit = _raw(metadata.get(PARTITION_EXPR_KEY))
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


def write_mode(source: str, metadata: Mapping[str, Any]) -> str:
    mode = str(_raw(metadata.get(WRITE_MODE_METADATA_KEY)) or DEFAULT_WRITE_MODE)
    if mode not in WRITE_MODES:
        raise dg.Failure(description=f"{source}: {WRITE_MODE_METADATA_KEY} {mode!r} is not one of "
                                     f"{', '.join(WRITE_MODES)}", allow_retries=False)
    return mode


def input_policy(source: str, metadata: Mapping[str, Any]) -> InputPolicy:
    """The asset's :class:`InputPolicy` from its definition metadata."""
    allow = _raw(metadata.get(ALLOW_EMPTY_METADATA_KEY, False))
    try:
        return InputPolicy(extra_columns=str(_raw(metadata.get(EXTRA_COLUMNS_METADATA_KEY)) or "refuse"),
                           allow_empty_partitions=allow is True or str(allow).lower() == "true")
    except ValueError as exc:
        raise dg.Failure(description=f"{source}: {EXTRA_COLUMNS_METADATA_KEY}: {exc}", allow_retries=False) from None


def run_ids(context: dg.OutputContext) -> tuple[str | None, str | None]:
    """(run id, root run id). A re-execution of a failed run keeps its original's root (the run's
    own id when it is no re-execution), so the re-executed step finds the commits the first run
    landed; a retried step runs in the same run."""
    try:
        run = context.step_context.dagster_run
    except dg.DagsterInvariantViolationError:  # an OutputContext built without a step (build_output_context)
        try:
            return context.run_id, context.run_id
        except dg.DagsterInvariantViolationError:
            return None, None
    return run.run_id, run.root_run_id or run.run_id


def is_partitioned(context: dg.OutputContext) -> bool:
    try:
        context.asset_partitions_def  # noqa: B018  # raises when the asset is not partitioned
    except dg.DagsterInvariantViolationError:
        return False
    return True


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


class PaimonTableIOManager(dg.ConfigurableIOManager):
    """Writes what Paimon-table assets return into their partition, and loads them as Arrow,
    pandas or polars."""

    catalog: PaimonCatalogResource

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        """Write ``obj`` into the asset's partition (nothing for ``None`` or a PaimonWrite receipt)."""
        source = f"asset {context.asset_key.to_user_string()}" if context.has_asset_key else f"output {context.name}"
        if obj is None or isinstance(obj, PaimonWrite):
            if obj is not None:
                log.debug("%s committed snapshot %s of %s (%d rows)", source, obj.snapshot_id,
                          obj.table, obj.rows_written)
            return
        metadata = context.definition_metadata or {}
        identifier = table_identifier(context.asset_key if context.has_asset_key else None, metadata)
        try:
            check_writable(obj, table=identifier)
        except ValueError as exc:
            raise dg.Failure(description=f"{source}: {exc}, a PaimonWrite receipt or None",
                             allow_retries=False) from None
        mode = write_mode(source, metadata)
        policy = input_policy(source, metadata)
        keys = list(context.asset_partition_keys) if context.has_asset_partitions else []
        if len(keys) > 1:
            raise dg.Failure(description=f"{source}: one output holds {len(keys)} partitions "
                                         f"({keys[0]} ... {keys[-1]}); materialize one partition per run "
                                         "(backfills do that by default)", allow_retries=False)
        if not keys and is_partitioned(context):
            raise dg.Failure(description=f"{source} is partitioned but this run names no partition; refusing "
                                         "to write, which would replace or append to the whole table",
                             allow_retries=False)
        partition_key = keys[0] if keys else None
        try:
            table = self.catalog.table(identifier)
        except (TableNotFoundError, DatabaseNotFoundError):
            raise dg.Failure(description=f"{source}: Paimon table {identifier} does not exist; the asset "
                                         "creates it (catalog.ensure_table) before returning its data",
                             allow_retries=False) from None
        run_id, root = run_ids(context)
        if root is None:  # no run at all (a context built by hand): still one commit, but no retry finds it
            root = f"adhoc-{uuid.uuid4()}"
        asset_path = "/".join(context.asset_key.path) if context.has_asset_key else context.name
        try:
            partition = mapping_for(table, metadata).values(partition_key) if partition_key else {}
            receipt = write_partition(
                table, obj, mode=mode, partition=partition,
                commit_user=commit_user_for(root, asset_path, partition_key),
                properties=snapshot_properties(run_id=run_id or root, asset_key=asset_path,
                                               partition_key=partition_key, mode=mode),
                policy=policy)
        except (ValueError, NotImplementedError) as exc:
            # Typed refusals (schema, options, partition values, no primary key) fail for good;
            # conflicts, unknown commit states and I/O errors propagate: a retry is safe.
            raise dg.Failure(description=f"{source}: writing {identifier} failed: {_one_line(exc)}",
                             allow_retries=False) from exc
        context.add_output_metadata(plottable({
            **write_metadata(table, snapshot_id=receipt.snapshot_id, partition=receipt.partition,
                             rows_written=receipt.rows_written),
            INGEST_MODE: receipt.mode,
            INGEST_REUSED_COMMIT: receipt.reused,
        }, INGEST_PLOTTED))

    def load_input(self, context: dg.InputContext) -> Any:
        """Read the upstream asset's requested partitions (all of it when unpartitioned) and
        columns, as the input's annotation asks (``pa.Table`` by default)."""
        upstream = context.upstream_output
        upstream_metadata = (upstream.definition_metadata if upstream is not None else None) or {}
        asset_key = context.asset_key if context.has_asset_key else None
        table = self.catalog.table(table_identifier(asset_key, upstream_metadata))
        columns = _raw((context.definition_metadata or {}).get(COLUMNS_METADATA_KEY))
        row_filter = None
        if context.has_asset_partitions:
            try:
                row_filter = mapping_for(table, upstream_metadata).filter(context.asset_partition_keys)
            except ValueError as exc:
                raise dg.Failure(description=f"reading {table.name} failed: {_one_line(exc)}",
                                 allow_retries=False) from exc
        wanted = context.dagster_type.typing_type
        if wanted is pa.RecordBatchReader:
            log.info("streaming %s (filter %s)", table.name, row_filter)
            return table.to_batches(columns, row_filter)
        module, name = getattr(wanted, "__module__", ""), getattr(wanted, "__name__", "")
        if wanted not in (pa.Table, typing.Any, object, None) and not (
                module.startswith(("pandas", "polars")) and name in ("DataFrame", "LazyFrame")):
            raise dg.Failure(description=f"input {context.name} of {table.name} is annotated {wanted!r}; the "
                                         f"Paimon IO manager loads {LOAD_TYPES}", allow_retries=False)
        data = table.read(columns, row_filter)
        log.info("loaded %d rows of %s (filter %s)", data.num_rows, table.name, row_filter)
        if module.startswith("pandas"):
            return data.to_pandas()
        if module.startswith("polars"):
            import polars as pl  # optional: only asked for by inputs annotated with polars frames

            frame = pl.DataFrame(data)
            return frame.lazy() if name == "LazyFrame" else frame
        return data

