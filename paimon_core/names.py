"""Validation of database, table and column names, and parsing of ``db.table`` identifiers."""

from __future__ import annotations

from dataclasses import dataclass

from paimon_core.errors import InvalidNameError


def _bad_reason(name: str, *, path_component: bool) -> str | None:
    if not isinstance(name, str):
        return f"it is a {type(name).__name__}, not a string"
    if not name:
        return "it is empty"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "it contains a control character"
    if name != name.strip():
        return "it has leading or trailing whitespace"
    if path_component:
        if "/" in name or "\\" in name:
            return "it contains a path separator"
        if name.startswith("."):
            return "it starts with '.'"
        if ".." in name:
            return "it contains '..'"
    return None


def validate_identifier(name: str, kind: str, *, table: str = "") -> None:
    """Reject names that cannot be stored safely.

    Databases and tables become directories, so they must be a single, non-hidden path
    component. Columns only need to be non-empty printable text.
    """
    reason = _bad_reason(name, path_component=kind in ("database", "table"))
    if reason is not None:
        where = f" in table {table}" if table and kind == "column" else ""
        raise InvalidNameError(f"invalid {kind} name {name!r}{where}: {reason}")


@dataclass(frozen=True, slots=True)
class Identifier:
    """A table's full name, ``database.table``."""

    database: str
    table: str

    @staticmethod
    def parse(text: str) -> Identifier:
        if not isinstance(text, str):
            raise InvalidNameError(f"table identifier {text!r} is a {type(text).__name__}, not a string "
                                   "'database.table'")
        if "." not in text:
            raise InvalidNameError(f"table identifier {text!r} must be 'database.table'")
        database, table = text.split(".", 1)
        if "." in table:  # Paimon's Identifier has exactly two parts
            raise InvalidNameError(f"table identifier {text!r}: table name {table!r} contains '.'; it must be "
                                   "'database.table' with no '.' in either name")
        if "$" in table:
            base, _, system = table.partition("$")
            raise InvalidNameError(f"table identifier {text!r}: '$' is reserved for Paimon's system tables; read "
                                   f"this one with catalog.get_table('{database}.{base}').system('{system}') "
                                   f"or `paimon read '{text}'`")
        try:
            validate_identifier(database, "database")
            validate_identifier(table, "table")
        except InvalidNameError as exc:  # name what the user typed: '../x' splits into '' and './x'
            raise InvalidNameError(f"table identifier {text!r}: {exc}") from None
        return Identifier(database, table)

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"
