"""Paimon data types: the schema-JSON spelling, and the mapping to and from Arrow.

Atomic types serialize as SQL strings exactly as Java Paimon writes them (``DECIMAL(10, 2)``,
``TIMESTAMP(6) WITH LOCAL TIME ZONE``, ``STRING``, suffix `` NOT NULL``); nested types are JSON
objects (``{"type": "ARRAY", "element": ...}``) whose ROW fields carry their own field ids.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from paimon_core.errors import SchemaError, UnsupportedFeatureError

MAX_LENGTH = 2**31 - 1

# Atomic type roots, named as in Java's DataTypeRoot-ish SQL keywords.
INTEGER_ROOTS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
STRING_ROOTS = ("CHAR", "VARCHAR")
BINARY_ROOTS = ("BINARY", "VARBINARY")
_DEFAULT_PARAMS: dict[str, tuple[int, ...]] = {
    "CHAR": (1,), "VARCHAR": (1,), "BINARY": (1,), "VARBINARY": (1,),
    "DECIMAL": (10, 0), "TIME": (0,), "TIMESTAMP": (6,), "TIMESTAMP_LTZ": (6,),
}
_ALIASES = {"INTEGER": "INT", "NUMERIC": "DECIMAL", "DEC": "DECIMAL"}
_UNSUPPORTED = ("VARIANT", "BLOB", "GEOMETRY", "GEOGRAPHY", "VECTOR", "MULTISET")
_ATOMIC = re.compile(
    r"^\s*(?P<root>[A-Z_]+(?:\s+PRECISION)?)\s*(?:\((?P<params>[\d\s,]+)\))?"
    r"(?P<tz>\s+WITH(?:OUT)?\s+(?:LOCAL\s+)?TIME\s+ZONE)?\s*(?P<nn>NOT\s+NULL|NULL)?\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class AtomicType:
    """A non-nested type: ``root`` is e.g. ``BIGINT``, ``DECIMAL`` or ``TIMESTAMP_LTZ``."""

    root: str
    params: tuple[int, ...] = ()
    nullable: bool = True

    def __str__(self) -> str:
        return type_to_string(self)

    @property
    def precision(self) -> int:
        """Precision of DECIMAL/TIME/TIMESTAMP types (first parameter)."""
        return self.params[0]

    @property
    def scale(self) -> int:
        return self.params[1]


@dataclass(frozen=True, slots=True)
class ArrayType:
    element: DataType
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class MapType:
    key: DataType
    value: DataType
    nullable: bool = True


@dataclass(frozen=True, slots=True)
class DataField:
    """A named, id-carrying column (top level or inside a ROW)."""

    id: int
    name: str
    type: DataType
    description: str | None = None
    default_value: str | None = None


@dataclass(frozen=True, slots=True)
class RowType:
    fields: tuple[DataField, ...]
    nullable: bool = True


DataType = AtomicType | ArrayType | MapType | RowType


def atomic(root: str, *params: int, nullable: bool = True) -> AtomicType:
    """Build an atomic type, filling Paimon's default parameters."""
    root = _ALIASES.get(root.upper(), root.upper())
    return AtomicType(root, tuple(params) or _DEFAULT_PARAMS.get(root, ()), nullable)


def with_nullable(data_type: DataType, nullable: bool) -> DataType:
    return replace(data_type, nullable=nullable)


# --------------------------------------------------------------------------------------------
# JSON / SQL string form
# --------------------------------------------------------------------------------------------


def type_to_string(data_type: AtomicType) -> str:
    """SQL spelling of an atomic type exactly as Java Paimon serializes it."""
    root, params = data_type.root, data_type.params
    if root == "VARCHAR" and params[0] == MAX_LENGTH:
        text = "STRING"
    elif root == "VARBINARY" and params[0] == MAX_LENGTH:
        text = "BYTES"
    elif root == "DECIMAL":
        text = f"DECIMAL({params[0]}, {params[1]})"
    elif root == "TIMESTAMP_LTZ":
        text = f"TIMESTAMP({params[0]}) WITH LOCAL TIME ZONE"
    elif params:
        text = f"{root}({', '.join(map(str, params))})"
    else:
        text = root
    return text if data_type.nullable else f"{text} NOT NULL"


def parse_type_string(text: str) -> AtomicType:
    """Parse an atomic SQL type string such as ``DECIMAL(10, 2) NOT NULL``."""
    match = _ATOMIC.match(text)
    if match is None:
        raise SchemaError(f"cannot parse data type {text!r}")
    root = re.sub(r"\s+", " ", match.group("root").upper())
    root = {"DOUBLE PRECISION": "DOUBLE", "STRING": "VARCHAR", "BYTES": "VARBINARY"}.get(root, root)
    root = _ALIASES.get(root, root)
    if root in _UNSUPPORTED:
        raise UnsupportedFeatureError(f"data type {text!r} is not supported")
    params = tuple(int(p) for p in match.group("params").split(",")) if match.group("params") else ()
    upper = match.group(0).upper()
    if re.match(r"^\s*(STRING|BYTES)\b", upper):
        params = (MAX_LENGTH,)
    tz = (match.group("tz") or "").upper()
    if "LOCAL" in tz:
        if root != "TIMESTAMP":
            raise SchemaError(f"cannot parse data type {text!r}")
        root = "TIMESTAMP_LTZ"
    known = set(_DEFAULT_PARAMS) | {"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT",
                                    "DOUBLE", "DATE"}
    if root not in known:
        raise SchemaError(f"unknown data type {text!r}")
    nullable = not (match.group("nn") or "").upper().startswith("NOT")
    return AtomicType(root, params or _DEFAULT_PARAMS.get(root, ()), nullable)


def type_to_json(data_type: DataType) -> Any:
    """The schema-JSON value of a type: a string for atomic types, an object for nested ones."""
    suffix = "" if data_type.nullable else " NOT NULL"
    if isinstance(data_type, AtomicType):
        return type_to_string(data_type)
    if isinstance(data_type, ArrayType):
        return {"type": "ARRAY" + suffix, "element": type_to_json(data_type.element)}
    if isinstance(data_type, MapType):
        return {"type": "MAP" + suffix, "key": type_to_json(data_type.key),
                "value": type_to_json(data_type.value)}
    return {"type": "ROW" + suffix, "fields": [field_to_json(f) for f in data_type.fields]}


def type_from_json(value: Any) -> DataType:
    if isinstance(value, str):
        return parse_type_string(value)
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise SchemaError(f"cannot parse data type {value!r}")
    kind: str = value["type"].upper()
    nullable = "NOT NULL" not in kind
    if kind.startswith("ARRAY"):
        return ArrayType(type_from_json(value["element"]), nullable)
    if kind.startswith("MAP"):
        return MapType(type_from_json(value["key"]), type_from_json(value["value"]), nullable)
    if kind.startswith("ROW"):
        return RowType(tuple(field_from_json(f) for f in value["fields"]), nullable)
    raise UnsupportedFeatureError(f"data type {value!r} is not supported")


def field_to_json(data_field: DataField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": data_field.id, "name": data_field.name,
                           "type": type_to_json(data_field.type)}
    if data_field.description is not None:
        out["description"] = data_field.description
    if data_field.default_value is not None:
        out["defaultValue"] = data_field.default_value
    return out


def field_from_json(value: dict[str, Any]) -> DataField:
    try:
        return DataField(int(value["id"]), str(value["name"]), type_from_json(value["type"]),
                         value.get("description"), value.get("defaultValue"))
    except KeyError as exc:
        raise SchemaError(f"schema field {value!r} lacks {exc}") from None


def nested_fields(data_type: DataType) -> Iterator[DataField]:
    """Every DataField nested inside ``data_type`` (ROW fields at any depth)."""
    if isinstance(data_type, ArrayType):
        yield from nested_fields(data_type.element)
    elif isinstance(data_type, MapType):
        yield from nested_fields(data_type.key)
        yield from nested_fields(data_type.value)
    elif isinstance(data_type, RowType):
        for f in data_type.fields:
            yield f
            yield from nested_fields(f.type)


# --------------------------------------------------------------------------------------------
# Arrow mapping
# --------------------------------------------------------------------------------------------

_INT_ARROW = {"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(), "BIGINT": pa.int64()}
_SIMPLE_ARROW = {**_INT_ARROW, "BOOLEAN": pa.bool_(), "FLOAT": pa.float32(),
                 "DOUBLE": pa.float64(), "DATE": pa.date32(), "TIME": pa.time32("ms")}


def _timestamp_unit(precision: int) -> str:
    if precision == 0:
        return "s"
    if precision <= 3:
        return "ms"
    return "us" if precision <= 6 else "ns"


def to_arrow_type(data_type: DataType) -> pa.DataType:
    """The Arrow type we store and return for a Paimon type."""
    if isinstance(data_type, AtomicType):
        root = data_type.root
        if root in _SIMPLE_ARROW:
            return _SIMPLE_ARROW[root]
        if root in STRING_ROOTS:
            return pa.string()
        if root in BINARY_ROOTS:
            return pa.binary()
        if root == "DECIMAL":
            return pa.decimal128(data_type.precision, data_type.scale)
        if root == "TIMESTAMP":
            return pa.timestamp(_timestamp_unit(data_type.precision))
        if root == "TIMESTAMP_LTZ":
            return pa.timestamp(_timestamp_unit(data_type.precision), tz="UTC")
        raise UnsupportedFeatureError(f"data type {data_type} has no Arrow mapping")
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("element", to_arrow_type(data_type.element),
                                 data_type.element.nullable))
    if isinstance(data_type, MapType):
        return pa.map_(pa.field("key", to_arrow_type(data_type.key), False),
                       pa.field("value", to_arrow_type(data_type.value), data_type.value.nullable))
    return pa.struct([to_arrow_field(f) for f in data_type.fields])


def to_arrow_field(data_field: DataField, *, with_id: bool = False) -> pa.Field:
    metadata = {b"PARQUET:field_id": str(data_field.id).encode()} if with_id else None
    return pa.field(data_field.name, to_arrow_type(data_field.type), data_field.type.nullable,
                    metadata=metadata)


def arrow_schema(fields: tuple[DataField, ...] | list[DataField], *, with_ids: bool = False) -> pa.Schema:
    """Arrow schema of a list of fields; ``with_ids`` adds Parquet field ids as Java writes."""
    return pa.schema([to_arrow_field(f, with_id=with_ids) for f in fields])


def from_arrow_type(arrow_type: pa.DataType, nullable: bool, next_id: list[int]) -> DataType:
    """Map an Arrow type to Paimon; ``next_id`` is a one-element counter for ROW field ids."""
    t = arrow_type
    if pa.types.is_dictionary(t):
        return from_arrow_type(t.value_type, nullable, next_id)
    simple = _from_arrow_simple(t)
    if simple is not None:
        return replace(simple, nullable=nullable)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return ArrayType(from_arrow_type(t.value_type, t.value_field.nullable, next_id), nullable)
    if pa.types.is_map(t):
        return MapType(from_arrow_type(t.key_type, False, next_id),
                       from_arrow_type(t.item_type, t.item_field.nullable, next_id), nullable)
    if pa.types.is_struct(t):
        fields = []
        for i in range(t.num_fields):
            child = t.field(i)
            field_id = next_id[0]
            next_id[0] += 1
            fields.append(DataField(field_id, child.name,
                                    from_arrow_type(child.type, child.nullable, next_id)))
        return RowType(tuple(fields), nullable)
    raise SchemaError(f"Arrow type {t} has no Paimon equivalent")


def _from_arrow_simple(t: pa.DataType) -> AtomicType | None:
    for root, arrow in _INT_ARROW.items():
        if t == arrow:
            return atomic(root)
    unsigned = {pa.uint8(): "SMALLINT", pa.uint16(): "INT", pa.uint32(): "BIGINT"}
    if t in unsigned:
        return atomic(unsigned[t])
    if pa.types.is_boolean(t):
        return atomic("BOOLEAN")
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return atomic("FLOAT")
    if pa.types.is_float64(t):
        return atomic("DOUBLE")
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return atomic("VARCHAR", MAX_LENGTH)
    if pa.types.is_fixed_size_binary(t):
        return atomic("BINARY", t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return atomic("VARBINARY", MAX_LENGTH)
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"DECIMAL precision {t.precision} exceeds Paimon's maximum 38")
        return atomic("DECIMAL", t.precision, t.scale)
    if pa.types.is_date(t):
        return atomic("DATE")
    if pa.types.is_time(t):
        return atomic("TIME", {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit])
    if pa.types.is_timestamp(t):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
        return atomic("TIMESTAMP_LTZ" if t.tz else "TIMESTAMP", precision)
    return None


def can_widen(old: DataType, new: DataType) -> bool:
    """Whether values of ``old`` can always be read as ``new`` without loss."""
    if not isinstance(old, AtomicType) or not isinstance(new, AtomicType):
        return old == new
    if old.root == new.root and old.params == new.params:
        return True
    ints = list(INTEGER_ROOTS)
    if old.root in ints and new.root in ints:
        return ints.index(new.root) >= ints.index(old.root)
    if old.root in ("TINYINT", "SMALLINT", "INT") and new.root == "DOUBLE":
        return True
    if old.root in ("TINYINT", "SMALLINT") and new.root == "FLOAT":
        return True
    if old.root == "FLOAT" and new.root == "DOUBLE":
        return True
    if old.root == "DECIMAL" and new.root == "DECIMAL":
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    if old.root in INTEGER_ROOTS and new.root == "DECIMAL":
        digits = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}[old.root]
        return new.precision - new.scale >= digits
    if old.root in STRING_ROOTS and new.root == "VARCHAR":
        return new.params[0] >= old.params[0]
    if old.root in BINARY_ROOTS and new.root == "VARBINARY":
        return new.params[0] >= old.params[0]
    if old.root == "TIMESTAMP" and new.root == "TIMESTAMP":
        return new.precision >= old.precision
    if old.root == "TIMESTAMP_LTZ" and new.root == "TIMESTAMP_LTZ":
        return new.precision >= old.precision
    return False
