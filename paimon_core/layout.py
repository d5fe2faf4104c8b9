"""Where every file of a table lives, and how partition values become directory names."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from paimon_core.types import AtomicType, DataType

_ESCAPED = frozenset([*map(chr, range(0x20)), '"', "#", "%", "'", "*", "/", ":", "=", "?", "\\",
                      "\x7f", "{", "}", "[", "]", "^"])


def escape_path_name(text: str) -> str:
    """Escape a partition key or value for a path component as Paimon does (``%XX``)."""
    if not any(c in _ESCAPED for c in text):
        return text
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def unescape_path_name(text: str) -> str:
    if "%" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        if text[i] == "%" and _is_hex(text[i + 1:i + 3]):
            out.append(chr(int(text[i + 1:i + 3], 16)))
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def partition_value_string(value: Any, data_type: DataType, *, legacy: bool) -> str | None:
    """Text of an internal partition value as Java Paimon puts it in the path.

    With ``partition.legacy-name`` (the default) Java uses the internal value's ``toString``:
    a DATE is its day number, a TIMESTAMP prints like ``LocalDateTime``. Without it, values are
    cast to string (``2024-01-01``, ``2024-01-01 12:00:00``).
    """
    if value is None:
        return None
    root = data_type.root if isinstance(data_type, AtomicType) else ""
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root == "DATE":
        return str(value) if legacy else (datetime.date(1970, 1, 1) + datetime.timedelta(days=value)).isoformat()
    if root == "TIME":
        return str(value) if legacy else _format_time(value)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return _format_timestamp(int(value), iso=legacy)
    if root == "DECIMAL":
        return format(value, "f") if isinstance(value, decimal.Decimal) else str(value)
    if root in ("FLOAT", "DOUBLE"):
        return _java_float(float(value))
    return str(value)


def _format_time(millis: int) -> str:
    seconds, ms = divmod(millis, 1000)
    text = (datetime.datetime.min + datetime.timedelta(seconds=seconds)).strftime("%H:%M:%S")
    return f"{text}.{ms:03d}" if ms else text


def _format_timestamp(nanos: int, *, iso: bool) -> str:
    seconds, nano = divmod(nanos, 1_000_000_000)
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
    if iso:  # java.time.LocalDateTime#toString
        text = moment.strftime("%Y-%m-%dT%H:%M")
        if moment.second or nano:
            text += moment.strftime(":%S")
    else:
        text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if nano:
        digits = f"{nano:09d}"
        text += "." + (digits[:3] if nano % 1_000_000 == 0 else digits[:6] if nano % 1000 == 0 else digits)
    return text


def _java_float(value: float) -> str:
    text = repr(value)
    return text if ("e" in text or "." in text or "n" in text) else text + ".0"


def partition_path(keys: Sequence[str], values: Sequence[str | None], default_name: str) -> str:
    """``k1=v1/k2=v2`` for string values (None or blank become the default partition name)."""
    parts = []
    for key, value in zip(keys, values):
        text = default_name if value is None or not value.strip() else value
        parts.append(f"{escape_path_name(key)}={escape_path_name(text)}")
    return "/".join(parts)


@dataclass(frozen=True, slots=True)
class TablePaths:
    """Paths of one table's metadata and data, rooted at ``root`` (a FileIO path)."""

    root: str

    @property
    def schema_dir(self) -> str:
        return f"{self.root}/schema"

    def schema_file(self, schema_id: int) -> str:
        return f"{self.schema_dir}/schema-{schema_id}"

    @property
    def snapshot_dir(self) -> str:
        return f"{self.root}/snapshot"

    def snapshot_file(self, snapshot_id: int) -> str:
        return f"{self.snapshot_dir}/snapshot-{snapshot_id}"

    @property
    def latest_hint(self) -> str:
        return f"{self.snapshot_dir}/LATEST"

    @property
    def earliest_hint(self) -> str:
        return f"{self.snapshot_dir}/EARLIEST"

    @property
    def manifest_dir(self) -> str:
        return f"{self.root}/manifest"

    def manifest_file(self, name: str) -> str:
        return f"{self.manifest_dir}/{name}"

    @property
    def index_dir(self) -> str:
        return f"{self.root}/index"

    def index_file(self, name: str) -> str:
        return f"{self.index_dir}/{name}"

    @property
    def tag_dir(self) -> str:
        return f"{self.root}/tag"

    def tag_file(self, name: str) -> str:
        return f"{self.tag_dir}/tag-{name}"

    @property
    def consumer_dir(self) -> str:
        return f"{self.root}/consumer"

    def consumer_file(self, consumer_id: str) -> str:
        return f"{self.consumer_dir}/consumer-{consumer_id}"

    @property
    def commit_ledger_dir(self) -> str:
        return f"{self.root}/commit-ledger"

    def bucket_dir(self, partition: str, bucket: int) -> str:
        base = f"{self.root}/{partition}" if partition else self.root
        return f"{base}/bucket-{bucket}"

    def data_file(self, partition: str, bucket: int, name: str,
                  external_path: str | None = None) -> str:
        return external_path or f"{self.bucket_dir(partition, bucket)}/{name}"
