"""Reading what snapshots changed: rows with their row kind (``+I``, ``-U``, ``+U``, ``-D``).

Which files hold a snapshot's changes depends on the changelog producer, as in Paimon's
follow-up scanners: with ``none`` the data files an APPEND snapshot added (merged per flush,
no ``-U`` before-images; COMPACT and OVERWRITE snapshots carry no changes), with any other
producer the files of the snapshot's changelog manifest list (snapshots without one carry
none). Append tables change only by APPEND snapshots, every row an insert.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.fileio import FileIO
from paimon_core.keyvalue import VALUE_KIND
from paimon_core.layout import TablePaths
from paimon_core.manifest import ADD, DataFileMeta, ManifestEntry, read_manifest_list
from paimon_core.options import TableOptions
from paimon_core.prefetch import mapped_in_order
from paimon_core.read.merge_read import MergeSplitReader
from paimon_core.read.scan import DataSplit, PartitionDecoder, read_entries
from paimon_core.read.split_read import READ_THREADS, SplitReader
from paimon_core.schema import TableSchema
from paimon_core.snapshot import Snapshot

log = logging.getLogger(__name__)

ROW_KIND = "_row_kind"  # pypaimon's name for the row kind column of streaming reads
KIND_NAMES = ("+I", "-U", "+U", "-D")
_KIND_ARRAY = pa.array(KIND_NAMES, pa.string())


def warn_if_changes_are_inputs(schema: TableSchema, options: TableOptions, table: str) -> None:
    """Log when the changes read are the written inputs, not merged changes.

    Without a changelog producer the delta files of partial-update and aggregation tables hold
    partial rows and partial sums, and those of first-row tables repeat keys that already
    exist. Java's streaming and incremental scans return those rows as they are (only Flink's
    source refuses such tables): so do we, and say what they are.
    """
    if not schema.primary_keys or options.changelog_producer != "none" or options.merge_engine == "deduplicate":
        return
    log.warning("table %s uses merge-engine %s with changelog-producer none: its changes are the rows as "
                "written, not the merged changes; set changelog-producer to lookup or full-compaction "
                "(ALTER TABLE ... SET) for a changelog of merged rows", table, options.merge_engine)


def carries_changes(snapshot: Snapshot, *, primary_key: bool, producer: str) -> bool:
    """Whether change reads find anything in ``snapshot`` (from its metadata alone)."""
    if primary_key and producer != "none":
        return snapshot.changelog_manifest_list is not None and snapshot.changelog_record_count != 0
    return snapshot.commit_kind == "APPEND"


def change_entries(file_io: FileIO, paths: TablePaths, snapshot: Snapshot, *, primary_key: bool,
                   producer: str) -> list[ManifestEntry]:
    """The files holding ``snapshot``'s changes, in commit order (none for snapshots without)."""
    if not carries_changes(snapshot, primary_key=primary_key, producer=producer):
        return []
    changelog = primary_key and producer != "none"
    listed = snapshot.changelog_manifest_list if changelog else snapshot.delta_manifest_list
    assert listed is not None
    metas = read_manifest_list(file_io, paths.manifest_file(listed))
    return [e for entries in read_entries(file_io, paths, metas) for e in entries if e.kind == ADD]


def change_splits(snapshot: Snapshot, schema: TableSchema, entries: Sequence[ManifestEntry]) -> list[DataSplit]:
    """Entries grouped per (partition, bucket), files kept in commit order."""
    decode = PartitionDecoder(schema.partition_types)
    groups: dict[tuple[bytes, int], list[DataFileMeta]] = {}
    for entry in entries:
        groups.setdefault((entry.partition, entry.bucket), []).append(entry.file)
    return [DataSplit(snapshot.id, schema.id, partition, decode(partition), bucket, tuple(files))
            for (partition, bucket), files in groups.items()]


class ChangeReader:
    """Reads change files as Arrow: ``_row_kind`` first, then the projected columns."""

    def __init__(self, reader: SplitReader) -> None:
        self.reader = reader
        self.output_schema = pa.schema([pa.field(ROW_KIND, pa.string(), False), *reader.output_schema])

    def read(self, splits: Sequence[DataSplit]) -> pa.Table:
        tables = [t for t in self.iter_tables(splits) if t.num_rows]
        return pa.concat_tables(tables) if tables else self.output_schema.empty_table()

    def iter_tables(self, splits: Sequence[DataSplit]) -> Iterator[pa.Table]:
        """One table per file, in split and commit order (a few files read at a time)."""
        tasks = [(split, meta) for split in splits for meta in split.files]
        return mapped_in_order(lambda task: self.read_file(*task), tasks, READ_THREADS)

    def read_file(self, split: DataSplit, meta: DataFileMeta) -> pa.Table:
        reader = self.reader
        if not isinstance(reader, MergeSplitReader):
            rows = reader.read_file(split, meta)  # an append table: every row an insert
            return rows.add_column(0, self.output_schema.field(0), pa.repeat(pa.scalar("+I"), rows.num_rows))
        data = reader.read_key_values(split, meta)
        if reader.filter is not None:
            data = data.filter(reader.filter)
        kinds = pc.take(_KIND_ARRAY, data.column(VALUE_KIND))
        values = data.select([f.name for f in reader.output_fields])
        return values.add_column(0, self.output_schema.field(0), kinds)
