"""A run that writes a range of partitions: a single-run backfill, a multi-run backfill's share, or
``dagster asset materialize --partition-range``.

The step writes the partitions in the range's order, each as it would be written by a run of its
own: its own data (the source function called with a context naming that one partition, or that
partition's landed files), its own commit whose user names (root run, asset, partition), and its
own materialization with its own metadata. A retried step, or a re-execution from failure, finds
the commits that landed and writes only the partitions after them. When a partition fails, the
ones committed before it are recorded as materialized (they are in the table) and the failure
names them.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations as real types.

from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from pipelines.dagster_internals import add_partition_metadata
from resources import PaimonWrite, keys


class OnePartition:
    """The step's context as one partition of a ranged run sees it: everything is the run's,
    except that it names one partition, so a source function written for a run per partition
    (``context.partition_key``, ``context.partition_time_window``) works unchanged."""

    def __init__(self, context: dg.AssetExecutionContext, partition_key: str) -> None:
        self._context = context
        self._key = partition_key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    @property
    def partition_key(self) -> str:
        return self._key

    @property
    def has_partition_key(self) -> bool:
        return True

    @property
    def has_partition_key_range(self) -> bool:
        return True

    @property
    def partition_keys(self) -> Sequence[str]:
        return [self._key]

    @property
    def partition_key_range(self) -> dg.PartitionKeyRange:
        return dg.PartitionKeyRange(self._key, self._key)

    @property
    def partition_time_window(self) -> dg.TimeWindow:
        partitions = self._context.assets_def.partitions_def
        if not isinstance(partitions, dg.TimeWindowPartitionsDefinition):
            raise dg.DagsterInvariantViolationError(f"partition {self._key} is not a time window")
        return partitions.time_window_for_partition_key(self._key)

    def asset_partition_key_for_output(self, output_name: str = "result") -> str:
        return self._key

    def asset_partition_keys_for_output(self, output_name: str = "result") -> Sequence[str]:
        return [self._key]

    def asset_partition_key_range_for_output(self, output_name: str = "result") -> dg.PartitionKeyRange:
        return self.partition_key_range

    def asset_partitions_time_window_for_output(self, output_name: str = "result") -> dg.TimeWindow:
        return self.partition_time_window


def is_ranged(context: dg.AssetExecutionContext) -> bool:
    """Whether this run materializes more than one partition of the asset."""
    return not context.has_partition_key and context.has_partition_key_range


def write_range(context: dg.AssetExecutionContext | dg.OpExecutionContext, table: str,
                write: Callable[[str], tuple[PaimonWrite, dict[str, Any]]]) -> dg.Output[PaimonWrite | None]:
    """Write each partition of the run's range with ``write(key)`` (its receipt and metadata).

    Each partition's metadata is its own materialization's. The output itself carries only the
    range, so no partition's figures are shown on another. ``context``: the asset's, or that of
    the last op of a graph asset (a fanned-out write, whose steps wrote every partition first).
    """
    wanted = list(context.partition_keys)
    written: list[tuple[str, PaimonWrite, dict[str, Any]]] = []
    context.log.info(f"{table}: writing {len(wanted)} partition(s), {wanted[0]} ... {wanted[-1]}, one commit each")
    for key in wanted:
        try:
            receipt, metadata = write(key)
        except BaseException as exc:
            record_written(context, written)
            landed = ", ".join(k for k, _, _ in written) or "none"
            note = (f"partitions of this run committed before {key}: {landed} (a retry or a re-execution from "
                    "failure does not write them again)")
            context.log.error(f"{table}: partition {key} failed; {note}")
            if isinstance(exc, dg.Failure):
                raise dg.Failure(description=f"{exc.description} (partition {key}; {note})",
                                 metadata=exc.metadata, allow_retries=exc.allow_retries) from exc
            raise
        if isinstance(context, dg.AssetExecutionContext):
            context.add_asset_metadata(metadata, partition_key=key)
        else:
            add_partition_metadata(context, metadata, key)
        written.append((key, receipt, metadata))
    rows = sum(receipt.rows_written for _, receipt, _ in written)
    context.log.info(f"{table}: wrote {len(written)} partition(s), {rows:,} rows")
    return dg.Output(None, metadata={keys.INGEST_RUN_PARTITIONS: dg.MetadataValue.text(
        f"{wanted[0]} ... {wanted[-1]} ({len(wanted)})")})


def record_written(context: dg.AssetExecutionContext | dg.OpExecutionContext,
                   written: Sequence[tuple[str, PaimonWrite, dict[str, Any]]]) -> None:
    """Materializations of the partitions a failing ranged step committed: they are in the table,
    though the step will not reach its output."""
    for key, _, metadata in written:
        context.log_event(dg.AssetMaterialization(asset_key=context.asset_key, partition=key, metadata=metadata))
