"""Column statistics of data files, collected columnar per ``metadata.stats-mode``.

Min/max come from one ``pyarrow.compute.min_max`` per column and chunk; ``truncate(N)`` then
shortens strings and binary values exactly as Java's ``TruncateSimpleColStatsCollector``: the
minimum becomes its prefix, the maximum its prefix with the last character (or byte) incremented,
and both are dropped when no upper bound fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.binary_row import arrow_scalar_to_internal, serialize_with_arity
from paimon_core.manifest import SimpleStats
from paimon_core.options import StatsMode, TableOptions
from paimon_core.types import AtomicType, DataField, DataType

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def column_stats_modes(fields: Sequence[DataField], options: TableOptions) -> list[StatsMode]:
    """Stats mode of each column: per-field override, else the table mode (first-N limited)."""
    modes = []
    keep = options.stats_keep_first_n_columns
    for i, f in enumerate(fields):
        own = options.field_option(f.name, "stats-mode")
        if own is not None:
            modes.append(StatsMode.parse(own))
        elif 0 <= keep <= i:
            modes.append(StatsMode("none"))
        else:
            modes.append(options.stats_mode)
    return modes


@dataclass(slots=True)
class _ColumnAccumulator:
    mode: StatsMode
    data_type: DataType
    min: Any = None
    max: Any = None
    null_count: int = 0

    def update(self, column: pa.Array | pa.ChunkedArray) -> None:
        self.null_count += column.null_count
        if not self.mode.collects_min_max or not _orderable(self.data_type):
            return
        if column.null_count == len(column):
            return
        result = pc.min_max(column)
        low = arrow_scalar_to_internal(result["min"], self.data_type)
        high = arrow_scalar_to_internal(result["max"], self.data_type)
        if low is not None and (self.min is None or low < self.min):
            self.min = low
        if high is not None and (self.max is None or high > self.max):
            self.max = high

    def result(self) -> tuple[Any, Any, int | None]:
        if not self.mode.collects_anything:
            return None, None, None
        if self.mode.kind == "counts":
            return None, None, self.null_count
        low, high = self.min, self.max
        if self.mode.kind == "truncate" and low is not None:
            low, high = truncate_min(low, self.mode.length), truncate_max(high, self.mode.length)
            if high is None:
                low = None
        return low, high, self.null_count


def _orderable(data_type: DataType) -> bool:
    return isinstance(data_type, AtomicType)


def truncate_min(value: Any, length: int) -> Any:
    """A value ≤ ``value`` of at most ``length`` characters (strings) or bytes (binary)."""
    if isinstance(value, str | bytes):
        return value[:length]
    return value


def truncate_max(value: Any, length: int) -> Any:
    """A value ≥ ``value`` of at most ``length`` characters/bytes, or None if none exists."""
    if isinstance(value, str):
        if len(value) <= length:
            return value
        for i in range(length - 1, -1, -1):
            code = ord(value[i]) + 1
            if code in _SURROGATES:
                code = _SURROGATES.stop
            if code <= _MAX_CODE_POINT:
                return value[:i] + chr(code)
        return None
    if isinstance(value, bytes):
        if len(value) <= length:
            return value
        for i in range(length - 1, -1, -1):
            if value[i] != 0xFF:
                return value[:i] + bytes([value[i] + 1])
        return None
    return value


class StatsCollector:
    """Accumulates value stats of one data file over the chunks written to it."""

    def __init__(self, fields: Sequence[DataField], options: TableOptions) -> None:
        self.fields = list(fields)
        self.modes = column_stats_modes(fields, options)
        self.dense = options.stats_dense_store
        self._columns = [_ColumnAccumulator(mode, f.type) for mode, f in zip(self.modes, fields)]

    def update(self, data: pa.Table | pa.RecordBatch) -> None:
        """Fold in a chunk holding (at least) the collector's columns, found by name."""
        for data_field, accumulator in zip(self.fields, self._columns):
            if accumulator.mode.collects_anything:
                accumulator.update(data.column(data_field.name))

    def result(self) -> tuple[SimpleStats, tuple[str, ...] | None]:
        """The stats and ``_VALUE_STATS_COLS`` (None = every column, () = none)."""
        covered = [i for i, mode in enumerate(self.modes) if mode.collects_anything]
        if self.dense:
            if not covered:
                return SimpleStats(), ()
            indexes = covered
            cols: tuple[str, ...] | None = (
                None if len(covered) == len(self.fields) else tuple(self.fields[i].name for i in covered))
        else:
            indexes, cols = list(range(len(self.fields))), None
        results = [self._columns[i].result() for i in indexes]
        types = [self.fields[i].type for i in indexes]
        return SimpleStats(
            serialize_with_arity([r[0] for r in results], types),
            serialize_with_arity([r[1] for r in results], types),
            tuple(r[2] for r in results),
        ), cols
