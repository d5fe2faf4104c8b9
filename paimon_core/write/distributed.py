"""Writing a Dask DataFrame into a table: a writer per partition of the frame, one commit.

The write side of :meth:`Table.to_dask`, for a user's own Dask pipeline that lands in a table
without an orchestrator's fan-out. Each task opens the table from its location (nothing cached
travels) and writes its partition of the frame; what comes back is its prepared commit, a few
kilobytes; the client commits them all as one snapshot under the caller's commit user and
identifier, so a retried call (or a rerun of the pipeline) finds the commit landed and writes
nothing again. A task Dask runs again (a worker lost, a task retried) writes its files again: the
commit takes one attempt's, and those of any other attempt, and of a call that failed before its
commit, are orphans that :meth:`Table.remove_orphan_files` reclaims once older than its window.

How the partitions share the table follows :mod:`paimon_core.write.input_slice`: on a table with
fixed buckets partition ``i`` of ``n`` is slice ``i`` (its rows numbered after those of every
earlier partition, so the frame's order is the write's order, as one writer given the partitions
one after the other); an append table without buckets needs no order. A dynamic-bucket table
assigns buckets in one place per partition of the table, so it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from paimon_core.errors import UnsupportedFeatureError
from paimon_core.fileio import FileIO
from paimon_core.names import Identifier
from paimon_core.write.prepared import CommitOutcome

if TYPE_CHECKING:
    from paimon_core.table import Table
    from paimon_core.write.table_write import OverwriteArg


@dataclass(frozen=True)
class PartitionWrite:
    """Writes one partition of a frame on any worker: picklable and small (the table's location)."""

    file_io: FileIO
    identifier: Identifier
    path: str
    count: int
    sliced: bool
    overwrite: Any

    def __call__(self, frame: Any, index: int) -> bytes:
        from paimon_core.table import Table

        table = Table(self.file_io, self.identifier, self.path)
        data = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
        with table.new_write(overwrite=self.overwrite,
                             input_slice=(index, self.count) if self.sliced else None) as writer:
            writer.write(data)
            return writer.prepare().to_bytes()


def write_dask(table: Table, frame: Any, *, commit_user: str, commit_identifier: int,
               overwrite: OverwriteArg = False, properties: Mapping[str, str] | None = None) -> CommitOutcome:
    """Write every partition of the Dask DataFrame ``frame`` on the active scheduler (a
    ``distributed.Client`` when one is open) and commit them as one snapshot, exactly once per
    ``commit_user`` and ``commit_identifier``: a commit found landed writes nothing."""
    try:
        import dask
    except ImportError as exc:
        raise UnsupportedFeatureError("writing a Dask DataFrame needs dask: pip install 'paimon-dagster[dask]'") \
            from exc
    bucket = table.options.bucket
    if bucket < 0 and table.schema.primary_keys:
        raise UnsupportedFeatureError(
            f"table {table.name} is a dynamic-bucket table, whose buckets one assigner per partition hands out: "
            "write it with sharded writers (new_write(shard=)), or give it a fixed 'bucket'")
    landed = table.find_commit(commit_user, commit_identifier)
    if landed is not None:
        return CommitOutcome(table.name, landed, None, None)
    parts = frame.to_delayed()
    write = PartitionWrite(table.file_io, table.identifier, table.path, len(parts), bucket > 0, overwrite)
    prepared = dask.compute(*(dask.delayed(write, pure=False)(part, index) for index, part in enumerate(parts)))
    return table.commit(list(prepared), commit_user=commit_user, commit_identifier=commit_identifier,
                        overwrite=overwrite, properties=properties)
