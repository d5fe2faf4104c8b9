"""``deduplicate``: the newest version of a key wins; a newest -U/-D means the key is gone."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from paimon_core.columnar import int64_array
from paimon_core.keyvalue import is_retract
from paimon_core.merge.engine import MergeEngine, kinds_of, last_where
from paimon_core.merge.sort import Groups, key_groups


class Deduplicate(MergeEngine):
    """With ``ignore-delete`` retractions are skipped, so the newest addition wins."""

    name = "deduplicate"

    def __init__(self, *, ignore_delete: bool = False) -> None:
        self.ignore_delete = ignore_delete

    def merge_unsorted(self, table: pa.Table, order: pa.Array, keys: list[str]) -> pa.Table:
        """Gather only each key's newest row (single versions pass through the same way)."""
        if self.ignore_delete:
            return super().merge_unsorted(table, order, keys)
        return newest_per_key(table, order, keys)

    def merge_indexed(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        """Every key's newest row; the table itself when no key has two versions."""
        if self.ignore_delete:
            return super().merge_indexed(table, groups)
        every = np.arange(len(groups), dtype=np.int64)
        if len(groups) == table.num_rows:
            return table, every
        return table.take(int64_array(groups.ends - 1)), every

    def merge_groups(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        if not self.ignore_delete:
            return table.take(int64_array(groups.ends - 1)), np.ones(len(groups), dtype=bool)
        last = last_where(~is_retract(kinds_of(table)), groups)
        kept = last >= 0
        return table.take(int64_array(last[kept])), kept


def newest_per_key(table: pa.Table, order: pa.Array, keys: list[str]) -> pa.Table:
    """The last row of every key, ``order`` being ``table``'s merge order: one gather."""
    positions = np.asarray(order.to_numpy(zero_copy_only=False), dtype=np.int64)
    groups = key_groups(table.select(keys), keys, order=positions)
    return table.take(int64_array(positions[groups.ends - 1]))
