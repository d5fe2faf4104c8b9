"""Creating databases and tables, and altering tables, from flags.

Columns are ``name TYPE`` with Paimon's type names (``id BIGINT NOT NULL``, ``price DECIMAL(12, 2)``,
``tags ARRAY<STRING>``), the spelling Paimon's DDL and schema files use; the schema is validated
as :meth:`paimon_core.Catalog.create_table` validates it, so nothing is written when it is wrong.
"""

from __future__ import annotations

import argparse

import pyarrow as pa

from paimon_core.catalog import Catalog
from paimon_core.cli.output import Listing
from paimon_core.errors import OptionError
from paimon_core.schema import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    TableSchema,
    UpdateColumnType,
    UpdateComment,
)
from paimon_core.type_names import arrow_field_for, type_name


def column_arg(text: str, flag: str) -> pa.Field:
    """``name TYPE`` as an Arrow field carrying the exact Paimon type."""
    name, _, type_text = text.strip().partition(" ")
    if not name or not type_text.strip():
        raise OptionError(f"{flag} {text!r} is not 'name TYPE' (for example 'id BIGINT NOT NULL')")
    return arrow_field_for(name.strip("`"), type_text.strip())


def key_value_arg(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise OptionError(f"{flag} {text!r} is not key=value")
    return key.strip(), value.strip()


def _names(values: list[str] | None) -> list[str]:
    return [n.strip() for value in values or () for n in value.split(",") if n.strip()]


def cmd_create_database(catalog: Catalog, args: argparse.Namespace) -> Listing:
    catalog.create_database(args.name, exist_ok=args.if_not_exists)
    return Listing(("database", "warehouse"), [(args.name, catalog.warehouse)])


def cmd_create_table(catalog: Catalog, args: argparse.Namespace) -> Listing:
    fields = [column_arg(c, "--column") for c in args.column]
    options = dict(key_value_arg(o, "--option") for o in args.option or ())
    table = catalog.create_table(args.table, schema=pa.schema(fields), partition_keys=_names(args.partition_key),
                                 primary_keys=_names(args.primary_key), options=options, comment=args.comment,
                                 exist_ok=args.if_not_exists)
    return _schema_listing(table.schema)


def cmd_alter(catalog: Catalog, args: argparse.Namespace) -> Listing:
    changes: list[SchemaChange] = []
    for text in args.add_column or ():
        field = column_arg(text, "--add-column")
        changes.append(AddColumn(field.name, field.type, after=None))
    for text in args.rename_column or ():
        old, new = key_value_arg(text, "--rename-column")
        changes.append(RenameColumn(old, new))
    changes += [DropColumn(name) for name in _names(args.drop_column)]
    for text in args.column_type or ():
        field = column_arg(text, "--column-type")
        changes.append(UpdateColumnType(field.name, field.type))
    changes += [SetOption(*key_value_arg(o, "--set")) for o in args.set or ()]
    changes += [RemoveOption(key) for key in _names(args.reset)]
    if args.comment is not None:
        changes.append(UpdateComment(args.comment or None))
    if not changes:
        raise OptionError("alter: nothing to change; give --add-column, --rename-column, --drop-column, "
                          "--column-type, --set, --reset or --comment")
    return _schema_listing(catalog.alter_table(args.table, changes))


def _schema_listing(schema: TableSchema) -> Listing:
    keys = set(schema.primary_keys)
    rows = [(f.id, f.name, type_name(f.type), "PK" if f.name in keys else "",
             "partition" if f.name in schema.partition_keys else "", f.description) for f in schema.fields]
    footer = [f"schema {schema.id}"] + [f"  {k} = {v}" for k, v in sorted(schema.options.items())]
    return Listing(("id", "column", "type", "key", "partitioned", "comment"), rows, footer=footer)
