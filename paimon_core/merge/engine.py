"""The merge-engine contract shared by the writer's fold, merge-on-read and compaction."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from paimon_core.columnar import int64_array
from paimon_core.keyvalue import VALUE_KIND
from paimon_core.merge.sort import Groups, key_groups


class MergeEngine:
    """Merges the versions of each key, given oldest first, into at most one row.

    A key with a single version passes through unchanged, kind included, as Paimon's reducer
    wrapper does; only keys with several versions are merged. Results keep the in-memory
    key-value layout (values, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``) and key order.
    """

    name = "abstract"
    # Whether a merge reads every value column of a version (combining fields across versions)
    # rather than picking one whole version: a projected read must then read the full row and
    # project after the merge.
    combines_fields = False

    def refusal(self, kinds: np.ndarray) -> str | None:
        """Why rows of these kinds cannot be written to a table of this engine (retractions it
        cannot merge), or None. Writers ask before anything is written."""
        return None

    def merge(self, table: pa.Table, groups: Groups) -> pa.Table:
        """One row per surviving key of ``table`` (sorted in merge order, grouped by key)."""
        return self.merge_indexed(table, groups)[0]

    def merge_indexed(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        """:meth:`merge`, and the group each result row comes from (changelog pairs them)."""
        sizes = groups.sizes
        multi = sizes > 1
        if not multi.any():
            return table, np.arange(len(groups), dtype=np.int64)
        rows = np.flatnonzero(np.repeat(multi, sizes))
        multi_sizes = sizes[multi]
        ends = np.cumsum(multi_sizes)
        merged, kept = self.merge_groups(table.take(int64_array(rows)), Groups(ends - multi_sizes, ends))
        position = np.where(multi, -1, groups.starts)
        merged_position = np.full(len(multi_sizes), -1, dtype=np.int64)
        merged_position[kept] = table.num_rows + np.arange(int(kept.sum()))
        position[multi] = merged_position
        surviving = np.flatnonzero(position >= 0)
        combined = pa.concat_tables([table, merged.select(table.column_names).cast(table.schema)])
        return combined.take(int64_array(position[surviving])), surviving

    def merge_unsorted(self, table: pa.Table, order: pa.Array, keys: list[str]) -> pa.Table:
        """Merge a table given its merge-order permutation (see :func:`merge_permutation`).

        Engines that pick whole rows override this to gather only the rows they keep.
        """
        ordered = table.take(order)
        return self.merge(ordered, key_groups(ordered, keys))

    def merge_groups(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        """Merged rows of every group that yields one, and the mask of groups that do.

        Requires: ``table`` sorted in merge order; results in group order.
        """
        raise NotImplementedError


def kinds_of(table: pa.Table) -> np.ndarray:
    return np.asarray(table.column(VALUE_KIND).to_numpy(zero_copy_only=False), dtype=np.int8)


def last_where(mask: np.ndarray, groups: Groups) -> np.ndarray:
    """Per group, the last row position where ``mask`` holds, or -1."""
    positions = np.where(mask, np.arange(len(mask), dtype=np.int64), -1)
    return np.maximum.reduceat(positions, groups.starts) if len(positions) else positions


def first_where(mask: np.ndarray, groups: Groups) -> np.ndarray:
    """Per group, the first row position where ``mask`` holds, or -1."""
    n = len(mask)
    positions = np.where(mask, np.arange(n, dtype=np.int64), n)
    firsts = np.minimum.reduceat(positions, groups.starts) if n else positions
    return np.where(firsts == n, -1, firsts)


def any_where(mask: np.ndarray, groups: Groups) -> np.ndarray:
    """Per group, whether ``mask`` holds for any of its rows."""
    return np.maximum.reduceat(mask.astype(np.int8), groups.starts) > 0 if len(mask) else np.zeros(0, bool)
