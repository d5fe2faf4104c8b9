"""Streaming merge of sorted runs: memory holds one chunk per run, whatever the runs' size.

Each round takes, from every run, the rows whose key is below a cut key (the smallest "last
key" among runs that have more chunks coming), so every version of a key is merged in the same
round; rows equal to the cut wait for the next round. The merged rows are put in merge order
and folded by the table's merge engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.merge.engine import MergeEngine
from paimon_core.merge.sort import key_groups, merge_permutation


class _Run:
    """The unconsumed rows of one sorted run's current chunk, with one chunk of lookahead.

    The lookahead makes ``exhausted`` exact: a run whose last chunk is loaded does not bound
    the cut, so its final rows are merged with the rest instead of in a round of their own.
    """

    def __init__(self, chunks: Iterator[pa.Table], keys: Sequence[str]) -> None:
        self.chunks = (chunk for chunk in chunks if chunk.num_rows)
        self.keys = list(keys)
        self.table: pa.Table | None = None
        self.pending: pa.Table | None = next(self.chunks, None)
        self.extend()

    @property
    def exhausted(self) -> bool:
        return self.pending is None

    def extend(self) -> None:
        """Append the run's next chunk, if any."""
        chunk, self.pending = self.pending, next(self.chunks, None) if self.pending is not None else None
        if chunk is None:
            return
        self.table = chunk if self.table is None or self.table.num_rows == 0 else pa.concat_tables(
            [self.table, chunk.cast(self.table.schema)])

    @property
    def has_rows(self) -> bool:
        return self.table is not None and self.table.num_rows > 0

    def last_key(self) -> tuple[Any, ...]:
        assert self.table is not None
        last = self.table.num_rows - 1
        return tuple(self.table.column(k)[last].as_py() for k in self.keys)

    def take_below(self, cut: tuple[Any, ...] | None) -> pa.Table:
        """Remove and return the rows with key < ``cut`` (all rows when ``cut`` is None)."""
        assert self.table is not None
        count = self.table.num_rows if cut is None else _count_below(self.table, self.keys, cut)
        taken, self.table = self.table.slice(0, count), self.table.slice(count)
        if self.table.num_rows == 0:
            self.extend()
        return taken


def _count_below(table: pa.Table, keys: Sequence[str], cut: tuple[Any, ...]) -> int:
    """Rows of a key-sorted table whose key is lexicographically below ``cut`` (a prefix)."""
    below = None
    equal = None
    for key, value in zip(keys, cut):
        column = table.column(key)
        scalar = pa.scalar(value, type=column.type)
        less = pc.less(column, scalar)
        term = less if equal is None else pc.and_(equal, less)
        below = term if below is None else pc.or_(below, term)
        same = pc.equal(column, scalar)
        equal = same if equal is None else pc.and_(equal, same)
    return int(pc.sum(below).as_py() or 0) if below is not None else 0


def merge_sorted_runs(runs: Sequence[Iterator[pa.Table]], *, keys: Sequence[str], engine: MergeEngine,
                      sequence_fields: Sequence[str] = (), descending_sequence: bool = False,
                      in_sequence: bool = True) -> Iterator[pa.Table]:
    """Merge key-sorted runs (each key's versions in sequence order) and fold every key.

    Requires: each run's rows in merge order (a file, or a writer's sorted buffer); and (unless
    ``in_sequence`` is False, which sorts by sequence number too) runs given oldest first, so a
    key's versions from earlier runs precede later ones.
    Yields key-sorted chunks; a key never spans two chunks.
    """
    states = [_Run(chunks, keys) for chunks in runs]
    while True:
        live = [s for s in states if s.has_rows]
        if not live:
            return
        bounding = [s for s in live if not s.exhausted]
        cut = min(s.last_key() for s in bounding) if bounding else None
        parts = [s.take_below(cut) for s in live]
        parts = [p for p in parts if p.num_rows]
        if not parts:
            for state in bounding:
                if state.last_key() == cut:
                    state.extend()
            continue
        if len(parts) == 1:  # rows of one run are in merge order already: no permutation to apply
            yield engine.merge(parts[0], key_groups(parts[0], keys))
            continue
        combined = pa.concat_tables([p.cast(parts[0].schema) for p in parts])
        order = merge_permutation(combined, keys, sequence_fields, descending_sequence=descending_sequence,
                                  in_sequence=in_sequence)
        yield engine.merge_unsorted(combined, order, list(keys))
