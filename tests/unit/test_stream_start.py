"""Where a stream starts (Paimon's scan.mode rules), without files."""

from __future__ import annotations

import pytest

from paimon_core.errors import OptionError
from paimon_core.read.stream import StartPosition, start_position


@pytest.mark.parametrize(("mode", "kwargs", "expected"), [
    ("latest-full", {}, StartPosition(9, 10)),
    ("latest", {}, StartPosition(None, 10)),
    ("from-snapshot", {"snapshot_id": 5}, StartPosition(None, 5)),
    ("from-snapshot", {"snapshot_id": 1}, StartPosition(None, 3)),  # clamped to the earliest
    ("from-snapshot-full", {"snapshot_id": 5}, StartPosition(5, 6)),
    ("from-snapshot-full", {"snapshot_id": 20}, StartPosition(9, 10)),
    ("from-timestamp", {"older_than_timestamp": 6}, StartPosition(None, 7)),
    ("from-timestamp", {"older_than_timestamp": None}, StartPosition(None, 3)),
    ("latest-full", {"consumer_next": 4}, StartPosition(None, 4)),  # saved progress wins
])
def test_start_positions(mode: str, kwargs: dict[str, int | None], expected: StartPosition) -> None:
    assert start_position(mode, latest=9, earliest=3, **kwargs) == expected  # type: ignore[arg-type]


def test_an_empty_table_streams_from_the_first_snapshot() -> None:
    assert start_position("latest-full", latest=None, earliest=None) == StartPosition(None, 1)
    assert start_position("from-snapshot", latest=None, earliest=None, snapshot_id=4) == StartPosition(None, 4)


@pytest.mark.parametrize(("mode", "snapshot_id"), [("sideways", None), ("from-snapshot", None)])
def test_bad_modes_are_refused(mode: str, snapshot_id: int | None) -> None:
    with pytest.raises(OptionError, match="t1"):
        start_position(mode, latest=9, earliest=3, snapshot_id=snapshot_id, table="t1")
