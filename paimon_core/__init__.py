"""paimon_core: Apache Paimon tables in Python, on Arrow, written and read byte-compatibly."""

from __future__ import annotations

from paimon_core.catalog import Catalog
from paimon_core.consumer import Consumer
from paimon_core.errors import PaimonError
from paimon_core.read.changes import ROW_KIND
from paimon_core.read.stream import ChangeBatch, ChangeStream
from paimon_core.schema import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SetOption,
    UpdateColumnType,
    UpdateComment,
)
from paimon_core.snapshot import Snapshot
from paimon_core.table import Table, TableWrite
from paimon_core.type_names import arrow_field_for, parse_type_name
from paimon_core.version import __version__

__all__ = [
    "ROW_KIND", "AddColumn", "Catalog", "ChangeBatch", "ChangeStream", "Consumer", "DropColumn",
    "PaimonError", "RemoveOption", "RenameColumn", "SetOption", "Snapshot", "Table", "TableWrite",
    "UpdateColumnType", "UpdateComment", "__version__", "arrow_field_for", "parse_type_name",
]
