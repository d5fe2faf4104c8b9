"""Paimon's interval partition: a bucket's files cut into key-range sections, each into sorted runs.

Files whose key ranges overlap (transitively) share a section; sections are disjoint in key
order, so each can be merged on its own. Within a section, files are packed greedily into the
fewest runs of non-overlapping files. Pure: works on decoded min/max keys only.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

from paimon_core.manifest import DataFileMeta

Key = tuple[Any, ...]
Bounds = Callable[[DataFileMeta], tuple[Key, Key]]


def sections(files: Sequence[DataFileMeta], bounds: Bounds) -> list[list[DataFileMeta]]:
    """Groups of files whose key ranges overlap (transitively), in key order."""
    ordered = sorted(((bounds(f), f) for f in files), key=lambda item: item[0])
    out: list[list[DataFileMeta]] = []
    section_max: Key | None = None
    for (low, high), meta in ordered:
        if out and section_max is not None and low <= section_max:
            out[-1].append(meta)
            section_max = max(section_max, high)
        else:
            out.append([meta])
            section_max = high
    return out


def section_runs(section: Sequence[DataFileMeta], bounds: Bounds) -> list[list[DataFileMeta]]:
    """The fewest runs of non-overlapping files covering ``section`` (each run in key order).

    Files are taken by min key; each joins the run that ends earliest if it starts after that
    end, else opens a new run.
    """
    runs: list[list[DataFileMeta]] = []
    ends: list[tuple[Key, int]] = []  # heap of (last max key, run index)
    for meta in sorted(section, key=bounds):
        low, high = bounds(meta)
        if ends and ends[0][0] < low:
            _, index = heapq.heappop(ends)
            runs[index].append(meta)
        else:
            index = len(runs)
            runs.append([meta])
        heapq.heappush(ends, (high, index))
    return runs
