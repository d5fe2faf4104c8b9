"""Reading a table's splits in parallel on other engines (Dask), one task per split.

:meth:`Table.plan` does the pruning on the client (manifests, partitions, statistics); every
split then travels to a worker with a :class:`SplitRead`: the table's location and the read's
columns and filter, nothing cached. The worker opens the table from its location (reading one
schema file) and reads the split as :meth:`Table.read_split` does, merging primary-key splits
through the table's merge engine, so a Dask DataFrame of a table holds exactly what
:meth:`Table.read` returns, split by split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from paimon_core.errors import SchemaError, UnsupportedFeatureError
from paimon_core.fileio import FileIO
from paimon_core.names import Identifier
from paimon_core.read.scan import DataSplit

if TYPE_CHECKING:
    from paimon_core.table import Table


@dataclass(frozen=True)
class SplitRead:
    """Reads one split on any worker: picklable, small, and free of the client's caches.

    Called with ``columns=`` (as Dask's optimizer does when a frame's columns are selected), it
    reads only those: the selection is pushed down into the Parquet reads.
    """

    file_io: FileIO
    identifier: Identifier
    path: str
    columns: tuple[str, ...] | None
    filter: Any = None
    _table: list[Table] = field(default_factory=list, compare=False, repr=False)

    def table(self) -> Table:
        """The table, opened once per worker process from its location."""
        if not self._table:
            from paimon_core.table import Table

            self._table.append(Table(self.file_io, self.identifier, self.path))
        return self._table[0]

    def read(self, split: DataSplit, columns: Sequence[str] | None = None) -> pa.Table:
        wanted = list(columns) if columns is not None else (list(self.columns) if self.columns is not None else None)
        return self.table().read_split(split, wanted, self.filter)

    def __call__(self, split: DataSplit, columns: Sequence[str] | None = None) -> Any:
        return self.read(split, columns).to_pandas()

    def __getstate__(self) -> dict[str, Any]:
        return {"file_io": self.file_io, "identifier": self.identifier, "path": self.path,
                "columns": self.columns, "filter": self.filter}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_table", [])


def split_read(table: Table, columns: Sequence[str] | None = None, filter: Any = None) -> SplitRead:
    """The reader of ``table``'s splits that workers run."""
    return SplitRead(table.file_io, table.identifier, table.path,
                     tuple(columns) if columns is not None else None, filter)


def to_dask(table: Table, columns: Sequence[str] | None = None, filter: Any = None, *,
            snapshot_id: int | None = None, timestamp_ms: int | None = None, tag: str | None = None) -> Any:
    """A Dask DataFrame of ``table`` at a snapshot: one partition per split of :meth:`Table.plan`.

    ``filter`` prunes partitions and files at planning and rows on the workers; ``columns``
    (or a later column selection, which Dask pushes down) prunes the Parquet reads. The
    frame's meta comes from the schema, so nothing is read until it is computed.
    """
    try:
        import dask.dataframe as dd
    except ImportError as exc:
        raise UnsupportedFeatureError("reading a table as a Dask DataFrame needs dask: "
                                      "pip install 'paimon-dagster[dask]'") from exc
    splits = table.plan(filter=filter, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms, tag=tag)
    # the schema the splits are read with (a time-travel read may predate a schema change)
    schema = table.schemas.schema(splits[0].schema_id).arrow_schema() if splits else table.arrow_schema
    if columns is not None:
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise SchemaError(f"table {table.name} has no column {missing[0]!r}; it has {', '.join(schema.names)}")
        schema = pa.schema([schema.field(c) for c in columns])
    meta = schema.empty_table().to_pandas()
    reader = split_read(table, columns, filter)
    if not splits:
        return dd.from_pandas(meta, npartitions=1)
    return dd.from_map(reader, splits, meta=meta, enforce_metadata=False, label=f"paimon-{table.identifier.table}")
