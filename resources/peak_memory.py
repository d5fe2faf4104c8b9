"""The peak resident memory of a step, as the compaction and fanned-out write steps report it.

Steps run in long-lived or forked workers, so a step resets the peak when it starts and reads
its own peak when it ends (Linux ``clear_refs`` and ``VmHWM``; elsewhere the process's peak).
"""

from __future__ import annotations

import resource


def reset_peak_rss() -> None:
    """Start measuring this process's peak resident memory anew (Linux: ``clear_refs`` 5), so a
    step in a long-lived or forked worker reports its own peak, not its parent's or an earlier step's."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass  # elsewhere the peak is the process's since it started


def peak_rss_mib() -> float:
    """The peak resident memory of this process since :func:`reset_peak_rss` (Linux ``VmHWM``)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux reports KiB
