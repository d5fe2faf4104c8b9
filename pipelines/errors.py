"""The errors the integration raises itself (the engine's live in :mod:`paimon_core.errors`).

A :class:`TableDefinitionError` is a ``SchemaError`` of the engine, so code catching the
engine's errors also catches a refused declaration.
"""

from __future__ import annotations

from paimon_core.errors import SchemaError


class TableDefinitionError(SchemaError):
    """A declared table (columns, keys, partitions, options, schedules) that cannot work, refused
    when the declaration is loaded; the message names the table and the field. ``field`` is that
    field's path (``ingestion.mode``, ``columns[0]``) when one field is at fault, so a YAML
    declaration can be reported at its line."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def field_path(self) -> list[str | int]:
        """``field`` as YAML path parts: ``columns[0]`` is ``["columns", 0]``; empty when unknown."""
        path: list[str | int] = []
        for part in (self.field or "").split("."):
            name, _, index = part.partition("[")
            if not name.isidentifier():
                break
            path.append(name)
            if index.rstrip("]").isdigit():
                path.append(int(index.rstrip("]")))
        return path


def fail(table: str, field_name: str, problem: str) -> TableDefinitionError:
    """The error of one field of one table's declaration: ``table db.t: ingestion.mode: ...``
    (a label after the path, as in ``columns[0] (dt)``, is shown but not part of ``field``)."""
    return TableDefinitionError(f"table {table}: {field_name}: {problem}", field=field_name.split(" ", 1)[0])
