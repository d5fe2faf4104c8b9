"""Reading and committing ``schema/schema-N`` files of one table."""

from __future__ import annotations

import re

from paimon_core.errors import CommitConflictError, SchemaError, TableNotFoundError
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.schema import TableSchema

SCHEMA_FILE = re.compile(r"^schema-(\d+)$")


class SchemaStore:
    """Schema versions of a table; versions are immutable, so reads are cached."""

    def __init__(self, file_io: FileIO, paths: TablePaths, table: str) -> None:
        self.file_io = file_io
        self.paths = paths
        self.table = table
        self._cache: dict[int, TableSchema] = {}

    def schema_ids(self) -> list[int]:
        ids = [int(m.group(1)) for s in self.file_io.list_dir(self.paths.schema_dir)
               if (m := SCHEMA_FILE.match(s.name))]
        return sorted(ids)

    def schema(self, schema_id: int) -> TableSchema:
        cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        path = self.paths.schema_file(schema_id)
        try:
            text = self.file_io.read_bytes(path)
        except FileNotFoundError:
            raise SchemaError(f"schema {schema_id} of table {self.table} is missing") from None
        schema = TableSchema.from_json(text, source=path)
        self._cache[schema_id] = schema
        return schema

    def latest(self) -> TableSchema:
        ids = self.schema_ids()
        if not ids:
            raise TableNotFoundError(f"table {self.table} does not exist (no schema files)")
        return self.schema(ids[-1])

    def commit(self, schema: TableSchema) -> None:
        """Publish a new schema version; fails if that version was created concurrently."""
        created = self.file_io.create_if_absent(self.paths.schema_file(schema.id),
                                                schema.to_json().encode("utf-8"))
        if not created:
            raise CommitConflictError(
                f"schema {schema.id} of table {self.table} was created concurrently; "
                "reload the table and apply the change again", snapshot_id=None)
        self._cache[schema.id] = schema
