"""Decoded manifests and manifest lists, kept per FileIO and bounded by their entry count.

Manifest, manifest-list and index-manifest names carry a UUID and are never rewritten, so
what was read once stays true for as long as the file exists. A writer restoring its sequence
numbers, the commit after it and the next read of the same process (a sensor polling, an
ingestion loop committing every minute) would otherwise fetch and decode the same files
again: on an object store each is a GET of 10-30 ms. Snapshot and schema files are not kept:
a rollback deletes snapshots whose ids later commits reuse.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TypeVar

Item = TypeVar("Item")

# About 1.5 KB of Python objects per data-file entry with stats: ~30 MiB when full.
DEFAULT_MAX_ENTRIES = 20_000


class MetadataCache:
    """A least-recently-used map from a metadata file's path to its decoded entries."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._files: OrderedDict[str, tuple[object, ...]] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, path: str, load: Callable[[], Sequence[Item]]) -> list[Item]:
        """The entries of ``path``, decoded by ``load`` on a miss; a fresh list each call, so
        callers may extend it."""
        with self._lock:
            cached = self._files.get(path)
            if cached is not None:
                self._files.move_to_end(path)
                self.hits += 1
                return list(cached)  # type: ignore[arg-type]
            self.misses += 1
        entries = tuple(load())  # outside the lock: concurrent reads of other files go on
        if len(entries) <= self.max_entries:
            with self._lock:
                if path not in self._files:
                    self._files[path] = entries
                    self._entries += len(entries)
                while self._entries > self.max_entries:
                    _, evicted = self._files.popitem(last=False)
                    self._entries -= len(evicted)
        return list(entries)

    def forget(self, path: str) -> None:
        """Drop ``path`` (a file deleted by this process, so no memory is held for it)."""
        with self._lock:
            evicted = self._files.pop(path, None)
            if evicted is not None:
                self._entries -= len(evicted)

    def __reduce__(self) -> tuple[type[MetadataCache], tuple[int]]:
        """A FileIO shipped to another process (a distributed read) starts with an empty cache."""
        return (MetadataCache, (self.max_entries,))

    def __len__(self) -> int:
        return len(self._files)
