"""How long a compaction or maintenance run of a table may run before the instance's run
monitoring fails it (Dagster's per-run ``dagster/max_runtime`` tag).

A run whose process died with its host (a crash, an OOM kill of the code server, an evicted pod)
stays STARTED for ever under a launcher without worker health checks, and it holds its table's
``paimon/compaction`` slot: every later compaction and maintenance run of the table would queue
behind it. With ``run_monitoring`` enabled (``dagster_home/dagster.yaml``) such a run is failed
once it has run longer than its bound, and the queue frees. Bounds are sized to the work, far
above what a healthy run takes, so that a slow store does not fail live runs: a sensor's run gets
one from the bytes it may rewrite, a run from the launchpad (whose work is not known in advance)
the job's generous default.
"""

from __future__ import annotations

import math

from resources.keys import MAX_RUNTIME_TAG

# The least a compaction run gets, whatever it rewrites (process start, planning, a slow commit).
COMPACTION_MIN_S = 15 * 60
# The rewrite throughput the bound assumes: a tenth of what one core compacts (tens of MiB/s).
REWRITE_BYTES_PER_S = 4 * 1024 * 1024
# Runs whose work is not known when they launch: compaction from the launchpad, maintenance.
COMPACTION_DEFAULT_S = 6 * 3600
MAINTENANCE_S = 2 * 3600


def compaction_bound_s(rewrite_bytes: int, *, follow_seconds: int = 0) -> int:
    """Seconds a compaction run rewriting at most ``rewrite_bytes`` (and following the writers for
    ``follow_seconds``) may take: ``COMPACTION_MIN_S``, or the bytes at ``REWRITE_BYTES_PER_S``."""
    return max(COMPACTION_MIN_S, math.ceil(rewrite_bytes / REWRITE_BYTES_PER_S)) + max(0, follow_seconds)


def bound_tags(seconds: int) -> dict[str, str]:
    """The run tag run monitoring enforces."""
    return {MAX_RUNTIME_TAG: str(int(seconds))}
