"""Record-at-a-time reference merge functions, written from Paimon's merge-function semantics.

Independent of paimon_core.merge: the columnar engines are checked against these on random
inputs. A record is ``(kind, seq, values)`` with kind 0..3 (+I, -U, +U, -D).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Record = tuple[int, int, dict[str, Any]]
RETRACT = (1, 3)


class RefError(Exception):
    """The reference raises where Paimon throws."""


def reduce(records: Sequence[Record], merge: Callable[[Sequence[Record]], Record | None]) -> Record | None:
    """Paimon's ReducerMergeFunctionWrapper: a single record is returned untouched."""
    return records[0] if len(records) == 1 else merge(records)


def deduplicate(records: Sequence[Record], *, ignore_delete: bool = False) -> Record | None:
    latest = None
    for record in records:
        if ignore_delete and record[0] in RETRACT:
            continue
        latest = record
    return latest


def first_row(records: Sequence[Record], *, ignore_delete: bool = False) -> Record | None:
    first = None
    for record in records:
        if record[0] in RETRACT:
            if ignore_delete:
                continue
            raise RefError("retract")
        if first is None:
            first = record
    return first


@dataclass
class PartialUpdateRef:
    columns: list[str]
    not_null: set[str] = field(default_factory=set)
    ignore_delete: bool = False
    remove_on_delete: bool = False
    groups: list[tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)

    def group_of(self, name: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        for group in self.groups:
            if name in group[0] or name in group[1]:
                return group
        return None

    @staticmethod
    def compare(a: dict[str, Any], b: dict[str, Any], ordering: tuple[str, ...]) -> int:
        """Nulls first, then ascending, field by field."""
        for name in ordering:
            x, y = a[name], b[name]
            if x == y:
                continue
            if x is None:
                return -1
            if y is None:
                return 1
            return -1 if x < y else 1
        return 0

    def __call__(self, records: Sequence[Record]) -> Record | None:
        row = dict.fromkeys(self.columns)
        filled = meet_insert = delete_row = False
        seq = 0
        for kind, record_seq, values in records:
            delete_row = False
            if kind in RETRACT:
                if not filled:
                    self._init(row, values)
                    filled = True
                if self.ignore_delete:
                    continue
                seq = record_seq
                if self.groups:
                    self._retract_groups(row, values)
                    continue
                if self.remove_on_delete:
                    if kind == 3:
                        delete_row = True
                        row = dict.fromkeys(self.columns)
                        self._init(row, values)
                    continue
                raise RefError("delete")
            seq = record_seq
            if self.groups:
                self._update_groups(row, values)
            else:
                for name in self.columns:
                    if values[name] is not None:
                        row[name] = values[name]
                    elif name in self.not_null:
                        raise RefError("null")
            meet_insert = filled = True
        kind = 3 if delete_row or not meet_insert else 0
        return kind, seq, row

    def _init(self, row: dict[str, Any], values: dict[str, Any]) -> None:
        for name in self.columns:
            if values[name] is None and name in self.not_null:
                raise RefError("null")
            row[name] = values[name]

    def _update_groups(self, row: dict[str, Any], values: dict[str, Any]) -> None:
        for name in self.columns:
            if self.group_of(name) is None and values[name] is not None:
                row[name] = values[name]
        for ordering, protected in self.groups:
            if all(values[o] is None for o in ordering):
                continue
            if self.compare(values, row, ordering) >= 0:
                for name in ordering + protected:
                    row[name] = values[name]

    def _retract_groups(self, row: dict[str, Any], values: dict[str, Any]) -> None:
        for ordering, protected in self.groups:
            if all(values[o] is None for o in ordering):
                continue
            if self.compare(values, row, ordering) >= 0:
                for name in ordering:
                    row[name] = values[name]
                for name in protected:
                    row[name] = None


class Agg:
    """Paimon's field aggregators, one call per record."""

    def __init__(self, name: str, *, ignore_retract: bool = False, delimiter: str = ",",
                 distinct: bool = False) -> None:
        self.name = name
        self.ignore_retract = ignore_retract
        self.delimiter = delimiter
        self.distinct = distinct
        self.initialized = False

    def agg(self, acc: Any, value: Any) -> Any:
        name = self.name
        if name in ("primary_key", "last_value"):
            return value
        if name == "last_non_null_value":
            return acc if value is None else value
        if name in ("first_value", "first_non_null_value"):
            if not self.initialized and (name == "first_value" or value is not None):
                self.initialized = True
                return value
            return acc
        if acc is None or value is None:
            if name == "listagg":
                return self._listagg(acc, value)
            return acc if value is None else value
        if name == "sum":
            return acc + value
        if name == "product":
            return acc * value
        if name == "max":
            return value if acc < value else acc
        if name == "min":
            return value if acc > value else acc
        if name == "bool_and":
            return acc and value
        if name == "bool_or":
            return acc or value
        if name == "listagg":
            return self._listagg(acc, value)
        raise AssertionError(name)

    def _listagg(self, acc: Any, value: Any) -> Any:
        if value is None or not value.strip():
            return acc
        if acc is None or not acc.strip():
            return value
        return acc + self.delimiter + value

    def retract(self, acc: Any, value: Any) -> Any:
        if self.ignore_retract:
            return acc
        name = self.name
        if name == "last_value":
            return None
        if name == "last_non_null_value":
            return None if value is not None else acc
        if name == "sum":
            if acc is None or value is None:
                return -value if acc is None and value is not None else acc
            return acc - value
        if name == "primary_key":
            return value
        if name == "product":  # Java's FieldProductAgg.retract: a null gives the other side, else divide
            if acc is None or value is None:
                return value if acc is None else acc
            if isinstance(acc, float):
                return ieee_divide(acc, value)
            if value == 0:
                raise RefError("division by zero")
            quotient = abs(acc) // abs(value)
            return quotient if (acc < 0) == (value < 0) else -quotient
        raise RefError("retract")


def ieee_divide(a: float, b: float) -> float:
    """Java's double division: by zero it gives an infinity, or NaN for 0/0."""
    if b != 0:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


@dataclass
class AggregationRef:
    functions: dict[str, Agg]
    remove_on_delete: bool = False

    def __call__(self, records: Sequence[Record]) -> Record | None:
        row = dict.fromkeys(self.functions)
        delete_row = False
        last_seq = 0
        for kind, seq, values in records:
            last_seq = seq
            delete_row = self.remove_on_delete and kind == 3
            if delete_row:
                row = dict(values)
                continue
            for name, agg in self.functions.items():
                row[name] = agg.retract(row[name], values[name]) if kind in RETRACT else agg.agg(
                    row[name], values[name])
        return (3 if delete_row else 0), last_seq, row

