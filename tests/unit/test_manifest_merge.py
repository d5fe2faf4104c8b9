"""Which manifests a commit merges, and how entries of a merged group cancel."""

from __future__ import annotations

from paimon_core.manifest import ADD, DELETE, DataFileMeta, ManifestEntry, ManifestFileMeta, SimpleStats
from paimon_core.manifest_merge import merge_group, plan_merge

STATS = SimpleStats()


def meta(size: int, deleted: int = 0) -> ManifestFileMeta:
    return ManifestFileMeta(f"m{size}", size, 1, deleted, STATS, 0)


def entry(kind: int, name: str, level: int = 0) -> ManifestEntry:
    return ManifestEntry(kind, b"", 0, 1, DataFileMeta(name, 1, 1, level=level))


def plan(sizes: list[int], deleted: int = 0, **kwargs: int) -> tuple[bool, tuple[tuple[int, ...], ...]]:
    options = {"target_size": 100, "min_count": 3, "full_threshold": 10_000, **kwargs}
    result = plan_merge([meta(s, deleted) for s in sizes], **options)
    return result.full, result.groups


def test_small_manifests_wait_for_the_minimum_count() -> None:
    assert plan([10, 10]) == (False, ((0,), (1,)))
    assert plan([10, 10, 10]) == (False, ((0, 1, 2),))


def test_groups_close_at_the_target_size() -> None:
    assert plan([60, 50, 10, 200, 10]) == (False, ((0, 1), (2, 3), (4,)))


def test_enough_to_rewrite_makes_a_full_merge() -> None:
    assert plan([60, 50, 200], full_threshold=100) == (True, ((0, 1, 2),))
    assert plan([500, 500], deleted=1, full_threshold=900) == (True, ((0, 1),))
    assert plan([500, 500], full_threshold=900)[0] is False  # big and without deletes: nothing to gain


def test_adds_and_deletes_of_one_file_cancel() -> None:
    first = [entry(ADD, "a"), entry(ADD, "b")]
    second = [entry(DELETE, "a"), entry(DELETE, "old"), entry(DELETE, "b"), entry(ADD, "b", level=1)]
    minor = merge_group([first, second], full=False)
    assert sorted((e.kind, e.file.file_name, e.file.level) for e in minor) == [(ADD, "b", 1), (DELETE, "old", 0)]
    full = merge_group([first, second], full=True)
    assert [(e.kind, e.file.file_name, e.file.level) for e in full] == [(ADD, "b", 1)]
