"""Writing rows of a primary-key table: row kinds, bucket routing, the LSM writer and the index.

Row kinds come from the ``rowkind.field`` column (Paimon's way), from an explicit kind for a
whole batch, or are -D for :meth:`PrimaryKeySink.delete`. ``ignore-delete`` and
``ignore-update-before`` drop retractions up front (Paimon's ``RowKindFilter``); retractions
the merge engine would refuse are refused here, before any file is written.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.commit import IndexUpdate
from paimon_core.errors import RowKindError, SchemaError
from paimon_core.fileio import FileIO
from paimon_core.keyvalue import INSERT, ROW_KINDS, UPDATE_BEFORE, is_retract, parse_row_kind
from paimon_core.layout import TablePaths
from paimon_core.manifest import IndexManifestEntry
from paimon_core.merge import engine_for
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema
from paimon_core.write.dynamic_bucket import DynamicBucketAssigner
from paimon_core.write.kv_writer import BucketRouter, KeyValueWriter, SequenceRestore
from paimon_core.write.message import CommitMessage
from paimon_core.write.routing import Partition, Router
from paimon_core.write.shard import Shard

_KIND_NAMES = pa.array(list(ROW_KINDS))


def _owned_by(shard: Shard, route: BucketRouter) -> BucketRouter:
    """``route`` keeping only the (partition, bucket) groups ``shard`` owns."""
    def owned(data: pa.Table) -> list[tuple[Partition, int, np.ndarray]]:
        return [group for group in route(data) if shard.owns(group[0].row, group[1])]
    return owned


@dataclass(frozen=True, slots=True)
class IndexState:
    """The index a writer started from: its manifest name and live entries."""

    manifest: str | None
    entries: list[IndexManifestEntry]


class PrimaryKeySink:
    """Turns conformed batches into key-value rows and hands them to the LSM writer."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schema: TableSchema, options: TableOptions, *,
                 table: str, next_sequence: SequenceRestore, index: IndexState, shard: Shard | None = None) -> None:
        self.schema = schema
        self.options = options
        self.table = table
        self.engine = engine_for(schema, options, table=table)
        self.index = index
        self.assigner: DynamicBucketAssigner | None = None
        route: BucketRouter
        if options.bucket == -1:
            self.assigner = DynamicBucketAssigner(file_io, paths, schema, options, index.entries, table=table,
                                                  owns_partition=shard.owns_partition if shard else None)
            route = self.assigner.split
        else:
            route = Router(schema, options).split
            if shard is not None:
                route = _owned_by(shard, route)
        self.writer = KeyValueWriter(file_io, paths, schema, options, self.engine, route=route,
                                     next_sequence=next_sequence, total_buckets=options.bucket)

    def kinds_of(self, data: pa.Table, row_kind: str | None) -> np.ndarray:
        """Row kind of every row: the explicit kind, the rowkind.field column, or +I."""
        if row_kind is not None:
            return np.full(data.num_rows, parse_row_kind(row_kind, table=self.table), dtype=np.int8)
        field_name = self.options.rowkind_field
        if field_name is None:
            return np.full(data.num_rows, INSERT, dtype=np.int8)
        codes = pc.index_in(data.column(field_name), value_set=_KIND_NAMES)
        if codes.null_count:
            bad = data.column(field_name).filter(pc.is_null(codes))[0].as_py()
            raise SchemaError(f"column {field_name!r} (rowkind.field) of table {self.table} holds {bad!r}, "
                              f"not one of {', '.join(ROW_KINDS)}")
        return np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int8)

    def add(self, data: pa.Table, kinds: np.ndarray) -> None:
        """Buffer rows of the given kinds, dropping and refusing retractions per the options."""
        keep = np.ones(len(kinds), dtype=bool)
        if self.options.ignore_delete:
            keep &= ~is_retract(kinds)
        elif self.options.ignore_update_before:
            keep &= kinds != UPDATE_BEFORE
        if not keep.all():
            data, kinds = data.filter(pa.array(keep)), kinds[keep]
        self._check_retractions(kinds)
        self.writer.write(data, kinds)

    def _check_retractions(self, kinds: np.ndarray) -> None:
        """Retractions the table's engine cannot merge are refused before anything is written
        (whatever wraps the engine: lookup changelog tables merge through LookupMerge)."""
        problem = self.engine.refusal(kinds)
        if problem is not None:
            raise RowKindError(f"table {self.table}: {problem}")

    def prepare(self) -> tuple[list[CommitMessage], IndexUpdate | None]:
        messages = self.writer.prepare_commit()
        if self.assigner is None or not self.assigner.changed:
            return messages, None
        entries, files = self.assigner.index_changes()
        return messages, IndexUpdate(entries, self.index.manifest, files)

    def abort(self) -> None:
        self.writer.abort()

    @property
    def rows_written(self) -> int:
        return self.writer.rows_written
