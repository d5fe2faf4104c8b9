"""Checking and casting user data to a table's schema before anything is written.

Every problem raises :class:`SchemaError` naming the table, the column and an offending value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.binary_row import arrow_scalar_to_internal
from paimon_core.errors import SchemaError
from paimon_core.schema import TableSchema
from paimon_core.types import MAX_LENGTH, STRING_ROOTS, AtomicType, DataField, to_arrow_type

Batch: TypeAlias = pa.Table | pa.RecordBatch


def iter_input(data: Any) -> Iterator[Batch]:
    """Yield Arrow tables/batches from any supported input, lazily for streams."""
    if isinstance(data, pa.Table | pa.RecordBatch):
        yield data
        return
    if isinstance(data, pa.RecordBatchReader):
        yield from data
        return
    if _is_pandas(data):
        # A named index (set_index("id")) holds a column the user means to write; an unnamed
        # one is only row numbers.
        named = any(name is not None for name in data.index.names)
        yield pa.Table.from_pandas(data, preserve_index=named)
        return
    if hasattr(data, "__arrow_c_stream__"):
        yield from pa.RecordBatchReader.from_stream(data)
        return
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        for item in data:
            yield from iter_input(item)
        return
    raise SchemaError(f"cannot write {type(data).__name__}: pass a pyarrow Table, RecordBatch, "
                      "RecordBatchReader, pandas DataFrame or an iterable of those")


def _is_pandas(data: Any) -> bool:
    module = type(data).__module__
    return module.startswith("pandas") and type(data).__name__ == "DataFrame"


def conform(data: Batch, schema: TableSchema, table: str) -> pa.Table:
    """Return ``data`` as a table with exactly the schema's columns, order and storage types.

    Key, partition and NOT NULL columns are required; other columns may be left out and are then
    written as nulls (after ``AddColumn`` a writer need not know the new columns; deletes by key
    need only the key columns).
    """
    names = data.schema.names
    expected = schema.field_names
    not_null = {f.name for f in schema.fields if not f.type.nullable}
    required = set(schema.primary_keys) | set(schema.partition_keys) | not_null
    missing = [n for n in expected if n not in names and n in required]
    extra = [n for n in names if n not in expected]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if missing or extra or duplicated:
        twice = f", duplicated {duplicated}" if duplicated else ""
        raise SchemaError(
            f"columns of the data written to table {table} do not match the table: "
            f"missing {missing}, unexpected {extra}{twice}; the table has {expected}"
            f"{_missing_hint(missing)}{_index_hint(data, extra)}")
    columns = []
    for data_field in schema.fields:
        if data_field.name in names:
            columns.append(_conform_column(data.column(names.index(data_field.name)), data_field, table))
        else:
            columns.append(pa.nulls(data.num_rows, to_arrow_type(data_field.type)))
    return pa.Table.from_arrays(columns, schema=schema.arrow_schema())


def _missing_hint(missing: list[str]) -> str:
    if not missing:
        return ""
    return (" (key, partition and NOT NULL columns must be given; nullable columns left out are written "
            "as nulls)")


def _index_hint(data: Batch, extra: list[str]) -> str:
    """Point at a pandas index that became an unexpected column."""
    metadata = data.schema.pandas_metadata or {}
    index = [name for name in metadata.get("index_columns", []) if isinstance(name, str) and name in extra]
    if not index:
        return ""
    return (f"; {index} is the DataFrame's index: name it as a table column, or call reset_index(drop=True) "
            "to leave it out")


def _conform_column(column: pa.ChunkedArray | pa.Array, data_field: DataField,
                    table: str) -> pa.ChunkedArray | pa.Array:
    target = to_arrow_type(data_field.type)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if column.type != target:
        column = _safe_cast(column, target, data_field, table)
    if not data_field.type.nullable and column.null_count:
        raise SchemaError(f"column {data_field.name!r} of table {table} is NOT NULL but "
                          f"{column.null_count} written value(s) are null")
    _check_length(column, data_field, table)
    return column


def _family(arrow_type: pa.DataType) -> str:
    t = pa.types
    checks = (("number", lambda x: t.is_integer(x) or t.is_floating(x) or t.is_decimal(x)),
              ("boolean", t.is_boolean),
              ("string", lambda x: t.is_string(x) or t.is_large_string(x) or t.is_string_view(x)),
              ("binary", lambda x: t.is_binary(x) or t.is_large_binary(x) or t.is_binary_view(x)
               or t.is_fixed_size_binary(x)),
              ("date", t.is_date), ("time", t.is_time), ("timestamp", t.is_timestamp),
              ("list", lambda x: t.is_list(x) or t.is_large_list(x) or t.is_list_view(x)),
              ("map", t.is_map), ("struct", t.is_struct), ("null", t.is_null))
    for name, check in checks:
        if check(arrow_type):
            return name
    return str(arrow_type)


def _safe_cast(column: pa.ChunkedArray | pa.Array, target: pa.DataType, data_field: DataField,
               table: str) -> pa.ChunkedArray | pa.Array:
    source_family = _family(column.type)
    if source_family not in (_family(target), "null"):
        raise SchemaError(f"column {data_field.name!r} of table {table} has type {column.type}, "
                          f"which cannot be safely cast to {target}")
    try:
        cast = pc.cast(column, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        sample = _first_uncastable(column, target)
        value = f" (first bad value: {sample!r})" if sample is not None else ""
        raise SchemaError(
            f"column {data_field.name!r} of table {table} has type {column.type}, which cannot "
            f"be safely cast to {target}{value}: {exc}") from None
    if pa.types.is_floating(column.type):
        _check_float_cast(column, cast, data_field, table)
    return cast


def _check_float_cast(column: pa.ChunkedArray | pa.Array, cast: pa.ChunkedArray | pa.Array,
                      data_field: DataField, table: str) -> None:
    """Arrow's safe cast still lets two float casts lose values silently: a finite double
    beyond FLOAT's range becomes infinity, and a float into DECIMAL is rounded to its scale
    (1.005 -> 1.00). Refuse both, as the integer casts are refused, instead of storing another
    value. (Rounding a double to the nearest FLOAT is ordinary float precision and allowed.)"""
    if pa.types.is_floating(cast.type):
        lost = pc.and_(pc.is_finite(column), pc.invert(pc.is_finite(cast)))
        problem = f"is out of the range of {cast.type}"
    elif pa.types.is_decimal(cast.type):
        lost = pc.not_equal(pc.cast(cast, pa.float64()), pc.cast(column, pa.float64()))
        problem = f"does not fit {cast.type} without rounding"
    else:
        return
    if pc.any(lost).as_py():
        value = column.filter(pc.fill_null(lost, False))[0].as_py()
        raise SchemaError(f"column {data_field.name!r} of table {table}: value {value!r} {problem}; "
                          "it is refused rather than stored as another value")


def _first_uncastable(column: pa.ChunkedArray | pa.Array, target: pa.DataType) -> Any:
    """The first value that does not cast safely (searched in halves, O(log n) casts)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    low, high = 0, len(array)
    try:
        pc.cast(array.slice(0, 0), target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None  # the types themselves are incompatible
    while high - low > 1:
        middle = (low + high) // 2
        try:
            pc.cast(array.slice(low, middle - low), target, safe=True)
            low = middle
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            high = middle
    return array[low].as_py() if len(array) else None


def _check_length(column: pa.ChunkedArray | pa.Array, data_field: DataField, table: str) -> None:
    data_type = data_field.type
    if not isinstance(data_type, AtomicType) or not data_type.params:
        return
    limit = data_type.params[0]
    if data_type.root not in ("CHAR", "VARCHAR", "BINARY", "VARBINARY") or limit >= MAX_LENGTH:
        return
    lengths = pc.utf8_length(column) if data_type.root in STRING_ROOTS else pc.binary_length(column)
    longest = pc.max(lengths).as_py()
    if longest is not None and longest > limit:
        index = pc.index(pc.greater(lengths, limit), True).as_py()
        value = column[index].as_py()
        raise SchemaError(f"column {data_field.name!r} of table {table} is {data_type} but value "
                          f"{value!r} has length {longest}")


def check_partition_values(data: pa.Table, schema: TableSchema, table: str) -> None:
    """Partition values become directory names: refuse path separators in them."""
    for name in schema.partition_keys:
        data_type = schema.field(name).type
        if not isinstance(data_type, AtomicType) or data_type.root not in STRING_ROOTS:
            continue
        distinct = pc.unique(data.column(name))
        bad = pc.match_substring_regex(distinct, r"[/\\]")
        if pc.any(bad).as_py():
            value = distinct.filter(bad)[0].as_py()
            raise SchemaError(f"partition value {value!r} of column {name!r} in table {table} "
                              "contains a path separator")


def internal_partition_spec(spec: Mapping[str, Any], schema: TableSchema, *, table: str) -> dict[str, Any]:
    """``{partition column: value}`` given by a user, as internal values (DATE days, ...)."""
    keys = list(schema.partition_keys)
    unknown = [k for k in spec if k not in keys]
    if unknown:
        raise SchemaError(f"partition spec {dict(spec)} of table {table} names {unknown}, "
                          f"which are not partition keys {keys}")
    arrow = schema.arrow_schema()
    internal = {}
    for key, value in spec.items():
        try:
            scalar = pa.scalar(value).cast(arrow.field(key).type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise SchemaError(f"value {value!r} does not fit partition column {key!r} of table {table}: "
                              f"{exc}") from None
        internal[key] = arrow_scalar_to_internal(scalar, schema.field(key).type)
    return internal
