"""Row filters: parsed from pyarrow-parquet-style DNF tuples, used for pruning and applied exactly.

``[("dt", "=", "2024-01-01"), ("id", ">", 5)]`` is a conjunction; a list of such lists is a
disjunction of conjunctions. Literals are converted once to the column's type, both as an
Arrow scalar (for the exact row filter) and in internal form (for min/max pruning).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.binary_row import arrow_scalar_to_internal
from paimon_core.errors import SchemaError
from paimon_core.schema import TableSchema
from paimon_core.types import DataType, to_arrow_type

_COMPARISONS = ("=", "==", "!=", "<", "<=", ">", ">=")
_SETS = ("in", "not in")
_NULL_TESTS = ("is null", "is not null")


@dataclass(frozen=True, slots=True)
class ColumnRange:
    """What is known about a column within a file, manifest or partition (internal values)."""

    min: Any = None
    max: Any = None
    null_count: int | None = None
    row_count: int | None = None

    @property
    def all_null(self) -> bool:
        return self.null_count is not None and self.row_count is not None and (
            self.null_count >= self.row_count)


RangeLookup = Callable[[str], ColumnRange | None]


@dataclass(frozen=True, slots=True)
class Leaf:
    column: str
    op: str
    scalars: tuple[pa.Scalar, ...]
    internal: tuple[Any, ...]

    def columns(self) -> set[str]:
        return {self.column}

    def to_expression(self) -> pc.Expression:
        column = pc.field(self.column)
        op = self.op
        if op == "is null":
            return column.is_null()
        if op == "is not null":
            return column.is_valid()
        if op in _SETS:
            values = pa.array([s.as_py() for s in self.scalars], type=self.scalars[0].type) \
                if self.scalars else pa.array([], type=pa.null())
            expression = column.isin(values)
            # SQL semantics: NULL is neither IN nor NOT IN a list.
            return (~expression & column.is_valid()) if op == "not in" else expression
        literal = self.scalars[0]
        return {"=": column == literal, "==": column == literal, "!=": column != literal,
                "<": column < literal, "<=": column <= literal, ">": column > literal,
                ">=": column >= literal}[op]

    def may_match(self, lookup: RangeLookup) -> bool:
        """False only when the range proves no row can satisfy this condition."""
        known = lookup(self.column)
        if known is None:
            return True
        op = self.op
        if op == "is null":
            return known.null_count is None or known.null_count > 0
        if op == "is not null":
            return not known.all_null
        if known.all_null:
            return False
        low, high = known.min, known.max
        if low is None or high is None:
            return True
        try:
            return _range_may_match(op, low, high, self.internal)
        except TypeError:
            return True


def _range_may_match(op: str, low: Any, high: Any, values: tuple[Any, ...]) -> bool:
    if op in ("=", "=="):
        return bool(low <= values[0] <= high)
    if op == "!=":
        return not (low == high == values[0])
    if op == "<":
        return bool(low < values[0])
    if op == "<=":
        return bool(low <= values[0])
    if op == ">":
        return bool(high > values[0])
    if op == ">=":
        return bool(high >= values[0])
    if op == "in":
        return any(v is not None and low <= v <= high for v in values)
    return not (low == high and low in values)  # not in


@dataclass(frozen=True, slots=True)
class Junction:
    """A conjunction (``all_of=True``) or disjunction of predicates."""

    all_of: bool
    children: tuple[Predicate, ...]

    def columns(self) -> set[str]:
        return set().union(*(c.columns() for c in self.children))

    def to_expression(self) -> pc.Expression:
        expression = self.children[0].to_expression()
        for child in self.children[1:]:
            expression = (expression & child.to_expression()) if self.all_of else (
                expression | child.to_expression())
        return expression

    def may_match(self, lookup: RangeLookup) -> bool:
        matches = (c.may_match(lookup) for c in self.children)
        return all(matches) if self.all_of else any(matches)


Predicate = Leaf | Junction


def residual(predicate: Predicate, decide: Callable[[Leaf], bool | None]) -> Predicate | bool:
    """What is left of ``predicate`` once ``decide`` has settled some of its conditions: True
    or False when those settle it, else the predicate over the undecided conditions only.

    ``decide`` returns a condition's exact outcome (True, or False for false and null alike), or
    None to leave it to the rows. Treating null as False is exact here: conditions combine only
    by Kleene AND/OR, and a row filter drops a null outcome as it drops False.
    """
    if isinstance(predicate, Leaf):
        outcome = decide(predicate)
        return predicate if outcome is None else outcome
    settles = not predicate.all_of  # the outcome that settles the junction: False for AND, True for OR
    rest = []
    for child in predicate.children:
        left = residual(child, decide)
        if left is settles:
            return settles
        if not isinstance(left, bool):
            rest.append(left)
    if not rest:
        return predicate.all_of
    return rest[0] if len(rest) == 1 else Junction(predicate.all_of, tuple(rest))


def parse_filter(filters: Any, schema: TableSchema, table: str) -> Predicate | None:
    """Parse DNF filters (a list of tuples, or a list of lists of tuples) against ``schema``."""
    if filters is None or (isinstance(filters, Sequence) and len(filters) == 0):
        return None
    if not isinstance(filters, Sequence) or isinstance(filters, str):
        raise SchemaError(f"filter for table {table} must be a list of (column, op, value) "
                          f"tuples or a list of such lists, got {filters!r}")
    if all(isinstance(f, tuple) for f in filters):
        return _conjunction(filters, schema, table)
    if all(isinstance(f, list) for f in filters):
        return Junction(False, tuple(_conjunction(group, schema, table) for group in filters))
    raise SchemaError(f"filter for table {table} mixes tuples and lists: {filters!r}")


def _conjunction(terms: Sequence[Any], schema: TableSchema, table: str) -> Predicate:
    if not terms:
        raise SchemaError(f"empty conjunction in filter for table {table}")
    leaves = tuple(_leaf(term, schema, table) for term in terms)
    return leaves[0] if len(leaves) == 1 else Junction(True, leaves)


def _leaf(term: Any, schema: TableSchema, table: str) -> Leaf:
    if not isinstance(term, tuple) or len(term) not in (2, 3):
        raise SchemaError(f"filter term {term!r} for table {table} must be (column, op, value)")
    column, op = term[0], str(term[1]).lower()
    value = term[2] if len(term) == 3 else None
    if column not in schema.field_names:
        raise SchemaError(f"filter column {column!r} is not a column of table {table}; "
                          f"columns are {schema.field_names}")
    data_type = schema.field(column).type
    if op in _NULL_TESTS:
        return Leaf(column, op, (), ())
    if op in _SETS:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence | set | frozenset):
            raise SchemaError(f"filter {term!r} for table {table}: '{op}' needs a list of values")
        scalars = tuple(_literal(v, data_type, column, table) for v in value)
    elif op in _COMPARISONS:
        scalars = (_literal(value, data_type, column, table),)
    else:
        raise SchemaError(f"unknown filter operator {term[1]!r} for table {table}; use one of "
                          f"{', '.join(_COMPARISONS + _SETS + _NULL_TESTS)}")
    return Leaf(column, op, scalars, tuple(arrow_scalar_to_internal(s, data_type) for s in scalars))


def _literal(value: Any, data_type: DataType, column: str, table: str) -> pa.Scalar:
    target = to_arrow_type(data_type)
    if value is None:
        raise SchemaError(f"filter on column {column!r} of table {table} compares with None; "
                          "use 'is null' instead")
    try:
        scalar = _exact_scalar(value)
        return scalar.cast(target, safe=True) if scalar.type != target else scalar
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, ValueError,
            TypeError) as exc:
        raise SchemaError(f"filter value {value!r} does not fit column {column!r} "
                          f"({to_arrow_type(data_type)}) of table {table}: {exc}") from None


def _exact_scalar(value: Any) -> pa.Scalar:
    """The literal as an Arrow scalar at its full precision: pyarrow infers a pandas Timestamp
    (what reads of TIMESTAMP(7..9) columns return) as microseconds, dropping its nanoseconds.

    pandas is looked up, not imported: a value can only be a pandas Timestamp once pandas is loaded,
    and importing it would double the start-up time of every process that imports paimon_core."""
    if isinstance(value, pa.Scalar):
        return value
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.Timestamp) and value is not pd.NaT:
        if value.tzinfo is None:
            return pa.scalar(value.as_unit("ns").to_datetime64())
        naive = value.tz_convert("UTC").tz_localize(None).as_unit("ns").to_datetime64()
        return pa.scalar(naive).cast(pa.timestamp("ns", tz="UTC"))
    return pa.scalar(value)
