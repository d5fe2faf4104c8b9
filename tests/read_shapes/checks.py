"""Every read shape of a table at one state, against the model (where it is exact) and against
the table's own full read (always): projections, filters, streaming and split reads, lookups,
time travel by snapshot, timestamp and tag, ``$audit_log`` and the metadata system tables, change
reads and streams.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pac
import pytest

import paimon_core as pc
from paimon_core.errors import SnapshotNotFoundError
from tests.read_shapes.runner import Run
from tests.read_shapes.shape import NUM_LEVELS


@dataclass(frozen=True)
class Depth:
    """How much of each state is checked."""

    name: str
    examples: int  # hypothesis examples per test
    max_ops: int
    every_projection: bool  # every single column, pair and all-but-one; else a few
    time_travel: int | None  # snapshots re-read per state (None: all)


QUICK = Depth("quick", examples=20, max_ops=9, every_projection=False, time_travel=2)
DEEP = Depth("deep", examples=400, max_ops=14, every_projection=True, time_travel=None)
DEPTHS = {d.name: d for d in (QUICK, DEEP)}


def rows_of(table: pa.Table) -> Counter[tuple[Any, ...]]:
    """Rows as a multiset; NaN (a product retracted by 0) counts as equal to NaN."""
    return Counter(tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row.values())
                   for row in table.to_pylist())


def assert_rows(ours: pa.Table, expected: pa.Table, what: str) -> None:
    """Same column names and types, and the same rows as multisets; the difference is shown."""
    assert ours.column_names == expected.column_names, f"{what}: columns {ours.column_names}, " \
                                                       f"expected {expected.column_names}"
    for name in expected.column_names:
        assert ours.schema.field(name).type == expected.schema.field(name).type, \
            f"{what}: column {name} is {ours.schema.field(name).type}, expected {expected.schema.field(name).type}"
    mine, theirs = rows_of(ours), rows_of(expected)
    if mine != theirs:
        raise AssertionError(f"{what}: {ours.num_rows} rows, expected {expected.num_rows}; "
                             f"unexpected {sorted(mine - theirs, key=repr)[:6]}; "
                             f"missing {sorted(theirs - mine, key=repr)[:6]}")


def check_state(run: Run, depth: Depth, rng: random.Random) -> None:
    """Every read shape at the table's current state."""
    table, model = run.table, run.model
    run.states[run.state()] += 1
    full = table.read()
    if model.exact:
        assert_rows(full, model.read(), "full read against the model")
        run.states["checked against the model"] += 1
    check_projections(table, full, depth, rng)
    check_filters(table, full)
    check_streaming_and_splits(table, full)
    check_lookup(table, full, rng)
    check_time_travel(run, depth, rng)
    check_system_tables(run, full)
    check_changes(run, full)


def projections(names: list[str], depth: Depth, rng: random.Random) -> list[list[str]]:
    """Key-only, value-only, a reordered subset; at depth, every column, pair and all-but-one."""
    keys = [n for n in names if n in ("p", "k")]
    values = [n for n in names if n not in keys]
    chosen = [keys[-1:], values[:1], values[-1:], list(reversed(names)), rng.sample(names, rng.randint(1, len(names)))]
    if depth.every_projection:
        chosen += [[n] for n in names] + [list(pair) for pair in itertools.combinations(names, 2)]
        chosen += [[n for n in names if n != left_out] for left_out in names]
    unique = []
    for columns in chosen:
        if columns and columns not in unique:
            unique.append(columns)
    return unique


def check_projections(table: pc.Table, full: pa.Table, depth: Depth, rng: random.Random) -> None:
    for columns in projections(full.column_names, depth, rng):
        assert_rows(table.read(columns=columns), full.select(columns), f"projection {columns}")


def filters(full: pa.Table) -> list[Any]:
    """A key filter, a value filter, an IS NULL, an OR of both kinds, and a partition filter."""
    value = "b" if "b" in full.column_names else full.column_names[-1]
    out: list[Any] = [[("k", ">=", 2)], [(value, "=", "x")], [("c", "is null")],
                      [[("k", "<", 2)], [("a", ">", 0)]], [("k", "in", [1, 3]), ("c", ">=", 0.0)]]
    if "p" in full.column_names:
        out.append([("p", "=", "y")])
    return out


def expression(dnf: list[Any]) -> pac.Expression:
    """A DNF filter as a pyarrow expression, written here from the filter's documented meaning."""
    clauses = dnf if dnf and isinstance(dnf[0], list) else [dnf]
    ops = {"=": lambda f, v: f == v, "!=": lambda f, v: f != v, "<": lambda f, v: f < v,
           "<=": lambda f, v: f <= v, ">": lambda f, v: f > v, ">=": lambda f, v: f >= v,
           "in": lambda f, v: f.isin(v), "is null": lambda f, v: f.is_null(),
           "is not null": lambda f, v: ~f.is_null()}
    out = None
    for clause in clauses:
        both = None
        for column, op, *value in clause:
            term = ops[op](pac.field(column), value[0] if value else None)
            both = term if both is None else both & term
        out = both if out is None else out | both
    assert out is not None
    return out


def check_filters(table: pc.Table, full: pa.Table) -> None:
    for dnf in filters(full):
        expected = full.filter(expression(dnf))
        assert_rows(table.read(filter=dnf), expected, f"filter {dnf}")
        columns = ["k", full.column_names[-1]]
        assert_rows(table.read(columns=columns, filter=dnf), expected.select(columns), f"projected filter {dnf}")


def check_streaming_and_splits(table: pc.Table, full: pa.Table) -> None:
    batches = list(table.to_batches(batch_size=3))
    streamed = pa.Table.from_batches(batches, schema=full.schema)
    assert_rows(streamed, full, "to_batches")
    split_reads = [table.read_split(split) for split in table.plan()]
    assert_rows(pa.concat_tables([full.schema.empty_table(), *split_reads]), full, "plan + read_split")
    dnf = [("k", ">=", 1)]
    projected = [table.read_split(split, columns=["k"], filter=dnf) for split in table.plan(filter=dnf)]
    expected = full.filter(expression(dnf)).select(["k"])
    assert_rows(pa.concat_tables([expected.schema.empty_table(), *projected]), expected, "filtered split reads")


def check_lookup(table: pc.Table, full: pa.Table, rng: random.Random) -> None:
    keys = [c for c in ("p", "k") if c in full.column_names]
    probe = pa.table({"p": ["x", "y", "x"], "k": [rng.randint(0, 6) for _ in range(3)]}).select(keys)
    probe = probe.cast(pa.schema([full.schema.field(k) for k in keys]))
    wanted = set(zip(*(probe.column(k).to_pylist() for k in keys)))
    mask = pa.array([key in wanted for key in zip(*(full.column(k).to_pylist() for k in keys))], pa.bool_())
    expected = full.filter(mask)
    assert_rows(table.lookup(probe), expected, "lookup")
    columns = [full.column_names[-1], "k"]
    assert_rows(table.lookup(probe, columns=columns), expected.select(columns), f"lookup of {columns}")


def check_time_travel(run: Run, depth: Depth, rng: random.Random) -> None:
    table = run.table
    alive = {s.id: s for s in table.snapshots()}
    ids = sorted(i for i in run.captured if i in alive)
    if depth.time_travel is not None and len(ids) > depth.time_travel:
        ids = sorted(rng.sample(ids, depth.time_travel))
    for sid in ids:
        captured = run.captured[sid]
        assert_rows(table.read(snapshot_id=sid), captured.ours, f"time travel to snapshot {sid}")
        at = table.snapshot_at(alive[sid].time_millis).id  # the newest snapshot of that millisecond
        assert_rows(table.read(timestamp_ms=alive[sid].time_millis), table.read(snapshot_id=at),
                    f"time travel to the time of snapshot {sid}")
    for sid in sorted(run.expired)[:2]:
        with pytest.raises(SnapshotNotFoundError):
            table.read(snapshot_id=sid)
    for name, captured in run.tags.items():
        assert_rows(table.read(tag=name), captured.ours, f"tag {name} (snapshot {captured.snapshot_id})")


def check_system_tables(run: Run, full: pa.Table) -> None:
    table, model = run.table, run.model
    audit = table.system("audit_log")
    visible = audit.filter(pac.is_in(audit.column("rowkind"), pa.array(["+I", "+U"])))
    assert_rows(visible.drop_columns(["rowkind"]), full, "$audit_log rows that are not retractions")
    if model.exact and model.retractions_known:
        assert_rows(audit, model.audit_log(), "$audit_log against the model")
    assert_rows(table.system_batches("audit_log").read_all(), audit, "$audit_log streamed")
    snapshots = table.system("snapshots").column("snapshot_id").to_pylist()
    assert snapshots == [s.id for s in table.snapshots()], "$snapshots"
    files = table.files()
    planned = [f for f in files if f.level > 0 or run.shape.level0_visible()]  # $files: a batch scan's files
    for name, listed in (("files", planned), ("partitions", files), ("buckets", files)):
        counted = pac.sum(table.system(name).column("record_count")).as_py() or 0
        stored = sum(f.row_count for f in listed)
        assert counted == stored, f"${name} counts {counted} records, the files hold {stored}"


def replay(changes: pa.Table, keys: list[str]) -> pa.Table:
    """Change rows applied in order: +I/+U put the row, -U/-D remove the key."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in changes.to_pylist():
        kind = row.pop("_row_kind")
        key = tuple(row[k] for k in keys)
        if kind in ("+I", "+U"):
            state[key] = row
        else:
            state.pop(key, None)
    schema = changes.schema.remove(changes.schema.get_field_index("_row_kind"))
    return pa.Table.from_pylist(list(state.values()), schema=schema)


def check_changes(run: Run, full: pa.Table) -> None:
    """Each commit's changes as the producer defines them; replayed changes give the table once
    everything written has surfaced; a stream returns what the change reads do."""
    table, model, shape = run.table, run.model, run.shape
    alive = {s.id for s in table.snapshots()}
    per_commit = {"input": run.input_changes, "none": run.file_changes}.get(shape.producer, {})
    for sid, records in per_commit.items():
        if sid in alive and sid - 1 in alive:
            assert_rows(table.read_changes(sid - 1, sid), model.changes(records),
                        f"changes of snapshot {sid} ({shape.producer})")
    everything = table.read_changes()
    levels = {f.level for f in table.files()}
    surfaced = {"lookup": 0 not in levels, "full-compaction": not run.minor_since_full and levels <= {NUM_LEVELS - 1},
                "input": True, "none": True}[shape.producer]
    replayable = shape.producer in ("lookup", "full-compaction") or (
        shape.engine == "deduplicate" and not shape.ignore_delete and not shape.sequence_field)
    if replayable and surfaced and not run.expired:
        truth = full if shape.producer in ("lookup", "full-compaction") else None
        if truth is None and model.exact:
            truth = model.merged_view()
        if truth is not None:
            assert_rows(replay(everything, shape.keys), truth, f"replayed {shape.producer} changes")
    check_stream(run, everything)


def check_stream(run: Run, everything: pa.Table) -> None:
    """``latest-full`` starts with what the producer has surfaced; ``from-snapshot`` of the first
    snapshot with changes returns the change reads' rows."""
    table, model, shape = run.table, run.model, run.shape
    batches = list(table.stream("latest-full", until_latest=True, poll_interval_s=0))
    initial = batches[0].data.drop_columns([pc.ROW_KIND]) if batches else None
    expected = None
    if model.exact and initial is not None:
        if shape.producer in ("none", "input"):
            expected = model.merged_view()
        elif shape.producer == "lookup":
            expected = model.rows(model.merged(prefix=model.pushed_up))
        elif not run.minor_since_full:
            expected = model.rows(model.merged(prefix=model.in_max_level))
    if expected is not None and initial is not None:
        assert_rows(initial, expected, f"initial batch of a latest-full stream ({shape.producer})")
    first = next((b.snapshot_id for b in table.iter_changes()), None)
    if first is not None:
        streamed = [b.data for b in table.stream("from-snapshot", snapshot_id=first, until_latest=True,
                                                 poll_interval_s=0)]
        assert_rows(pa.concat_tables([everything.schema.empty_table(), *streamed]),
                    table.read_changes(first - 1), "from-snapshot stream against read_changes")
