"""``first-row``: the oldest version of a key wins and later ones are ignored."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from paimon_core.columnar import int64_array
from paimon_core.errors import RowKindError
from paimon_core.keyvalue import is_retract
from paimon_core.merge.engine import MergeEngine, first_where, kinds_of
from paimon_core.merge.sort import Groups

RETRACT_REFUSED = ("the first-row merge engine cannot accept -U/-D rows; set 'ignore-delete' = 'true' "
                   "to ignore them")


class FirstRow(MergeEngine):
    """Retractions are an error unless ``ignore-delete`` skips them (as in Paimon)."""

    name = "first-row"

    def __init__(self, *, ignore_delete: bool = False) -> None:
        self.ignore_delete = ignore_delete

    def refusal(self, kinds: np.ndarray) -> str | None:
        return RETRACT_REFUSED if is_retract(kinds).any() else None

    def merge_groups(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        retract = is_retract(kinds_of(table))
        if retract.any() and not self.ignore_delete:
            raise RowKindError(RETRACT_REFUSED)
        first = first_where(~retract, groups)
        kept = first >= 0
        return table.take(int64_array(first[kept])), kept
