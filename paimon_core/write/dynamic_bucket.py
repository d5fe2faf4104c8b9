"""Dynamic buckets (``bucket = -1`` primary-key tables): key hash → bucket from HASH index files.

Each (partition, bucket) has a HASH index file listing the 32-bit hashes of its keys
(big-endian). A known hash keeps its bucket; new hashes fill the non-full buckets in bucket
order up to ``dynamic-bucket.target-row-num`` keys, then open the smallest unused bucket ids,
as Paimon's single ``PartitionIndex`` assigner does. After a commit that added keys, the
bucket's index file is rewritten whole.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from paimon_core.binary_row import hash_arrow_rows
from paimon_core.columnar import int64_array
from paimon_core.errors import UnsupportedFeatureError
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.manifest import ADD, IndexManifestEntry
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema
from paimon_core.write.routing import Partition, Router

HASH_INDEX = "HASH"
MAX_BUCKET_ID = 32766  # Short.MAX_VALUE - 1


@dataclass(slots=True)
class _PartitionIndex:
    """Known key hashes of one partition, by bucket."""

    hashes: np.ndarray  # sorted
    buckets: np.ndarray  # bucket of each hash in ``hashes``
    counts: dict[int, int]
    added: dict[int, list[np.ndarray]] = field(default_factory=dict)
    files: dict[int, IndexManifestEntry] = field(default_factory=dict)
    loaded_hashes: dict[int, np.ndarray] = field(default_factory=dict)


class DynamicBucketAssigner:
    """Routes rows of a dynamic-bucket table and tracks the HASH index changes to commit."""

    def __init__(self, file_io: FileIO, paths: TablePaths, schema: TableSchema, options: TableOptions,
                 index_entries: list[IndexManifestEntry], *, table: str,
                 owns_partition: Callable[[bytes], bool] | None = None) -> None:
        if not set(schema.partition_keys) <= set(schema.primary_keys):
            raise UnsupportedFeatureError(
                f"table {table}: cross-partition upsert (bucket = -1 with a primary key that lacks "
                f"partition keys {list(schema.partition_keys)}) is not supported; add the partition keys "
                "to the primary key or use a fixed bucket count")
        self.file_io = file_io
        self.paths = paths
        self.options = options
        self.owns_partition = owns_partition
        self.partitioner = Router(schema, TableOptions.from_map({**options.raw, "bucket": "-1"}))
        self.keys = schema.trimmed_primary_keys
        self.key_types = [schema.field(k).type for k in self.keys]
        self.target = options.dynamic_bucket_target_row_num
        self.max_buckets = int(options.raw.get("dynamic-bucket.max-buckets", "-1"))
        self.existing = [e for e in index_entries if e.kind == ADD]
        self._partitions: dict[bytes, _PartitionIndex] = {}

    def split(self, table: pa.Table) -> list[tuple[Partition, int, np.ndarray]]:
        """The row indices of every (partition, bucket) group of ``table``, each in input order;
        keys new to a partition are assigned a bucket (and recorded in its index) here."""
        out = []
        all_keys = table.select(self.keys)
        for partition, _, rows in self.partitioner.split(table):
            if self.owns_partition is not None and not self.owns_partition(partition.row):
                continue
            index = self._index(partition.row)
            keys = all_keys if len(rows) == table.num_rows else all_keys.take(int64_array(rows))
            hashes = hash_arrow_rows(keys.columns, self.key_types)  # type: ignore[arg-type]
            buckets = self._assign(index, hashes)
            order = np.argsort(buckets, kind="stable")
            sorted_buckets = buckets[order]
            starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_buckets)) + 1))
            ends = np.concatenate((starts[1:], [len(order)]))
            for start, end in zip(starts, ends):
                out.append((partition, int(sorted_buckets[start]), rows[order[start:end]]))
        return out

    def _index(self, partition: bytes) -> _PartitionIndex:
        index = self._partitions.get(partition)
        if index is not None:
            return index
        hashes: list[np.ndarray] = []
        buckets: list[np.ndarray] = []
        counts: dict[int, int] = {}
        files: dict[int, IndexManifestEntry] = {}
        loaded: dict[int, np.ndarray] = {}
        for entry in self.existing:
            if entry.partition != partition or entry.index_type != HASH_INDEX:
                continue
            path = entry.external_path or self.paths.index_file(entry.file_name)
            values = np.frombuffer(self.file_io.read_bytes(path), dtype=">i4").astype(np.int32)
            hashes.append(values)
            buckets.append(np.full(len(values), entry.bucket, dtype=np.int32))
            counts[entry.bucket] = counts.get(entry.bucket, 0) + len(values)
            files[entry.bucket] = entry
            loaded[entry.bucket] = values
        all_hashes = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.int32)
        all_buckets = np.concatenate(buckets) if buckets else np.zeros(0, dtype=np.int32)
        order = np.argsort(all_hashes, kind="stable")
        index = _PartitionIndex(all_hashes[order], all_buckets[order], counts, files=files, loaded_hashes=loaded)
        self._partitions[partition] = index
        return index

    def _assign(self, index: _PartitionIndex, hashes: np.ndarray) -> np.ndarray:
        """Bucket of every row: known hashes keep theirs, new ones fill buckets in order."""
        position = np.searchsorted(index.hashes, hashes)
        known = (position < len(index.hashes)) & (index.hashes[np.minimum(position, len(index.hashes) - 1)]
                                                  == hashes) if len(index.hashes) else np.zeros(len(hashes), bool)
        result = np.empty(len(hashes), dtype=np.int32)
        result[known] = index.buckets[position[known]]
        new_hashes, first_seen, inverse = np.unique(hashes[~known], return_index=True, return_inverse=True)
        if len(new_hashes) == 0:
            return result
        appearance = np.argsort(first_seen, kind="stable")  # assign in order of first appearance
        assigned = np.empty(len(new_hashes), dtype=np.int32)
        assigned[appearance] = self._fill(index, len(new_hashes))
        result[~known] = assigned[inverse.reshape(-1)]
        self._remember(index, new_hashes, assigned)
        return result

    def _fill(self, index: _PartitionIndex, count: int) -> np.ndarray:
        """Buckets for ``count`` new keys: free capacity in bucket order, then new buckets."""
        slots: list[np.ndarray] = []
        needed = count
        for bucket in sorted(index.counts):
            room = self.target - index.counts[bucket]
            if room > 0 and needed > 0:
                take = min(room, needed)
                slots.append(np.full(take, bucket, dtype=np.int32))
                needed -= take
        limit = MAX_BUCKET_ID if self.max_buckets == -1 else self.max_buckets - 1
        candidate = 0
        while needed > 0:
            while candidate in index.counts:
                candidate += 1
            if candidate > limit:
                if self.max_buckets == -1:
                    raise UnsupportedFeatureError(
                        f"too many dynamic buckets ({limit}); increase 'dynamic-bucket.target-row-num'")
                existing = sorted(index.counts)
                slots.append(np.array([random.choice(existing) for _ in range(needed)], dtype=np.int32))
                break
            take = min(self.target, needed)
            slots.append(np.full(take, candidate, dtype=np.int32))
            index.counts[candidate] = 0
            needed -= take
        assigned = np.concatenate(slots)
        for bucket, number in zip(*np.unique(assigned, return_counts=True)):
            index.counts[int(bucket)] = index.counts.get(int(bucket), 0) + int(number)
        return assigned

    @staticmethod
    def _remember(index: _PartitionIndex, hashes: np.ndarray, buckets: np.ndarray) -> None:
        merged = np.concatenate([index.hashes, hashes])
        merged_buckets = np.concatenate([index.buckets, buckets])
        order = np.argsort(merged, kind="stable")
        index.hashes, index.buckets = merged[order], merged_buckets[order]
        for bucket in np.unique(buckets):
            index.added.setdefault(int(bucket), []).append(hashes[buckets == bucket])

    def index_changes(self) -> tuple[list[IndexManifestEntry], list[str]]:
        """Write a complete HASH file for every bucket that gained keys.

        Returns:
            The index manifest entries after the change (all HASH and other entries that stay,
            plus the new files) and the paths of the new files (for cleanup on failure).
        """
        replaced: set[tuple[bytes, int]] = set()
        new_entries, written = [], []
        for partition, index in self._partitions.items():
            for bucket, parts in index.added.items():
                old = index.loaded_hashes.get(bucket, np.zeros(0, dtype=np.int32))
                hashes = np.concatenate([old, *parts]).astype(">i4")
                name = f"index-{uuid.uuid4()}-0"
                path = self.paths.index_file(name)
                self.file_io.write_bytes(path, hashes.tobytes())
                written.append(path)
                new_entries.append(IndexManifestEntry(ADD, partition, bucket, HASH_INDEX, name, hashes.nbytes,
                                                      len(hashes)))
                replaced.add((partition, bucket))
        kept = [e for e in self.existing
                if not (e.index_type == HASH_INDEX and (e.partition, e.bucket) in replaced)]
        return kept + new_entries, written

    @property
    def changed(self) -> bool:
        return any(index.added for index in self._partitions.values())

