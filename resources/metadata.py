"""Dagster materialization metadata describing a Paimon write, computed from table metadata only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc


def column_schema(schema: pa.Schema) -> dg.TableSchema:
    """The Arrow schema as a Dagster ``TableSchema`` (shown as the asset's columns in the UI)."""
    return dg.TableSchema(columns=[
        dg.TableColumn(name=f.name, type=str(f.type),
                       constraints=dg.TableColumnConstraints(nullable=f.nullable))
        for f in schema
    ])


def partition_filter(partition: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """A DNF conjunction selecting exactly one partition."""
    return [(key, "=", value) for key, value in partition.items()]


def write_metadata(table: pc.Table, *, snapshot_id: int | None, partition: Mapping[str, str],
                   rows_written: int) -> dict[str, Any]:
    """Metadata for one partition write, read back from the snapshot the write produced.

    Counting from the snapshot's manifests (pruned to the partition) rather than trusting the
    writer proves what readers will see, and costs no data-file reads.
    """
    snapshot = table.snapshot(snapshot_id) if snapshot_id is not None else table.latest_snapshot()
    splits = table.plan(filter=partition_filter(partition),
                        snapshot_id=snapshot.id) if snapshot is not None else []
    metadata: dict[str, Any] = {
        "rows_written": rows_written,
        "files": sum(len(split.files) for split in splits),
        "snapshot_id": snapshot.id if snapshot is not None else -1,
        "commit_kind": snapshot.commit_kind if snapshot is not None else "NONE",
        "table_uri": table.uri,
        "dagster/row_count": snapshot.total_record_count if snapshot is not None else 0,
        "dagster/partition_row_count": sum(split.row_count for split in splits),
        "dagster/table_name": table.name,
        "dagster/uri": table.uri,
        "dagster/column_schema": column_schema(table.arrow_schema),
    }
    return metadata
