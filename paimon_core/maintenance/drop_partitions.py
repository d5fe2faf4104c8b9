"""Dropping whole partitions (Paimon's ``drop_partition`` action).

A drop is an OVERWRITE snapshot that deletes every live file of the partitions and adds none,
so time travel to earlier snapshots still sees them and the files go only when expiry and
orphan cleanup reach them. The partitions are re-derived from the latest snapshot at each commit
attempt, so a file a concurrent writer adds to the partition before the drop lands is dropped too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from paimon_core.commit import FileStoreCommit, Overwrite, new_commit_user
from paimon_core.errors import SchemaError
from paimon_core.manifest import ManifestEntry
from paimon_core.read.scan import PartitionDecoder, PartitionSpecMatcher, live_entries
from paimon_core.write.conform import internal_partition_spec
from paimon_core.write.routing import make_partition

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext


@dataclass(frozen=True, slots=True)
class DroppedPartitions:
    """What a drop removed from the latest state (``dry_run``: would remove)."""

    table: str
    partitions: tuple[str, ...]  # k=v/k2=v2 paths, as the listings show them
    files: int
    records: int
    bytes: int
    snapshot_id: int | None = None  # the OVERWRITE snapshot; None for a dry run
    dry_run: bool = True

    def summary(self) -> str:
        verb = "would drop" if self.dry_run else "dropped"
        landed = f" in snapshot {self.snapshot_id}" if self.snapshot_id is not None else ""
        noun = "partition" if len(self.partitions) == 1 else "partitions"
        return (f"{self.table}: {verb} {len(self.partitions)} {noun} ({self.files} files, {self.records} "
                f"records, {self.bytes} bytes){landed}; earlier snapshots still hold them until they expire")


def drop_partitions(table: TableContext, partitions: Sequence[Mapping[str, Any] | str], *, dry_run: bool = True,
                    commit_user: str | None = None) -> DroppedPartitions:
    """Drop every partition matching one of ``partitions`` (``{column: value}`` or a partition
    path ``dt=2024-01-01/region=eu``; a prefix of the partition keys is enough:
    ``{"dt": "2024-01-01"}`` drops every region of that day).

    Raises:
        SchemaError: the table is not partitioned, a spec names a column that is not a partition
            key or a value that does not fit it, or a spec matches no partition (nothing changes).
    """
    schema = table.schema
    if not schema.partition_keys:
        raise SchemaError(f"table {table.name} is not partitioned; to empty it overwrite it with no rows "
                          "(table.write(empty, overwrite=True))")
    if not partitions:
        raise SchemaError(f"drop of partitions of table {table.name}: no partition given")
    given = [table.partition_of(p) if isinstance(p, str) else dict(p) for p in partitions]
    specs = [internal_partition_spec(spec, schema, table=table.name) for spec in given]
    latest = table.latest_snapshot()
    decode = PartitionDecoder(schema.partition_types)
    keys = list(schema.partition_keys)
    matcher = PartitionSpecMatcher(specs, keys, decode)
    matched: dict[int, list[ManifestEntry]] = {i: [] for i in range(len(specs))}
    if latest is not None:
        for entry in live_entries(table.file_io, table.paths, latest):
            for i in matcher.matching(entry.partition):
                matched[i].append(entry)
    missing = [given[i] for i, entries in matched.items() if not entries]
    if missing:
        raise SchemaError(f"drop of partitions of table {table.name}: {missing} match no partition of the latest "
                          "snapshot (see `paimon read <table>$partitions`); nothing was dropped")
    entries = {id(e): e for found in matched.values() for e in found}.values()
    options = table.options
    paths = sorted({make_partition(decode(e.partition), keys, schema.partition_types, options).path
                    for e in entries})
    plan = DroppedPartitions(table.name, tuple(paths), len(entries), sum(e.file.row_count for e in entries),
                             sum(e.file.file_size for e in entries))
    if dry_run:
        return plan
    committer = FileStoreCommit(table.file_io, table.paths, schema, table.options, table=table.name,
                                commit_user=commit_user or new_commit_user(options))
    snapshot_id = committer.commit([], overwrite=Overwrite("partitions", partitions=tuple(specs)))
    return replace(plan, snapshot_id=snapshot_id, dry_run=False)
