"""Reading Dagster metadata back as plain values in tests.

The integration shows numbers it does not chart as text (``"1,234"``: see
``resources.metadata.plottable``); tests compare them as the numbers they are.
"""

from __future__ import annotations

import re
from typing import Any

import dagster as dg

NUMBER = re.compile(r"-?\d{1,3}(,\d{3})*|-?\d+")
# A size as text: "812.7 KiB (832,166 bytes)" or "320 bytes".
SIZE = re.compile(r"(?:-?[\d.]+ [KMGTP]iB \()?(?P<bytes>-?[\d,]+) bytes\)?")


def value_of(value: Any) -> Any:
    """A metadata entry's value; numbers and sizes shown as text become ints again."""
    plain = getattr(value, "value", value)
    if isinstance(value, dg.TextMetadataValue) and isinstance(plain, str):
        if NUMBER.fullmatch(plain):
            return int(plain.replace(",", ""))
        size = SIZE.fullmatch(plain)
        if size:
            return int(size["bytes"].replace(",", ""))
    return plain
