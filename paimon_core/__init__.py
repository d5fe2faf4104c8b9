"""paimon_core: Apache Paimon tables in Python, on Arrow, written and read byte-compatibly."""

from __future__ import annotations

from paimon_core.catalog import Catalog, validate_table
from paimon_core.commit_ledger import CommitRecord
from paimon_core.compaction.compactor import BucketCompaction, BucketTotals, CompactionResult
from paimon_core.compaction.state import BucketState, LsmState
from paimon_core.consumer import Consumer
from paimon_core.errors import PaimonError
from paimon_core.maintenance.auto_tags import AutoTagResult
from paimon_core.maintenance.drop_partitions import DroppedPartitions
from paimon_core.maintenance.expiry import ExpiryPlan
from paimon_core.maintenance.mark_done import MarkedDone, SuccessFile
from paimon_core.maintenance.orphans import DAY_MS, OrphanFiles
from paimon_core.maintenance.rollback import Rollback
from paimon_core.options import TableOptions, parse_duration_ms
from paimon_core.read.changes import ROW_KIND, change_feed_problem
from paimon_core.read.lookup import TableLookup
from paimon_core.read.scan import DataSplit
from paimon_core.read.stream import ChangeBatch, ChangeStream
from paimon_core.schema import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SetOption,
    TableSchema,
    UpdateColumnType,
    UpdateComment,
)
from paimon_core.snapshot import Snapshot
from paimon_core.table import FileInfo, Table
from paimon_core.table_context import TableContext
from paimon_core.tags import Tag
from paimon_core.type_names import arrow_field_for, parse_type_name, type_name
from paimon_core.version import __version__
from paimon_core.write.input_slice import InputSlice
from paimon_core.write.prepared import CommitOutcome, PreparedCommit
from paimon_core.write.shard import Shard
from paimon_core.write.table_write import TableWrite

__all__ = [
    "DAY_MS",
    "ROW_KIND",
    "AddColumn",
    "AutoTagResult",
    "BucketCompaction",
    "BucketState",
    "BucketTotals",
    "Catalog",
    "ChangeBatch",
    "ChangeStream",
    "CommitOutcome",
    "CommitRecord",
    "CompactionResult",
    "Consumer",
    "DataSplit",
    "DropColumn",
    "DroppedPartitions",
    "ExpiryPlan",
    "FileInfo",
    "InputSlice",
    "LsmState",
    "MarkedDone",
    "OrphanFiles",
    "PaimonError",
    "PreparedCommit",
    "RemoveOption",
    "RenameColumn",
    "Rollback",
    "SetOption",
    "Shard",
    "Snapshot",
    "SuccessFile",
    "Table",
    "TableContext",
    "TableLookup",
    "TableOptions",
    "TableSchema",
    "TableWrite",
    "Tag",
    "UpdateColumnType",
    "UpdateComment",
    "__version__",
    "arrow_field_for",
    "change_feed_problem",
    "parse_duration_ms",
    "parse_type_name",
    "type_name",
    "validate_table",
]
