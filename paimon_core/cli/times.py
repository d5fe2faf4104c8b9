"""Times as operators type them: ISO-8601, ``now``, ``2h`` / ``7d`` ago, or epoch milliseconds.

Pure parsing, apart from the clock a caller passes in, so every form has a reference test.
"""

from __future__ import annotations

import datetime as dt
import re

from paimon_core.snapshot import utc_text

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000,
             "w": 7 * 86_400_000}
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h|d|w)\s*(?:ago)?\s*$", re.IGNORECASE)
_EPOCH_MS_MIN_DIGITS = 11  # 10-digit integers are years like 2024 or epoch seconds: refused as ambiguous


def parse_time(text: str, now_ms: int) -> int:
    """Epoch milliseconds of ``text``.

    Accepts ``now``; a duration ago (``90s``, ``30m``, ``2h``, ``7d``, ``1w``, optionally followed by
    ``ago``); an ISO-8601 date or date-time (without a zone it is UTC, as Paimon's files are);
    or epoch milliseconds (11 digits or more, so a year or epoch seconds is not taken for one).

    Raises:
        ValueError: naming the text and the accepted forms.
    """
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    relative = _RELATIVE.match(value)
    if relative:
        return now_ms - round(float(relative.group(1)) * _UNITS_MS[relative.group(2).lower()])
    if value.isdigit():
        if len(value) < _EPOCH_MS_MIN_DIGITS:
            raise ValueError(f"time {text!r} is ambiguous: give epoch milliseconds (13 digits), an ISO-8601 "
                             "time such as 2024-01-01T12:00, 'now', or an age such as 2h or 7d")
        return int(value)
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        raise ValueError(f"time {text!r} is not ISO-8601 (2024-01-01 or 2024-01-01T12:00:00+01:00), 'now', "
                         "an age such as 30m, 2h or 7d, or epoch milliseconds") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def format_time(millis: int | None) -> str:
    """Epoch milliseconds as ``2024-01-01 12:00:00 UTC`` (what the listings print)."""
    return "-" if millis is None else utc_text(millis)


def format_age(millis: int, now_ms: int) -> str:
    """How long before ``now_ms`` a time was, coarsely (``3h 5m ago``), for confirmations."""
    seconds = max(0, (now_ms - millis) // 1000)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    return (" ".join(parts[:2]) if parts else f"{secs}s") + " ago"
