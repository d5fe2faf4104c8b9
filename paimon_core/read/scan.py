"""Scan planning: snapshot → manifest lists → manifests → live files → splits.

Partition predicates prune whole manifests (by their partition min/max) and entries; value
predicates prune files by their min/max/null-count stats, mapped by field id to the read schema.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from paimon_core.binary_row import deserialize_with_arity
from paimon_core.errors import CorruptMetadataError, UnsupportedFeatureError
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.manifest import (
    ADD,
    DataFileMeta,
    FileIdentifier,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    read_index_manifest,
    read_manifest,
    read_manifest_list,
)
from paimon_core.read.predicate import ColumnRange, Predicate
from paimon_core.schema import TableSchema
from paimon_core.schema_store import SchemaStore
from paimon_core.snapshot import Snapshot
from paimon_core.types import DataType

log = logging.getLogger(__name__)

DELETION_VECTORS = "DELETION_VECTORS"
_STATS_ERRORS = (CorruptMetadataError, UnsupportedFeatureError, struct.error, IndexError,
                 UnicodeDecodeError, ValueError)
_MANIFEST_READ_THREADS = 8


@dataclass(frozen=True, slots=True)
class DeletionFile:
    """Where the deletion vector of one data file is stored."""

    index_file: str
    offset: int
    length: int
    cardinality: int | None


@dataclass(frozen=True, slots=True)
class DataSplit:
    """Files of one (partition, bucket) to read together."""

    snapshot_id: int
    schema_id: int  # the schema the split was planned (and is read) with
    partition: bytes
    partition_values: tuple[Any, ...]
    bucket: int
    files: tuple[DataFileMeta, ...]
    deletion_files: dict[str, DeletionFile] = field(default_factory=dict)

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)


def read_manifest_metas(file_io: FileIO, paths: TablePaths, snapshot: Snapshot) -> list[ManifestFileMeta]:
    """Manifests making up ``snapshot``: its base list, then its delta list."""
    metas = read_manifest_list(file_io, paths.manifest_file(snapshot.base_manifest_list))
    metas += read_manifest_list(file_io, paths.manifest_file(snapshot.delta_manifest_list))
    return metas


def read_entries(file_io: FileIO, paths: TablePaths, metas: Sequence[ManifestFileMeta]
                 ) -> list[list[ManifestEntry]]:
    """Entries of each manifest, in order; several manifests are read concurrently."""
    names = [paths.manifest_file(m.file_name) for m in metas]
    if len(names) <= 1:
        return [read_manifest(file_io, n) for n in names]
    with ThreadPoolExecutor(min(_MANIFEST_READ_THREADS, len(names))) as pool:
        return list(pool.map(lambda n: read_manifest(file_io, n), names))


def merge_entries(entry_lists: Sequence[Sequence[ManifestEntry]],
                  keep: Callable[[ManifestEntry], bool] | None = None) -> list[ManifestEntry]:
    """Fold ADD/DELETE entries in order into the live ADD entries."""
    live: dict[FileIdentifier, ManifestEntry] = {}
    for entries in entry_lists:
        for entry in entries:
            if keep is not None and not keep(entry):
                continue
            if entry.kind == ADD:
                live[entry.identifier] = entry
            else:
                live.pop(entry.identifier, None)
    return list(live.values())


def live_entries(file_io: FileIO, paths: TablePaths, snapshot: Snapshot, *,
                 manifest_filter: Callable[[ManifestFileMeta], bool] | None = None,
                 entry_filter: Callable[[ManifestEntry], bool] | None = None) -> list[ManifestEntry]:
    """Live data files of ``snapshot`` (optionally pruned by manifest and entry)."""
    metas = read_manifest_metas(file_io, paths, snapshot)
    if manifest_filter is not None:
        metas = [m for m in metas if manifest_filter(m)]
    return merge_entries(read_entries(file_io, paths, metas), entry_filter)


class PartitionDecoder:
    """Decodes partition BinaryRows once per distinct value."""

    def __init__(self, types: Sequence[DataType]) -> None:
        self.types = list(types)
        self._cache: dict[bytes, tuple[Any, ...]] = {}

    def __call__(self, row: bytes) -> tuple[Any, ...]:
        values = self._cache.get(row)
        if values is None:
            values = self._cache[row] = deserialize_with_arity(row, self.types)
        return values


class PartitionSpecMatcher:
    """Which of several partition specs an encoded partition matches.

    A spec maps a subset of the partition keys to internal values (``{"dt": 19723}`` matches
    every partition of that day, whatever its other keys hold).
    """

    def __init__(self, specs: Sequence[Mapping[str, Any]], keys: Sequence[str], decode: PartitionDecoder) -> None:
        positions = {key: i for i, key in enumerate(keys)}
        self._wanted = [[(positions[k], v) for k, v in spec.items()] for spec in specs]
        self._decode = decode

    def matching(self, row: bytes) -> list[int]:
        """Indexes of the specs ``row`` matches."""
        values = self._decode(row)
        return [i for i, spec in enumerate(self._wanted) if all(values[p] == v for p, v in spec)]

    def __call__(self, row: bytes) -> bool:
        values = self._decode(row)
        return any(all(values[p] == v for p, v in spec) for spec in self._wanted)


class TableScan:
    """Plans which files of a snapshot a read needs."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schemas: SchemaStore,
                 snapshot: Snapshot, read_schema: TableSchema, predicate: Predicate | None, *,
                 skip_level0: bool = False) -> None:
        self.file_io = file_io
        self.skip_level0 = skip_level0
        self.paths = paths
        self.schemas = schemas
        self.snapshot = snapshot
        self.schema = read_schema
        self.predicate = predicate
        self.partition_keys = list(read_schema.partition_keys)
        self.decode_partition = PartitionDecoder(read_schema.partition_types)
        self.files_before_stats = 0

    def plan(self) -> list[DataSplit]:
        entries = live_entries(self.file_io, self.paths, self.snapshot,
                               manifest_filter=self._manifest_may_match,
                               entry_filter=self._partition_may_match)
        if self.skip_level0:
            entries = [e for e in entries if e.file.level > 0]
        self.files_before_stats = len(entries)
        entries = [e for e in entries if self._stats_may_match(e.file)]
        deletion_files = self._deletion_files()
        groups: dict[tuple[bytes, int], list[DataFileMeta]] = {}
        for entry in entries:
            groups.setdefault((entry.partition, entry.bucket), []).append(entry.file)
        splits = []
        for (partition, bucket), files in groups.items():
            if not self.schema.primary_keys:  # append files are read in write order (as Java does)
                files.sort(key=lambda f: f.min_sequence_number)
            dv = deletion_files.get((partition, bucket), {})
            splits.append(DataSplit(self.snapshot.id, self.schema.id, partition, self.decode_partition(partition),
                                    bucket, tuple(files),
                                    {f.file_name: dv[f.file_name] for f in files if f.file_name in dv}))
        log.debug("scan of snapshot %d: %d files after partition pruning, %d after stats",
                  self.snapshot.id, self.files_before_stats, len(entries))
        return splits

    # ---- pruning -------------------------------------------------------------------------

    def _manifest_may_match(self, meta: ManifestFileMeta) -> bool:
        if self.predicate is None or not self.partition_keys:
            return True
        stats = meta.partition_stats
        try:
            lows = deserialize_with_arity(stats.min_values, self.decode_partition.types)
            highs = deserialize_with_arity(stats.max_values, self.decode_partition.types)
        except _STATS_ERRORS:  # unreadable stats only disable pruning
            return True
        nulls = stats.null_counts or (None,) * len(lows)
        ranges = {k: ColumnRange(lo, hi, n, None)
                  for k, lo, hi, n in zip(self.partition_keys, lows, highs, nulls)}
        return self.predicate.may_match(ranges.get)

    def _partition_may_match(self, entry: ManifestEntry) -> bool:
        if self.predicate is None or not self.partition_keys:
            return True
        values = self.decode_partition(entry.partition)
        ranges = {k: ColumnRange(v, v, int(v is None), 1) for k, v in zip(self.partition_keys, values)}
        return self.predicate.may_match(ranges.get)

    def _stats_may_match(self, meta: DataFileMeta) -> bool:
        if self.predicate is None:
            return True
        ranges = self.file_ranges(meta)
        if self.schema.primary_keys:
            # Only key columns may prune files of a primary-key table: a file whose values do not
            # match can still hold the newest version of a matching key's older row.
            keys = set(self.schema.trimmed_primary_keys)
            ranges = {name: known for name, known in ranges.items() if name in keys}
        return self.predicate.may_match(ranges.get)

    def file_ranges(self, meta: DataFileMeta) -> dict[str, ColumnRange]:
        """Value stats of a file, keyed by the read schema's column names."""
        file_schema = self.schemas.schema(meta.schema_id)
        by_name = {f.name: f for f in file_schema.fields}
        if meta.value_stats_cols is None:
            covered = list(file_schema.fields)
        else:
            covered = [by_name[name] for name in meta.value_stats_cols if name in by_name]
        if not covered:
            return {}
        stats = meta.value_stats
        try:
            lows = deserialize_with_arity(stats.min_values, [f.type for f in covered])
            highs = deserialize_with_arity(stats.max_values, [f.type for f in covered])
        except _STATS_ERRORS:  # unreadable stats only disable pruning
            return {}
        nulls = stats.null_counts if stats.null_counts is not None else (None,) * len(covered)
        current = {f.id: f.name for f in self.schema.fields}
        out = {}
        for data_field, low, high, null_count in zip(covered, lows, highs, nulls):
            name = current.get(data_field.id)
            if name is not None:
                out[name] = ColumnRange(low, high, null_count, meta.row_count)
        return out

    # ---- deletion vectors ------------------------------------------------------------------

    def _deletion_files(self) -> dict[tuple[bytes, int], dict[str, DeletionFile]]:
        return deletion_files(self.paths, live_index_entries(self.file_io, self.paths, self.snapshot))


def live_index_entries(file_io: FileIO, paths: TablePaths, snapshot: Snapshot) -> list[IndexManifestEntry]:
    """The index files (HASH, DELETION_VECTORS, ...) of ``snapshot``."""
    if not snapshot.index_manifest:
        return []
    entries = read_index_manifest(file_io, paths.manifest_file(snapshot.index_manifest))
    live: dict[tuple[bytes, int, str], IndexManifestEntry] = {}
    for entry in entries:
        key = (entry.partition, entry.bucket, entry.file_name)
        if entry.kind == ADD:
            live[key] = entry
        else:
            live.pop(key, None)
    return list(live.values())


def deletion_files(paths: TablePaths, entries: Sequence[IndexManifestEntry]
                   ) -> dict[tuple[bytes, int], dict[str, DeletionFile]]:
    """Per (partition, bucket): data file name -> where its deletion vector is."""
    out: dict[tuple[bytes, int], dict[str, DeletionFile]] = {}
    for entry in entries:
        if entry.index_type != DELETION_VECTORS or not entry.dv_ranges:
            continue
        path = entry.external_path or paths.index_file(entry.file_name)
        bucket_files = out.setdefault((entry.partition, entry.bucket), {})
        for r in entry.dv_ranges:
            bucket_files[r.data_file] = DeletionFile(path, r.offset, r.length, r.cardinality)
    return out
