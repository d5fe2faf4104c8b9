"""Producing the next items of an iterator on background threads while the caller works.

Used where reading (Parquet decode) and writing (encode) alternate on one stream, or where many
files are read in order: decoding releases the GIL, so overlapping uses the other cores. The
number of items held ahead is bounded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")
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


def mapped_in_order(function: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[R]:
    """``function`` of each item, in order, computed up to ``workers`` + 1 items ahead."""
    if len(items) <= 1:
        yield from map(function, items)
        return
    with ThreadPoolExecutor(workers) as pool:
        window: deque[Future[R]] = deque()
        for item in items:
            window.append(pool.submit(function, item))
            if len(window) > workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()
