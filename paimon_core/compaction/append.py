"""Which files of an append table to rewrite together (Paimon's append compaction rules).

Pure. Unaware-bucket tables (``bucket = -1``) gather a partition's small files into groups
worth a rewrite; fixed-bucket tables slide a window over a bucket's files in sequence order, so
a group is always a contiguous stretch of the bucket's rows. Groups keep the files' order.

A group worth more than one output file is rewritten by several writers at once, each taking a
contiguous slice (:func:`writer_slices`): the rows, their order and their sequence numbers are
those of one writer rewriting the whole group; only where the output files break differs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from paimon_core.manifest import DataFileMeta

Group = tuple[DataFileMeta, ...]
FULL_COMPACT_MIN_FILES = 3  # Paimon: a full compaction of fewer files is not worth it


@dataclass(frozen=True, slots=True)
class AppendLimits:
    """The sizes the rules compare with (from the table options)."""

    target_size: int
    small_file_size: int  # files below are small (target size x compaction.small-file-ratio)
    min_file_num: int
    open_file_cost: int


def write_order(meta: DataFileMeta) -> tuple[int, int, str]:
    return (meta.creation_time_ms or 0, meta.min_sequence_number, meta.file_name)


def sequence_order(meta: DataFileMeta) -> tuple[int, int, str]:
    return (meta.min_sequence_number, meta.max_sequence_number, meta.file_name)


def pick_unaware(files: Sequence[DataFileMeta], limits: AppendLimits, *, full: bool = False) -> list[Group]:
    """Groups of a partition's small files: a group closes at twice the target size.

    A trailing group is kept when it has ``compaction.min.file-num`` files (any two files on a
    full compaction).
    """
    small = sorted((f for f in files if f.file_size < limits.small_file_size), key=write_order)
    groups: list[Group] = []
    current: list[DataFileMeta] = []
    size = 0
    for meta in small:
        current.append(meta)
        size += meta.file_size + limits.open_file_cost
        if len(current) > 1 and size >= limits.target_size * 2:
            groups.append(tuple(current))
            current, size = [], 0
    if len(current) >= (2 if full else limits.min_file_num):
        groups.append(tuple(current))
    return groups


def pick_bucketed(files: Sequence[DataFileMeta], limits: AppendLimits) -> Group | None:
    """The first window of ``min_file_num`` consecutive files (by sequence) under twice the target."""
    window: list[DataFileMeta] = []
    size = 0
    for meta in sorted(files, key=sequence_order):
        window.append(meta)
        size += meta.file_size
        if len(window) >= limits.min_file_num:
            return tuple(window)
        if size >= limits.target_size * 2:
            size -= window.pop(0).file_size
    return None


def pick_bucketed_full(files: Sequence[DataFileMeta], limits: AppendLimits, *, force: bool = False) -> Group | None:
    """Everything after the leading big files, when small files outnumber big ones."""
    ordered = sorted(files, key=sequence_order)
    start = 0
    while not force and start < len(ordered) and ordered[start].file_size >= limits.small_file_size:
        start += 1
    rest = ordered[start:]
    small = sum(1 for f in rest if f.file_size < limits.small_file_size)
    if force and len(rest) > 0:
        return tuple(rest)
    if small > len(rest) - small and len(rest) >= FULL_COMPACT_MIN_FILES:
        return tuple(rest)
    return None


@dataclass(frozen=True, slots=True)
class Slice:
    """Files of a group one writer rewrites, and the sequence number its first row gets."""

    files: Group
    first_sequence: int


def writer_slices(group: Group, target_size: int, writers: int) -> list[Slice]:
    """A group cut into contiguous slices of about equal bytes, one per writer.

    There are as many slices as the group has output files' worth (``target_size`` each), at
    most ``writers``, so the slices write no more files than one writer would. Rows are numbered
    from the group's first file's first sequence number, as a rewrite of the whole group numbers
    them: a slice starts after the rows of the slices before it.
    """
    total = sum(f.file_size for f in group)
    count = max(1, min(writers, len(group), -(-total // max(target_size, 1))))
    slices: list[Slice] = []
    sequence = group[0].min_sequence_number if group else 0
    start = size = 0
    for index, meta in enumerate(group):
        size += meta.file_size
        left = len(group) - index - 1  # files after this one
        wanted = count - len(slices) - 1  # slices still to start after the current one
        if wanted and (size * count >= total * (len(slices) + 1) or left == wanted):
            files = tuple(group[start:index + 1])
            slices.append(Slice(files, sequence))
            sequence += sum(f.row_count for f in files)
            start = index + 1
    if start < len(group):
        slices.append(Slice(tuple(group[start:]), sequence))
    return slices
