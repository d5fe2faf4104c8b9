"""Automatic tags (``tag.automatic-creation = process-time``): one tag per finished period.

The tag of a day (or hour) is named after it (``2024-01-31``, ``2024-01-31 10``; without dashes
``20240131``, ``20240131 10`` as Paimon's formatters write them) and holds the table as it was at
the end of the period: the newest snapshot committed by then. It is created once the period has
ended and ``tag.creation-delay`` has passed, by the next maintaining commit or maintenance run;
``tag.num-retained-max`` deletes the oldest automatic tags. Which tag is due is pure.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from paimon_core.errors import SnapshotNotFoundError, TagExistsError

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext

log = logging.getLogger(__name__)

_FORMATS = {("daily", "with_dashes"): "%Y-%m-%d", ("daily", "without_dashes"): "%Y%m%d",
            ("hourly", "with_dashes"): "%Y-%m-%d %H", ("hourly", "without_dashes"): "%Y%m%d %H"}
_STEP = {"daily": dt.timedelta(days=1), "hourly": dt.timedelta(hours=1)}


@dataclass(frozen=True, slots=True)
class DueTag:
    name: str
    period_end_ms: int


def _start_of(moment: dt.datetime, period: str) -> dt.datetime:
    if period == "daily":
        return moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return moment.replace(minute=0, second=0, microsecond=0)


def due_tag(now_ms: int, *, period: str, delay_ms: int, formatter: str) -> DueTag:
    """The latest period that has ended at least ``delay_ms`` before ``now_ms`` (local time, as
    Paimon's process-time extractor uses)."""
    moment = dt.datetime.fromtimestamp((now_ms - delay_ms) / 1000)
    end = _start_of(moment, period)
    start = end - _STEP[period]
    return DueTag(start.strftime(_FORMATS[(period, formatter)]), int(end.timestamp() * 1000))


def automatic_tags(names: Iterable[str], *, period: str, formatter: str) -> list[str]:
    """The names that are automatic tags of this period and format, oldest first."""
    found = []
    for name in names:
        try:
            found.append((dt.datetime.strptime(name, _FORMATS[(period, formatter)]), name))
        except ValueError:
            continue
    return [name for _, name in sorted(found)]


def tags_over_limit(names: Iterable[str], *, period: str, formatter: str, limit: int | None) -> list[str]:
    """Automatic tags beyond ``tag.num-retained-max``, oldest first."""
    auto = automatic_tags(names, period=period, formatter=formatter)
    return auto[:max(0, len(auto) - limit)] if limit is not None else []


@dataclass(frozen=True, slots=True)
class AutoTagResult:
    created: str | None
    snapshot_id: int | None
    deleted: tuple[str, ...]


def create_automatic_tags(table: TableContext, now_ms: int) -> AutoTagResult:
    """Create the due tag (if the table had a snapshot by the period's end) and trim old ones."""
    options = table.options
    if options.tag_automatic_creation != "process-time":
        return AutoTagResult(None, None, ())
    period, formatter = options.tag_creation_period, options.tag_period_formatter
    due = due_tag(now_ms, period=period, delay_ms=options.tag_creation_delay_ms, formatter=formatter)
    tags = table.tags
    existing = {t.name for t in tags.tags()}
    created, snapshot_id = None, None
    if due.name not in existing:
        try:
            snapshot = table.snapshots.at_or_before(due.period_end_ms - 1)
        except SnapshotNotFoundError:
            snapshot = None  # the table had no (retained) snapshot by then
        if snapshot is not None:
            try:
                tags.create(due.name, snapshot)
                created, snapshot_id = due.name, snapshot.id
                existing.add(due.name)
            except TagExistsError:
                pass  # another maintainer made it meanwhile
    deleted = tags_over_limit(existing, period=period, formatter=formatter, limit=options.tag_num_retained_max)
    for name in deleted:
        tags.delete(name)
    if created or deleted:
        log.info("automatic tags of %s: created %s, deleted %s", table.name, created, deleted)
    return AutoTagResult(created, snapshot_id, tuple(deleted))
