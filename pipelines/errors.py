"""The errors the integration raises itself (the engine's live in :mod:`paimon_core.errors`).

A :class:`TableDefinitionError` is a ``SchemaError`` of the engine, so code catching the
engine's errors also catches a refused declaration.
"""

from __future__ import annotations

from paimon_core.errors import SchemaError


class TableDefinitionError(SchemaError):
    """A declared table (columns, keys, partitions, options, schedules) that cannot work, refused
    when the declaration is loaded; the message names the table and the field."""


def fail(table: str, field_name: str, problem: str) -> TableDefinitionError:
    """The error of one field of one table's declaration: ``table db.t: ingestion.mode: ...``."""
    return TableDefinitionError(f"table {table}: {field_name}: {problem}")
