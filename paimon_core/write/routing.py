"""Routing rows to (partition, bucket): one stable sort by a group code, then slices.

The group code combines each partition column's dictionary index with the fixed-bucket number
(Paimon's ``abs(murmur3(BinaryRow(bucket key)) % N)``), so splitting a batch costs one sort and
one take however many partitions it spans, and rows keep their input order within a group.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.binary_row import EMPTY_ROW, arrow_scalar_to_internal, hash_arrow_rows, serialize_with_arity
from paimon_core.columnar import int64_array
from paimon_core.layout import partition_path, partition_value_string
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema
from paimon_core.threads import worker_threads
from paimon_core.types import AtomicType, DataType


@dataclass(frozen=True, slots=True)
class Partition:
    """A partition: its BinaryRow (manifest form), internal values and relative directory."""

    row: bytes
    values: tuple[Any, ...]
    path: str


UNPARTITIONED = Partition(EMPTY_ROW, (), "")


def make_partition(values: Sequence[Any], keys: Sequence[str], types: Sequence[DataType],
                   options: TableOptions) -> Partition:
    """Partition of internal ``values`` of the partition ``keys``."""
    texts = [partition_value_string(v, t, legacy=options.partition_legacy_name)
             for v, t in zip(values, types)]
    return Partition(serialize_with_arity(values, types), tuple(values),
                     partition_path(keys, texts, options.partition_default_name))


def fixed_buckets(columns: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[AtomicType],
                  num_buckets: int) -> np.ndarray:
    """Bucket of every row for a fixed-bucket table: ``abs(hash % N)`` with Java's ``%``."""
    hashes = hash_arrow_rows(columns, types).astype(np.int64)
    return np.abs(np.fmod(hashes, num_buckets))


# Gathers of inputs larger than this are split by column over threads: the gather is memory
# bound, and the first touch of a memory-mapped input's pages is most of its cost.
PARALLEL_GATHER_BYTES = 16 * 1024 * 1024
_GATHER_THREADS = worker_threads()


def gathered(data: pa.Table, groups: Sequence[pa.Array]) -> list[pa.Table]:
    """``data.take(indices)`` for each group of row indices, the columns taken concurrently."""
    if data.nbytes < PARALLEL_GATHER_BYTES or _GATHER_THREADS < 2 or data.num_columns < 2:
        return [data.take(indices) for indices in groups]

    def column(i: int) -> list[pa.ChunkedArray]:
        source = data.column(i)
        return [source.take(indices) for indices in groups]

    with ThreadPoolExecutor(_GATHER_THREADS, thread_name_prefix="paimon-gather") as pool:
        columns = list(pool.map(column, range(data.num_columns)))
    return [pa.Table.from_arrays([taken[g] for taken in columns], schema=data.schema) for g in range(len(groups))]


class Router:
    """Splits conformed tables into per-(partition, bucket) slices."""

    def __init__(self, schema: TableSchema, options: TableOptions) -> None:
        self.keys = list(schema.partition_keys)
        self.types = schema.partition_types
        self.options = options
        self.num_buckets = options.bucket if options.bucket > 0 else 0
        self.bucket_keys = schema.bucket_keys(options) if self.num_buckets else []
        self.bucket_types = [schema.field(k).type for k in self.bucket_keys]
        self._partitions: dict[tuple[Any, ...], Partition] = {}

    def split(self, data: pa.Table) -> list[tuple[Partition, int, np.ndarray]]:
        """The row indices of every (partition, bucket) group of ``data``, each in input order."""
        n = data.num_rows
        if n == 0:
            return []
        if not self.keys and not self.num_buckets:
            return [(UNPARTITIONED, 0, np.arange(n, dtype=np.int64))]
        codes, buckets = self._group_codes(data)
        if codes.min() == codes.max():
            return [(self._partition_at(data, 0), int(buckets[0]), np.arange(n, dtype=np.int64))]
        if int(codes.max()) < 2**15:  # numpy sorts 16-bit integers stably by radix: a few times faster
            codes = codes.astype(np.int16)
        order = np.argsort(codes, kind="stable")
        sorted_codes = codes[order]
        starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_codes)) + 1))
        ends = np.concatenate((starts[1:], [n]))
        return [(self._partition_at(data, int(order[s])), int(buckets[order[s]]), order[s:e])
                for s, e in zip(starts, ends)]

    def route(self, data: pa.Table) -> list[tuple[Partition, int, pa.Table]]:
        """:meth:`split`, each group's rows gathered into a table of its own (so a buffered
        group never keeps the rows of other groups alive after they are flushed)."""
        groups = self.split(data)
        if len(groups) == 1:
            partition, bucket, _ = groups[0]
            return [(partition, bucket, data)]
        tables = gathered(data, [int64_array(rows) for _, _, rows in groups])
        return [(partition, bucket, table) for (partition, bucket, _), table in zip(groups, tables)]

    def _group_codes(self, data: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(group code per row, bucket per row)."""
        n = data.num_rows
        buckets = np.zeros(n, dtype=np.int64)
        columns: list[np.ndarray] = []
        radices: list[int] = []
        for key in self.keys:
            encoded = pc.dictionary_encode(data.column(key), null_encoding="encode").combine_chunks()
            columns.append(np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64))
            radices.append(max(len(encoded.dictionary), 1))
        if self.num_buckets:
            buckets = fixed_buckets([data.column(k) for k in self.bucket_keys],
                                    self.bucket_types, self.num_buckets)  # type: ignore[arg-type]
            columns.append(buckets)
            radices.append(self.num_buckets)
        if float(np.prod(np.array(radices, dtype=np.float64))) < 2**62:
            codes = np.zeros(n, dtype=np.int64)
            for column, radix in zip(columns, radices):
                codes = codes * radix + column
            return codes, buckets
        _, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        return np.asarray(inverse.reshape(-1), dtype=np.int64), buckets

    def _partition_at(self, table: pa.Table, row: int) -> Partition:
        """The partition of ``table``'s row ``row`` (built once per distinct value)."""
        values = tuple(arrow_scalar_to_internal(table.column(k)[row], t) for k, t in zip(self.keys, self.types))
        partition = self._partitions.get(values)
        if partition is None:
            partition = make_partition(values, self.keys, self.types, self.options)
            self._partitions[values] = partition
        return partition
