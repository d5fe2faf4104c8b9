"""Producing the next items of an iterator on a background thread while the caller works.

Used where reading (Parquet decode) and writing (encode) alternate on one stream: both release
the GIL, so overlapping them uses a second core. ``depth`` bounds the items held ahead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def prefetched(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Yield ``items`` in order, produced up to ``depth`` ahead on one worker thread.

    The worker's exceptions surface here, at the item that raised them.
    """
    iterator = iter(items)
    with ThreadPoolExecutor(1, thread_name_prefix="paimon-prefetch") as pool:
        ahead: deque[Future[object]] = deque(pool.submit(next, iterator, _DONE) for _ in range(depth))
        while True:
            item = ahead.popleft().result()
            if item is _DONE:
                return
            ahead.append(pool.submit(next, iterator, _DONE))
            yield item  # type: ignore[misc]
