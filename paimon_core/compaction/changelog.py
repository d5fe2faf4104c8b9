"""Changelog made by compactions: ``changelog-producer`` full-compaction and lookup.

Both compare, per key, an old row (*before*) with the newly merged one (*after*), with Paimon's
rule (``FullChangelogMergeFunctionWrapper``, ``LookupChangelogMergeFunctionWrapper``): no old
row (or a retracted one) and an added new row give ``+I``; an old row and no (or a retracted)
new row give ``-D`` of the old row; both added give ``-U`` old then ``+U`` new, left out when
``changelog-producer.row-deduplicate`` finds the values equal. A new row that *is* the old one
(same sequence number: nothing newer was merged) changed nothing, where the engine picks whole
versions; an engine that combines fields (partial-update, aggregation) can fold a newer record
into a row that keeps the old sequence number (``sequence.field`` ordered the newer one first),
so its rows of equal sequence numbers are compared value by value.

full-compaction: before is the key's max-level row, for every key of a compaction into the max
level. lookup: only keys with level-0 rows change; before is the key's row at the lowest level
>= 1, from the compaction's input or found in the levels below its output (fed to the merge as
extra sorted runs). Everything is columnar, on the merge's key groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.columnar import int64_array
from paimon_core.compaction.merge_tree import ChangelogMode
from paimon_core.keyvalue import DELETE, INSERT, SEQUENCE_NUMBER, UPDATE_AFTER, UPDATE_BEFORE, VALUE_KIND
from paimon_core.merge.engine import MergeEngine, any_where, last_where
from paimon_core.merge.lookup import (
    LEVEL,
    levels_of,
    lookup_inputs,
    newest_high_level,
    select_rows,
    with_newest_sequence,
)
from paimon_core.merge.sort import Groups, key_groups


def _is_add(kinds: np.ndarray) -> np.ndarray:
    return (kinds == INSERT) | (kinds == UPDATE_AFTER)


def _column(table: pa.Table, name: str, rows: np.ndarray) -> np.ndarray:
    return np.asarray(table.column(name).take(int64_array(rows)).to_numpy(zero_copy_only=False))


def _kinds_at(table: pa.Table, rows: np.ndarray) -> np.ndarray:
    """The value kind of each row (-1 where there is none)."""
    kinds = np.full(len(rows), -1, dtype=np.int8)
    present = rows >= 0
    if present.any():
        kinds[present] = _column(table, VALUE_KIND, rows[present])
    return kinds


def _rows_equal(left: pa.Table, right: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Whether ``left[i]`` and ``right[i]`` hold equal values in ``columns`` (null equals null)."""
    equal = np.ones(left.num_rows, dtype=bool)
    for name in columns:
        a, b = left.column(name), right.column(name)
        try:
            same = pc.fill_null(pc.equal(a, b), False)
            column_equal = np.asarray(pc.or_(same, pc.and_(pc.is_null(a), pc.is_null(b)))
                                      .to_numpy(zero_copy_only=False), dtype=bool)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested types: compare as Python values
            column_equal = np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist())], dtype=bool)
        equal &= column_equal
    return equal


def changelog_rows(before: pa.Table, before_rows: np.ndarray, after: pa.Table, after_rows: np.ndarray, *,
                   compare_columns: Sequence[str] | None = None, combined: bool = False) -> pa.Table:
    """Changes of candidate keys ``i`` (in order): old row ``before[before_rows[i]]``, new row
    ``after[after_rows[i]]`` (-1: none). Key-value layout, the kind in ``_VALUE_KIND``.

    ``compare_columns``: with row-deduplicate, the columns whose equality drops an update.
    ``combined``: the engine combines fields, so a new row with the old row's sequence number
    may still hold new values (compared, then).
    """
    b = np.asarray(before_rows, dtype=np.int64)
    a = np.asarray(after_rows, dtype=np.int64)
    b_add = _is_add(_kinds_at(before, b))
    a_add = _is_add(_kinds_at(after, a))
    inserted = ~b_add & a_add
    deleted = b_add & ~a_add
    updated = b_add & a_add
    if updated.any():
        moved = _column(before, SEQUENCE_NUMBER, b[updated]) != _column(after, SEQUENCE_NUMBER, a[updated])
        if combined and not moved.all():
            values = [n for n in before.column_names if n not in (SEQUENCE_NUMBER, VALUE_KIND)]
            kept = np.flatnonzero(updated)[~moved]
            moved[~moved] = ~_rows_equal(before.take(int64_array(b[kept])), after.take(int64_array(a[kept])), values)
        updated[updated] = moved
    if compare_columns is not None and updated.any():
        same = _rows_equal(before.take(int64_array(b[updated])), after.take(int64_array(a[updated])),
                           compare_columns)
        updated[updated] = ~same
    from_before = deleted | updated
    from_after = inserted | updated
    rows = pa.concat_tables([before.take(int64_array(b[from_before])),
                             after.take(int64_array(a[from_after])).select(before.column_names).cast(before.schema)])
    kinds = np.concatenate([np.where(deleted[from_before], DELETE, UPDATE_BEFORE),
                            np.where(inserted[from_after], INSERT, UPDATE_AFTER)]).astype(np.int8)
    # candidate i emits its before-row (slot 2i) ahead of its after-row (slot 2i + 1)
    slots = np.concatenate([2 * np.flatnonzero(from_before), 2 * np.flatnonzero(from_after) + 1])
    order = np.argsort(slots, kind="stable")
    result = rows.take(int64_array(order))
    index = result.schema.get_field_index(VALUE_KIND)
    return result.set_column(index, result.schema.field(index), pa.array(kinds[order], pa.int8()))


class CompactionChangelog(MergeEngine):
    """The merge of one compaction section that also records its changes in :attr:`changes`.

    Input rows carry their level (:data:`LEVEL`). ``lookup_merge``: fold only level-0 rows
    and the newest high-level row (the table merges as :class:`LookupMerge`). With lookup,
    keys found only in the deeper runs are not part of the output.
    """

    def __init__(self, inner: MergeEngine, *, producer: ChangelogMode, output_level: int, lookup_merge: bool,
                 compare_columns: Sequence[str] | None) -> None:
        self.inner = inner
        self.name = inner.name
        self.combines_fields = inner.combines_fields
        self.producer = producer
        self.output_level = output_level
        self.lookup_merge = lookup_merge
        self.compare_columns = compare_columns
        self.changes: list[pa.Table] = []

    def refusal(self, kinds: np.ndarray) -> str | None:
        return self.inner.refusal(kinds)

    def take_changes(self) -> list[pa.Table]:
        changes, self.changes = self.changes, []
        return changes

    def merge_unsorted(self, table: pa.Table, order: pa.Array, keys: list[str]) -> pa.Table:
        ordered = table.take(order)
        return self.merge(ordered, key_groups(ordered, keys))

    def merge_indexed(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        levels = levels_of(table)
        rows = table.drop_columns([LEVEL])
        if self.producer == "full":
            merged, of = self.inner.merge_indexed(rows, groups)
            candidates = np.arange(len(groups), dtype=np.int64)
            before = last_where(levels == self.output_level, groups)
        else:
            mask = np.repeat(any_where(levels <= self.output_level, groups), groups.sizes)
            if self.lookup_merge:
                mask &= lookup_inputs(levels, groups)
            kept, kept_groups, origin = select_rows(rows, groups, mask)
            merged, of = self.inner.merge_indexed(kept, kept_groups)
            if self.lookup_merge:
                merged = with_newest_sequence(merged, kept, kept_groups, of)
            of = origin[of]
            candidates = np.flatnonzero(any_where(levels == 0, groups))
            before = newest_high_level(levels, groups)[candidates]
        after = np.full(len(groups), -1, dtype=np.int64)
        after[of] = np.arange(len(of), dtype=np.int64)
        self.changes.append(changelog_rows(rows, before, merged, after[candidates],
                                           compare_columns=self.compare_columns, combined=self.combines_fields))
        return merged, of
