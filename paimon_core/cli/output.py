"""Listings of the command line in the three ``--format`` forms: an aligned table for people
(sizes as ``1.5 MiB``, times as ``2024-01-01 12:00:00 UTC``), JSON and CSV for scripts (sizes in
bytes, times in ISO-8601 UTC)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from paimon_core.cli.times import format_time

FORMATS = ("table", "json", "csv")
BYTES = "bytes"  # a column kind: sizes
TIME = "time"  # a column kind: epoch milliseconds


@dataclass
class Listing:
    """Rows of one listing; ``kinds`` marks columns holding sizes (:data:`BYTES`) or epoch
    milliseconds (:data:`TIME`), which each format shows its own way; ``footer`` lines follow the
    table (they are left out of JSON and CSV, where they would break parsing)."""

    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    kinds: dict[str, str] = field(default_factory=dict)
    footer: Sequence[str] = ()


def human_bytes(size: int | None) -> str:
    """``1536`` → ``1.5 KiB``; bytes below a KiB stay exact."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _iso(millis: int | None) -> str | None:
    if millis is None:
        return None
    moment = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def render(listing: Listing, fmt: str = "table") -> str:
    """The listing as text in ``fmt`` (one of :data:`FORMATS`)."""
    headers = list(listing.headers)
    kinds = [listing.kinds.get(h) for h in headers]
    if fmt == "json":
        records = [{h: _machine(v, k) for h, v, k in zip(headers, row, kinds)} for row in listing.rows]
        return json.dumps(records, indent=2, default=str, ensure_ascii=False)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(headers)
        for row in listing.rows:
            writer.writerow(["" if v is None else _machine_text(v, k) for v, k in zip(row, kinds)])
        return out.getvalue().rstrip("\n")
    if fmt != "table":
        raise ValueError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    cells = [headers] + [[_human(v, k) for v, k in zip(row, kinds)] for row in listing.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, *listing.footer])


def _human(value: Any, kind: str | None) -> str:
    if value is not None and kind == BYTES:
        return human_bytes(int(value))
    if value is not None and kind == TIME:
        return format_time(int(value))
    return _cell(value)


def _machine(value: Any, kind: str | None) -> Any:
    if value is not None and kind == TIME:
        return _iso(int(value))
    return value


def _machine_text(value: Any, kind: str | None) -> str:
    shown = _machine(value, kind)
    return json.dumps(shown, default=str, ensure_ascii=False) if isinstance(shown, dict | list | tuple) \
        else str(shown)
