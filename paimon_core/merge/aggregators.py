"""Aggregate functions of the aggregation merge engine, folded columnar over key groups.

Each function folds, per key, the optional starting row (a -D that reset the accumulator under
``aggregation.remove-record-on-delete``) and then the additions and retractions after it, in
merge order, exactly as Paimon's ``Field*Agg`` classes do one record at a time. The common
functions are numpy/Arrow kernels over all keys at once; a few rarely used variants whose
result depends on element identity (``collect`` with ``distinct`` or retraction, ``merge_map``,
``listagg`` with ``distinct``, ``product`` with retraction) fold each affected key in Python.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.columnar import int64_array, take_or_null, validity
from paimon_core.errors import AggregationOverflowError, OptionError
from paimon_core.merge.engine import any_where, first_where, last_where
from paimon_core.merge.sort import Groups
from paimon_core.options import TableOptions
from paimon_core.types import ArrayType, AtomicType, DataField, MapType

_INT_RANGES = {"TINYINT": 2**7, "SMALLINT": 2**15, "INT": 2**31, "BIGINT": 2**63}


@dataclass(frozen=True, slots=True)
class FoldContext:
    """Which rows of a merge-ordered table each key folds, and from which starting row."""

    groups: Groups
    row_group: np.ndarray
    base: np.ndarray  # per key: the row whose values start the accumulator, or -1 (all null)
    adds: np.ndarray  # rows after the base that add
    retracts: np.ndarray  # rows after the base that retract
    adds_before_base: np.ndarray  # additions the base discarded (they still mark first_* as set)

    def base_rows(self, valid: np.ndarray) -> np.ndarray:
        """Mask of the rows that are a key's base and hold a value."""
        mask = np.zeros(len(self.row_group), dtype=bool)
        rows = self.base[self.base >= 0]
        mask[rows] = valid[rows]
        return mask


class Aggregator:
    """One column's aggregate function."""

    name: ClassVar[str] = ""
    retractable: ClassVar[bool] = False

    def __init__(self, data_field: DataField, options: TableOptions, *, ignore_retract: bool,
                 table: str) -> None:
        self.field = data_field
        self.options = options
        self.ignore_retract = ignore_retract
        self.check_type(table)

    def check_type(self, table: str) -> None:
        """Raise OptionError when the column's type does not suit the function."""

    def type_error(self, table: str) -> OptionError:
        return OptionError(f"aggregate function {self.name!r} does not support column "
                           f"{self.field.name!r} of type {self.field.type} in table {table}")

    def retracts(self, context: FoldContext) -> np.ndarray:
        return np.zeros_like(context.retracts) if self.ignore_retract else context.retracts

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        raise NotImplementedError

    # A sequential fold of the keys that need it, used by the element-wise functions.
    def fold_sequentially(self, column: pa.ChunkedArray, context: FoldContext,
                          step: Callable[[Any, Any, bool], Any]) -> pa.Array:
        retracts = self.retracts(context)
        involved = context.adds | retracts
        rows = np.flatnonzero(involved | context.base_rows(np.ones(len(involved), dtype=bool)))
        values = pc.take(column, int64_array(rows)).to_pylist()
        results: list[Any] = [None] * len(context.groups)
        keys = context.row_group[rows]
        for row, key, value in zip(rows, keys, values):
            if row == context.base[key]:
                results[key] = value
            else:
                results[key] = step(results[key], value, bool(retracts[row]))
        return pa.array(results, type=column.type)


class PrimaryKey(Aggregator):
    name = "primary_key"
    retractable = True

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        return take_or_null(column, context.groups.ends - 1)


class LastValue(Aggregator):
    name = "last_value"
    retractable = True

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        retracts = self.retracts(context)
        last = last_where(context.adds | retracts, context.groups)
        picked = np.where(last >= 0, np.where(retracts[np.maximum(last, 0)], -1, last), context.base)
        return take_or_null(column, picked)


class LastNonNullValue(Aggregator):
    name = "last_non_null_value"
    retractable = True

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        retracts = self.retracts(context)
        last = last_where((context.adds | retracts) & validity(column), context.groups)
        picked = np.where(last >= 0, np.where(retracts[np.maximum(last, 0)], -1, last), context.base)
        return take_or_null(column, picked)


class FirstValue(Aggregator):
    """The first addition of the merge wins, even a null one."""

    name = "first_value"

    def seen(self, column: pa.ChunkedArray) -> np.ndarray:
        return np.ones(len(column), dtype=bool)

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        seen = self.seen(column)
        first = first_where(context.adds & seen, context.groups)
        # Paimon's aggregator keeps its "initialized" flag when a -D resets the accumulator.
        set_before = any_where(context.adds_before_base & seen, context.groups) & (context.base >= 0)
        picked = np.where(set_before, context.base, np.where(first >= 0, first, context.base))
        return take_or_null(column, picked)


class FirstNonNullValue(FirstValue):
    name = "first_non_null_value"

    def seen(self, column: pa.ChunkedArray) -> np.ndarray:
        return validity(column)


class Sum(Aggregator):
    """Numeric sum; a retraction subtracts (from a null accumulator: the negated value)."""

    name = "sum"
    retractable = True

    def check_type(self, table: str) -> None:
        data_type = self.field.type
        if not isinstance(data_type, AtomicType) or data_type.root not in (
                *_INT_RANGES, "FLOAT", "DOUBLE", "DECIMAL"):
            raise self.type_error(table)

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        data_type = self.field.type
        assert isinstance(data_type, AtomicType)
        valid = validity(column)
        retracts = self.retracts(context)
        rows = ((context.adds | retracts) & valid) | context.base_rows(valid)
        count = np.add.reduceat(rows.astype(np.int64), context.groups.starts)
        if data_type.root == "DECIMAL":
            return self._decimal(column, context, rows, retracts, count)
        values = _numbers(column)
        signed = np.where(rows, np.where(retracts, -values, values), 0)
        if data_type.root in ("FLOAT", "DOUBLE"):
            return pa.array(np.add.reduceat(signed, context.groups.starts), type=column.type,
                            mask=count == 0)
        sums = np.add.reduceat(signed.astype(np.int64), context.groups.starts)
        _check_range(np.add.reduceat(signed.astype(np.float64), context.groups.starts),
                     sums, data_type.root, self.field.name)
        return pa.array(sums, type=pa.int64(), mask=count == 0).cast(column.type)

    def _decimal(self, column: pa.ChunkedArray, context: FoldContext, rows: np.ndarray,
                 retracts: np.ndarray, count: np.ndarray) -> pa.Array:
        data_type = self.field.type
        assert isinstance(data_type, AtomicType)
        if data_type.precision > 18:
            return self.fold_sequentially(column, context, _decimal_sum_step(data_type.precision,
                                                                             data_type.scale))
        unscaled = _unscaled(column, data_type.scale)
        signed = np.where(rows, np.where(retracts, -unscaled, unscaled), 0)
        sums = np.add.reduceat(signed, context.groups.starts)
        overflow = np.abs(sums) >= 10**data_type.precision  # Paimon's Decimal becomes null
        return _decimal_from_unscaled(sums, data_type.precision, data_type.scale, (count == 0) | overflow)


class Product(Aggregator):
    name = "product"
    retractable = True

    def check_type(self, table: str) -> None:
        Sum.check_type(self, table)  # type: ignore[arg-type]

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        data_type = self.field.type
        assert isinstance(data_type, AtomicType)
        retracts = self.retracts(context)
        if retracts.any() or data_type.root == "DECIMAL":
            return self.fold_sequentially(column, context, _product_step(data_type))
        valid = validity(column)
        rows = (context.adds & valid) | context.base_rows(valid)
        count = np.add.reduceat(rows.astype(np.int64), context.groups.starts)
        values = np.where(rows, _numbers(column), 1)
        if data_type.root in ("FLOAT", "DOUBLE"):
            products = np.multiply.reduceat(values, context.groups.starts)
            return pa.array(products, type=column.type, mask=count == 0)
        products = np.multiply.reduceat(values.astype(np.int64), context.groups.starts)
        _check_range(np.multiply.reduceat(values.astype(np.float64), context.groups.starts), products,
                     data_type.root, self.field.name)
        return pa.array(products, pa.int64(), mask=count == 0).cast(column.type)


class _Extreme(Aggregator):
    """max/min over the comparable values of each key (nulls ignored)."""

    kernel: ClassVar[str] = "max"

    def check_type(self, table: str) -> None:
        if not isinstance(self.field.type, AtomicType):
            raise self.type_error(table)

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        valid = validity(column)
        rows = np.flatnonzero((context.adds & valid) | context.base_rows(valid))
        return _grouped(column, rows, context, self.kernel)


class Max(_Extreme):
    name = "max"
    kernel = "max"


class Min(_Extreme):
    name = "min"
    kernel = "min"


class BoolAnd(_Extreme):
    name = "bool_and"
    kernel = "all"

    def check_type(self, table: str) -> None:
        if not isinstance(self.field.type, AtomicType) or self.field.type.root != "BOOLEAN":
            raise self.type_error(table)


class BoolOr(BoolAnd):
    name = "bool_or"
    kernel = "any"


class Listagg(Aggregator):
    """Strings joined by ``fields.<f>.list-agg-delimiter`` (default ','); blanks are skipped."""

    name = "listagg"

    def check_type(self, table: str) -> None:
        if not isinstance(self.field.type, AtomicType) or self.field.type.root not in ("CHAR", "VARCHAR"):
            raise self.type_error(table)

    @property
    def delimiter(self) -> str:
        return self.options.field_option(self.field.name, "list-agg-delimiter") or ","

    @property
    def distinct(self) -> bool:
        return (self.options.field_option(self.field.name, "distinct") or "false").lower() == "true"

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        if self.distinct:
            return self.fold_sequentially(column, context, self._distinct_step)
        lengths = pc.fill_null(pc.utf8_length(pc.utf8_trim_whitespace(column)), 0)
        present = validity(column) & (np.asarray(lengths.to_numpy(zero_copy_only=False)) > 0)
        rows = np.flatnonzero((context.adds & present) | context.base_rows(present))
        joined = _grouped(column, rows, context, "list")
        result = pc.binary_join(joined, self.delimiter)
        # A key whose only value is a blank starting row keeps that blank value.
        return pc.if_else(pc.is_null(result), take_or_null(column, context.base), result)

    def _distinct_step(self, acc: Any, value: Any, retract: bool) -> Any:
        if value is None or not str(value).strip():
            return acc
        if acc is None or not str(acc).strip():
            return value
        existing = set(acc.split(self.delimiter))
        parts = [acc]
        for token in value.split(self.delimiter):
            if token.strip() and token not in existing:
                existing.add(token)
                parts.append(token)
        return self.delimiter.join(parts)


class Collect(Aggregator):
    """Array elements concatenated (``fields.<f>.distinct``); a retraction removes elements."""

    name = "collect"
    retractable = True

    def check_type(self, table: str) -> None:
        if not isinstance(self.field.type, ArrayType):
            raise self.type_error(table)

    @property
    def distinct(self) -> bool:
        return (self.options.field_option(self.field.name, "distinct") or "false").lower() == "true"

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        if self.distinct or self.retracts(context).any():
            return self.fold_sequentially(column, context, self._step)
        valid = validity(column)
        rows = np.flatnonzero((context.adds & valid) | context.base_rows(valid))
        taken = pc.take(column, int64_array(rows)).combine_chunks()
        lengths = np.asarray(pc.list_value_length(taken).to_numpy(zero_copy_only=False), dtype=np.int64)
        per_key = np.bincount(context.row_group[rows], weights=lengths, minlength=len(context.groups))
        has_rows = np.bincount(context.row_group[rows], minlength=len(context.groups)) > 0
        offsets = np.concatenate(([0], np.cumsum(per_key))).astype(np.int32)
        flat = pc.list_flatten(taken)
        result = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), flat, type=column.type,
                                          mask=pa.array(~has_rows))
        return result

    def _step(self, acc: Any, value: Any, retract: bool) -> Any:
        if retract:
            if acc is None or not value:
                return acc
            remaining = list(value)
            out = []
            for element in acc:
                if element in remaining:
                    remaining.remove(element)
                else:
                    out.append(element)
            return out
        if acc is None and value is None:
            return None
        if not self.distinct and (acc is None or value is None):
            return value if acc is None else acc
        out = list(acc or [])
        for element in value or []:
            if not self.distinct or element not in out:
                out.append(element)
        return out


class MergeMap(Aggregator):
    """Map union, later values winning; a retraction removes the retracted keys."""

    name = "merge_map"
    retractable = True

    def check_type(self, table: str) -> None:
        if not isinstance(self.field.type, MapType):
            raise self.type_error(table)

    def fold(self, column: pa.ChunkedArray, context: FoldContext) -> pa.Array:
        return self.fold_sequentially(column, context, self._step)

    @staticmethod
    def _step(acc: Any, value: Any, retract: bool) -> Any:
        if retract:
            if acc is None or not value:
                return acc
            gone = {k for k, _ in value}
            return [(k, v) for k, v in acc if k not in gone]
        if acc is None or value is None:
            return value if acc is None else acc
        merged = dict(acc)
        merged.update(dict(value))
        return list(merged.items())


AGGREGATORS: dict[str, type[Aggregator]] = {
    cls.name: cls for cls in (PrimaryKey, LastValue, LastNonNullValue, FirstValue, FirstNonNullValue,
                              Sum, Product, Max, Min, BoolAnd, BoolOr, Listagg, Collect, MergeMap)
}


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def _numbers(column: pa.ChunkedArray) -> np.ndarray:
    """Values with nulls as 0: floats in their own precision (as Java adds them), ints as int64."""
    filled = column.fill_null(0) if column.null_count else column
    values = np.asarray(filled.to_numpy())
    return values if pa.types.is_floating(column.type) else values.astype(np.int64)


def _check_range(estimate: np.ndarray, exact: np.ndarray, root: str, name: str) -> None:
    """Paimon's exact arithmetic: refuse results outside the column type's range."""
    limit = _INT_RANGES[root]
    bad = np.abs(estimate) >= 2.0**63 if root == "BIGINT" else (exact >= limit) | (exact < -limit)
    if bad.any():
        raise AggregationOverflowError(f"aggregating column {name!r} overflows {root}")


def _grouped(column: pa.ChunkedArray, rows: np.ndarray, context: FoldContext, kernel: str) -> pa.Array:
    """An Arrow hash aggregate of the chosen rows per key, null for keys without rows."""
    keys = context.row_group[rows]
    table = pa.table({"key": int64_array(keys), "value": pc.take(column, int64_array(rows))})
    result = table.group_by("key", use_threads=False).aggregate([("value", kernel)])
    position = np.full(len(context.groups), -1, dtype=np.int64)
    position[np.asarray(result.column("key").to_numpy(zero_copy_only=False))] = np.arange(result.num_rows)
    return take_or_null(result.column(f"value_{kernel}"), position)


def _unscaled(column: pa.ChunkedArray, scale: int) -> np.ndarray:
    array = column.combine_chunks()
    if array.null_count:
        array = array.fill_null(decimal.Decimal(0))
    words = np.frombuffer(array.buffers()[1], dtype="<i8")[2 * array.offset:2 * (array.offset + len(array))]
    return words[0::2].astype(np.int64)


def _decimal_from_unscaled(unscaled: np.ndarray, precision: int, scale: int, null: np.ndarray) -> pa.Array:
    """decimal128 values from int64 unscaled values (two's complement words, high word by sign)."""
    words = np.empty(2 * len(unscaled), dtype="<i8")
    words[0::2] = unscaled
    words[1::2] = np.where(unscaled < 0, -1, 0)
    validity = pa.array(~null).buffers()[1] if null.any() else None
    return pa.Array.from_buffers(pa.decimal128(precision, scale), len(unscaled),
                                 [validity, pa.py_buffer(words)], null_count=int(null.sum()))


def _fit_decimal(value: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal | None:
    """Paimon's ``Decimal.fromBigDecimal``: round half up to the scale, null past the precision."""
    context = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)
    fitted = value.quantize(decimal.Decimal(1).scaleb(-scale), context=context)
    return None if abs(fitted) >= decimal.Decimal(10) ** (precision - scale) else fitted


def _decimal_sum_step(precision: int, scale: int) -> Callable[[Any, Any, bool], Any]:
    def step(acc: Any, value: Any, retract: bool) -> Any:
        if value is None:
            return acc if acc is not None or not retract else None
        if acc is None:
            return -value if retract else value
        return _fit_decimal(acc - value if retract else acc + value, precision, scale)

    return step


def _product_step(data_type: AtomicType) -> Callable[[Any, Any, bool], Any]:
    """Paimon's ``FieldProductAgg``: a null on either side gives the other value (a retraction
    too); a retraction divides, as Java does: IEEE division for FLOAT and DOUBLE (0 gives an
    infinity or NaN), integer division toward zero, and a zero divisor of an integer or decimal
    is refused (Java throws)."""
    floating = data_type.root in ("FLOAT", "DOUBLE")

    def step(acc: Any, value: Any, retract: bool) -> Any:
        if acc is None or value is None:
            return value if acc is None else acc
        if not retract:
            if isinstance(acc, decimal.Decimal):
                return _fit_decimal(acc * value, data_type.precision, data_type.scale)
            return acc * value
        if floating:
            with np.errstate(divide="ignore", invalid="ignore"):
                return float(np.divide(np.float64(acc), np.float64(value)))
        if value == 0:
            raise AggregationOverflowError(f"product: retracting {value} from {acc} divides by zero")
        if isinstance(acc, decimal.Decimal):
            return _fit_decimal(acc / value, data_type.precision, data_type.scale)
        quotient = abs(acc) // abs(value)
        return quotient if (acc < 0) == (value < 0) else -quotient

    return step
