"""Cron schedules and times as the maintenance runs and checks read them (UTC, epoch ms).

A maintenance check judges a table by its schedule: what the run at the tick before the last
one could already have done. Crons are parsed here only, so a bad one fails the definitions'
load naming where it came from.
"""

from __future__ import annotations

import datetime as dt_
import time

import dagster as dg

# The maintenance schedules of a table whose spec does not name them (UTC): expiry hourly,
# orphan cleanup daily at 03:00; the maintenance checks judge a table without schedules by them.
DEFAULT_EXPIRE_CRON = "0 * * * *"
DEFAULT_ORPHANS_CRON = "0 3 * * *"


def current_ms() -> int:
    return int(time.time() * 1000)


def iso(ms: int) -> str:
    return dt_.datetime.fromtimestamp(ms / 1000, tz=dt_.UTC).isoformat(timespec="seconds")


def age_text(ms: int) -> str:
    """``3 d 4 h``, ``2 h 5 min``, ``4 min 2 s``, ``12 s``: an age in its two largest units."""
    seconds = max(0, ms) // 1000
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    first = next((i for i, (value, _) in enumerate(parts) if value), len(parts) - 1)
    return " ".join(f"{value} {unit}" for value, unit in parts[first:first + 2] if value or unit == "s")


def scheduled_ticks(cron: str, now_ms: int) -> tuple[int, int]:
    """The last two ticks of ``cron`` (UTC) at or before ``now_ms``: (previous, last), in ms."""
    windows = dg.TimeWindowPartitionsDefinition(cron_schedule=cron, start=dt_.datetime(2000, 1, 1),
                                                fmt="%Y-%m-%dT%H:%M", timezone="UTC")
    now = dt_.datetime.fromtimestamp(now_ms / 1000, tz=dt_.UTC)
    window = windows.get_prev_partition_window(now, respect_bounds=False)
    if window is None:  # only before 2000
        return now_ms, now_ms
    return int(window.start.timestamp() * 1000), int(window.end.timestamp() * 1000)


def checked_cron(cron: str, source: str) -> str:
    """``cron`` if Dagster accepts it (five fields, or @hourly/@daily ...), else a load error naming ``source``."""
    try:
        scheduled_ticks(cron, current_ms())
    except (dg.DagsterInvalidDefinitionError, ValueError):
        raise dg.DagsterInvariantViolationError(
            f"{source} must be a cron schedule of five fields (e.g. '0 * * * *'), got {cron!r}") from None
    return cron


def parse_time(value: str | None, *, now_ms: int, field: str) -> int | None:
    """``value`` ('now' or ISO-8601, naive means UTC) in epoch ms; None when unset."""
    text = (value or "").strip()
    if not text:
        return None
    if text.lower() == "now":
        return now_ms
    try:
        moment = dt_.datetime.fromisoformat(text)
    except ValueError:
        raise dg.Failure(description=f"{field} must be 'now' or an ISO-8601 time such as "
                         f"'2024-01-02T03:00:00', got {value!r}", allow_retries=False) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt_.UTC)
    return int(moment.timestamp() * 1000)
