"""How many threads a process gives its encoding, decoding and compaction work."""

from __future__ import annotations

import os


def worker_threads(limit: int = 4) -> int:
    """The CPUs this process may run on, at most ``limit``.

    The affinity, not the machine's CPU count: a container's cpuset, ``taskset``, or a worker
    pinned to its core gets as many threads as it has cores, so workers sharing a machine do
    not oversubscribe it.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(limit, cpus))
