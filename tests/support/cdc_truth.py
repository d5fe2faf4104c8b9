"""Independent truth for the orders CDC tables: the change feed replayed row by row in Python."""

from typing import Any

import pyarrow as pa


def replay(changes: pa.Table) -> list[dict[str, Any]]:
    """The table a deduplicate merge of ``changes`` must show: the last +I/+U per key, minus -U/-D."""
    state: dict[tuple[str, int], dict[str, Any]] = {}
    for row in changes.to_pylist():
        key = (row["dt"], row["order_id"])
        if row["op"] in ("+I", "+U"):
            state[key] = row
        else:
            state.pop(key, None)
    return [state[key] for key in sorted(state)]
