"""Apache Paimon's system tables (``t$snapshots``, ``t$files``, ...) as Arrow tables.

:func:`read_system_table` (what :meth:`paimon_core.Table.system` calls) gathers the metadata
through the table's own stores and scan (no second decoder of snapshots, schemas, manifests,
tags or consumers) and hands it to the pure builders of :mod:`paimon_core.system.metadata`
(JSON metadata), :mod:`paimon_core.system.files` (manifests) and
:mod:`paimon_core.system.audit_log` (data). Columns, their order and types are those of
Paimon's Java ``*Table`` classes, in the shape of Paimon 0.9.0 where later versions differ
(each schema constant says how).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from paimon_core.errors import OptionError, SystemTableNotFoundError
from paimon_core.merge import engine_for
from paimon_core.options import TableOptions
from paimon_core.read.scan import read_entries, read_manifest_metas
from paimon_core.read.split_read import SplitReader
from paimon_core.schema import TableSchema
from paimon_core.snapshot import Snapshot
from paimon_core.system import audit_log, files, metadata

if TYPE_CHECKING:
    from paimon_core.table import Table

SYSTEM_TABLES = ("snapshots", "schemas", "options", "manifests", "files", "partitions", "buckets", "tags",
                 "consumers", "audit_log")
"""Names of the system tables, without Paimon's ``$`` separator."""

TIME_TRAVEL_TABLES = frozenset({"manifests", "files", "partitions", "buckets", "audit_log"})
"""System tables of one snapshot (``scan.snapshot-id`` in Paimon); the others list every
snapshot, schema, tag or consumer, or the latest options."""

SCHEMAS: dict[str, pa.Schema] = {
    "snapshots": metadata.SNAPSHOTS_SCHEMA, "schemas": metadata.SCHEMAS_SCHEMA,
    "options": metadata.OPTIONS_SCHEMA, "manifests": files.MANIFESTS_SCHEMA, "files": files.FILES_SCHEMA,
    "partitions": files.PARTITIONS_SCHEMA, "buckets": files.BUCKETS_SCHEMA, "tags": metadata.TAGS_SCHEMA,
    "consumers": metadata.CONSUMERS_SCHEMA,
}
"""Fixed column schemas (``audit_log``'s follow the table: :func:`audit_log.audit_schema`)."""


def system_table_name(name: str, *, table: str) -> str:
    """``"files"``, ``"$files"`` or ``"FILES"`` → ``"files"`` (Paimon matches names case-insensitively).

    Raises:
        SystemTableNotFoundError: not one of :data:`SYSTEM_TABLES`.
    """
    key = name[1:] if name.startswith("$") else name
    key = key.lower()
    if key not in SYSTEM_TABLES:
        raise SystemTableNotFoundError(f"table {table} has no system table {name!r}; system tables are "
                                       f"{', '.join('$' + n for n in SYSTEM_TABLES)}")
    return key


def read_system_table(table: Table, name: str, *, snapshot_id: int | None = None) -> pa.Table:
    """The system table ``name`` of ``table`` (see :meth:`paimon_core.Table.system`).

    Raises:
        SystemTableNotFoundError: an unknown name.
        OptionError: ``snapshot_id`` for a system table that does not travel in time.
        SnapshotNotFoundError: ``snapshot_id`` does not exist (any more).
    """
    key = _checked_name(table, name, snapshot_id)
    if key == "audit_log":
        return _audit_log(table, *_target(table, snapshot_id)).read_all()
    return _metadata_table(table, key, snapshot_id)


def system_table_reader(table: Table, name: str, *, snapshot_id: int | None = None) -> pa.RecordBatchReader:
    """The system table as a stream: ``$audit_log`` is read section by section (memory bounded
    by what the caller holds, as :meth:`paimon_core.Table.to_batches`); the metadata tables are
    small and built whole. Raises as :func:`read_system_table`."""
    key = _checked_name(table, name, snapshot_id)
    if key == "audit_log":
        return _audit_log(table, *_target(table, snapshot_id))
    data = _metadata_table(table, key, snapshot_id)
    return pa.RecordBatchReader.from_batches(data.schema, data.to_batches())


def _checked_name(table: Table, name: str, snapshot_id: int | None) -> str:
    key = system_table_name(name, table=table.name)
    if snapshot_id is not None and key not in TIME_TRAVEL_TABLES:
        raise OptionError(f"system table ${key} of table {table.name} lists every version and takes no snapshot_id; "
                          f"time travel applies to {', '.join('$' + n for n in sorted(TIME_TRAVEL_TABLES))}")
    return key


def _metadata_table(table: Table, key: str, snapshot_id: int | None) -> pa.Table:
    """Every system table but ``$audit_log``, built from metadata only."""
    if key == "snapshots":
        return metadata.snapshots_table(table.snapshots())
    if key == "schemas":
        return metadata.schemas_table([table.schemas.schema(i) for i in table.schemas.schema_ids()])
    if key == "options":
        return metadata.options_table(table.schema.options)
    if key == "tags":
        return metadata.tags_table(table.list_tags())
    if key == "consumers":
        return metadata.consumers_table(table.consumers())
    snapshot, schema = _target(table, snapshot_id)
    if key == "files":
        return _files(table, snapshot, schema) if snapshot is not None else files.FILES_SCHEMA.empty_table()
    if snapshot is None:
        return SCHEMAS[key].empty_table()
    metas = read_manifest_metas(table.file_io, table.paths, snapshot)
    if key == "manifests":
        return files.manifests_table(metas)
    entries = [e for entry_list in read_entries(table.file_io, table.paths, metas) for e in entry_list]
    if key == "partitions":
        return files.partitions_table(entries, schema.partition_types)
    return files.buckets_table(entries, schema.partition_types)


def _target(table: Table, snapshot_id: int | None) -> tuple[Snapshot | None, TableSchema]:
    """The snapshot a system table shows and the schema to show it in: the latest with the
    current schema, or a given snapshot with its own schema (as Paimon's time travel does)."""
    if snapshot_id is None:
        return table.latest_snapshot(), table.schema
    snapshot = table.snapshot(snapshot_id)
    return snapshot, table.schemas.schema(snapshot.schema_id)


def _files(table: Table, snapshot: Snapshot, schema: TableSchema) -> pa.Table:
    """The files a batch read plans (Paimon's ``$files`` lists its scan's splits: tables whose
    batch reads skip level 0, with deletion vectors or first-row merging, do not list it)."""
    splits = table.plan(snapshot_id=snapshot.id)
    schema_ids = {meta.schema_id for split in splits for meta in split.files}
    return files.files_table(splits, schema, {i: table.schemas.schema(i) for i in schema_ids})


def _audit_log(table: Table, snapshot: Snapshot | None, schema: TableSchema) -> pa.RecordBatchReader:
    """A batch read of ``snapshot`` in ``schema`` with each row's kind (see :mod:`.audit_log`)."""
    splits = table.plan(snapshot_id=snapshot.id) if snapshot is not None else []
    if not schema.primary_keys:
        reader = SplitReader(table.file_io, table.paths, table.schemas, schema, table=table.name)
        chunks: Iterator[pa.Table] = (audit_log.with_inserts(t) for t in reader.read_splits(splits))
        output = audit_log.audit_schema(reader.output_schema)
    else:
        engine = engine_for(schema, TableOptions.from_map(schema.effective_options()), table=table.name)
        merge_reader = audit_log.AuditLogReader(table.file_io, table.paths, table.schemas, schema,
                                                table=table.name, engine=engine)
        chunks = merge_reader.iter_audit(splits)
        output = audit_log.audit_schema(merge_reader.output_schema)
    batches = (batch for chunk in chunks for batch in chunk.to_batches())
    return pa.RecordBatchReader.from_batches(output, batches)
