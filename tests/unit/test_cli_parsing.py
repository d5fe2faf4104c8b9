"""Reference tests of the command line's pure parts: times, ``--filter`` text and listings."""

from __future__ import annotations

import csv
import io
import json

import pytest

from paimon_core.cli.filters import FilterSyntaxError, parse_filter_text
from paimon_core.cli.output import BYTES, TIME, Listing, human_bytes, render
from paimon_core.cli.times import format_age, format_time, parse_time

NOW = 1_735_732_800_000  # 2025-01-01 12:00:00 UTC


@pytest.mark.parametrize(("text", "expected"), [
    ("now", NOW),
    ("NOW", NOW),
    ("2h", NOW - 2 * 3_600_000),
    ("7d", NOW - 7 * 86_400_000),
    ("30m", NOW - 30 * 60_000),
    ("90s ago", NOW - 90_000),
    ("1w", NOW - 7 * 86_400_000),
    ("1.5h", NOW - 5_400_000),
    ("250ms", NOW - 250),
    ("2025-01-01", 1_735_689_600_000),
    ("2025-01-01T12:00:00", NOW),
    ("2025-01-01 12:00:00Z", NOW),
    ("2025-01-01T13:00:00+01:00", NOW),
    ("1735732800000", NOW),
])
def test_times_in_every_accepted_form(text: str, expected: int) -> None:
    assert parse_time(text, NOW) == expected


@pytest.mark.parametrize(("text", "words"), [
    ("yesterday", ["'yesterday'", "ISO-8601", "2h"]),
    ("2024", ["'2024'", "ambiguous"]),
    ("1735732800", ["ambiguous", "epoch milliseconds"]),
    ("2h later", ["'2h later'"]),
    ("2025-13-01", ["'2025-13-01'"]),
])
def test_bad_times_name_the_text_and_the_forms(text: str, words: list[str]) -> None:
    with pytest.raises(ValueError) as raised:
        parse_time(text, NOW)
    for word in words:
        assert word in str(raised.value)


def test_times_print_in_utc_and_ages_coarsely() -> None:
    assert format_time(NOW) == "2025-01-01 12:00:00 UTC"
    assert format_time(None) == "-"
    assert format_age(NOW - 3 * 3_600_000 - 5 * 60_000 - 7_000, NOW) == "3h 5m ago"
    assert format_age(NOW - 2 * 86_400_000 - 60_000, NOW) == "2d 1m ago"
    assert format_age(NOW - 4_000, NOW) == "4s ago"


@pytest.mark.parametrize(("text", "expected"), [
    ("id = 5", [[("id", "=", "5")]]),
    ("dt = '2024-01-01' AND id > 5", [[("dt", "=", "2024-01-01"), ("id", ">", "5")]]),
    ("a=1 and b<>2 OR c >= 3", [[("a", "=", "1"), ("b", "!=", "2")], [("c", ">=", "3")]]),
    ("s IN ('x', 'it''s', y)", [[("s", "in", ("x", "it's", "y"))]]),
    ("s not in (1,2)", [[("s", "not in", ("1", "2"))]]),
    ("note IS NULL or note is not null", [[("note", "is null", None)], [("note", "is not null", None)]]),
    ("`order` = 'a and b'", [[("order", "=", "a and b")]]),
    ("\"my col\" == 3", [[("my col", "=", "3")]]),
    ('[["id", ">", 5]]', [[("id", ">", 5)]]),
    ('[[["id", "in", [1, 2]]], [["v", "is null", null]]]', [[("id", "in", (1, 2))], [("v", "is null", None)]]),
])
def test_filters_parse_to_dnf(text: str, expected: list[list[tuple[object, ...]]]) -> None:
    assert parse_filter_text(text) == expected


@pytest.mark.parametrize("text", ["", "id", "id = ", "= 5", "id = 5 AND", "OR id = 5", "id in 1, 2",
                                  "id in (1 2)", "id ~ 5", "[1, 2", '[["id", ">"]]', "'x' = 1"])
def test_malformed_filters_are_refused(text: str) -> None:
    with pytest.raises(FilterSyntaxError):
        parse_filter_text(text)


def test_sizes_are_human_in_tables() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1536, 5 * 1024 ** 2, 3 * 1024 ** 4 // 2)] == [
        "0 B", "1023 B", "1.5 KiB", "5.0 MiB", "1.5 TiB"]


LISTING = Listing(("name", "size", "at"), [("a", 2048, NOW), ("b,c", None, None)], {"size": BYTES, "at": TIME},
                  footer=("2 files",))


def test_a_listing_as_table_json_and_csv() -> None:
    table = render(LISTING, "table").splitlines()
    assert table[0].split() == ["name", "size", "at"]
    assert table[2].split() == ["a", "2.0", "KiB", "2025-01-01", "12:00:00", "UTC"]
    assert table[3].split() == ["b,c", "-", "-"] and table[-1] == "2 files"
    assert json.loads(render(LISTING, "json")) == [
        {"name": "a", "size": 2048, "at": "2025-01-01T12:00:00.000Z"}, {"name": "b,c", "size": None, "at": None}]
    rows = list(csv.reader(io.StringIO(render(LISTING, "csv"))))
    assert rows == [["name", "size", "at"], ["a", "2048", "2025-01-01T12:00:00.000Z"], ["b,c", "", ""]]
    with pytest.raises(ValueError, match="xml"):
        render(LISTING, "xml")
