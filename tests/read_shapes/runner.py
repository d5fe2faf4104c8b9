"""Runs a workload on a real table and on the model side by side, remembering what each snapshot
should read as, and what each commit's change reads should hold."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.errors import RowKindError
from tests.read_shapes.model import KIND_NAMES, Key, Record, Row, TableModel
from tests.read_shapes.shape import NUM_LEVELS, Shape
from tests.read_shapes.workload import Compact, Delete, Evolve, Op, Tag, Write, batch

TABLE = "m.t"


@dataclass
class Captured:
    """A snapshot as it read when it was created: our read, and the model's when it was exact."""

    snapshot_id: int
    ours: pa.Table
    expected: pa.Table | None


@dataclass
class Run:
    """A table and its model, after the operations applied so far."""

    catalog: pc.Catalog
    shape: Shape
    table: pc.Table = field(init=False)
    model: TableModel = field(init=False)
    captured: dict[int, Captured] = field(default_factory=dict)
    tags: dict[str, Captured] = field(default_factory=dict)
    input_changes: dict[int, list[tuple[Key, Record]]] = field(default_factory=dict)
    file_changes: dict[int, list[tuple[Key, Record]]] = field(default_factory=dict)
    expired: set[int] = field(default_factory=set)
    minor_since_full: bool = False
    steps: list[str] = field(default_factory=list)
    states: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self.catalog.create_database("m", exist_ok=True)
        self.table = self.catalog.create_table(TABLE, schema=self.shape.arrow_schema(),
                                               partition_keys=self.shape.partition_keys,
                                               primary_keys=self.shape.keys, options=self.shape.options())
        self.model = TableModel(self.shape)
        self.steps.append(f"create {self.shape.describe()} with options {self.shape.options()}")

    # ---- operations --------------------------------------------------------------------------

    def apply(self, op: Op) -> None:
        self.steps.append(repr(op))
        if isinstance(op, Write):
            rows = [Row(kind, self.key(p, k), self.alive(dict(vals))) for kind, p, k, vals in op.rows]
            self.commit(rows, lambda writer: self.write_rows(writer, op))
        elif isinstance(op, Delete):
            keys = [self.key(p, k) for p, k in op.keys]
            self.commit([Row(3, key, {}) for key in keys], lambda writer: writer.delete(self.key_table(keys)))
        elif isinstance(op, Compact):
            self.compact(op.full)
        elif isinstance(op, Evolve):
            self.evolve(op.change)
        elif isinstance(op, Tag):
            self.tag()
        else:
            self.expire(op.retain)

    def commit(self, rows: list[Row], write: object) -> None:
        before = self.latest_id()
        if self.shape.refuses({row.kind for row in rows}):
            with pytest.raises(RowKindError), self.table.new_write() as writer:
                write(writer)  # type: ignore[operator]
                writer.commit()
            assert self.latest_id() == before, "a refused write committed"
            self.steps.append("  refused, nothing written")
            return
        with self.table.new_write() as writer:
            write(writer)  # type: ignore[operator]
            writer.commit()
        written = self.model.write(rows)
        created = [s for s in self.table.snapshots() if s.id > (before or 0)]
        self.steps.append("  snapshots " + ", ".join(f"{s.id} {s.commit_kind}" for s in created))
        for snapshot in created:
            if snapshot.commit_kind == "APPEND":
                self.input_changes[snapshot.id] = written
                self.file_changes[snapshot.id] = self.model.commit_files(written)
        if any(s.commit_kind == "COMPACT" for s in created):
            self.compacted(full=False)
        if created:
            self.capture()

    def write_rows(self, writer: pc.TableWrite, op: Write) -> None:
        schema = self.table.arrow_schema
        names = {c.label: c.name for c in self.model.columns}
        for kind, rows in itertools.groupby(op.rows, key=lambda r: r[0]):
            writer.write(batch(list(rows), schema, names), row_kind=KIND_NAMES[kind])

    def compact(self, full: bool) -> None:
        before = self.latest_id()
        self.table.compact(full=full)
        if self.latest_id() == before:
            self.steps.append("  nothing to compact")
            if full:
                self.model.full_compaction()
            return
        self.steps.append(f"  snapshot {self.latest_id()} COMPACT")
        self.compacted(full=full)
        self.capture()

    def compacted(self, *, full: bool) -> None:
        """The model after a compaction of every bucket (``full``, or what the picker asked)."""
        levels = [f.level for f in self.table.files()]
        if full:
            assert set(levels) <= {NUM_LEVELS - 1}, f"a full compaction left files at levels {sorted(set(levels))}"
        if set(levels) <= {NUM_LEVELS - 1}:  # everything merged into the max level: a full compaction
            self.model.full_compaction()
            self.minor_since_full = False
            return
        self.minor_since_full = True
        forced = not self.shape.level0_visible() or self.shape.producer == "lookup"
        if forced:
            assert 0 not in levels, "a compaction of a first-row, deletion-vector or lookup table left level 0"
        self.model.minor_compaction(level0_left=0 in levels, lookup=self.shape.producer == "lookup")

    def evolve(self, change: str) -> None:
        model = self.model
        alive = {c.label: c for c in model.columns}
        n = alive.get("n")
        if change == "add_e" and "e" not in alive:
            self.table.alter([pc.AddColumn("e", pa.string())])
            model.add_column("e", pa.string())
        elif change == "widen_n" and n is not None and n.type == pa.int32():
            self.table.alter([pc.UpdateColumnType(n.name, pa.int64())])
            model.widen_column(n.name, pa.int64())
        elif change == "rename_n" and n is not None and n.name == "n":
            self.table.alter([pc.RenameColumn("n", "n2")])
            model.rename_column("n", "n2")
        elif change == "drop_n" and n is not None:
            self.table.alter([pc.DropColumn(n.name)])
            model.drop_column(n.name)
        else:
            self.steps.append("  not applicable")
            return
        self.states["schema evolved"] += 1

    def tag(self) -> None:
        latest = self.latest_id()
        if latest is None:
            return
        name = f"tag{len(self.tags)}"
        self.table.create_tag(name)
        self.tags[name] = self.captured[latest]

    def expire(self, retain: int) -> None:
        before = {s.id for s in self.table.snapshots()}
        self.table.expire_snapshots(dry_run=False, older_than=int(time.time() * 1000) + 1000,
                                    retain_min=retain, retain_max=retain)
        gone = before - {s.id for s in self.table.snapshots()}
        self.steps.append(f"  expired {sorted(gone)}")
        self.expired |= gone
        if gone:
            self.states["after expiry"] += 1

    # ---- helpers -----------------------------------------------------------------------------

    def capture(self) -> None:
        """Remember how the latest snapshot reads; where the model is exact, it must agree."""
        latest = self.latest_id()
        if latest is None:  # nothing committed yet (every row was a retraction ignore-delete dropped)
            return
        ours = self.table.read(snapshot_id=latest)
        expected = self.model.read() if self.model.exact else None
        if expected is not None:
            from tests.read_shapes.checks import assert_rows

            assert_rows(ours, expected, f"snapshot {latest} against the model")
        self.captured[latest] = Captured(latest, ours, expected)

    def latest_id(self) -> int | None:
        latest = self.table.latest_snapshot()
        return None if latest is None else latest.id

    def key(self, p: str, k: int) -> Key:
        return (p, k) if self.shape.partitioned else (k,)

    def key_table(self, keys: list[Key]) -> pa.Table:
        schema = self.table.arrow_schema
        return pa.table({name: [key[i] for key in keys] for i, name in enumerate(self.shape.keys)},
                        schema=pa.schema([schema.field(name) for name in self.shape.keys]))

    def alive(self, values: dict[str, object]) -> dict[str, object]:
        """Values of the columns the table has now (a row cannot carry a dropped or unborn column)."""
        labels = {c.label for c in self.model.columns}
        return {label: value for label, value in values.items() if label in labels}

    def state(self) -> str:
        """Where the LSM stands: ``level 0 only``, ``mixed levels`` or ``max level only``."""
        levels = {f.level for f in self.table.files()}
        if not levels:
            return "empty"
        if levels == {0}:
            return "level 0 only"
        if levels == {NUM_LEVELS - 1}:
            return "max level only"
        return "mixed levels"

    def story(self) -> str:
        return "\n".join(self.steps)
