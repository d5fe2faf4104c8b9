"""Partition directory names, escaping and the value spelling Java uses."""

from __future__ import annotations

import decimal

from paimon_core.layout import (
    escape_path_name,
    partition_path,
    partition_value_string,
    unescape_path_name,
)
from paimon_core.types import atomic


def test_escaping_matches_paimon() -> None:
    assert escape_path_name("2024-01-01") == "2024-01-01"
    assert escape_path_name("a/b:c=d%") == "a%2Fb%3Ac%3Dd%25"
    assert escape_path_name("tab\there") == "tab%09here"
    assert escape_path_name("space ok, é ok") == "space ok, é ok"
    for text in ("a/b:c=d%", "x{y}[z]^#?*'\"\\", "plain"):
        assert unescape_path_name(escape_path_name(text)) == text


def test_partition_path_uses_default_name_for_null_and_blank() -> None:
    assert partition_path(["dt", "hr"], ["2024-01-01", "05"], "__D__") == "dt=2024-01-01/hr=05"
    assert partition_path(["dt"], [None], "__DEFAULT_PARTITION__") == "dt=__DEFAULT_PARTITION__"
    assert partition_path(["dt"], ["  "], "__D__") == "dt=__D__"


def test_value_spelling_legacy_and_cast() -> None:
    date = atomic("DATE")
    assert partition_value_string(19723, date, legacy=True) == "19723"
    assert partition_value_string(19723, date, legacy=False) == "2024-01-01"
    ts = atomic("TIMESTAMP", 3)
    nanos = 1704110400000 * 1_000_000
    assert partition_value_string(nanos, ts, legacy=True) == "2024-01-01T12:00"
    assert partition_value_string(nanos + 5_000_000, ts, legacy=False) == "2024-01-01 12:00:00.005"
    assert partition_value_string(True, atomic("BOOLEAN"), legacy=True) == "true"
    assert partition_value_string(decimal.Decimal("1.50"), atomic("DECIMAL", 5, 2), legacy=True) == "1.50"
    assert partition_value_string(7, atomic("INT"), legacy=True) == "7"
    assert partition_value_string(None, atomic("INT"), legacy=True) is None
