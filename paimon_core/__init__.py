"""paimon_core: Apache Paimon tables in Python, on Arrow, written and read byte-compatibly."""

from __future__ import annotations

from paimon_core.catalog import Catalog
from paimon_core.errors import PaimonError
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
from paimon_core.version import __version__

__all__ = [
    "AddColumn", "Catalog", "DropColumn", "PaimonError", "RemoveOption", "RenameColumn",
    "SetOption", "Snapshot", "Table", "TableWrite", "UpdateColumnType", "UpdateComment",
    "__version__",
]
