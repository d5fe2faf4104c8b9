"""The decoded-manifest cache: bounded by entries, least recently used out first, copies out."""

from __future__ import annotations

import pickle
from collections.abc import Callable

from paimon_core.metadata_cache import MetadataCache


def loader(calls: list[str], path: str, size: int) -> Callable[[], list[int]]:
    def load() -> list[int]:
        calls.append(path)
        return list(range(size))
    return load


def test_a_second_read_is_served_from_memory_and_callers_get_their_own_list() -> None:
    cache, calls = MetadataCache(max_entries=10), list[str]()
    first = cache.get("m1", loader(calls, "m1", 3))
    first.append(99)
    assert cache.get("m1", loader(calls, "m1", 3)) == [0, 1, 2]
    assert calls == ["m1"] and (cache.hits, cache.misses) == (1, 1)


def test_the_least_recently_used_file_goes_first_when_entries_pass_the_bound() -> None:
    cache, calls = MetadataCache(max_entries=6), list[str]()
    for path in ("a", "b", "c"):
        cache.get(path, loader(calls, path, 2))
    cache.get("a", loader(calls, "a", 2))  # a is now the most recent
    cache.get("d", loader(calls, "d", 2))  # 8 entries: b goes
    calls.clear()
    for path in ("a", "c", "d", "b"):
        cache.get(path, loader(calls, path, 2))
    assert calls == ["b"]


def test_a_file_larger_than_the_bound_is_read_but_not_kept() -> None:
    cache, calls = MetadataCache(max_entries=4), list[str]()
    assert cache.get("big", loader(calls, "big", 5)) == list(range(5))
    cache.get("big", loader(calls, "big", 5))
    assert calls == ["big", "big"] and len(cache) == 0


def test_forgotten_files_are_read_again_and_a_pickled_cache_is_empty() -> None:
    cache, calls = MetadataCache(max_entries=10), list[str]()
    cache.get("m", loader(calls, "m", 1))
    assert len(pickle.loads(pickle.dumps(cache))) == 0
    cache.forget("m")
    cache.get("m", loader(calls, "m", 1))
    assert calls == ["m", "m"]
