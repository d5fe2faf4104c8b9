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


_AS_WRITTEN = {"partial-update": "partial rows as written, not the merged rows",
               "aggregation": "the addends as written, not the aggregated rows",
               "first-row": "every row as written, repeated keys included, not the first row of each key"}


def change_feed_problem(*, primary_key: bool, merge_engine: str, producer: str) -> str | None:
    """Why a table's change reads are not merged rows with ``-U`` before-images, or None.

    A consumer that keeps running aggregates (a sum per status) needs both: without a changelog
    producer a primary-key table's changes are its merged delta files (an update arrives as
    ``+I``/``+U`` without the row it replaces); with ``input``, those of partial-update,
    aggregation and first-row tables are the rows as written. Append tables (inserts only) and
    the ``lookup`` and ``full-compaction`` producers give merged changes with before-images;
    ``input`` on deduplicate tables gives the before-images its writers wrote.
    """
    if not primary_key or producer in ("lookup", "full-compaction"):
        return None
    if producer == "none":
        fix = ("'lookup' or 'full-compaction' (or 'input' if its writers write -U rows)"
               if merge_engine == "deduplicate" else "'lookup' or 'full-compaction'")
        what = "the rows each commit wrote" if merge_engine == "deduplicate" else _AS_WRITTEN[merge_engine]
        engine = "" if merge_engine == "deduplicate" else f" with merge-engine {merge_engine}"
        return (f"changelog-producer none{engine}: its changes are {what}, without -U before-images, so a "
                f"consumer cannot take an old value away; set 'changelog-producer' to {fix}")
    if merge_engine == "deduplicate":
        return None
    return (f"changelog-producer input with merge-engine {merge_engine}: its changes are {_AS_WRITTEN[merge_engine]}, "
            "without -U before-images of the merged rows; set 'changelog-producer' to 'lookup' or "
            "'full-compaction' for a changelog of merged rows")


def warn_if_changes_are_inputs(schema: TableSchema, options: TableOptions, table: str) -> None:
    """Log when the changes read are the written inputs, not merged changes.

    Java's streaming and incremental scans return such rows as they are (only Flink's source
    refuses tables without a producer): so do we, and say what they are.
    """
    primary_key = bool(schema.primary_keys)
    if not primary_key or options.merge_engine == "deduplicate" or options.changelog_producer not in ("none", "input"):
        return
    problem = change_feed_problem(primary_key=primary_key, merge_engine=options.merge_engine,
                                  producer=options.changelog_producer)
    log.warning("table %s: %s", table, problem)


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
