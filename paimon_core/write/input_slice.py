"""One writer's slice of the input when many writers prepare one commit and none owns a bucket.

Sharding by bucket (:mod:`paimon_core.write.shard`) keeps Paimon's one-writer-per-bucket rule, but
every writer must see the whole input to pick its buckets out of it. A slice writer instead takes
its own part of the input, in input order (slice 0 first), and writes every bucket it meets. The
merge stays a single writer's: a bucket's rows are ordered by sequence number, and slice ``i`` of
``n`` numbers its rows of a bucket from the bucket's next sequence number plus ``i`` spans of
:data:`SEQUENCE_SPAN`, so every row of a later slice sorts after every row of an earlier one (the
last version of a key in input order wins; deletes and row kinds keep their order), and the next
writer of the bucket restores its sequence from the largest number written, above them all.

A merge that depends on how a key's rows are cut into files (an aggregate's ``last_value`` over
retractions it ignores) may differ, as it does between one writer's spilled files or commits.

The price is more level-0 files: each slice writes a file per bucket it meets, which compaction
folds later. Writers that compact in line (tables without ``write-only``) leave that to the
committer, as sharded writers do. Dynamic-bucket tables keep one assigner per partition (shard
them); append tables without buckets have no sequence to keep (give each writer its input).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from paimon_core.errors import InvalidArgumentError, SchemaError

SEQUENCE_SPAN = 1 << 32
"""Sequence numbers a slice may use per bucket: 4.3 billion rows of one bucket in one slice.

Each sliced commit moves a bucket's next sequence number up by at most ``count`` spans, so a
bucket takes about two billion sliced writers before its 64-bit sequence runs out."""


@dataclass(frozen=True, slots=True)
class InputSlice:
    """Writer ``index`` of ``count``: its part of the input, ``index`` in input order."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise SchemaError(f"slice {self.index} of {self.count} does not exist: a slice is (index, count) "
                              "with 0 <= index < count, e.g. (0, 4) for the first quarter of the input")

    def first_sequence(self, restored: int) -> int:
        """The first sequence number of this slice in a bucket whose next one is ``restored``."""
        return restored + self.index * SEQUENCE_SPAN

    def numbering(self, restore: Callable[[bytes, int], int]) -> Callable[[bytes, int], int]:
        """``restore`` (next sequence number per partition and bucket) moved to this slice's range."""
        return lambda partition, bucket: self.first_sequence(restore(partition, bucket))

    def check_range(self, table: str, restored: int, max_sequence: int) -> None:
        """Refuse a bucket's rows that ran past this slice's range into the next slice's."""
        if max_sequence >= self.first_sequence(restored) + SEQUENCE_SPAN:
            raise InvalidArgumentError(f"table {table}: slice {self.index} of {self.count} wrote more than "
                             f"{SEQUENCE_SPAN:,} rows into one bucket; cut the input into more slices")


def as_slice(value: InputSlice | tuple[int, int] | None) -> InputSlice | None:
    """A slice from ``(index, count)``, or None for a writer of the whole input."""
    if value is None or isinstance(value, InputSlice):
        return value
    index, count = value
    return InputSlice(int(index), int(count))
