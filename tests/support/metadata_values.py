"""Reading Dagster metadata back as plain values in tests.

The integration shows numbers it does not chart as text (``"1,234"``: see
``resources.metadata.plottable``); tests compare them as the numbers they are.
"""

from __future__ import annotations

import re
from typing import Any

import dagster as dg

NUMBER = re.compile(r"-?\d{1,3}(,\d{3})*|-?\d+")


def value_of(value: Any) -> Any:
    """A metadata entry's value; numbers shown as text become ints again."""
    plain = getattr(value, "value", value)
    if isinstance(value, dg.TextMetadataValue) and isinstance(plain, str) and NUMBER.fullmatch(plain):
        return int(plain.replace(",", ""))
    return plain
