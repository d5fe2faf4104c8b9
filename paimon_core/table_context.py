"""One table as an operation sees it: where it lives, and the schema and options resolved once.

A :class:`paimon_core.Table` answers ``schema`` with the latest version on every access (another
process may have altered the table), which costs a listing of the schema directory, a LIST
request on an object store. An operation (a write, a compaction, an expiry, a cleanup) takes one
:class:`TableContext` when it starts and hands it to the parts it runs, so none of them lists
the schema again or re-parses the options per file, and all of them agree on one schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from paimon_core.consumer import ConsumerStore
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths, unescape_path_name
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema
from paimon_core.schema_store import SchemaStore
from paimon_core.snapshot import ChangelogStore, Snapshot, SnapshotStore
from paimon_core.tags import TagStore


@dataclass(frozen=True, slots=True)
class TableContext:
    """Storage, paths and stores of one table, with its schema (and parsed options) of the moment."""

    file_io: FileIO
    paths: TablePaths
    name: str
    schema: TableSchema
    options: TableOptions
    schemas: SchemaStore
    snapshots: SnapshotStore
    tags: TagStore
    consumer_store: ConsumerStore
    changelogs: ChangelogStore

    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshots.latest()

    def partition_of(self, path: str) -> dict[str, str | None]:
        """``{column: value}`` of a partition path ``dt=2024-01-01/region=eu`` (see
        :meth:`paimon_core.Table.partition_of`).

        Raises:
            ValueError: ``path`` is not ``k=v[/k=v]``.
        """
        if not path:
            return {}
        default = self.options.partition_default_name
        spec: dict[str, str | None] = {}
        for part in path.split("/"):
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"{path!r} is not a partition path of table {self.name} (want k=v[/k=v])")
            text = unescape_path_name(value)
            spec[unescape_path_name(key)] = None if text == default else text
        return spec


class OptionsCache:
    """Parsed options per schema version: versions never change once written, so each is parsed once."""

    def __init__(self, table: str) -> None:
        self.table = table
        self._parsed: dict[int, TableOptions] = {}

    def of(self, schema: TableSchema) -> TableOptions:
        parsed = self._parsed.get(schema.id)
        if parsed is None:
            parsed = self._parsed[schema.id] = TableOptions.from_map(schema.effective_options(), table=self.table)
        return parsed
