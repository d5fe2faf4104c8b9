"""Merging in tables that look keys up in deeper levels (Paimon's ``LookupMergeFunction``).

With ``changelog-producer=lookup`` a compaction merges each level-0 key with its version found
deeper and writes the result one level up, while the deeper version stays where it is. The
version nearest the top among levels >= 1 therefore already holds everything older, so a merge
takes only it and the level-0 versions; merging the deeper ones again would, for example, add
an aggregated sum twice. Rows carry their file's level in :data:`LEVEL` for this.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from paimon_core.columnar import int64_array
from paimon_core.keyvalue import SEQUENCE_NUMBER
from paimon_core.merge.engine import MergeEngine
from paimon_core.merge.sort import Groups, key_groups
from paimon_core.options import TableOptions

LEVEL = "__paimon_level"  # the LSM level of the file a row was read from (int8)


def needs_levels(options: TableOptions) -> bool:
    """Tables whose merges must know each row's level: lookup changelog with engines that
    combine versions (deduplicate and first-row pick one version, which gives the same row)."""
    return options.changelog_producer == "lookup" and options.merge_engine in ("partial-update", "aggregation")


def with_level(table: pa.Table, level: int) -> pa.Table:
    return table.append_column(pa.field(LEVEL, pa.int8(), False), pa.array(np.full(table.num_rows, level, np.int8)))


def levels_of(table: pa.Table) -> np.ndarray:
    return np.asarray(table.column(LEVEL).to_numpy(zero_copy_only=False), dtype=np.int64)


def newest_high_level(levels: np.ndarray, groups: Groups) -> np.ndarray:
    """Per group, the row of its version at the lowest level >= 1 (a level holds a key once), or -1."""
    n = len(levels)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    never = np.iinfo(np.int64).max
    score = np.where(levels > 0, levels * n + np.arange(n, dtype=np.int64), never)
    best = np.minimum.reduceat(score, groups.starts)
    return np.where(best == never, -1, best % n)


def lookup_inputs(levels: np.ndarray, groups: Groups) -> np.ndarray:
    """Row mask of what a lookup merge folds: level-0 rows and each key's newest high-level row."""
    mask = levels == 0
    high = newest_high_level(levels, groups)
    mask[high[high >= 0]] = True
    return mask


def select_rows(table: pa.Table, groups: Groups, mask: np.ndarray) -> tuple[pa.Table, Groups, np.ndarray]:
    """The rows of ``mask`` (kept in order), their groups, and each new group's original index."""
    counts = np.add.reduceat(mask.astype(np.int64), groups.starts) if len(mask) else np.zeros(0, np.int64)
    nonempty = np.flatnonzero(counts > 0)
    ends = np.cumsum(counts[nonempty])
    return table.take(int64_array(np.flatnonzero(mask))), Groups(ends - counts[nonempty], ends), nonempty


def with_newest_sequence(merged: pa.Table, rows: pa.Table, groups: Groups, of: np.ndarray) -> pa.Table:
    """``merged`` (the results of ``groups`` ``of``) carrying the newest sequence number of the
    rows each folds.

    A lookup merge leaves the deeper version it folded in place, so its result must sort after
    that version. An engine gives its result the number of the last row in merge order, which
    with ``sequence.field`` can be the deeper version's own (a newer row with a smaller sequence
    field sorts first): the two would tie, and a reader taking the newest high-level version by
    merge order (Java's ``LookupMergeFunction``) could keep the older one and lose the newer rows.
    """
    if not len(of):
        return merged
    sequence = np.asarray(rows.column(SEQUENCE_NUMBER).to_numpy(zero_copy_only=False), dtype=np.int64)
    newest = np.maximum.reduceat(sequence, groups.starts)[of]
    index = merged.schema.get_field_index(SEQUENCE_NUMBER)
    return merged.set_column(index, merged.schema.field(index), int64_array(newest))


class LookupMerge(MergeEngine):
    """Wraps a table's engine; rows without :data:`LEVEL` (the write buffer) merge as usual."""

    def __init__(self, inner: MergeEngine) -> None:
        self.inner = inner
        self.name = inner.name
        self.combines_fields = inner.combines_fields

    def refusal(self, kinds: np.ndarray) -> str | None:
        return self.inner.refusal(kinds)

    def merge_unsorted(self, table: pa.Table, order: pa.Array, keys: list[str]) -> pa.Table:
        if LEVEL not in table.column_names:
            return self.inner.merge_unsorted(table, order, keys)
        ordered = table.take(order)
        return self.merge(ordered, key_groups(ordered, keys))

    def merge_indexed(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        if LEVEL not in table.column_names:
            return self.inner.merge_indexed(table, groups)
        rows, kept_groups, origin = select_rows(table, groups, lookup_inputs(levels_of(table), groups))
        merged, of = self.inner.merge_indexed(rows.drop_columns([LEVEL]), kept_groups)
        return with_newest_sequence(merged, rows, kept_groups, of), origin[of]
