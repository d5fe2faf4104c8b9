"""The LSM shape of one bucket: level-0 files (each its own sorted run) and levels >= 1.

Pure: built from file metadata only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from paimon_core.manifest import DataFileMeta


@dataclass(frozen=True, slots=True)
class SortedRun:
    """Files of one level whose key ranges do not overlap (a level-0 run is a single file)."""

    level: int
    files: tuple[DataFileMeta, ...]

    @property
    def size(self) -> int:
        return sum(f.file_size for f in self.files)


def _level0_order(meta: DataFileMeta) -> tuple[int, int, int, str]:
    """Newest first: larger max sequence first, then Paimon's tie-breakers."""
    return (-meta.max_sequence_number, meta.min_sequence_number, meta.creation_time_ms or 0, meta.file_name)


@dataclass(frozen=True, slots=True)
class Levels:
    """A bucket's files by level."""

    level0: tuple[DataFileMeta, ...]
    levels: tuple[tuple[DataFileMeta, ...], ...]  # index i holds level i + 1, files by min key
    num_levels: int

    @staticmethod
    def of(files: Iterable[DataFileMeta], num_levels: int,
           key_of: Callable[[bytes], tuple[Any, ...]]) -> Levels:
        """Arrange files; ``key_of`` decodes a min-key BinaryRow to order levels >= 1."""
        files = list(files)
        levels_count = max(num_levels, max((f.level for f in files), default=0) + 1)
        level0 = tuple(sorted((f for f in files if f.level == 0), key=_level0_order))
        upper: list[list[DataFileMeta]] = [[] for _ in range(levels_count - 1)]
        for meta in files:
            if meta.level > 0:
                upper[meta.level - 1].append(meta)
        return Levels(level0, tuple(tuple(sorted(level, key=lambda m: key_of(m.min_key))) for level in upper),
                      levels_count)

    @property
    def max_level(self) -> int:
        return self.num_levels - 1

    def sorted_runs(self) -> list[SortedRun]:
        """``[level-0 files newest first] + [level 1 run, level 2 run, ...]``, empty levels left out."""
        runs = [SortedRun(0, (f,)) for f in self.level0]
        runs += [SortedRun(i + 1, files) for i, files in enumerate(self.levels) if files]
        return runs

    @property
    def number_of_sorted_runs(self) -> int:
        return len(self.level0) + sum(1 for files in self.levels if files)

    @property
    def highest_non_empty_level(self) -> int:
        for i in range(len(self.levels) - 1, -1, -1):
            if self.levels[i]:
                return i + 1
        return 0 if self.level0 else -1

    def all_files(self) -> list[DataFileMeta]:
        return list(self.level0) + [f for files in self.levels for f in files]


def level_sizes(levels: Levels) -> list[int]:
    """Bytes per level, level 0 first."""
    return [sum(f.file_size for f in levels.level0)] + [sum(f.file_size for f in files) for files in levels.levels]


def runs_size(runs: Sequence[SortedRun]) -> int:
    return sum(r.size for r in runs)
