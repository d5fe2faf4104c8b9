"""One writer's share of a table when many writers prepare one commit.

Paimon spreads a write over parallel writers by bucket (Flink's ``ChannelComputer.select``):
writer ``(abs(hash(partition)) % n + bucket) % n`` owns a bucket, so each bucket has exactly one
writer and its sequence numbers stay one increasing series. Dynamic-bucket tables assign
buckets from a per-partition index, so there a writer owns whole partitions (one assigner per
partition). Append tables without buckets (``bucket = -1``) have no owner: every writer takes
its own slice of the input instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from paimon_core.binary_row import hash_bytes
from paimon_core.errors import SchemaError

_INT_MIN = -(2**31)


def _java_rem(value: int, divisor: int) -> int:
    """Java's ``%``: the remainder takes the sign of the dividend."""
    remainder = abs(value) % divisor
    return -remainder if value < 0 else remainder


def channel(partition_row: bytes, bucket: int, count: int) -> int:
    """Paimon's channel of (partition, bucket) among ``count`` writers.

    ``partition_row`` is the manifest form (arity, then the BinaryRow); the hash is the
    BinaryRow's, as Java's ``BinaryRow.hashCode``.
    """
    code = hash_bytes(partition_row[4:])
    start = code if code == _INT_MIN else abs(code)  # Math.abs(Integer.MIN_VALUE) stays negative
    return _java_rem(_java_rem(start, count) + bucket, count)


@dataclass(frozen=True, slots=True)
class Shard:
    """Writer ``index`` of ``count``: the rows of the buckets (or partitions) it owns."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise SchemaError(f"shard {self.index} of {self.count} does not exist: a shard is (index, count) "
                              "with 0 <= index < count, e.g. (0, 4) for the first of four writers")

    def owns(self, partition_row: bytes, bucket: int) -> bool:
        """Whether this writer writes (partition, bucket) of a fixed-bucket table."""
        return channel(partition_row, bucket, self.count) == self.index

    def owns_partition(self, partition_row: bytes) -> bool:
        """Whether this writer writes the partition (dynamic-bucket tables: one assigner each)."""
        return channel(partition_row, 0, self.count) == self.index


def as_shard(value: Shard | tuple[int, int] | None) -> Shard | None:
    """A shard from ``(index, count)``, or None for a writer of every bucket."""
    if value is None or isinstance(value, Shard):
        return value
    index, count = value
    return Shard(int(index), int(count))
