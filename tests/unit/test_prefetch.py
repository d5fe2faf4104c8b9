"""Background prefetching keeps order, surfaces errors where they happened, and stops early."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from paimon_core.prefetch import prefetched


def test_items_arrive_in_order() -> None:
    assert list(prefetched(range(100), depth=3)) == list(range(100))
    assert list(prefetched([])) == []


def test_a_producer_error_is_raised_after_the_items_before_it() -> None:
    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("bad file")

    got = []
    with pytest.raises(ValueError, match="bad file"):
        for item in prefetched(failing()):
            got.append(item)
    assert got == [1, 2]


def test_closing_early_reads_at_most_depth_items_ahead() -> None:
    produced = []

    def counting() -> Iterator[int]:
        for i in range(1000):
            produced.append(i)
            yield i

    stream = prefetched(counting(), depth=2)
    assert next(stream) == 0
    stream.close()
    assert len(produced) <= 4
