"""Paimon's snapshot expiry rule, case by case (pure: commit times given as a function)."""

from __future__ import annotations

import pytest

from paimon_core.maintenance.expiry import Retention, expiry_end

# snapshot i was committed at time 100 * i
TIMES = {i: 100 * i for i in range(1, 31)}


def end(earliest: int, latest: int, *, retain_min: int = 1, retain_max: int = 1000, keep_after: int = 10**9,
        limit: int = 1000, consumer: int | None = None) -> int:
    retention = Retention(retain_min, retain_max, keep_after, limit)
    return expiry_end(earliest, latest, retention, time_of=TIMES.__getitem__, consumer_next=consumer)


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, 20),                                    # everything old: all but the newest one
    ({"retain_min": 5}, 16),                     # the newest 5 stay
    ({"keep_after": 1000}, 9),                   # snapshot 10 (time 1000) is young: 9 stays, it was current then
    ({"keep_after": 1050}, 10),                  # 11 is the first young successor: 10 stays
    ({"keep_after": 0, "retain_max": 5}, 16),    # all young, but at most 5 kept
    ({"keep_after": 0, "retain_max": 5, "retain_min": 8}, 13),  # retain_min wins over retain_max
    ({"limit": 3}, 4),                           # at most 3 per run
    ({"consumer": 7}, 7),                        # a consumer still needs 7
    ({"consumer": 0}, 1),                        # a consumer behind the earliest blocks expiry
])
def test_expiry_end(kwargs: dict[str, int], expected: int) -> None:
    assert end(1, 20, **kwargs) == expected


def test_nothing_before_the_earliest() -> None:
    assert end(10, 12, retain_min=5) == 10
    assert end(10, 10) == 10
