"""``aggregation``: every non-key field is folded by its aggregate function.

Columnar transcription of Paimon's ``AggregateMergeFunction``: the accumulator row starts all
null; an addition aggregates into it, a retraction (-U/-D) retracts from it (an error for
functions that cannot, unless ``fields.<f>.ignore-retract``); the result is always +I, except
with ``aggregation.remove-record-on-delete`` where a -D replaces the accumulator with the -D
row itself, and a final -D makes the result -D. Primary-key columns pass through; columns named
in ``sequence.field`` use ``last_value``. The result carries the last record's sequence number.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from paimon_core.columnar import int8_array, int64_array
from paimon_core.errors import OptionError, RowKindError
from paimon_core.keyvalue import DELETE, INSERT, SEQUENCE_NUMBER, UPDATE_BEFORE, VALUE_KIND, is_retract
from paimon_core.merge.aggregators import AGGREGATORS, Aggregator, FoldContext
from paimon_core.merge.engine import MergeEngine, kinds_of, last_where
from paimon_core.merge.sort import Groups
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema
from paimon_core.types import DataField

DEFAULT_FUNCTION = "last_non_null_value"
_ALIASES = {"first_not_null_value": "first_non_null_value"}


def field_function(data_field: DataField, schema: TableSchema, options: TableOptions) -> str:
    """The aggregate function name of one column."""
    if data_field.name in schema.primary_keys:
        return "primary_key"
    if data_field.name in options.sequence_field:
        return "last_value"
    own = options.field_option(data_field.name, "aggregate-function")
    name = own or options.default_aggregate_function or DEFAULT_FUNCTION
    return _ALIASES.get(name.strip().lower(), name.strip().lower())


def field_aggregators(schema: TableSchema, options: TableOptions, *, table: str = "") -> dict[str, Aggregator]:
    """An aggregator per column, validated against the column types."""
    out = {}
    for data_field in schema.fields:
        name = field_function(data_field, schema, options)
        factory = AGGREGATORS.get(name)
        if factory is None:
            raise OptionError(f"aggregate function {name!r} of column {data_field.name!r} in table "
                              f"{table} is not supported; use one of {', '.join(sorted(AGGREGATORS))}")
        ignore_retract = (options.field_option(data_field.name, "ignore-retract") or "false").lower() == "true"
        out[data_field.name] = factory(data_field, options, ignore_retract=ignore_retract, table=table)
    return out


class Aggregation(MergeEngine):
    name = "aggregation"
    combines_fields = True

    def __init__(self, schema: TableSchema, options: TableOptions, *, table: str = "") -> None:
        self.schema = schema
        self.table = table
        self.remove_on_delete = options.aggregation_remove_record_on_delete
        self.aggregators = field_aggregators(schema, options, table=table)

    def retraction_problem(self) -> str | None:
        """Why this table cannot take -U/-D rows, if it cannot."""
        refusing = [name for name, agg in self.aggregators.items()
                    if not agg.retractable and not agg.ignore_retract]
        if not refusing:
            return None
        return (f"aggregate functions of columns {refusing} in table {self.table} cannot retract -U/-D "
                "rows; set 'fields.<column>.ignore-retract' = 'true' or 'ignore-delete' = 'true'")

    def refusal(self, kinds: np.ndarray) -> str | None:
        """-U rows, and -D rows unless they reset the row (remove-record-on-delete), retract."""
        retracting = (kinds == UPDATE_BEFORE) | ((kinds == DELETE) & ~self.remove_on_delete)
        return self.retraction_problem() if retracting.any() else None

    def merge_groups(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        kinds = kinds_of(table)
        retract = is_retract(kinds)
        n = table.num_rows
        base = np.full(len(groups), -1, dtype=np.int64)
        reset_by_delete = np.zeros(len(groups), dtype=bool)
        if self.remove_on_delete:
            base = last_where(kinds == DELETE, groups)
            reset_by_delete = kinds[groups.ends - 1] == DELETE
            self._check_reset_rows(table, base)
        row_group = groups.row_groups()
        after_base = np.arange(n) > base[row_group]
        context = FoldContext(groups=groups, row_group=row_group, base=base,
                              adds=~retract & after_base, retracts=retract & after_base,
                              adds_before_base=~retract & ~after_base)
        problem = self.refusal(kinds)
        if problem is not None:
            raise RowKindError(problem)
        columns = [self.aggregators[f.name].fold(table.column(f.name), context) for f in self.schema.fields]
        sequence = np.asarray(table.column(SEQUENCE_NUMBER).to_numpy(zero_copy_only=False))
        seq = sequence[groups.ends - 1]
        kind = np.where(reset_by_delete, DELETE, INSERT)
        merged = pa.Table.from_arrays(columns + [int64_array(seq), int8_array(kind)],
                                      names=[*self.schema.field_names, SEQUENCE_NUMBER, VALUE_KIND])
        return merged, np.ones(len(groups), dtype=bool)

    def _check_reset_rows(self, table: pa.Table, base: np.ndarray) -> None:
        rows = base[base >= 0]
        if len(rows) == 0:
            return
        for data_field in self.schema.fields:
            column = table.column(data_field.name)
            if not data_field.type.nullable and column.null_count and column.take(int64_array(rows)).null_count:
                raise RowKindError(f"aggregation: NOT NULL column {data_field.name!r} is null in a "
                                   "-D row that replaces the accumulator")
