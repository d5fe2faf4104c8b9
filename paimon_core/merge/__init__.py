"""Merge engines of primary-key tables, and choosing the one a table is configured with."""

from __future__ import annotations

from paimon_core.errors import OptionError
from paimon_core.merge.aggregation import Aggregation
from paimon_core.merge.deduplicate import Deduplicate
from paimon_core.merge.engine import MergeEngine
from paimon_core.merge.first_row import FirstRow
from paimon_core.merge.lookup import LookupMerge, needs_levels
from paimon_core.merge.partial_update import PartialUpdate
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema


def engine_for(schema: TableSchema, options: TableOptions, *, table: str = "") -> MergeEngine:
    """The table's merge engine, validated against its schema and options."""
    engine = _base_engine(schema, options, table=table)
    return LookupMerge(engine) if needs_levels(options) else engine


def _base_engine(schema: TableSchema, options: TableOptions, *, table: str) -> MergeEngine:
    name = options.merge_engine
    if name == "first-row" and options.sequence_field:
        raise OptionError(f"table {table}: 'sequence.field' cannot be used with merge-engine first-row")
    if name == "deduplicate":
        return Deduplicate(ignore_delete=options.ignore_delete)
    if name == "first-row":
        return FirstRow(ignore_delete=options.ignore_delete)
    if name == "partial-update":
        return PartialUpdate(schema, options, table=table)
    return Aggregation(schema, options, table=table)


__all__ = ["MergeEngine", "engine_for"]
