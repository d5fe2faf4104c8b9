"""What repeated primary-key lookups keep in memory: decoded row groups of data files.

A *block* is one Parquet row group (an ORC file is one block) decoded into the read schema plus
``_SEQUENCE_NUMBER`` and ``_VALUE_KIND``, in file order, with an index over its key columns.
Data files and deletion-vector index files are immutable (new versions of a key, compactions
and new deletion vectors all go to new files), so a block keyed by its file path stays right for
every snapshot that still references the file: a new snapshot changes which files a lookup
consults, never what a cached block says. Nothing here is ever invalidated, only evicted.

:class:`LookupCache` bounds the bytes it holds (Paimon's ``lookup.cache-max-memory-size``, which
there bounds the block cache of the local lookup files) and evicts the least recently used
entry first; an entry not used for ``lookup.cache-file-retention`` is dropped as Paimon drops a
lookup file after that long without access. An entry larger than the whole bound is not kept
(the lookup still reads it), so the bound holds whatever the file sizes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from paimon_core.binary_row import hash_arrow_rows
from paimon_core.fileio import FileIO
from paimon_core.keyvalue import SEQUENCE_NUMBER, VALUE_KIND
from paimon_core.manifest import DataFileMeta
from paimon_core.read.merge_read import MergeSplitReader
from paimon_core.read.scan import DataSplit, DeletionFile
from paimon_core.read.split_read import load_deletion_vector, read_all
from paimon_core.types import AtomicType, to_arrow_type

Clock = Callable[[], float]
KeyRange = tuple[pa.Scalar, pa.Scalar] | None  # a row group's (min, max) of one key column, if known
_ENTRY_OVERHEAD = 256  # bytes charged per cache entry on top of its buffers (Python objects, dict slot)
_PARTIAL_BATCH_ROWS = 32_768  # granularity at which a one-off read of a row group stops early


# ---- the cache -------------------------------------------------------------------------------


@dataclass(slots=True)
class CacheStats:
    """Counters of a :class:`LookupCache` since it was created."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0  # entries dropped to stay under the memory bound
    expirations: int = 0  # entries dropped after lookup.cache-file-retention without access
    oversized: int = 0  # entries larger than the whole bound, read but never kept
    bytes: int = 0
    entries: int = 0


class LookupCache:
    """A byte-bounded LRU map with expiry after access; safe to share between threads."""

    def __init__(self, max_bytes: int, retention_s: float | None, *, clock: Clock = time.monotonic) -> None:
        self.max_bytes = max(0, int(max_bytes))
        self.retention_s = retention_s
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[Any, int, float]] = OrderedDict()  # value, bytes, last use
        self._bytes = 0
        self._lock = threading.Lock()
        self.stats = CacheStats()

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def accepts(self, nbytes: int) -> bool:
        """Whether an entry of ``nbytes`` would be kept (false when caching is off or it is too big)."""
        return nbytes + _ENTRY_OVERHEAD <= self.max_bytes

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            now = self.clock()
            self._expire(now)
            entry = self._entries.get(key)
            if entry is None:
                self.stats.misses += 1
                return None
            value, nbytes, _ = entry
            self._entries[key] = (value, nbytes, now)
            self._entries.move_to_end(key)
            self.stats.hits += 1
            return value

    def put(self, key: Hashable, value: Any, nbytes: int) -> bool:
        """Keep ``value``, evicting least recently used entries to make room; False if it is too big."""
        charged = nbytes + _ENTRY_OVERHEAD
        with self._lock:
            if charged > self.max_bytes:
                self.stats.oversized += 1
                return False
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            now = self.clock()
            self._expire(now)
            while self._entries and self._bytes + charged > self.max_bytes:
                _, (_, freed, _) = self._entries.popitem(last=False)
                self._bytes -= freed
                self.stats.evictions += 1
            self._entries[key] = (value, charged, now)
            self._bytes += charged
            self._sync()
            return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._sync()

    def _expire(self, now: float) -> None:
        """Drop entries unused for the retention (the oldest use is first: uses move entries last)."""
        if self.retention_s is None:
            return
        while self._entries:
            key, (_, nbytes, used) = next(iter(self._entries.items()))
            if now - used <= self.retention_s:
                break
            del self._entries[key]
            self._bytes -= nbytes
            self.stats.expirations += 1
        self._sync()

    def _sync(self) -> None:
        self.stats.bytes = self._bytes
        self.stats.entries = len(self._entries)


# ---- finding keys in a block -------------------------------------------------------------------

_SORTABLE = (pa.types.is_integer, pa.types.is_date, pa.types.is_timestamp)


def _as_int64(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Integer-like values (ints, dates, timestamps) as int64, in their own order."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not pa.types.is_integer(column.type):
        column = column.view(pa.int32() if pa.types.is_date32(column.type) else pa.int64())
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)


class SortedKeyIndex:
    """One integer-like key column in strictly increasing order (a data file holds a key once,
    sorted): binary search of the probes, no extra structure beyond the column as int64."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.nbytes = values.nbytes

    def find(self, keys: Sequence[pa.Array | pa.ChunkedArray]) -> tuple[np.ndarray, np.ndarray]:
        probe = _as_int64(keys[0])
        position = np.searchsorted(self.values, probe)
        inside = position < len(self.values)
        hit = np.zeros(len(probe), dtype=bool)
        hit[inside] = self.values[position[inside]] == probe[inside]
        return position[hit].astype(np.int64), np.flatnonzero(hit)


class HashKeyIndex:
    """Any key: Paimon's BinaryRow hash of every row, sorted; probes are hashed, matched by
    binary search, and candidates (a hash can collide) confirmed by comparing the key columns."""

    def __init__(self, columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[AtomicType]) -> None:
        self.columns = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
        self.types = list(types)
        hashes = hash_arrow_rows(self.columns, self.types)
        self.order = np.argsort(hashes, kind="stable").astype(np.int32 if len(hashes) < 2**31 else np.int64)
        self.hashes = hashes[self.order]
        self.nbytes = self.order.nbytes + self.hashes.nbytes

    def find(self, keys: Sequence[pa.Array | pa.ChunkedArray]) -> tuple[np.ndarray, np.ndarray]:
        probes = [k.combine_chunks() if isinstance(k, pa.ChunkedArray) else k for k in keys]
        probe_hashes = hash_arrow_rows(probes, self.types)
        low = np.searchsorted(self.hashes, probe_hashes, side="left")
        counts = np.searchsorted(self.hashes, probe_hashes, side="right") - low
        total = int(counts.sum())
        if total == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        starts = np.repeat(low - (np.cumsum(counts) - counts), counts)
        rows = self.order[starts + np.arange(total)].astype(np.int64)
        probe_rows = np.repeat(np.arange(len(probe_hashes), dtype=np.int64), counts)
        same = np.ones(total, dtype=bool)
        for column, probe in zip(self.columns, probes):
            equal = pc.equal(column.take(pa.array(rows)), probe.take(pa.array(probe_rows)))
            same &= np.asarray(equal.to_numpy(zero_copy_only=False), dtype=bool)
        return rows[same], probe_rows[same]


KeyIndex = SortedKeyIndex | HashKeyIndex


def build_index(columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[AtomicType]) -> KeyIndex:
    """The cheapest index that is exact for these key columns."""
    if len(columns) == 1 and any(check(columns[0].type) for check in _SORTABLE) and not columns[0].null_count:
        values = _as_int64(columns[0])
        if len(values) < 2 or bool(np.all(values[1:] > values[:-1])):
            return SortedKeyIndex(values)
    return HashKeyIndex(columns, types)


@dataclass(slots=True)
class Block:
    """Decoded rows of one row group: read-schema columns, then the system columns, in file order."""

    rows: pa.Table
    first_row: int  # file position of rows[0]: deletion vectors address rows by file position
    index: KeyIndex | None = None

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes) + (self.index.nbytes if self.index is not None else 0)

    def find(self, keys: pa.Table, key_names: Sequence[str], key_types: Sequence[AtomicType]) -> np.ndarray:
        """Positions (within the block) of the rows whose key is one of ``keys``, ascending."""
        if self.index is not None:
            rows, _ = self.index.find([keys.column(k) for k in key_names])
            return np.sort(rows)
        if len(key_names) == 1:  # a one-off probe: hash the few keys, scan the block once
            name = key_names[0]
            mask = pc.is_in(self.rows.column(name), value_set=keys.column(name).combine_chunks())
            return np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool))
        probe = HashKeyIndex([keys.column(k) for k in key_names], key_types)
        _, block_rows = probe.find([self.rows.column(k) for k in key_names])
        return np.sort(block_rows)


# ---- reading blocks ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileLayout:
    """What a data file's footer says about its row groups: first rows and key ranges."""

    metadata: pq.FileMetaData | None  # None: not Parquet (the whole file is one block)
    first_rows: tuple[int, ...]
    ranges: tuple[tuple[KeyRange, ...], ...]  # per row group, per key column
    nbytes: int


_STAT_TYPES = (pa.types.is_integer, pa.types.is_date32, pa.types.is_timestamp, pa.types.is_string,
               pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary)


def key_ranges(metadata: pq.FileMetaData, names: Sequence[str],
               arrow_types: Sequence[pa.DataType]) -> tuple[tuple[KeyRange, ...], ...]:
    """Per row group, the (min, max) of each key column from the footer's statistics, as
    scalars of the key's Arrow type; None where a statistic is absent or not trusted.

    Only exact physical values are used (integers, days, INT64 timestamps of the key's own
    unit, strings, bytes): a range from a converted value (a decimal, an INT96 or rounded
    timestamp) could exclude a key that is there.
    """
    schema = metadata.schema
    stored = schema.to_arrow_schema()
    leaf = {schema.column(j).path: j for j in range(metadata.num_columns)}
    usable: list[int | None] = []
    for name, arrow_type in zip(names, arrow_types):
        j = leaf.get(name)
        ok = (j is not None and name in stored.names and stored.field(name).type == arrow_type
              and any(check(arrow_type) for check in _STAT_TYPES)
              and schema.column(j).physical_type != "INT96")
        usable.append(j if ok else None)
    out = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        ranges: list[KeyRange] = []
        for j, arrow_type in zip(usable, arrow_types):
            statistics = group.column(j).statistics if j is not None else None
            ranges.append(_stat_range(statistics, arrow_type) if statistics is not None else None)
        out.append(tuple(ranges))
    return tuple(out)


def _stat_range(statistics: Any, arrow_type: pa.DataType) -> KeyRange:
    if not statistics.has_min_max:
        return None
    try:
        if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
            low, high = statistics.min, statistics.max
            if not isinstance(low, str) or not isinstance(high, str):
                return None
            return pa.scalar(low, arrow_type), pa.scalar(high, arrow_type)
        low, high = statistics.min_raw, statistics.max_raw
        if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
            return pa.scalar(bytes(low), arrow_type), pa.scalar(bytes(high), arrow_type)
        if pa.types.is_integer(arrow_type):
            return pa.scalar(int(low), arrow_type), pa.scalar(int(high), arrow_type)
        storage = pa.int32() if pa.types.is_date32(arrow_type) else pa.int64()
        return pa.scalar(int(low), storage).cast(arrow_type), pa.scalar(int(high), storage).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None


class BlockReader:
    """Reads a data file's layout and row groups as :class:`Block` values, through the merged
    read path's reader (field ids to the read schema, casts, added columns, typed errors)."""

    def __init__(self, reader: MergeSplitReader, file_io: FileIO, schema_id: int) -> None:
        self.reader = reader
        self.file_io = file_io
        self.key_fields = [reader.schema.field(k) for k in reader.keys]
        self.key_types: list[AtomicType] = [f.type for f in self.key_fields]  # type: ignore[misc]  # keys are atomic
        self.schema_id = schema_id
        # what a decoded block depends on besides its file: the read schema and projection
        self.signature = (schema_id, tuple(f.name for f in reader.read_fields))

    def layout(self, split: DataSplit, meta: DataFileMeta) -> FileLayout:
        path = self.reader.file_path(split, meta)
        if not path.endswith(".parquet"):
            return FileLayout(None, (0,), ((None,) * len(self.key_fields),), _ENTRY_OVERHEAD)
        file_fields = self.reader._file_fields(meta)
        names = [file_fields[f.id].name if f.id in file_fields else "" for f in self.key_fields]
        current = [to_arrow_type(f.type) for f in self.key_fields]
        with self.reader._decoding(path), self.file_io.open_input(path, meta.file_size) as source:
            metadata = pq.ParquetFile(source).metadata
        # a key column renamed or retyped since the file was written: its stored stats do not apply
        same = [file_fields.get(f.id) is not None and file_fields[f.id].type == f.type for f in self.key_fields]
        ranges = key_ranges(metadata, [n if s else "" for n, s in zip(names, same)], current)
        firsts = np.concatenate(([0], np.cumsum([metadata.row_group(g).num_rows
                                                 for g in range(metadata.num_row_groups)])))[:-1]
        return FileLayout(metadata, tuple(int(x) for x in firsts), ranges,
                          int(metadata.serialized_size) * 4 + 64 * len(ranges) * max(1, len(names)))

    def blocks(self, split: DataSplit, meta: DataFileMeta, layout: FileLayout,
               groups: Sequence[int]) -> list[Block]:
        """The blocks of row groups ``groups`` (all of an ORC file), read in one pass."""
        path = self.reader.file_path(split, meta)
        file_fields = self.reader._file_fields(meta)
        columns = [f.name for f in file_fields.values()] + [SEQUENCE_NUMBER, VALUE_KIND]
        with self.reader._decoding(path), self.file_io.open_input(path, meta.file_size) as source:
            if layout.metadata is None:
                data, rows = read_all(source, path, columns)
                return [Block(self.reader._with_system_columns(data, file_fields, rows), 0)]
            parquet = _parquet(source, layout, columns)
            out = []
            for group in groups:
                data = parquet.read_row_group(group, columns=columns, use_threads=True)
                table = self.reader._with_system_columns(data, file_fields, data.num_rows)
                out.append(Block(table, layout.first_rows[group]))
            return out

    def rows_at(self, split: DataSplit, meta: DataFileMeta, layout: FileLayout, group: int,
                rows: np.ndarray) -> pa.Table:
        """Rows ``rows`` (ascending positions within row group ``group``) with system columns.

        The group is decoded in batches and decoding stops after the last wanted row, so a
        one-off lookup near the start of a large row group decodes little of it.
        """
        path = self.reader.file_path(split, meta)
        file_fields = self.reader._file_fields(meta)
        columns = [f.name for f in file_fields.values()] + [SEQUENCE_NUMBER, VALUE_KIND]
        last = int(rows[-1])
        pieces = []
        with self.reader._decoding(path), self.file_io.open_input(path, meta.file_size) as source:
            parquet = _parquet(source, layout, columns)
            start = 0
            for batch in parquet.iter_batches(batch_size=_PARTIAL_BATCH_ROWS, row_groups=[group], columns=columns):
                inside = rows[(rows >= start) & (rows < start + batch.num_rows)] - start
                if len(inside):
                    pieces.append(pa.Table.from_batches([batch]).take(pa.array(inside)))
                start += batch.num_rows
                if start > last:
                    break
        data = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        return self.reader._with_system_columns(data, file_fields, data.num_rows)

    def key_blocks(self, split: DataSplit, meta: DataFileMeta, layout: FileLayout,
                   groups: Sequence[int]) -> list[Block] | None:
        """Blocks of only the key columns (named and typed as now) of Parquet row groups, to
        find which groups hold a key before decoding their other columns; None for ORC."""
        if layout.metadata is None:
            return None
        path = self.reader.file_path(split, meta)
        file_fields = self.reader._file_fields(meta)
        stored = [file_fields[f.id] for f in self.key_fields]
        with self.reader._decoding(path), self.file_io.open_input(path, meta.file_size) as source:
            parquet = _parquet(source, layout, [f.name for f in stored])
            out = []
            for group in groups:
                data = parquet.read_row_group(group, columns=[f.name for f in stored], use_threads=False)
                columns = [data.column(old.name) if old.type == new.type else data.column(old.name).cast(
                    to_arrow_type(new.type)) for old, new in zip(stored, self.key_fields)]
                keys = pa.Table.from_arrays(columns, names=[f.name for f in self.key_fields])
                out.append(Block(keys, layout.first_rows[group]))
            return out

    def deleted_positions(self, deletion: DeletionFile) -> np.ndarray:
        """Sorted deleted row positions of a file (its deletion vector)."""
        return np.sort(load_deletion_vector(self.file_io, deletion).astype(np.int64))


def _parquet(source: pa.NativeFile, layout: FileLayout, columns: Sequence[str]) -> pq.ParquetFile:
    """The Parquet file with its already parsed footer; a column it lacks makes it not this
    table's file (reported as corrupt by the reader's ``_decoding``)."""
    parquet = pq.ParquetFile(source, metadata=layout.metadata)
    present = parquet.schema_arrow.names
    missing = [c for c in columns if c not in present]
    if missing:
        raise KeyError(f"the file has no column {missing[0]!r} (it has {present})")
    return parquet


def live_rows(rows: np.ndarray, first_row: int, deleted: np.ndarray | None) -> np.ndarray:
    """``rows`` of a block minus those its file's deletion vector (sorted positions) deletes."""
    if deleted is None or not len(rows) or not len(deleted):
        return rows
    positions = first_row + rows
    slot = np.minimum(np.searchsorted(deleted, positions), len(deleted) - 1)
    return rows[deleted[slot] != positions]


class BlockStore:
    """Layouts, blocks and deletion vectors of data files: from the cache when it holds them,
    else read (and kept when caching is on and they fit). Blocks kept get their key index."""

    def __init__(self, cache: LookupCache, *, caching: bool) -> None:
        self.cache = cache
        self.caching = caching
        self.files_read = 0  # blocks decoded from storage

    def layout(self, reader: BlockReader, split: DataSplit, meta: DataFileMeta, path: str) -> FileLayout:
        key = ("layout", path, reader.schema_id)
        layout = self.cache.get(key) if self.caching else None
        if layout is None:
            layout = reader.layout(split, meta)
            if self.caching:
                self.cache.put(key, layout, layout.nbytes)
        return layout

    def blocks(self, reader: BlockReader, split: DataSplit, meta: DataFileMeta, path: str, layout: FileLayout,
               groups: Sequence[int]) -> list[Block]:
        found: dict[int, Block] = {}
        if self.caching:
            for group in groups:
                block = self.cache.get(("block", path, reader.signature, group))
                if block is not None:
                    found[group] = block
        missing = [g for g in groups if g not in found]
        if missing:
            names = [f.name for f in reader.key_fields]
            for group, block in zip(missing, reader.blocks(split, meta, layout, missing)):
                self.files_read += 1
                if self.caching and self.cache.accepts(int(block.rows.nbytes)):
                    block.index = build_index([block.rows.column(k) for k in names], reader.key_types)
                    self.cache.put(("block", path, reader.signature, group), block, block.nbytes)
                found[group] = block
        return [found[g] for g in groups]

    def deleted(self, reader: BlockReader, deletion: DeletionFile) -> np.ndarray:
        """Sorted deleted positions of a data file (index files never change: cached by location)."""
        key = ("dv", deletion.index_file, deletion.offset, deletion.length)
        positions = self.cache.get(key) if self.caching else None
        if positions is None:
            positions = reader.deleted_positions(deletion)
            if self.caching:
                self.cache.put(key, positions, int(positions.nbytes))
        return positions
