"""An independent, record-at-a-time model of a primary-key table: what each read should return.

The model keeps every key's records (kind, sequence, values by column *label*) oldest first,
as written, and folds them with the reference merge functions when asked. Labels are stable
column identities (a renamed column keeps its label, a dropped one is no longer shown, an
added one is null in older records), which is how Paimon matches columns by field id.

Paimon's visibility rules, written from its documentation and Java code, not from ours:

* a commit's records of a key are folded in the writer's buffer into one record per key;
* a batch read merges every level, except that first-row and deletion-vector tables leave
  level 0 out (``batchScanSkipLevel0``): they show a key's records up to the last compaction
  that pushed level 0 up (every compaction of these tables does);
* a full compaction folds each key into one record at the max level and drops it when the fold
  is a retraction (-U/-D) (``dropDelete``: nothing lies below);
* ``$audit_log`` shows the merged record of each key with its kind, retractions included;
* change reads: ``input`` gives every commit's rows as written, ``none`` the rows each commit's
  level-0 files hold (the commit's records folded per key), ``lookup`` and ``full-compaction``
  changes that, replayed, give the table once everything written has surfaced.

Minor compactions are the picker's choice; which of them drop retractions depends on the LSM
shape, so for :meth:`Shape.drop_sensitive` tables the model stops being exact at the first one
(:attr:`TableModel.exact`), and for :meth:`Shape.order_sensitive` ones at the first that is not a
lookup compaction; the matrix then compares the read shapes with the table's own full read and
the Java oracle only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tests.read_shapes.shape import VALUE_LABELS, Record, Shape
from tests.unit.merge_reference import RETRACT

KIND_NAMES = ("+I", "-U", "+U", "-D")
Key = tuple[Any, ...]


@dataclass
class Column:
    """A value column as the table names and types it now."""

    label: str
    name: str
    type: pa.DataType


@dataclass
class Row:
    """One row a writer hands the table: its kind (0..3), key and values by label."""

    kind: int
    key: Key
    values: dict[str, Any]


@dataclass
class TableModel:
    """What the table holds, per key, and what each kind of read sees of it."""

    shape: Shape
    columns: list[Column] = field(default_factory=list)
    history: dict[Key, list[Record]] = field(default_factory=dict)
    pushed_up: dict[Key, int] = field(default_factory=dict)  # records moved out of level 0
    in_max_level: dict[Key, int] = field(default_factory=dict)  # records folded by the last full compaction
    labels: list[str] = field(default_factory=lambda: list(VALUE_LABELS))
    exact: bool = True
    retractions_known: bool = True  # which retractions are stored (only $audit_log shows them)
    sequence: int = 0

    def __post_init__(self) -> None:
        if not self.columns:
            schema = self.shape.arrow_schema()
            self.columns = [Column(label, label, schema.field(label).type) for label in VALUE_LABELS]

    # ---- what happens to the table -----------------------------------------------------------

    def write(self, rows: Sequence[Row]) -> list[tuple[Key, Record]]:
        """Records the rows of one commit (retractions dropped under ``ignore-delete``); returns
        what the commit's input changelog holds, in order.

        A commit's records of one key are folded in the writer's buffer before they reach a file,
        and engines that start a row from a retraction fold differently in two steps than in one:
        so the history keeps what the commit's level-0 file holds, one record per key."""
        written = []
        for row in rows:
            if self.shape.ignore_delete and row.kind in RETRACT:
                continue
            values = {label: row.values.get(label) for label in self.labels}
            written.append((row.key, (row.kind, self.sequence, values)))
            self.sequence += 1
        for key, record in self.commit_files(written):
            self.history.setdefault(key, []).append(record)
        return written

    def commit_files(self, written: Sequence[tuple[Key, Record]]) -> list[tuple[Key, Record]]:
        """What one commit's level-0 files hold: its records folded per key (the write buffer)."""
        per_key: dict[Key, list[Record]] = {}
        for key, record in written:
            per_key.setdefault(key, []).append(record)
        out = []
        for key, records in per_key.items():
            merged = self.shape.fold(records, self.labels)
            if merged is not None:
                out.append((key, merged))
        return out

    def minor_compaction(self, *, level0_left: bool, lookup: bool) -> None:
        """A compaction of the picker's choice: every level-0 record moved up unless
        ``level0_left`` (first-row, deletion-vector and lookup tables always move them). A
        ``lookup`` compaction folds each key's level-0 records with its newest deeper row, so
        every key's history becomes one record. Where a compaction's output had nothing below
        it dropped retractions, which changes later merges of drop-sensitive tables and what
        ``$audit_log`` shows of any table; which records other compactions folded changes later
        merges of order-sensitive tables."""
        folded = lookup and not level0_left
        if folded:
            for key, records in list(self.history.items()):
                merged = self.shape.fold(records, self.labels)
                self.history[key] = [] if merged is None else [merged]
        if not level0_left:
            for key, records in self.history.items():
                self.pushed_up[key] = len(records)
        if self.shape.drop_sensitive() or (self.shape.order_sensitive() and not folded):
            self.exact = False
        if self.shape.retractions:
            self.retractions_known = False

    def full_compaction(self) -> None:
        """Every key folded into one record at the max level, retractions dropped."""
        for key, records in list(self.history.items()):
            merged = self.shape.fold(records, self.labels)
            kept = [] if merged is None or merged[0] in RETRACT else [merged]
            self.history[key] = kept
            self.pushed_up[key] = self.in_max_level[key] = len(kept)
        self.retractions_known = self.exact

    def add_column(self, label: str, arrow_type: pa.DataType) -> None:
        self.columns.append(Column(label, label, arrow_type))
        if label not in self.labels:
            self.labels.append(label)

    def rename_column(self, old: str, new: str) -> None:
        self.column_named(old).name = new

    def drop_column(self, name: str) -> None:
        self.columns.remove(self.column_named(name))

    def widen_column(self, name: str, arrow_type: pa.DataType) -> None:
        self.column_named(name).type = arrow_type

    def column_named(self, name: str) -> Column:
        [column] = [c for c in self.columns if c.name == name]
        return column

    # ---- what reads see ----------------------------------------------------------------------

    def schema(self) -> pa.Schema:
        """The table's Arrow schema now (keys first, as created; added columns last)."""
        base = self.shape.arrow_schema()
        keys = [base.field(k) for k in self.shape.keys]
        return pa.schema([*keys, *(pa.field(c.name, c.type) for c in self.columns)])

    def merged(self, *, level0: bool | None = None, prefix: Mapping[Key, int] | None = None) -> dict[Key, Record]:
        """Each key's merged record, retractions included: over every record, or only the
        ``prefix`` count of each key's records (level 0 left out when ``level0`` is False)."""
        if level0 is None:
            level0 = self.shape.level0_visible()
        if prefix is None and not level0:
            prefix = self.pushed_up
        out = {}
        for key, records in self.history.items():
            chosen = records if prefix is None else records[:prefix.get(key, 0)]
            merged = self.shape.fold(chosen, self.labels)
            if merged is not None:
                out[key] = merged
        return out

    def rows(self, merged: Mapping[Key, Record]) -> pa.Table:
        """The visible rows of merged records (retractions are not rows)."""
        return self.table((key, record) for key, record in merged.items() if record[0] not in RETRACT)

    def read(self) -> pa.Table:
        """What a batch read of the latest snapshot returns."""
        return self.rows(self.merged())

    def merged_view(self) -> pa.Table:
        """Every level merged, level 0 included (the initial batch of a ``none``/``input`` stream)."""
        return self.rows(self.merged(level0=True))

    def audit_log(self) -> pa.Table:
        """``$audit_log``: every merged record with its kind in a leading ``rowkind`` column."""
        merged = self.merged()
        data = self.table(merged.items())
        kinds = pa.array([KIND_NAMES[record[0]] for record in merged.values()], pa.string())
        return data.add_column(0, pa.field("rowkind", pa.string()), kinds)

    def changes(self, records: Iterable[tuple[Key, Record]]) -> pa.Table:
        """Change rows in the current schema, with ``_row_kind`` first."""
        listed = list(records)
        data = self.table(listed)
        kinds = pa.array([KIND_NAMES[record[0]] for _, record in listed], pa.string())
        return data.add_column(0, pa.field("_row_kind", pa.string(), False), kinds)

    def table(self, records: Iterable[tuple[Key, Record]]) -> pa.Table:
        schema = self.schema()
        columns: dict[str, list[Any]] = {name: [] for name in schema.names}
        for key, (_, _, values) in records:
            for name, value in zip(self.shape.keys, key):
                columns[name].append(value)
            for column in self.columns:
                columns[column.name].append(values.get(column.label))
        return pa.table(columns, schema=schema)
