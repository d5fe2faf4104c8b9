"""The filesystem catalog: databases are ``<warehouse>/<db>.db`` and tables directories in them.

The catalog keeps no state of its own: a table exists when its ``schema/schema-0`` does, which
is created atomically, so two processes creating one table cannot both succeed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from paimon_core.errors import (
    DatabaseExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    FileIOError,
    InvalidNameError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
    WarehouseNotFoundError,
)
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.merge import engine_for
from paimon_core.names import Identifier, validate_identifier
from paimon_core.schema import SchemaChange, TableSchema, create_schema
from paimon_core.schema_store import SCHEMA_FILE
from paimon_core.table import Table

log = logging.getLogger(__name__)

DB_SUFFIX = ".db"


class Catalog:
    """A warehouse of Paimon tables on any fsspec filesystem.

    Args:
        warehouse: a local path (relative paths are made absolute), ``file://`` URI or any
            fsspec URL such as ``s3://bucket/warehouse``.
        storage_options: passed to fsspec (for S3: ``key``, ``secret``, ``client_kwargs`` ...).
    """

    def __init__(self, warehouse: str, *, storage_options: Mapping[str, Any] | None = None) -> None:
        self.file_io, self.warehouse_path = FileIO.for_uri(str(warehouse), storage_options)
        self.warehouse = self.file_io.uri(self.warehouse_path)

    def __repr__(self) -> str:
        return f"Catalog({self.warehouse!r})"

    # ---- databases ------------------------------------------------------------------------

    def _database_path(self, name: str) -> str:
        validate_identifier(name, "database")
        if "." in name:
            raise InvalidNameError(f"invalid database name {name!r}: it contains '.'")
        return f"{self.warehouse_path}/{name}{DB_SUFFIX}"

    def exists(self) -> bool:
        """Whether the warehouse exists: its directory on a file system (a catalog on a new path
        creates it with the first database), its bucket on an object store (where a prefix
        exists only while objects are under it)."""
        if self.file_io.is_local:
            return self.file_io.exists(self.warehouse_path)
        return self.file_io.exists(self.warehouse_path.split("/", 1)[0])

    def _require_warehouse(self) -> None:
        if not self.exists():
            raise WarehouseNotFoundError(f"warehouse {self.warehouse} does not exist; check the path (or create a "
                                         "database in it first)")

    def list_databases(self) -> list[str]:
        """Names of the databases, sorted.

        Raises:
            WarehouseNotFoundError: the warehouse path does not exist (likely a typo).
        """
        self._require_warehouse()
        return sorted(s.name[: -len(DB_SUFFIX)] for s in self.file_io.list_dir(self.warehouse_path)
                      if s.is_dir and s.name.endswith(DB_SUFFIX) and not s.name.startswith("."))

    def database_exists(self, name: str) -> bool:
        """Whether the database directory exists."""
        return self.file_io.exists(self._database_path(name))

    def create_database(self, name: str, *, exist_ok: bool = False) -> None:
        """Create a database (a ``<name>.db`` directory); ``exist_ok`` makes an existing one fine."""
        path = self._database_path(name)
        if self.file_io.exists(path):
            if exist_ok:
                return
            raise DatabaseExistsError(f"database {name!r} already exists in {self.warehouse}")
        try:
            self.file_io.mkdirs(path)
        except FileIOError:
            raise
        except OSError as exc:  # e.g. no write permission on the warehouse
            raise FileIOError(f"creating database {name!r} at {self.file_io.uri(path)} failed: {exc}") from exc
        log.info("created database %s in %s", name, self.warehouse)

    def drop_database(self, name: str, *, ignore_missing: bool = False, cascade: bool = False) -> None:
        """Delete a database; one holding tables only with ``cascade`` (which drops them too)."""
        path = self._database_path(name)
        if not self.file_io.exists(path):
            if ignore_missing:
                return
            raise DatabaseNotFoundError(f"database {name!r} does not exist in {self.warehouse}")
        tables = self.list_tables(name)
        if tables and not cascade:
            raise DatabaseNotEmptyError(f"database {name!r} still holds tables {tables}; "
                                        "pass cascade=True to drop them too")
        self._delete_dir(path, f"database {name!r}")

    def _delete_dir(self, path: str, what: str) -> None:
        """Delete a database or table directory; a storage failure (no permission) is a typed error."""
        try:
            self.file_io.delete_dir(path)
        except FileIOError:
            raise
        except OSError as exc:
            raise FileIOError(f"dropping {what} at {self.file_io.uri(path)} failed: {exc}") from exc

    # ---- tables ---------------------------------------------------------------------------

    def _table_path(self, identifier: Identifier) -> str:
        return f"{self._database_path(identifier.database)}/{identifier.table}"

    def _require_database(self, name: str) -> None:
        if not self.database_exists(name):
            self._require_warehouse()
            raise DatabaseNotFoundError(f"database {name!r} does not exist in {self.warehouse}")

    def list_tables(self, database: str) -> list[str]:
        """Names of the tables of ``database``, sorted (directories with a schema file)."""
        self._require_database(database)
        names = []
        for status in self.file_io.list_dir(self._database_path(database)):
            if status.is_dir and not status.name.startswith("."):
                paths = TablePaths(status.path)
                if self._has_schema(paths):
                    names.append(status.name)
        return sorted(names)

    def table_exists(self, identifier: str) -> bool:
        """Whether ``database.table`` has a schema file (a directory alone is no table)."""
        ident = Identifier.parse(identifier)
        return self._has_schema(TablePaths(self._table_path(ident)))

    def table_uri(self, identifier: str) -> str:
        """Where ``identifier`` lives (or would live), as a URI; touches no storage."""
        return self.file_io.uri(self._table_path(Identifier.parse(identifier)))

    def get_table(self, identifier: str) -> Table:
        """The table ``database.table``.

        Raises:
            TableNotFoundError / DatabaseNotFoundError: it does not exist (the message says which).
        """
        ident = Identifier.parse(identifier)
        self._require_database(ident.database)
        path = self._table_path(ident)
        if not self._has_schema(TablePaths(path)):
            raise TableNotFoundError(f"table {ident} does not exist in {self.warehouse}")
        return Table(self.file_io, ident, path)

    def create_table(self, identifier: str, *, schema: pa.Schema,
                     partition_keys: Sequence[str] = (), primary_keys: Sequence[str] = (),
                     options: Mapping[str, str] | None = None, comment: str | None = None,
                     exist_ok: bool = False) -> Table:
        """Create a table from an Arrow schema.

        Raises:
            TableExistsError: the table exists and ``exist_ok`` is false.
            SchemaError / OptionError: the schema, keys or options are invalid (nothing written).
        """
        ident = Identifier.parse(identifier)
        self._require_database(ident.database)
        table_schema = validate_table(identifier, schema=schema, partition_keys=partition_keys,
                                      primary_keys=primary_keys, options=options, comment=comment)
        path = self._table_path(ident)
        paths = TablePaths(path)
        if self._has_schema(paths):
            return self._existing(ident, path, exist_ok, table_schema)
        if not self.file_io.create_if_absent(paths.schema_file(0), table_schema.to_json().encode()):
            return self._existing(ident, path, exist_ok, table_schema)
        log.info("created table %s at %s", ident, self.file_io.uri(path))
        return Table(self.file_io, ident, path)

    def _has_schema(self, paths: TablePaths) -> bool:
        """Whether the table has a schema file: the directory alone, or a temp file of a writer
        still publishing schema 0, does not make a table (a racing creator would read none)."""
        return any(SCHEMA_FILE.match(status.name) for status in self.file_io.list_dir(paths.schema_dir))

    def _existing(self, ident: Identifier, path: str, exist_ok: bool, wanted: TableSchema) -> Table:
        """The existing table, if ``exist_ok`` and it is the requested table or an evolution of it:
        every requested column is there with its type (columns added since, by ``alter``, are
        fine), and the keys are the same."""
        if not exist_ok:
            raise TableExistsError(f"table {ident} already exists in {self.warehouse}")
        table = Table(self.file_io, ident, path)
        current = table.schema
        have = {f.name: f for f in current.arrow_schema()}
        missing = [f.name for f in wanted.arrow_schema() if f.name not in have]
        changed = [f"{f.name} is {have[f.name].type}{'' if have[f.name].nullable else ' not null'}, "
                   f"not {f.type}{'' if f.nullable else ' not null'}"
                   for f in wanted.arrow_schema()
                   if f.name in have and (have[f.name].type != f.type or have[f.name].nullable != f.nullable)]
        mismatches = [
            f"no columns {missing} (dropped or renamed since?)" if missing else "",
            "; ".join(changed),
            f"partition keys {list(current.partition_keys)} instead of {list(wanted.partition_keys)}"
            if current.partition_keys != wanted.partition_keys else "",
            f"primary keys {list(current.primary_keys)} instead of {list(wanted.primary_keys)}"
            if current.primary_keys != wanted.primary_keys else "",
        ]
        problems = [m for m in mismatches if m]
        if problems:
            raise TableExistsError(f"table {ident} already exists in {self.warehouse} and does not match the "
                                   "requested one: " + "; ".join(problems) + " (alter it, or use another name)")
        return table

    def drop_table(self, identifier: str, *, ignore_missing: bool = False) -> None:
        """Delete the table directory with all its data and metadata."""
        ident = Identifier.parse(identifier)
        if not self.table_exists(identifier):
            if ignore_missing:
                return
            raise TableNotFoundError(f"table {ident} does not exist in {self.warehouse}")
        self._delete_dir(self._table_path(ident), f"table {ident}")
        log.info("dropped table %s", ident)

    def alter_table(self, identifier: str, changes: Sequence[SchemaChange]) -> TableSchema:
        """Apply schema changes to a table as one new schema version."""
        return self.get_table(identifier).alter(changes)


def validate_table(identifier: str, *, schema: pa.Schema, partition_keys: Sequence[str] = (),
                   primary_keys: Sequence[str] = (), options: Mapping[str, str] | None = None,
                   comment: str | None = None) -> TableSchema:
    """The schema ``create_table`` would write, checked exactly as it checks it, without storage.

    Lets a declaration of a table (columns, keys, options, merge engine) be refused when it is
    loaded rather than when its first write runs.

    Raises:
        InvalidNameError / SchemaError / OptionError: what ``create_table`` would raise.
    """
    ident = Identifier.parse(identifier)
    if not isinstance(schema, pa.Schema):
        raise SchemaError(f"schema of table {ident} must be a pyarrow.Schema, got {type(schema).__name__}")
    table_schema = create_schema(schema, partition_keys=partition_keys, primary_keys=primary_keys,
                                 options=options, comment=comment, table=str(ident))
    if table_schema.primary_keys:
        engine_for(table_schema, table_schema.table_options(), table=str(ident))  # validates the options
    return table_schema
