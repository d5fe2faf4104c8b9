"""Dagster materialization metadata describing a Paimon write, computed from the table itself."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

import paimon_core as pc
from paimon_core.errors import SnapshotNotFoundError
from resources import keys


def column_schema(schema: pc.TableSchema) -> dg.TableSchema:
    """A Paimon schema as a Dagster ``TableSchema`` (the asset's columns in the UI): Paimon's type
    names, the columns' descriptions, the primary and partition keys marked.

    The same for the definition (from the declared spec) and for every write (from the table),
    so a run never replaces the declared columns with coarser ones.
    """
    primary = set(schema.primary_keys)
    columns = []
    for data_field in schema.fields:
        other = ["primary key"] if data_field.name in primary else []
        if data_field.name in schema.partition_keys:
            other.append("partition key")
        columns.append(dg.TableColumn(
            name=data_field.name, type=pc.type_name(data_field.type).removesuffix(" NOT NULL"),
            description=data_field.description,
            constraints=dg.TableColumnConstraints(nullable=data_field.type.nullable,
                                                  unique=data_field.name in primary and len(primary) == 1,
                                                  other=other)))
    constraints = dg.TableConstraints(other=[f"PRIMARY KEY ({', '.join(schema.primary_keys)})"]) if primary else None
    return dg.TableSchema(columns=columns, constraints=constraints)


# What a write charts in the asset's Plots (besides dagster/* rows):
# the rows written, per row kind for tables taking row kinds from a column.
INGEST_PLOTTED = frozenset({keys.INGEST_ROWS_WRITTEN, keys.INGEST_INSERTS, keys.INGEST_UPDATE_BEFORES,
                            keys.INGEST_UPDATE_AFTERS, keys.INGEST_DELETES})


def plottable(metadata: dict[str, Any], plotted: frozenset[str]) -> dict[str, Any]:
    """``metadata`` with every number not in ``plotted`` shown as text.

    Dagster charts every numeric entry of an asset's events in its Plots tab; keeping numbers
    only for the few series worth following over time (rows, level-0 files, debt, files and
    bytes per level, snapshots retained) keeps that tab readable.
    """
    return {key: (dg.MetadataValue.text(number_text(key, value))
                  if isinstance(value, int | float) and not isinstance(value, bool) and key not in plotted
                  and not key.startswith(("dagster/", keys.LSM_PREFIX)) else value)
            for key, value in metadata.items()}


SIZE_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def number_text(key: str, value: float) -> str:
    """A number as text: sizes (keys naming bytes) as ``812.7 KiB (832,166 bytes)``, readable
    and exact; other integers with thousands separators."""
    if not isinstance(value, int):
        return str(value)
    if "bytes" not in key.rsplit("/", 1)[-1].split("_"):
        return f"{value:,}"
    scaled, unit = float(value), ""
    for candidate in SIZE_UNITS:
        if abs(scaled) < 1024:
            break
        scaled, unit = scaled / 1024, candidate
    return f"{scaled:.1f} {unit} ({value:,} bytes)" if unit else f"{value:,} bytes"


def partition_filter(partition: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """A DNF conjunction selecting exactly one partition."""
    return [(key, "=", value) for key, value in partition.items()]


def live_rows(table: pc.Table, partition: Mapping[str, str], snapshot_id: int | None = None) -> int:
    """Rows a reader sees in one partition of a primary-key table (one per live key).

    Files of a primary-key table hold every version and retraction until compaction, so only a
    merged read can count them; reading the key columns alone keeps it cheap.
    """
    primary = list(table.schema.primary_keys)
    return table.read(primary, filter=partition_filter(partition), snapshot_id=snapshot_id).num_rows


def manifest_count_is_exact(splits: list[Any]) -> bool:
    """Whether the manifests' row counts are a primary-key table's live rows: every bucket one
    file (one sorted run, so no key twice) without retractions and without deletion vectors."""
    return all(len(split.files) == 1 and not split.deletion_files and split.files[0].delete_row_count == 0
               for split in splits)


# Records of a primary-key table's other partitions, whose manifests are not exact (not fully
# compacted), that a write merges to count the whole table (a read of their key columns); with
# more, the table's count is left out rather than making every write pay for the table's size.
TABLE_COUNT_MERGE_BUDGET = 1_000_000


def table_live_rows(table: pc.Table, snapshot_id: int, written: Mapping[str, str], written_rows: int
                    ) -> tuple[int | None, str]:
    """The live rows of a whole primary-key table at ``snapshot_id``, given the written partition's:
    each other partition from its manifests where they are exact, else from a merged read of its
    keys (within ``TABLE_COUNT_MERGE_BUDGET``); None when that budget would be passed. With how."""
    names = list(table.schema.partition_keys)
    written_values = tuple(str(written.get(name)) for name in names)
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for split in table.plan(snapshot_id=snapshot_id):
        groups.setdefault(tuple(split.partition_values), []).append(split)
    exact, from_manifests, merged = 0, 0, []
    for values, splits in groups.items():
        if tuple(str(v) for v in values) == written_values:
            continue
        if manifest_count_is_exact(splits):
            exact += sum(split.row_count for split in splits)
            from_manifests += 1
        else:
            merged.append((values, sum(split.row_count for split in splits)))
    to_merge = sum(records for _, records in merged)
    if to_merge > TABLE_COUNT_MERGE_BUDGET:
        return None, (f"not counted: {len(merged)} partition(s) not fully compacted hold {to_merge:,} records to "
                      f"merge, more than {TABLE_COUNT_MERGE_BUDGET:,}")
    counted = sum(live_rows(table, dict(zip(names, values, strict=True)), snapshot_id) for values, _ in merged)
    return written_rows + exact + counted, (f"{from_manifests} other partition(s) from manifests, {len(merged)} by "
                                            "a merged read")


def write_metadata(table: pc.Table, *, snapshot_id: int | None, partition: Mapping[str, str],
                   rows_written: int) -> dict[str, Any]:
    """Metadata for one partition write, read back from the snapshot the write produced.

    A commit found again whose snapshot has expired since is counted at the latest snapshot.
    Counting from the snapshot's manifests (pruned to the partition) rather than trusting the
    writer proves what readers will see, and costs no data-file reads. Primary-key tables are
    the exception: their files keep superseded versions and retractions, so the partition's live
    rows (``dagster/partition_row_count``) come from the manifests only where they are exact (see
    ``manifest_count_is_exact``), else from a merged read of its keys (``row_count_source``
    says which): one count per partition, besides the rows the write wrote. The whole table's
    (``dagster/row_count``) adds the other partitions' counted the same way (``table_live_rows``),
    or is left out when too much of it is not compacted to count cheaply. A write of the whole
    table (``partition`` empty) counts it so, and says it as ``dagster/row_count``.
    """
    expired = False
    try:
        snapshot = table.snapshot(snapshot_id) if snapshot_id is not None else table.latest_snapshot()
    except SnapshotNotFoundError:  # a reused commit whose snapshot expired since: the table as it is now
        snapshot, expired = table.latest_snapshot(), True
    splits = table.plan(filter=partition_filter(partition),
                        snapshot_id=snapshot.id) if snapshot is not None else []
    stored = snapshot.total_record_count if snapshot is not None else 0
    in_partition = sum(split.row_count for split in splits)
    metadata: dict[str, Any] = {
        keys.INGEST_ROWS_WRITTEN: rows_written,
        keys.INGEST_FILES: sum(len(split.files) for split in splits),
        # Text, not a number: an id is worth reading, not plotting.
        keys.INGEST_SNAPSHOT_ID: (f"{snapshot_id} (expired; counted at snapshot "
                                      f"{snapshot.id if snapshot is not None else '-'})" if expired else
                                      str(snapshot.id) if snapshot is not None else "-"),
        keys.INGEST_COMMIT_KIND: ("EXPIRED" if expired else
                                      snapshot.commit_kind if snapshot is not None else "NONE"),
        "dagster/row_count": stored,
        "dagster/partition_row_count": in_partition,
        "dagster/table_name": table.name,
        "dagster/uri": table.uri,
        "dagster/column_schema": column_schema(table.schema),
    }
    if table.schema.primary_keys:
        del metadata["dagster/row_count"]
        exact = manifest_count_is_exact(splits)
        source = "manifests" if exact else "merged read"
        count = in_partition if exact else live_rows(table, partition, snapshot.id) if snapshot is not None else 0
        metadata["dagster/partition_row_count"] = count
        if partition and snapshot is not None:
            total, how = table_live_rows(table, snapshot.id, partition, count)
            if total is not None:
                metadata["dagster/row_count"] = total
            source = f"partition: {source}; table: {how}"
        metadata[keys.INGEST_ROW_COUNT_SOURCE] = source
    if not partition:
        # A write of the whole table (an unpartitioned asset): its rows are the table's, and a
        # partition count would name a partition that is not there.
        metadata["dagster/row_count"] = metadata.pop("dagster/partition_row_count")
    return metadata


def lsm_metadata(state: pc.LsmState) -> dict[str, Any]:
    """The table's shape as plottable numbers (``paimon/lsm/*``), observed after every compaction
    (a write's materialization leaves it out: the asset's overview shows the latest
    materialization's metadata, which a compaction would leave stale; the level-0 check, recorded
    after every write and compaction, carries the current shape):
    the worst bucket's level-0 files, the bytes the picker would rewrite now, and files and bytes
    per level over all buckets."""
    levels = max((len(b.level_files) for b in state.buckets), default=0)
    per_level = [sum(b.level_files[i] for b in state.buckets if i < len(b.level_files)) for i in range(levels)]
    metadata: dict[str, Any] = {
        keys.LSM_MAX_LEVEL0_FILES: state.max_level0_files,
        keys.LSM_DEBT_BYTES: state.debt_bytes,
        keys.LSM_FILES: sum(b.files for b in state.buckets),
        keys.LSM_BYTES: sum(b.total_bytes for b in state.buckets),
    }
    metadata.update({keys.lsm_level_files(level): count for level, count in enumerate(per_level) if count})
    return metadata
