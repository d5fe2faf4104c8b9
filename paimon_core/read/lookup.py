"""Primary-key lookups (点查): the current rows of given keys, exact at one snapshot.

A lookup reads only what can hold the keys:

1. **Route.** A key's partition comes from its partition columns (a Paimon primary key contains
   them); its bucket is the writers' ``abs(murmur3(BinaryRow(bucket key)) % N)`` with the bucket
   count its manifest entries record. Dynamic-bucket tables (``bucket = -1``) place keys by an
   assignment, not a hash, so every bucket of the partition is searched.
2. **Files.** A bucket's files whose min/max key (from the manifest) brackets a key; keys are
   sorted, so each file gets one contiguous slice of them.
3. **Row groups.** A file's row groups whose footer statistics bracket one of its keys.
4. **Merge.** The versions of each key found in those files go through the table's merge engine
   exactly as the merged read merges a section: sequence order, ``-U``/``-D`` results dropped,
   deletion vectors applied, and level 0 left out where batch reads leave it out (first-row and
   deletion-vector tables). Every version of a key lies in a file whose key range holds the key,
   so this is the merged read restricted to the keys.

Steps 1-3 are the pure functions below (:func:`route_keys`, :func:`buckets_for`,
:func:`files_for_keys`, :func:`row_groups_for_keys`); :class:`TableLookup` does the I/O, and with
its cache (:mod:`paimon_core.read.lookup_cache`) keeps decoded row groups for the next lookups.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.binary_row import arrow_scalar_to_internal, deserialize_with_arity
from paimon_core.columnar import int64_array
from paimon_core.errors import CorruptMetadataError, SchemaError, SnapshotExpiredError, UnsupportedFeatureError
from paimon_core.manifest import DataFileMeta, ManifestEntry, ManifestFileMeta
from paimon_core.merge import engine_for
from paimon_core.options import TableOptions
from paimon_core.prefetch import mapped_in_order
from paimon_core.read.lookup_cache import BlockReader, BlockStore, CacheStats, Clock, KeyRange, LookupCache, live_rows
from paimon_core.read.merge_read import MergeSplitReader, drop_retractions
from paimon_core.read.scan import DataSplit, PartitionDecoder, deletion_files, live_entries, live_index_entries
from paimon_core.read.split_read import READ_THREADS
from paimon_core.schema import TableSchema
from paimon_core.snapshot import Snapshot
from paimon_core.table_context import TableContext
from paimon_core.types import AtomicType, DataType
from paimon_core.write.conform import _safe_cast, iter_input
from paimon_core.write.routing import Router, fixed_buckets

Key = tuple[Any, ...]
_UNORDERED_ROOTS = ("FLOAT", "DOUBLE")  # NaN has no place in Python's order: no range pruning on these


# ---- keys -------------------------------------------------------------------------------------------


def lookup_keys(data: Any, schema: TableSchema, table: str) -> pa.Table:
    """The distinct primary keys in ``data``: the key columns only, in the table's storage types.

    Other columns of ``data`` are ignored; rows with a null key column are dropped (a primary
    key is NOT NULL, so they match nothing). Casts are the writers' safe casts.
    """
    frame = _as_table(data, table)
    keys = list(schema.primary_keys)
    missing = [k for k in keys if k not in frame.column_names]
    if missing:
        raise SchemaError(f"lookup keys for table {table} lack primary-key column(s) {missing}: the primary key "
                          f"is {keys} and the keys have columns {frame.column_names}")
    arrow = schema.arrow_schema()
    columns = []
    for name in keys:
        column = frame.column(name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        data_field = schema.field(name)
        target = arrow.field(name).type
        if column.type != target:
            try:
                column = _safe_cast(column, target, data_field, table)
            except SchemaError as exc:
                present = column.drop_null()
                sample = f" (value {present[0].as_py()!r})" if len(present) and "bad value" not in str(exc) else ""
                raise SchemaError(f"lookup keys: {exc}{sample}") from None
        columns.append(column)
    out = pa.Table.from_arrays(columns, names=keys)
    if any(c.null_count for c in columns):
        valid = columns[0].is_valid()
        for column in columns[1:]:
            valid = pc.and_(valid, column.is_valid())
        out = out.filter(valid)
    if out.num_rows > 1:
        out = out.group_by(keys, use_threads=False).aggregate([]).select(keys)
    return out


def _as_table(data: Any, table: str) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, Mapping):
        columns = {}
        for name, values in data.items():
            try:
                columns[str(name)] = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
                raise SchemaError(f"lookup keys for table {table}: column {name!r} holds values of mixed or "
                                  f"unknown types: {exc}") from None
        try:
            return pa.table(columns)
        except pa.ArrowInvalid as exc:  # columns of different lengths
            raise SchemaError(f"lookup keys for table {table}: {exc}") from None
    try:
        batches = [b if isinstance(b, pa.Table) else pa.Table.from_batches([b]) for b in iter_input(data)]
    except SchemaError:
        raise SchemaError(f"lookup keys for table {table} must be a pyarrow Table or RecordBatch, a dict of "
                          f"column lists or a pandas DataFrame, not {type(data).__name__}") from None
    if not batches:
        raise SchemaError(f"lookup keys for table {table} hold no batch")
    return pa.concat_tables(batches) if len(batches) > 1 else batches[0]


# ---- planning (pure) ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeyRoute:
    """The keys of one partition (``partition``: its internal values)."""

    partition: Key
    keys: pa.Table


def route_keys(keys: pa.Table, router: Router) -> list[KeyRoute]:
    """Keys grouped by partition, with the writers' router (built with ``bucket = -1``, so it
    splits by partition only: bucket counts can differ by partition, see :func:`buckets_for`)."""
    return [KeyRoute(partition.values, rows) for partition, _, rows in router.route(keys)]


def buckets_for(keys: pa.Table, bucket_keys: Sequence[str], bucket_types: Sequence[DataType],
                total_buckets: int | None, present: Iterable[int]) -> list[tuple[int, pa.Table]]:
    """The buckets to search for ``keys`` and the keys of each.

    With a known bucket count (fixed-bucket tables, as recorded in the manifest entries) each key
    goes to its hash bucket only; otherwise (dynamic buckets, or a partition whose files disagree
    on the count) every bucket present is searched for every key.
    """
    buckets = sorted(present)
    if not total_buckets or total_buckets <= 0 or not bucket_keys:
        return [(b, keys) for b in buckets]
    assigned = fixed_buckets([keys.column(k) for k in bucket_keys], bucket_types, total_buckets)  # type: ignore[arg-type]
    out = []
    for bucket in np.unique(assigned):
        if int(bucket) in buckets:
            out.append((int(bucket), keys.filter(pa.array(assigned == bucket))))
    return out


class _SortedKeys(Sequence[Key]):
    """Keys sorted by the trimmed primary key, seen as internal-value tuples on demand, so a
    binary search converts O(log n) of them instead of all."""

    def __init__(self, keys: pa.Table, names: Sequence[str], types: Sequence[DataType]) -> None:
        self.columns = [keys.column(n) for n in names]
        self.types = list(types)
        self.length = keys.num_rows
        self._seen: dict[int, Key] = {}

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: Any) -> Any:
        key = self._seen.get(index)
        if key is None:
            key = self._seen[index] = tuple(arrow_scalar_to_internal(c[index], t)
                                            for c, t in zip(self.columns, self.types))
        return key


def files_for_keys(sorted_keys: pa.Table, names: Sequence[str], types: Sequence[DataType],
                   bounds: Sequence[tuple[Key, Key] | None]) -> list[tuple[int, int, int]]:
    """``(file index, start, stop)`` for every file whose [min key, max key] brackets keys
    ``start:stop`` of ``sorted_keys`` (sorted by ``names`` ascending); files bracketing none are
    left out. A file without usable bounds (None) gets every key."""
    probe = _SortedKeys(sorted_keys, names, types)
    orderable = all(not (isinstance(t, AtomicType) and t.root in _UNORDERED_ROOTS) for t in types)
    out = []
    for index, bound in enumerate(bounds):
        start, stop = 0, len(probe)
        if bound is not None and orderable:
            try:
                start, stop = bisect.bisect_left(probe, bound[0]), bisect.bisect_right(probe, bound[1])
            except TypeError:  # a null in decoded bounds: no pruning for this file
                start, stop = 0, len(probe)
        if stop > start:
            out.append((index, start, stop))
    return out


def row_groups_for_keys(key_columns: Sequence[pa.Array | pa.ChunkedArray],
                        ranges: Sequence[Sequence[KeyRange]]) -> list[int]:
    """Row groups (by index) whose per-column [min, max] box may hold one of the keys.

    A key can only be in a row group if each of its columns lies in that column's range there;
    a column without a known range constrains nothing.
    """
    out = []
    for group, columns in enumerate(ranges):
        mask = None
        for column, known in zip(key_columns, columns):
            if known is None:
                continue
            inside = pc.and_(pc.greater_equal(column, known[0]), pc.less_equal(column, known[1]))
            mask = inside if mask is None else pc.and_(mask, inside)
        if mask is None or pc.any(mask).as_py():
            out.append(group)
    return out


def manifest_may_hold(meta: ManifestFileMeta, partitions: Sequence[Key], types: Sequence[DataType]) -> bool:
    """Whether a manifest's partition min/max can include one of ``partitions`` (unreadable stats: yes)."""
    if not types:
        return True
    stats = meta.partition_stats
    try:
        lows = deserialize_with_arity(stats.min_values, types)
        highs = deserialize_with_arity(stats.max_values, types)
    except (CorruptMetadataError, UnsupportedFeatureError, ValueError, IndexError):
        return True
    nulls = stats.null_counts or (None,) * len(types)
    for values in partitions:
        fits = True
        for value, low, high, null_count in zip(values, lows, highs, nulls):
            if value is None:
                fits = null_count is None or null_count > 0
            elif low is not None and high is not None:
                try:
                    fits = low <= value <= high
                except TypeError:
                    fits = True
            if not fits:
                break
        if fits:
            return True
    return False


# ---- merging --------------------------------------------------------------------------------------------


def merge_versions(parts: Sequence[tuple[pa.Table, DataFileMeta]], reader: MergeSplitReader) -> pa.Table | None:
    """The merged rows of the keys in ``parts`` (rows of each file found for the keys): the merged
    read's own merge of a section's files, then its retractions dropped."""
    return drop_retractions(reader.merge_records(parts)) if parts else None


# ---- the lookup -------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Bucket:
    split: DataSplit
    bounds: list[tuple[Key, Key] | None] | None = None  # decoded min/max keys, on first use


@dataclass(slots=True)
class _Partition:
    total_buckets: int | None  # None: not one fixed count, so every bucket is searched
    buckets: dict[int, _Bucket] = field(default_factory=dict)


@dataclass(slots=True)
class _Plan:
    """Where the keys of one snapshot can be: partitions → buckets → files (with their DVs)."""

    snapshot: Snapshot
    schema: TableSchema
    partitions: dict[Key, _Partition]  # every partition, or (one-off lookups) those asked for


@dataclass(frozen=True, slots=True)
class LookupStats:
    """What a :class:`TableLookup` did so far; ``cache`` counts its memory use and reuse."""

    lookups: int
    plans: int  # snapshot plans built (one per new snapshot looked up)
    files_read: int  # row groups (ORC: files) decoded from storage
    snapshot_id: int | None  # the snapshot the latest plan is of
    cache: CacheStats


class _Reading:
    """Per read schema: the merged-read reader (field mapping, merge engine) and the router."""

    def __init__(self, table: TableContext, schema: TableSchema, columns: Sequence[str] | None) -> None:
        options = TableOptions.from_map(schema.effective_options(), table=table.name)
        engine = engine_for(schema, options, table=table.name)
        self.reader = MergeSplitReader(table.file_io, table.paths, table.schemas, schema, columns=columns,
                                       table=table.name, engine=engine)
        self.blocks = BlockReader(self.reader, table.file_io, schema.id)
        self.options = options
        self.router = Router(schema, TableOptions.from_map({**options.raw, "bucket": "-1"}))
        self.bucket_keys = schema.bucket_keys(options) if options.bucket > 0 else []
        self.bucket_types = [schema.field(k).type for k in self.bucket_keys]
        self.key_types = [schema.field(k).type for k in self.reader.keys]


class OpensContext(Protocol):
    """A table (:class:`paimon_core.Table`): what a lookup needs of it is one :class:`TableContext`."""

    def context(self) -> TableContext: ...


class TableLookup:
    """Repeated primary-key lookups of one table (see :meth:`paimon_core.Table.new_lookup`).

    Each lookup of the latest snapshot first checks for a newer one (one small read of the
    ``LATEST`` hint) and plans it from the manifests if there is one; decoded row groups stay
    cached across snapshots, bounded by ``lookup.cache-max-memory-size`` and dropped after
    ``lookup.cache-file-retention`` without use. Safe to use from several threads.
    """

    def __init__(self, table: TableContext | OpensContext, columns: Sequence[str] | None = None, *,
                 options: Mapping[str, str] | None = None, cache: bool = True, clock: Clock = time.monotonic) -> None:
        if not isinstance(table, TableContext):
            table = table.context()
        schema = table.schema
        if not schema.primary_keys:
            raise UnsupportedFeatureError(
                f"table {table.name} has no primary key, so rows cannot be looked up by key: read it with "
                "table.read(filter=[...]) instead, or create the table with primary_keys")
        self.table = table
        self.columns = list(columns) if columns is not None else None
        merged = {**schema.effective_options(), **(options or {})}
        self.options = TableOptions.from_map(merged, table=table.name)
        retention = self.options.lookup_cache_file_retention_ms
        self.cache = LookupCache(self.options.lookup_cache_max_memory_size if cache else 0,
                                 retention / 1000 if retention else None, clock=clock)
        self.caching = cache and self.cache.max_bytes > 0
        self.store = BlockStore(self.cache, caching=self.caching)
        self._readings: dict[int, _Reading] = {}
        self._plans: OrderedDict[int, _Plan] = OrderedDict()  # by snapshot id, most recent last
        self._lookups = self._plans_built = 0
        self._lock = threading.Lock()  # plans are built and swapped under it; the cache has its own
        self._readings[schema.id] = _Reading(table, schema, self.columns)  # unknown columns fail here

    @property
    def stats(self) -> LookupStats:
        latest = next(reversed(self._plans.values())).snapshot.id if self._plans else None
        return LookupStats(self._lookups, self._plans_built, self.store.files_read, latest, replace(self.cache.stats))

    def clear(self) -> None:
        """Forget cached plans and row groups."""
        with self._lock:
            self._plans.clear()
        self.cache.clear()

    def lookup(self, keys: Any, *, snapshot_id: int | None = None) -> pa.Table:
        """Current rows of ``keys`` at ``snapshot_id`` (default the latest); see :meth:`Table.lookup`."""
        self._lookups += 1
        for attempt in range(2):
            snapshot, schema = self._target(snapshot_id, refresh=attempt > 0)
            reading = self._reading(schema)
            if snapshot is None:
                return reading.reader.output_schema.empty_table()
            try:
                return self._lookup(reading, snapshot, lookup_keys(keys, schema, self.table.name))
            except FileNotFoundError as exc:
                if self.table.snapshots.exists(snapshot.id):
                    raise
                with self._lock:
                    self._plans.pop(snapshot.id, None)
                if snapshot_id is not None or attempt:  # a pinned snapshot is gone, or it happened twice
                    raise SnapshotExpiredError(
                        f"snapshot {snapshot.id} of table {self.table.name} was expired while it was looked up "
                        f"({exc}); look up a newer snapshot, or protect this one with a tag") from exc
        raise AssertionError("unreachable")

    # ---- planning ----------------------------------------------------------------------------------

    def _target(self, snapshot_id: int | None, *, refresh: bool) -> tuple[Snapshot | None, TableSchema]:
        store = self.table.snapshots
        if snapshot_id is not None:
            plan = self._plans.get(snapshot_id)
            snapshot = plan.snapshot if plan is not None else store.snapshot(snapshot_id)
            return snapshot, plan.schema if plan is not None else self.table.schemas.schema(snapshot.schema_id)
        latest = store.latest_id()
        if latest is None:
            return None, self.table.schemas.latest()
        plan = None if refresh else self._plans.get(latest)
        if plan is not None:
            return plan.snapshot, plan.schema
        return store.snapshot(latest), self.table.schemas.latest()

    def _reading(self, schema: TableSchema) -> _Reading:
        reading = self._readings.get(schema.id)
        if reading is None:
            reading = self._readings[schema.id] = _Reading(self.table, schema, self.columns)
        return reading

    def _plan(self, snapshot: Snapshot, schema: TableSchema, wanted: Sequence[Key]) -> _Plan:
        if not self.caching:  # one-off: only the partitions asked for
            return self._build_plan(snapshot, schema, set(wanted))
        with self._lock:
            plan = self._plans.get(snapshot.id)
            if plan is None:
                plan = self._plans[snapshot.id] = self._build_plan(snapshot, schema, None)
                while len(self._plans) > 4:
                    self._plans.popitem(last=False)
            self._plans.move_to_end(snapshot.id)
            return plan

    def _build_plan(self, snapshot: Snapshot, schema: TableSchema, wanted: set[Key] | None) -> _Plan:
        table = self.table
        decode = PartitionDecoder(schema.partition_types)
        manifest_filter = None
        entry_filter = None
        if wanted is not None and schema.partition_keys:
            chosen = list(wanted)
            manifest_filter = lambda m: manifest_may_hold(m, chosen, decode.types)  # noqa: E731
            entry_filter = lambda e: decode(e.partition) in wanted  # noqa: E731
        entries = live_entries(table.file_io, table.paths, snapshot, manifest_filter=manifest_filter,
                               entry_filter=entry_filter)
        options = TableOptions.from_map(schema.effective_options(), table=table.name)
        if options.batch_scan_skips_level0(primary_key=True):
            entries = [e for e in entries if e.file.level > 0]
        vectors = deletion_files(table.paths, live_index_entries(table.file_io, table.paths, snapshot))
        grouped: dict[tuple[bytes, int], list[ManifestEntry]] = {}
        for entry in entries:
            grouped.setdefault((entry.partition, entry.bucket), []).append(entry)
        partitions: dict[Key, _Partition] = {}
        totals: dict[Key, set[int]] = {}
        for (row, bucket), bucket_entries in grouped.items():
            values = decode(row)
            files = tuple(sorted((e.file for e in bucket_entries), key=lambda f: (f.level, f.min_sequence_number)))
            dv = vectors.get((row, bucket), {})
            split = DataSplit(snapshot.id, schema.id, row, values, bucket, files,
                              {f.file_name: dv[f.file_name] for f in files if f.file_name in dv})
            partition = partitions.setdefault(values, _Partition(None))
            partition.buckets[bucket] = _Bucket(split)
            totals.setdefault(values, set()).update(e.total_buckets for e in bucket_entries)
        for values, partition in partitions.items():
            counts = totals[values]
            if options.bucket > 0 and len(counts) == 1:
                partition.total_buckets = next(iter(counts))
        self._plans_built += 1
        return _Plan(snapshot, schema, partitions)

    # ---- reading ---------------------------------------------------------------------------------------

    def _lookup(self, reading: _Reading, snapshot: Snapshot, keys: pa.Table) -> pa.Table:
        reader = reading.reader
        if keys.num_rows == 0:
            return reader.output_schema.empty_table()
        routes = route_keys(keys, reading.router)
        plan = self._plan(snapshot, reading.reader.schema, [r.partition for r in routes])
        work: list[tuple[_Bucket, pa.Table]] = []
        for route in routes:
            partition = plan.partitions.get(route.partition)
            if partition is None:
                continue
            for bucket, bucket_keys in buckets_for(route.keys, reading.bucket_keys, reading.bucket_types,
                                                   partition.total_buckets, partition.buckets):
                work.append((partition.buckets[bucket], bucket_keys))
        # Buckets are read in parallel only when files are read: from memory the threads cost more
        # than they give (a missing row group decodes its columns on several threads anyway).
        if self.caching:
            results: Iterable[pa.Table | None] = (self._lookup_bucket(reading, *item) for item in work)
        else:
            results = mapped_in_order(lambda item: self._lookup_bucket(reading, *item), work, READ_THREADS)
        found = [t for t in results if t is not None and t.num_rows]
        if not found:
            return reader.output_schema.empty_table()
        names = [f.name for f in reader.output_fields]
        return pa.concat_tables([t.select(names).cast(reader.output_schema) for t in found])

    def _lookup_bucket(self, reading: _Reading, bucket: _Bucket, keys: pa.Table) -> pa.Table | None:
        reader = reading.reader
        if bucket.bounds is None:
            bucket.bounds = [_bounds(meta, reading) for meta in bucket.split.files]
        if keys.num_rows > 1:
            keys = keys.take(pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in reader.keys]))
        parts = []
        for index, start, stop in files_for_keys(keys, reader.keys, reading.key_types, bucket.bounds):
            meta = bucket.split.files[index]
            rows = self._file_rows(reading, bucket.split, meta, keys.slice(start, stop - start))
            if rows is not None:
                parts.append((rows, meta))
        return merge_versions(parts, reader)

    def _file_rows(self, reading: _Reading, split: DataSplit, meta: DataFileMeta, keys: pa.Table) -> pa.Table | None:
        """The rows of one file holding ``keys`` (deletion vector applied), with system columns.

        Without a cache the key columns of the candidate row groups are read first, and the
        other columns only of groups that hold a live key: most files a key's range falls in
        (level-0 runs of random keys) do not hold it.
        """
        path = reading.reader.file_path(split, meta)
        layout = self.store.layout(reading.blocks, split, meta, path)
        names = reading.reader.keys
        groups = row_groups_for_keys([keys.column(k) for k in names], layout.ranges)
        if not groups:
            return None
        deletion = split.deletion_files.get(meta.file_name)
        deleted = self.store.deleted(reading.blocks, deletion) if deletion is not None else None
        types = reading.blocks.key_types
        known: dict[int, np.ndarray] = {}
        probes = None if self.caching else reading.blocks.key_blocks(split, meta, layout, groups)
        if probes is not None:
            for group, probe in zip(groups, probes):
                live = live_rows(probe.find(keys, names, types), probe.first_row, deleted)
                if len(live):
                    known[group] = live
            if not known:
                return None
            pieces = [reading.blocks.rows_at(split, meta, layout, group, rows) for group, rows in known.items()]
            return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
        pieces = []
        for block in self.store.blocks(reading.blocks, split, meta, path, layout, groups):
            rows = live_rows(block.find(keys, names, types), block.first_row, deleted)
            if len(rows):
                pieces.append(block.rows.take(int64_array(rows)))
        if not pieces:
            return None
        return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]


def _bounds(meta: DataFileMeta, reading: _Reading) -> tuple[Key, Key] | None:
    """A file's decoded (min key, max key), typed by the file's own schema version; None if unknown."""
    try:
        by_id = reading.reader.schemas.schema(meta.schema_id).field_by_id()
        types = [by_id[reading.reader.schema.field(k).id].type for k in reading.reader.keys]
        return deserialize_with_arity(meta.min_key, types), deserialize_with_arity(meta.max_key, types)
    except (CorruptMetadataError, UnsupportedFeatureError, SchemaError, KeyError, ValueError, IndexError):
        return None

