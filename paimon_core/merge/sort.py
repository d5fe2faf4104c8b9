"""Merge order of key-value rows and the boundaries of each key's group of versions.

Rows are sorted stably by (trimmed primary key, ``sequence.field`` columns, ``_SEQUENCE_NUMBER``);
the versions of one key are then a contiguous group, oldest first, ready for a merge engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.columnar import int64_array
from paimon_core.keyvalue import SEQUENCE_NUMBER


@dataclass(frozen=True, slots=True)
class Groups:
    """Key groups of a table sorted in merge order: rows ``starts[g]..ends[g]-1`` are group g."""

    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def sizes(self) -> np.ndarray:
        return self.ends - self.starts

    def row_groups(self) -> np.ndarray:
        """Group id of every row."""
        return np.repeat(np.arange(len(self.starts)), self.sizes)


def merge_permutation(table: pa.Table, keys: Sequence[str], sequence_fields: Sequence[str] = (),
                      *, descending_sequence: bool = False, in_sequence: bool = False) -> pa.Array:
    """Row indices of ``table`` in merge order: key, then user sequence fields, then sequence.

    ``in_sequence`` says every key's rows already appear in sequence order (rows in arrival
    order, or runs concatenated oldest first): then a stable sort on the key alone suffices.
    """
    if in_sequence and not sequence_fields:
        return _stable_key_order(table, keys)
    order = "descending" if descending_sequence else "ascending"
    sort_keys = ([(k, "ascending", "at_start") for k in keys]
                 + [(f, order, "at_start") for f in sequence_fields]
                 + [(SEQUENCE_NUMBER, "ascending", "at_start")])
    columns = list(dict.fromkeys([*keys, *sequence_fields, SEQUENCE_NUMBER]))
    return pc.sort_indices(table.select(columns), sort_keys=sort_keys)


def _stable_key_order(table: pa.Table, keys: Sequence[str]) -> pa.Array:
    if len(keys) == 1 and pa.types.is_integer(table.schema.field(keys[0]).type):
        values = table.column(keys[0]).to_numpy()
        return int64_array(np.argsort(values, kind="stable"))
    return pc.sort_indices(table.select(list(keys)), sort_keys=[(k, "ascending", "at_start") for k in keys])


def merge_order(table: pa.Table, keys: Sequence[str], sequence_fields: Sequence[str] = (),
                *, descending_sequence: bool = False) -> pa.Table:
    """``table`` sorted stably by key, then user sequence fields, then system sequence."""
    return table.take(merge_permutation(table, keys, sequence_fields, descending_sequence=descending_sequence))


def key_groups(table: pa.Table, keys: Sequence[str], *, order: np.ndarray | None = None) -> Groups:
    """Boundaries of runs of equal keys in a table sorted by ``keys`` (or in ``table`` taken
    in ``order``, which is then sorted by them)."""
    n = table.num_rows
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Groups(empty, empty)
    change = np.zeros(n - 1, dtype=bool)
    for key in keys:
        column = table.column(key)
        if pa.types.is_integer(column.type) and column.null_count == 0:  # keys are NOT NULL
            values = column.to_numpy()
            if order is not None:
                values = values[order]
            change |= values[1:] != values[:-1]
            continue
        taken = column.take(int64_array(order)) if order is not None else column
        combined = taken.combine_chunks()
        change |= np.asarray(pc.not_equal(combined.slice(1), combined.slice(0, n - 1))
                             .to_numpy(zero_copy_only=False), dtype=bool)
    starts = np.concatenate(([0], np.flatnonzero(change) + 1)).astype(np.int64)
    ends = np.concatenate((starts[1:], [n])).astype(np.int64)
    return Groups(starts, ends)
