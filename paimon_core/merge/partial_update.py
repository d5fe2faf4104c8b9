"""``partial-update``: each field takes its newest non-null value; sequence groups order groups.

Columnar transcription of Paimon's ``PartialUpdateMergeFunction`` (records of a key arrive
oldest first):

* a first record that is a retraction initialises the row with its values;
* additions overwrite only their non-null fields (a null in a NOT NULL column is an error);
* retractions are an error unless ``ignore-delete`` skips them,
  ``partial-update.remove-record-on-delete`` makes a -D reset the row to the -D's values (a -U is
  ignored), or sequence groups retract their own columns;
* a sequence group ``fields.<o1,o2>.sequence-group = p1,p2`` replaces its ordering and protected
  fields (nulls included) from the record with the largest ordering value, later records
  winning ties; a retraction that wins nulls the protected fields; records whose ordering fields
  are all null do not touch the group;
* the result is -D when the row was reset by a final -D or no addition was seen, else +I, with
  the sequence number of the last record taken into account.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.columnar import int8_array, int64_array, take_or_null, validity
from paimon_core.errors import OptionError, RowKindError, UnsupportedFeatureError
from paimon_core.keyvalue import DELETE, INSERT, SEQUENCE_NUMBER, VALUE_KIND, is_retract
from paimon_core.merge.engine import MergeEngine, any_where, kinds_of, last_where
from paimon_core.merge.sort import Groups
from paimon_core.options import TableOptions
from paimon_core.schema import TableSchema

DELETE_REFUSED = (
    "the partial-update merge engine cannot accept -U/-D rows by default; set 'ignore-delete' = "
    "'true', 'partial-update.remove-record-on-delete' = 'true', or sequence groups "
    "('fields.<ordering>.sequence-group')")


@dataclass(frozen=True, slots=True)
class SequenceGroup:
    ordering: tuple[str, ...]
    protected: tuple[str, ...]


def sequence_groups(schema: TableSchema, options: TableOptions, *, table: str = "") -> list[SequenceGroup]:
    """The ``fields.<o1,o2>.sequence-group`` options, validated against the schema."""
    groups = []
    names = set(schema.field_names)
    for key, value in options.raw.items():
        if not (key.startswith("fields.") and key.endswith(".sequence-group")):
            continue
        ordering = tuple(k.strip() for k in key[len("fields."):-len(".sequence-group")].split(","))
        protected = tuple(v.strip() for v in value.split(",") if v.strip())
        for name in ordering + protected:
            if name not in names:
                raise OptionError(f"option {key!r} of table {table} names unknown column {name!r}")
            if name in schema.primary_keys:
                raise OptionError(f"option {key!r} of table {table}: primary key column {name!r} "
                                  "cannot be in a sequence group")
        groups.append(SequenceGroup(ordering, protected))
    used = [n for g in groups for n in g.ordering + g.protected]
    if len(used) != len(set(used)):
        raise OptionError(f"a column of table {table} is in more than one sequence group")
    return groups


class PartialUpdate(MergeEngine):
    name = "partial-update"
    combines_fields = True

    def __init__(self, schema: TableSchema, options: TableOptions, *, table: str = "") -> None:
        self.schema = schema
        self.ignore_delete = options.ignore_delete
        self.remove_on_delete = options.partial_update_remove_record_on_delete
        self.groups = sequence_groups(schema, options, table=table)
        if self.remove_on_delete and self.groups:  # Java's factory refuses the table (it could not read it)
            raise OptionError(f"table {table}: sequence groups and 'partial-update.remove-record-on-delete' "
                              "conflict (a -D either retracts its groups or removes the row); set only one")
        if options.raw.get("partial-update.remove-record-on-sequence-group"):
            raise UnsupportedFeatureError(
                f"table {table}: 'partial-update.remove-record-on-sequence-group' is not supported")
        aggregated = [k for k in options.raw if k.startswith("fields.") and k.endswith(".aggregate-function")]
        if aggregated or options.default_aggregate_function:
            raise UnsupportedFeatureError(
                f"table {table}: aggregate functions inside partial-update are not supported "
                f"({', '.join(aggregated) or 'fields.default-aggregate-function'})")
        self.grouped = {n for g in self.groups for n in g.ordering + g.protected}
        self.keys = set(schema.primary_keys)

    def accepts_retractions(self) -> bool:
        return self.ignore_delete or self.remove_on_delete or bool(self.groups)

    def refusal(self, kinds: np.ndarray) -> str | None:
        return DELETE_REFUSED if not self.accepts_retractions() and is_retract(kinds).any() else None

    def merge_groups(self, table: pa.Table, groups: Groups) -> tuple[pa.Table, np.ndarray]:
        kinds = kinds_of(table)
        retract = is_retract(kinds)
        if retract.any() and not self.accepts_retractions():
            raise RowKindError(DELETE_REFUSED)
        n = table.num_rows
        row_group = groups.row_groups()
        first_retract = retract[groups.starts]
        base = np.where(first_retract, groups.starts, -1)  # initRow from a leading retraction
        active = ~retract if self.ignore_delete else np.ones(n, dtype=bool)
        reset_by_delete = np.zeros(len(groups), dtype=bool)
        if self.remove_on_delete and not self.ignore_delete and not self.groups:
            last_delete = last_where(kinds == DELETE, groups)
            base = np.maximum(base, last_delete)
            last = groups.ends - 1
            reset_by_delete = kinds[last] == DELETE
        adds = ~retract
        self._check_not_null(table, adds, base)
        columns: dict[str, pa.Array] = {}
        after_base = np.arange(n) > base[row_group]
        for data_field in self.schema.fields:
            name = data_field.name
            if name in self.grouped:
                continue
            column = table.column(name)
            index = last_where(adds & validity(column) & after_base, groups)
            columns[name] = take_or_null(column, np.where(index >= 0, index, base))
        for group in self.groups:
            columns.update(self._sequence_group(table, groups, group, retract, active, base, row_group))
        has_add = any_where(adds, groups)
        kind = np.where(reset_by_delete | ~has_add, DELETE, INSERT)
        last_active = last_where(active, groups)
        sequence = np.asarray(table.column(SEQUENCE_NUMBER).to_numpy(zero_copy_only=False))
        seq = np.where(last_active >= 0, sequence[np.maximum(last_active, 0)], 0)
        arrays = [columns[f.name] for f in self.schema.fields] + [int64_array(seq), int8_array(kind)]
        merged = pa.Table.from_arrays(arrays, names=[*self.schema.field_names, SEQUENCE_NUMBER, VALUE_KIND])
        return merged, np.ones(len(groups), dtype=bool)

    def _check_not_null(self, table: pa.Table, adds: np.ndarray, base: np.ndarray) -> None:
        """Paimon refuses nulls in NOT NULL columns of additions (without sequence groups) and
        of rows that (re)initialise the merged row."""
        seeds = np.zeros(table.num_rows, dtype=bool)
        seeds[base[base >= 0]] = True
        checked = seeds | (adds if not self.groups else np.zeros_like(adds))
        for data_field in self.schema.fields:
            column = table.column(data_field.name)
            if data_field.type.nullable or not column.null_count:
                continue
            if (checked & ~validity(column)).any():
                raise RowKindError(f"partial-update: NOT NULL column {data_field.name!r} is null in a "
                                   "row that sets it")

    def _sequence_group(self, table: pa.Table, groups: Groups, group: SequenceGroup,
                        retract: np.ndarray, active: np.ndarray, base: np.ndarray,
                        row_group: np.ndarray) -> dict[str, pa.Array]:
        """Ordering and protected columns of one sequence group for every key."""
        n = table.num_rows
        ordering_valid = np.zeros(n, dtype=bool)
        for name in group.ordering:
            ordering_valid |= validity(table.column(name))
        eligible = active & ordering_valid
        # With ignore-delete a leading retraction is no record, yet it still seeds the row.
        seeds = np.zeros(n, dtype=bool)
        if self.ignore_delete:
            seeds[base[base >= 0]] = True
        candidates = eligible | (seeds & ordering_valid)
        winner = _last_of_max(table, group.ordering, candidates, row_group, len(groups))
        keep_protected = (winner >= 0) & ~(retract[np.maximum(winner, 0)] & ~seeds[np.maximum(winner, 0)])
        fallback = np.where(winner >= 0, winner, base)
        out = {}
        for name in group.ordering:
            out[name] = take_or_null(table.column(name), fallback)
        protected_index = np.where(winner >= 0, np.where(keep_protected, winner, -1), base)
        for name in group.protected:
            out[name] = take_or_null(table.column(name), protected_index)
        return out


def _last_of_max(table: pa.Table, ordering: Sequence[str], candidates: np.ndarray,
                 row_group: np.ndarray, group_count: int) -> np.ndarray:
    """Per key group, the last candidate row holding the largest ordering value (nulls smallest)."""
    rows = np.flatnonzero(candidates)
    winner = np.full(group_count, -1, dtype=np.int64)
    if len(rows) == 0:
        return winner
    subset = table.select(list(ordering)).take(int64_array(rows))
    subset = subset.append_column("__group", int64_array(row_group[rows]))
    subset = subset.append_column("__row", int64_array(rows))
    order = pc.sort_indices(subset, sort_keys=[("__group", "ascending", "at_start")]
                            + [(o, "ascending", "at_start") for o in ordering]
                            + [("__row", "ascending", "at_start")])
    sorted_groups = row_group[rows][np.asarray(order)]
    sorted_rows = rows[np.asarray(order)]
    last = np.flatnonzero(np.append(sorted_groups[1:] != sorted_groups[:-1], True))
    winner[sorted_groups[last]] = sorted_rows[last]
    return winner
