"""Paimon's write stall: a writer of a table that compacts waits (compacting first) while a
bucket has more sorted runs than ``num-sorted-run.stop-trigger``, so reads stay bounded when
writes outpace compaction."""

from __future__ import annotations

import logging
import time

from paimon_core.compaction.compactor import TableCompactor
from paimon_core.table_context import TableContext

log = logging.getLogger(__name__)

MAX_STALL_ROUNDS = 8  # each round is a compaction; more means the picker makes no progress


def stall_while_over_stop_trigger(table: TableContext) -> float:
    """Compact the buckets over the stop trigger until none is; the seconds it took (0.0: no stall)."""
    compactor = TableCompactor(table)
    stop = table.options.sorted_run_stop_trigger
    started = time.monotonic()
    stalled = False
    for _ in range(MAX_STALL_ROUNDS):
        over = [b for b in compactor.state().buckets if b.sorted_runs > stop]
        if not over:
            break
        stalled = True
        worst = max(over, key=lambda b: b.sorted_runs)
        log.warning("write stall on %s: %d buckets over num-sorted-run.stop-trigger %d (worst: partition %r "
                    "bucket %d with %d sorted runs); compacting before writing", table.name, len(over),
                    stop, worst.partition, worst.bucket, worst.sorted_runs)
        result = compactor.compact(partitions=None, buckets={b.bucket for b in over})
        if result.snapshot_id is None:
            break
    if not stalled:
        return 0.0
    seconds = time.monotonic() - started
    log.warning("write stall on %s ended after %.2fs", table.name, seconds)
    return seconds
