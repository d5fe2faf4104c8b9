"""Changelog from a full compaction: the old max-level rows against the newly merged ones.

Paimon's rule (``FullChangelogMergeFunctionWrapper``) per key: no old row and an added new row
gives ``+I``; an old row and no (or a retracted) new row gives ``-D`` of the old row; both added
give ``-U`` old then ``+U`` new, left out when ``row-deduplicate`` finds the values equal. A new
row that *is* the old one (same sequence number: nothing newer was merged) changed nothing.
Everything is columnar: both sides are key-sorted, so one stable sort pairs them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.columnar import int64_array
from paimon_core.keyvalue import DELETE, INSERT, SEQUENCE_NUMBER, UPDATE_AFTER, UPDATE_BEFORE, VALUE_KIND

_SIDE = "__paimon_side"


def _is_add(kinds: np.ndarray) -> np.ndarray:
    return (kinds == INSERT) | (kinds == UPDATE_AFTER)


def _adjacent_keys_equal(table: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """``out[i]``: row i and row i + 1 have the same key (keys are never null)."""
    n = table.num_rows
    same = np.ones(max(n - 1, 0), dtype=bool)
    for key in keys:
        column = table.column(key)
        same &= np.asarray(pc.equal(column.slice(0, n - 1), column.slice(1)).to_numpy(zero_copy_only=False),
                           dtype=bool)
    return same


def _rows_equal(table: pa.Table, left: np.ndarray, right: np.ndarray, columns: Sequence[str]) -> np.ndarray:
    """Whether rows ``left[j]`` and ``right[j]`` hold equal values in ``columns`` (null equals null)."""
    equal = np.ones(len(left), dtype=bool)
    for name in columns:
        a = table.column(name).take(int64_array(left))
        b = table.column(name).take(int64_array(right))
        try:
            same = pc.fill_null(pc.equal(a, b), False)
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            column_equal = np.asarray(pc.or_(same, both_null).to_numpy(zero_copy_only=False), dtype=bool)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested types: compare as Python values
            column_equal = np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist())], dtype=bool)
        equal &= column_equal
    return equal


def full_compaction_changelog(before: pa.Table, after: pa.Table, keys: Sequence[str], *,
                              compare_columns: Sequence[str] | None = None) -> pa.Table:
    """Changelog rows (key-value layout, kind in ``_VALUE_KIND``) for one key range.

    ``before``: the old max-level rows, ``after``: the merged result (retractions may be kept
    or dropped); both key-sorted with one row per key. ``compare_columns``: with
    ``changelog-producer.row-deduplicate``, the value columns whose equality suppresses
    ``-U``/``+U``; None emits every update.
    """
    if before.num_rows == 0 and after.num_rows == 0:
        return after
    combined = pa.concat_tables(
        [table.append_column(_SIDE, pa.array(np.full(table.num_rows, tag, np.int8)))
         for tag, table in ((0, before), (1, after.select(before.column_names)))],
        promote_options="permissive")
    order = pc.sort_indices(combined, sort_keys=[(k, "ascending") for k in keys] + [(_SIDE, "ascending")])
    combined = combined.take(order)
    side = np.asarray(combined.column(_SIDE).to_numpy(zero_copy_only=False))
    kinds = np.asarray(combined.column(VALUE_KIND).to_numpy(zero_copy_only=False), dtype=np.int8)
    sequence = np.asarray(combined.column(SEQUENCE_NUMBER).to_numpy(zero_copy_only=False))
    n = combined.num_rows
    same = _adjacent_keys_equal(combined, keys)
    pair = np.zeros(n, dtype=bool)
    pair[:-1] = same & (side[:-1] == 0) & (side[1:] == 1)
    paired_after = np.zeros(n, dtype=bool)
    paired_after[1:] = pair[:-1]
    old = np.flatnonzero(pair)
    new = old + 1
    changed = sequence[old] != sequence[new]
    updated = changed & _is_add(kinds[new])
    if compare_columns is not None and updated.any():
        updated[updated] = ~_rows_equal(combined, old[updated], new[updated], compare_columns)
    deleted_pairs = changed & ~_is_add(kinds[new])
    lone_before = (side == 0) & ~pair & _is_add(kinds)
    lone_after = (side == 1) & ~paired_after & _is_add(kinds)
    positions = np.concatenate([old[updated], new[updated], old[deleted_pairs],
                                np.flatnonzero(lone_before), np.flatnonzero(lone_after)])
    out_kinds = np.concatenate([
        np.full(int(updated.sum()), UPDATE_BEFORE, np.int8), np.full(int(updated.sum()), UPDATE_AFTER, np.int8),
        np.full(int(deleted_pairs.sum()) + int(lone_before.sum()), DELETE, np.int8),
        np.full(int(lone_after.sum()), INSERT, np.int8)])
    emit = np.argsort(positions, kind="stable")  # key order; -U precedes its +U
    result = combined.take(int64_array(positions[emit])).drop_columns([_SIDE])
    index = result.schema.get_field_index(VALUE_KIND)
    return result.set_column(index, result.schema.field(index), pa.array(out_kinds[emit], pa.int8()))
