"""Table schemas (``schema/schema-N`` JSON), their validation and pure schema evolution.

A schema version is immutable; an ALTER writes ``schema-(N+1)``. Columns are identified across
versions by field id, which is how files written under older schemas are read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa

from paimon_core.errors import CorruptMetadataError, OptionError, SchemaError, UnsupportedFeatureError
from paimon_core.names import validate_identifier
from paimon_core.options import TableOptions, check_option_keys, codec_problem
from paimon_core.type_names import PAIMON_TYPE_KEY, check_type_parameters
from paimon_core.types import (
    ArrayType,
    AtomicType,
    DataField,
    DataType,
    MapType,
    RowType,
    arrow_schema,
    can_widen,
    field_from_json,
    field_to_json,
    from_arrow_type,
    to_arrow_type,
    type_from_json,
    type_to_json,
    with_nullable,
)

SCHEMA_VERSION = 3


@dataclass(frozen=True, slots=True)
class TableSchema:
    """One version of a table's schema, as stored in ``schema/schema-<id>``."""

    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict)
    comment: str | None = None
    time_millis: int = 0
    version: int = SCHEMA_VERSION

    # ---- lookups -----------------------------------------------------------------------

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaError(f"no column {name!r}; columns are {self.field_names}")

    def field_by_id(self) -> dict[int, DataField]:
        return {f.id: f for f in self.fields}

    @property
    def partition_fields(self) -> list[DataField]:
        return [self.field(k) for k in self.partition_keys]

    @property
    def partition_types(self) -> list[DataType]:
        return [f.type for f in self.partition_fields]

    @property
    def trimmed_primary_keys(self) -> list[str]:
        """Primary key without the partition columns (the key stored in data files)."""
        return [k for k in self.primary_keys if k not in self.partition_keys]

    def bucket_keys(self, options: TableOptions | None = None) -> list[str]:
        """``bucket-key`` if set, else the trimmed primary key (empty for append tables)."""
        opts = options or self.table_options()
        return list(opts.bucket_key) if opts.bucket_key else self.trimmed_primary_keys

    def table_options(self) -> TableOptions:
        return TableOptions.from_map(self.effective_options())

    def effective_options(self) -> dict[str, str]:
        """Options with the defaults old schema versions imply (bucket, file.format)."""
        options = dict(self.options)
        if self.version <= 1 and "bucket" not in options:
            options["bucket"] = "1"
        if self.version <= 2 and "file.format" not in options:
            options["file.format"] = "orc"
        return options

    def arrow_schema(self) -> pa.Schema:
        return arrow_schema(self.fields)

    # ---- JSON --------------------------------------------------------------------------

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [field_to_json(f) for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
            "comment": self.comment,
            "timeMillis": self.time_millis,
        }
        if self.comment is None:  # Java writes no key (it reads a JSON null as the text "null")
            del doc["comment"]
        return json.dumps(doc, indent=2, ensure_ascii=False)

    @staticmethod
    def from_json(text: str | bytes, *, source: str = "schema") -> TableSchema:
        try:
            doc = json.loads(text)
            return TableSchema(
                id=int(doc["id"]),
                fields=tuple(field_from_json(f) for f in doc["fields"]),
                highest_field_id=int(doc["highestFieldId"]),
                partition_keys=tuple(doc.get("partitionKeys") or ()),
                primary_keys=tuple(doc.get("primaryKeys") or ()),
                options={str(k): str(v) for k, v in (doc.get("options") or {}).items()},
                comment=doc.get("comment"),
                time_millis=int(doc.get("timeMillis") or 0),
                version=int(doc.get("version", 1)),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadataError(f"cannot parse {source}: {exc}") from exc


def create_schema(arrow: pa.Schema, *, partition_keys: Sequence[str] = (),
                  primary_keys: Sequence[str] = (), options: Mapping[str, str] | None = None,
                  comment: str | None = None, table: str = "") -> TableSchema:
    """Build and validate schema 0 of a new table from an Arrow schema.

    A field whose metadata carries ``b"paimon.type"`` (made by
    :func:`paimon_core.type_names.arrow_field_for`) gets exactly that Paimon type, e.g.
    ``VARCHAR(20)`` where a plain ``pa.string()`` field becomes ``STRING``.

    Raises:
        SchemaError: unknown or duplicate columns, bad keys, unsupported types, a ``paimon.type``
            that cannot be read or does not match the field's Arrow type.
        OptionError: a bad option value, or options that contradict the schema.
    """
    check_option_keys(options or {}, table=table)
    next_id = [0]
    fields: list[DataField] = []
    for arrow_field in arrow:
        validate_identifier(arrow_field.name, "column", table=table)
        field_id = next_id[0]
        next_id[0] += 1
        declared = (arrow_field.metadata or {}).get(PAIMON_TYPE_KEY)
        if declared is None:
            data_type = from_arrow_type(arrow_field.type, arrow_field.nullable, next_id)
        else:
            data_type = _renumber(_declared_type(arrow_field, declared, table), next_id)
        if arrow_field.name in primary_keys:
            data_type = with_nullable(data_type, False)
        description = (arrow_field.metadata or {}).get(b"description")
        fields.append(DataField(field_id, arrow_field.name, data_type,
                                description.decode() if description else None))
    schema = TableSchema(
        id=0, fields=tuple(fields), highest_field_id=next_id[0] - 1,
        partition_keys=tuple(partition_keys), primary_keys=tuple(primary_keys),
        options={str(k): str(v) for k, v in (options or {}).items()}, comment=comment,
        time_millis=int(time.time() * 1000))
    validate_schema(schema, table=table)
    return schema


def _declared_type(arrow_field: pa.Field, declared: bytes, table: str) -> DataType:
    """The Paimon type an Arrow field declares in its ``paimon.type`` metadata (see
    :func:`paimon_core.type_names.arrow_field_for`), checked against the field's Arrow type."""
    where = f"column {arrow_field.name!r}" + (f" of table {table}" if table else "")
    try:
        data_type = type_from_json(json.loads(declared))
        check_type_parameters(data_type)
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"{where}: {exc}") from exc
    except (ValueError, KeyError, TypeError) as exc:  # SchemaError and JSONDecodeError are ValueErrors
        raise SchemaError(f"{where} declares Paimon type {declared.decode(errors='replace')!r}, which "
                          f"cannot be read: {exc}") from exc
    expected = to_arrow_type(data_type)
    if expected != arrow_field.type or data_type.nullable != arrow_field.nullable:
        raise SchemaError(f"{where} declares Paimon type {json.dumps(type_to_json(data_type))}, stored as "
                          f"Arrow {_spell(expected, data_type.nullable)}, but the Arrow field is "
                          f"{_spell(arrow_field.type, arrow_field.nullable)}")
    return data_type


def _spell(arrow_type: pa.DataType, nullable: bool) -> str:
    return f"{arrow_type}{'' if nullable else ' not null'}"


def _renumber(data_type: DataType, next_id: list[int]) -> DataType:
    """``data_type`` with its ROW field ids taken from the running counter, in the order
    :func:`~paimon_core.types.from_arrow_type` assigns them (depth first, a field before its
    children, map keys before values)."""
    if isinstance(data_type, ArrayType):
        return replace(data_type, element=_renumber(data_type.element, next_id))
    if isinstance(data_type, MapType):
        key = _renumber(data_type.key, next_id)
        return replace(data_type, key=key, value=_renumber(data_type.value, next_id))
    if isinstance(data_type, RowType):
        fields = []
        for data_field in data_type.fields:
            field_id = next_id[0]
            next_id[0] += 1
            fields.append(replace(data_field, id=field_id, type=_renumber(data_field.type, next_id)))
        return replace(data_type, fields=tuple(fields))
    return data_type


def validate_schema(schema: TableSchema, *, table: str = "") -> None:
    """Check column names, keys and options against each other."""
    names = schema.field_names
    where = f" in table {table}" if table else ""
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SchemaError(f"duplicate columns {duplicates}{where}")
    if not names:
        raise SchemaError(f"a table needs at least one column{where}")
    for kind, keys in (("partition key", schema.partition_keys), ("primary key", schema.primary_keys)):
        for key in keys:
            if key not in names:
                raise SchemaError(f"{kind} {key!r} is not a column{where}; columns are {names}")
        if len(set(keys)) != len(keys):
            raise SchemaError(f"duplicate {kind}s {list(keys)}{where}")
    for key in schema.partition_keys:
        if not isinstance(schema.field(key).type, AtomicType):
            raise SchemaError(f"partition key {key!r}{where} must have an atomic type, "
                              f"not {type_to_json(schema.field(key).type)}")
    if schema.primary_keys and not set(schema.partition_keys) <= set(schema.primary_keys):
        raise SchemaError(f"primary key {list(schema.primary_keys)}{where} must include the partition keys "
                          f"{list(schema.partition_keys)}")
    if schema.primary_keys and set(schema.primary_keys) == set(schema.partition_keys):
        raise SchemaError(f"primary key {list(schema.primary_keys)}{where} must not be just the "
                          "partition keys")
    for key in schema.primary_keys:
        if not isinstance(schema.field(key).type, AtomicType):
            raise SchemaError(f"primary key {key!r}{where} must have an atomic type, "
                              f"not {type_to_json(schema.field(key).type)}")
    _validate_column_names(names, where)
    options = TableOptions.from_map(schema.effective_options(), table=table)
    problem = codec_problem(options.file_format, options.file_compression)
    if problem is not None:
        raise OptionError(f"{problem}{where}")
    _validate_bucket_options(schema, options, where)
    _validate_field_options(schema, where)
    _validate_merge_options(schema, options, where)
    _validate_retention(options, where)


# Columns Paimon reserves for its own use in data files and system tables (SpecialFields).
_SYSTEM_COLUMNS = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "rowkind", "_ROW_ID"})


def _validate_column_names(names: Sequence[str], where: str) -> None:
    """Paimon's SchemaValidation: system column names and the ``_KEY_`` prefix are reserved
    (a data file of a primary-key table would hold two columns of that name)."""
    for name in names:
        if name in _SYSTEM_COLUMNS or name.startswith("_KEY_"):
            raise SchemaError(f"column name {name!r}{where} is reserved by Paimon "
                              f"({', '.join(sorted(_SYSTEM_COLUMNS))} and the '_KEY_' prefix)")


def _validate_field_options(schema: TableSchema, where: str) -> None:
    """Every ``fields.<column>[,<column>].<suffix>`` option names existing columns, as Paimon
    checks: an option left behind by a typo or a dropped column would silently do nothing."""
    names = schema.field_names
    for key in schema.options:
        if not key.startswith("fields.") or key.startswith("fields.default-aggregate-function"):
            continue
        body = key[len("fields."):]
        if any(body.startswith(f"{name}.") for name in names):
            continue
        unknown = [n for n in (part.strip() for part in body.split(".", 1)[0].split(",")) if n not in names]
        if unknown:
            raise OptionError(f"option {key!r}{where} names column {unknown[0]!r}, which is not a column; "
                              f"columns are {names}")


def _validate_merge_options(schema: TableSchema, options: TableOptions, where: str) -> None:
    """Option combinations Paimon's SchemaValidation (and merge-function factories) refuse: a
    table Java would not open must not be created here either."""
    names = schema.field_names
    engine = options.merge_engine
    producer = options.changelog_producer
    if not schema.primary_keys and producer != "none":
        raise OptionError(f"changelog-producer = {producer!r}{where} needs a primary key: "
                          "a table without one has no changelog producer")
    for key in options.sequence_field:
        if key not in names:
            raise OptionError(f"sequence.field column {key!r}{where} is not a column; columns are {names}")
        if options.field_option(key, "aggregate-function") is not None:
            raise OptionError(f"sequence.field column {key!r}{where} must not have an aggregate function")
    repeated = sorted({k for k in options.sequence_field if options.sequence_field.count(k) > 1})
    if repeated:
        raise OptionError(f"sequence.field column {repeated[0]!r}{where} is listed more than once")
    if options.sequence_field and engine == "first-row":
        raise OptionError(f"sequence.field{where} cannot be used with merge-engine first-row")
    if schema.primary_keys and engine == "first-row" and producer not in ("none", "lookup"):
        raise OptionError(f"merge-engine first-row{where} supports changelog-producer 'none' and 'lookup' "
                          f"only, not {producer!r}")
    if options.deletion_vectors_enabled and producer == "full-compaction":
        raise OptionError(f"deletion-vectors.enabled{where} supports changelog-producer none, input and "
                          "lookup, not 'full-compaction'")
    if options.full_compaction_delta_commits is not None and producer == "lookup":
        raise OptionError(f"full-compaction.delta-commits{where} is incompatible with changelog-producer "
                          "'lookup'; use changelog-producer 'full-compaction' for periodic full compactions "
                          "with changelog, or remove full-compaction.delta-commits")
    if options.rowkind_field and options.rowkind_field not in names:  # blank: unset
        raise OptionError(f"rowkind.field column {options.rowkind_field!r}{where} is not a column; "
                          f"columns are {names}")
    if options.deletion_vectors_enabled and engine == "first-row" and schema.primary_keys:
        raise OptionError(f"deletion-vectors.enabled{where} cannot be used with merge-engine first-row, "
                          "which never deletes old rows")
    if options.full_compaction_delta_commits is not None and not schema.primary_keys and options.bucket == -1:
        raise OptionError(f"full-compaction.delta-commits{where} needs a fixed bucket number on a table "
                          "without primary key")
    if (schema.primary_keys and engine == "partial-update" and options.ignore_delete
            and options.partial_update_remove_record_on_delete):
        raise OptionError(f"ignore-delete and partial-update.remove-record-on-delete{where} contradict "
                          "each other; set only one")


def _validate_retention(options: TableOptions, where: str) -> None:
    """Retention minimums above their maximums, which Paimon refuses at create and alter."""
    pairs = (("snapshot", options.snapshot_num_retained_min, options.snapshot_num_retained_max),
             ("changelog",
              options.changelog_num_retained_min or options.snapshot_num_retained_min,
              options.changelog_num_retained_max or options.snapshot_num_retained_max))
    for kind, low, high in pairs:
        if low > high:
            raise OptionError(f"{kind}.num-retained.min = {low}{where} is larger than "
                              f"{kind}.num-retained.max = {high}")


def _validate_bucket_options(schema: TableSchema, options: TableOptions, where: str) -> None:
    names = schema.field_names
    if options.bucket == -1 and "bucket-key" in schema.options:
        raise OptionError(f"bucket-key{where} needs a bucket number: with bucket = -1 rows are not "
                          "hashed; remove 'bucket-key' or set 'bucket'")
    for key in options.bucket_key:
        if key not in names:
            raise OptionError(f"bucket-key column {key!r}{where} is not a column; columns are {names}")
        if key in schema.partition_keys:
            raise OptionError(f"bucket-key column {key!r}{where} must not be a partition key")
        if not isinstance(schema.field(key).type, AtomicType):
            raise OptionError(f"bucket-key column {key!r}{where} must have an atomic type")
    if options.bucket > 0 and not schema.primary_keys and not options.bucket_key:
        raise OptionError(f"append table{where} with bucket = {options.bucket} needs a "
                          "'bucket-key' option naming the columns to hash")
    if options.bucket == -2:
        raise OptionError(f"bucket = -2 (postpone){where} is not supported")
    if schema.primary_keys and options.bucket_key:
        outside = [k for k in options.bucket_key if k not in schema.primary_keys]
        if outside:
            raise OptionError(f"bucket-key columns {outside}{where} must be part of the primary key")


# ------------------------------------------------------------------------------------------
# schema evolution (pure)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AddColumn:
    """Add a nullable column at the end (or after ``after``)."""

    name: str
    arrow_type: pa.DataType
    comment: str | None = None
    after: str | None = None


@dataclass(frozen=True, slots=True)
class RenameColumn:
    name: str
    new_name: str


@dataclass(frozen=True, slots=True)
class DropColumn:
    name: str


@dataclass(frozen=True, slots=True)
class UpdateColumnType:
    """Change a column to a type that holds every old value (widening only)."""

    name: str
    arrow_type: pa.DataType


@dataclass(frozen=True, slots=True)
class SetOption:
    key: str
    value: str


@dataclass(frozen=True, slots=True)
class RemoveOption:
    key: str


@dataclass(frozen=True, slots=True)
class UpdateComment:
    comment: str | None


SchemaChange = (AddColumn | RenameColumn | DropColumn | UpdateColumnType | SetOption
                | RemoveOption | UpdateComment)

# Options whose change would reinterpret files already written.
_IMMUTABLE_OPTIONS = frozenset({"bucket", "bucket-key", "merge-engine", "sequence.field",
                                "rowkind.field", "partition.legacy-name", "primary-key",
                                "partition"})


def apply_changes(schema: TableSchema, changes: Iterable[SchemaChange], *,
                  table: str = "") -> TableSchema:
    """The next schema version after ``changes``; raises SchemaError/OptionError if not allowed."""
    fields = list(schema.fields)
    options = dict(schema.options)
    highest = schema.highest_field_id
    comment = schema.comment
    where = f" of table {table}" if table else ""
    for change in changes:
        if isinstance(change, AddColumn):
            fields, highest = _add_column(fields, change, highest, where, table)
        elif isinstance(change, RenameColumn):
            fields = _rename_column(schema, fields, change, where, table)
        elif isinstance(change, DropColumn):
            fields = _drop_column(schema, fields, change, where)
        elif isinstance(change, UpdateColumnType):
            fields = _update_type(schema, fields, change, where)
        elif isinstance(change, SetOption | RemoveOption):
            _check_mutable_option(change.key, where)
            if isinstance(change, SetOption):
                check_option_keys({change.key: change.value}, table=table)
                options[change.key] = str(change.value)
            else:
                options.pop(change.key, None)
        else:
            comment = change.comment
    evolved = replace(schema, id=schema.id + 1, fields=tuple(fields), highest_field_id=highest,
                      options=options, comment=comment, time_millis=int(time.time() * 1000))
    validate_schema(evolved, table=table)
    return evolved


def _index(fields: list[DataField], name: str, where: str) -> int:
    for i, f in enumerate(fields):
        if f.name == name:
            return i
    raise SchemaError(f"no column {name!r}{where}; columns are {[f.name for f in fields]}")


def _add_column(fields: list[DataField], change: AddColumn, highest: int, where: str,
                table: str) -> tuple[list[DataField], int]:
    validate_identifier(change.name, "column", table=table)
    if any(f.name == change.name for f in fields):
        raise SchemaError(f"column {change.name!r} already exists{where}")
    next_id = [highest + 1]
    field_id = next_id[0]
    next_id[0] += 1
    data_type = from_arrow_type(change.arrow_type, True, next_id)
    new = DataField(field_id, change.name, data_type, change.comment)
    position = len(fields) if change.after is None else _index(fields, change.after, where) + 1
    return fields[:position] + [new] + fields[position:], next_id[0] - 1


def _rename_column(schema: TableSchema, fields: list[DataField], change: RenameColumn,
                   where: str, table: str) -> list[DataField]:
    validate_identifier(change.new_name, "column", table=table)
    if change.name in schema.partition_keys or change.name in schema.primary_keys:
        raise SchemaError(f"cannot rename key column {change.name!r}{where}")
    if any(f.name == change.new_name for f in fields):
        raise SchemaError(f"column {change.new_name!r} already exists{where}")
    i = _index(fields, change.name, where)
    fields[i] = replace(fields[i], name=change.new_name)
    return fields


def _drop_column(schema: TableSchema, fields: list[DataField], change: DropColumn,
                 where: str) -> list[DataField]:
    if change.name in schema.partition_keys or change.name in schema.primary_keys:
        raise SchemaError(f"cannot drop key column {change.name!r}{where}")
    if change.name in schema.table_options().bucket_key:
        raise SchemaError(f"cannot drop bucket-key column {change.name!r}{where}")
    i = _index(fields, change.name, where)
    if len(fields) == 1:
        raise SchemaError(f"cannot drop the last column {change.name!r}{where}")
    return fields[:i] + fields[i + 1:]


def _update_type(schema: TableSchema, fields: list[DataField], change: UpdateColumnType,
                 where: str) -> list[DataField]:
    if change.name in schema.primary_keys or change.name in schema.partition_keys:
        raise SchemaError(f"cannot change the type of key column {change.name!r}{where}")
    i = _index(fields, change.name, where)
    old = fields[i].type
    new = with_nullable(from_arrow_type(change.arrow_type, old.nullable, [-1]), old.nullable)
    if not isinstance(new, AtomicType):
        raise SchemaError(f"cannot change column {change.name!r}{where} to nested type "
                          f"{change.arrow_type}: only atomic types can be widened")
    if not can_widen(old, new):
        raise SchemaError(f"cannot change column {change.name!r}{where} from "
                          f"{type_to_json(old)} to {type_to_json(new)}: only widening is allowed")
    fields[i] = replace(fields[i], type=new)
    return fields


def _check_mutable_option(key: str, where: str) -> None:
    if key in _IMMUTABLE_OPTIONS:
        raise OptionError(f"option {key!r}{where} cannot be changed after the table is created")
