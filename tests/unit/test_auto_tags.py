"""Which automatic tag is due, how its name is formatted, and which old ones go."""

from __future__ import annotations

import datetime as dt

from paimon_core.maintenance.auto_tags import automatic_tags, due_tag, tags_over_limit


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def test_the_tag_of_the_last_finished_period_is_due() -> None:
    due = due_tag(ms("2024-02-01T00:30:00"), period="daily", delay_ms=0, formatter="with_dashes")
    assert due.name == "2024-01-31" and due.period_end_ms == ms("2024-02-01T00:00:00")
    assert due_tag(ms("2024-02-01T10:20:00"), period="hourly", delay_ms=0, formatter="with_dashes").name == \
        "2024-02-01 09"
    assert due_tag(ms("2024-02-01T10:20:00"), period="hourly", delay_ms=0, formatter="without_dashes").name == \
        "20240201 09"


def test_the_delay_holds_the_tag_back() -> None:
    hour = 3600 * 1000
    assert due_tag(ms("2024-02-01T00:30:00"), period="daily", delay_ms=hour, formatter="with_dashes").name == \
        "2024-01-30"
    assert due_tag(ms("2024-02-01T01:30:00"), period="daily", delay_ms=hour, formatter="without_dashes").name == \
        "20240131"


def test_only_automatic_tags_count_against_the_limit() -> None:
    names = ["2024-01-03", "release", "2024-01-01", "2024-01-02", "20240104"]
    assert automatic_tags(names, period="daily", formatter="with_dashes") == ["2024-01-01", "2024-01-02",
                                                                               "2024-01-03"]
    assert tags_over_limit(names, period="daily", formatter="with_dashes", limit=2) == ["2024-01-01"]
    assert tags_over_limit(names, period="daily", formatter="with_dashes", limit=None) == []
