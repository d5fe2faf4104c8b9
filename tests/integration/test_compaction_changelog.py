"""Changelog made by compactions (full-compaction, lookup): replay semantics for every engine.

The truth is the table itself: what a streaming reader sees at snapshot A (its initial full
read), with the changes of (A, B] applied by an independent key -> row replay, must equal what
B holds once its changes are produced (level 0 pushed up for lookup, one max-level run for
full-compaction). Keys nobody wrote between A and B must not appear in the changes.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.manifest import FILE_SOURCE_APPEND
from paimon_core.read.changes import change_entries

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("n", pa.int64()),
                    ("rk", pa.string())])
ENGINE_OPTIONS = {
    "deduplicate": {},
    "partial-update": {},
    "aggregation": {"fields.n.aggregate-function": "sum", "fields.v.aggregate-function": "last_non_null_value"},
    "first-row": {},
}


def history(seed: int, commits: int, engine: str) -> list[pa.Table]:
    """Random commits over 60 keys; deduplicate also updates and deletes present keys."""
    rng = random.Random(seed)
    present: set[int] = set()
    out = []
    for c in range(commits):
        rows: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 40)):
            key = rng.randrange(60)
            if engine == "deduplicate" and key in present and rng.random() < 0.25:
                present.discard(key)
                rows.append({"id": key, "v": None, "n": None, "rk": "-D"})
                continue
            value = None if engine == "partial-update" and rng.random() < 0.3 else f"c{c}-{rng.randrange(9)}"
            rows.append({"id": key, "v": value, "n": rng.randrange(-5, 20), "rk": "+I"})
            present.add(key)
        out.append(pa.Table.from_pylist(rows, schema=SCHEMA))
    return out


def model(batches: list[pa.Table], engine: str) -> dict[int, tuple[Any, Any]]:
    """What the table must hold after ``batches``, by each engine's definition."""
    state: dict[int, tuple[Any, Any]] = {}
    for row in (r for batch in batches for r in batch.to_pylist()):
        key, old = row["id"], state.get(row["id"])
        if row["rk"] == "-D":
            state.pop(key, None)
        elif old is None or engine == "deduplicate":
            state[key] = (row["v"], row["n"])
        elif engine == "partial-update":
            state[key] = (row["v"] if row["v"] is not None else old[0], row["n"])
        elif engine == "aggregation":
            state[key] = (row["v"] if row["v"] is not None else old[0], old[1] + row["n"])
    return state


def replay(state: dict[int, tuple[Any, Any]], changes: pa.Table) -> dict[int, tuple[Any, Any]]:
    state = dict(state)
    for row in changes.to_pylist():
        if row["_row_kind"] in ("+I", "+U"):
            state[row["id"]] = (row["v"], row["n"])
        else:
            assert state.pop(row["id"]) == (row["v"], row["n"]), f"{row} retracts a row that is not there"
    return state


def rows(table: pa.Table) -> dict[int, tuple[Any, Any]]:
    return {r["id"]: (r["v"], r["n"]) for r in table.to_pylist()}


def settled(table: pc.Table, snapshot_id: int, producer: str) -> bool:
    """Whether every change up to this snapshot has been produced."""
    levels = {f.level for f in table.files(snapshot_id)}
    if producer == "lookup":
        return 0 not in levels
    return levels <= {table.options.num_levels - 1}


def make_table(catalog: pc.Catalog, name: str, producer: str, engine: str, **options: str) -> pc.Table:
    return catalog.create_table(f"db.{name}", schema=SCHEMA, primary_keys=["id"], options={
        "bucket": "2", "rowkind.field": "rk", "changelog-producer": producer, "merge-engine": engine,
        "write-buffer-size": "4 kb", "num-sorted-run.compaction-trigger": "3", **ENGINE_OPTIONS[engine],
        **options})


def check_replay(table: pc.Table, producer: str, written: dict[int, set[int]], rng: random.Random) -> None:
    snapshots = [s.id for s in table.snapshots()]
    targets = [s for s in snapshots if settled(table, s, producer)]
    assert len(targets) >= 3
    for _ in range(6):
        a = rng.choice(snapshots)
        later = [s for s in targets if s > a]
        if not later:
            continue
        b = rng.choice(later)
        batches = []
        for batch in table.stream("from-snapshot-full", snapshot_id=a, until_latest=True):
            if batch.snapshot_id > b:
                break
            batches.append(batch)
        initial, changes = batches[0], [x.data.drop_columns(["rk"]) for x in batches[1:]]
        assert initial.initial and initial.snapshot_id == a
        state = rows(initial.data)
        for change in changes:
            state = replay(state, change)
        assert state == rows(table.read(snapshot_id=b)), f"changes ({a}, {b}] do not replay"
        # changes surface when compacted: writes since the last snapshot with all changes out
        produced = max((s for s in targets if s <= a), default=0)
        touched = {k for s in snapshots if produced < s <= b for k in written.get(s, set())}
        changed = {k for change in changes for k in change.column("id").to_pylist()}
        assert changed <= touched, f"keys {sorted(changed - touched)} changed without a write in ({a}, {b}]"


# Paimon refuses first-row with changelog-producer full-compaction (only none and lookup).
PRODUCER_ENGINES = [(p, e) for p in ("lookup", "full-compaction") for e in ENGINE_OPTIONS
                    if (p, e) != ("full-compaction", "first-row")]


@pytest.mark.parametrize(("producer", "engine"), PRODUCER_ENGINES)
def test_compacting_writers_produce_a_changelog_that_replays(catalog: pc.Catalog, producer: str,
                                                             engine: str) -> None:
    table = make_table(catalog, f"{producer}_{engine}".replace("-", "_"), producer, engine)
    written: dict[int, set[int]] = {}
    batches = history(7, 14, engine)
    for batch in batches:
        snapshot = table.write(batch)
        assert snapshot is not None
        written[snapshot] = set(batch.column("id").to_pylist())
    kinds = [s.commit_kind for s in table.snapshots()]
    assert kinds.count("COMPACT") >= 10  # every commit pushes its changes out (lookup-wait, delta-commits 1)
    assert rows(table.read()) == model(batches, engine)
    check_replay(table, producer, written, random.Random(3))


@pytest.mark.parametrize("engine", ["deduplicate", "aggregation"])
@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
@pytest.mark.parametrize("seed", [11, 12])
def test_dedicated_compactions_of_write_only_tables(catalog: pc.Catalog, producer: str, engine: str,
                                                    seed: int) -> None:
    periodic = {"full-compaction.delta-commits": "3"} if producer == "full-compaction" else {}  # Paimon:
    table = make_table(catalog, f"w{seed}_{producer}_{engine}".replace("-", "_"), producer, engine,  # not with lookup
                       **{"write-only": "true", **periodic})
    rng = random.Random(seed)
    written: dict[int, set[int]] = {}
    batches = history(seed, 16, engine)
    for batch in batches:
        snapshot = table.write(batch)
        assert snapshot is not None
        written[snapshot] = set(batch.column("id").to_pylist())
        if rng.random() < 0.5:
            table.compact()
    assert rows(table.read()) == model(batches, engine)
    table.compact(full=True)
    assert rows(table.read()) == model(batches, engine)
    if producer == "lookup":
        assert any(f.level not in (0, table.options.num_levels - 1) for s in table.snapshots()
                   for f in table.files(s.id)), "lookups into deeper levels were never exercised"
    check_replay(table, producer, written, rng)


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
@pytest.mark.parametrize("producer", ["lookup"])  # Paimon refuses deletion vectors with full-compaction
def test_deletion_vector_tables_produce_the_same_changelog(catalog: pc.Catalog, producer: str, engine: str) -> None:
    table = make_table(catalog, f"dv_{producer}_{engine}".replace("-", "_"), producer, engine,
                       **{"deletion-vectors.enabled": "true"})
    written: dict[int, set[int]] = {}
    batches = history(21, 12, engine)
    for batch in batches:
        snapshot = table.write(batch)
        assert snapshot is not None
        written[snapshot] = set(batch.column("id").to_pylist())
    assert rows(table.read()) == model(batches, engine)
    check_replay(table, producer, written, random.Random(5))


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_row_deduplicate_drops_updates_that_change_nothing(catalog: pc.Catalog, producer: str) -> None:
    table = make_table(catalog, f"dedupe_{producer}".replace("-", "_"), producer, "deduplicate",
                       **{"changelog-producer.row-deduplicate": "true",
                          "changelog-producer.row-deduplicate-ignore-fields": "rk"})
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"], "n": [1, 2], "rk": ["+I", "+I"]}, schema=SCHEMA))
    start = table.latest_snapshot().id
    table.write(pa.table({"id": [1, 2], "v": ["a", "B"], "n": [1, 2], "rk": ["+U", "+U"]}, schema=SCHEMA))
    changes = table.read_changes(start)
    assert [(r["_row_kind"], r["id"], r["v"]) for r in changes.to_pylist()] == [("-U", 2, "b"), ("+U", 2, "B")]


def test_full_compaction_changelog_files_are_paimon_changelog_files(catalog: pc.Catalog) -> None:
    table = make_table(catalog, "files", "full-compaction", "deduplicate", **{"write-only": "true"})
    table.write(history(5, 1, "deduplicate")[0])
    before = table.latest_snapshot().id
    result = table.compact()  # delta-commits defaults to 1 with this producer: a full compaction
    assert result.full and result.changelog_rows > 0
    snapshot = table.latest_snapshot()
    assert snapshot.id == before + 1 and snapshot.commit_kind == "COMPACT"
    assert snapshot.changelog_manifest_list is not None
    assert snapshot.changelog_record_count == result.changelog_rows == table.read().num_rows
    names = [p.name for p in Path(table.uri.removeprefix("file://")).rglob("changelog-*.parquet")]
    entries = change_entries(table.file_io, table.paths, snapshot, primary_key=True, producer="full-compaction")
    assert sorted(e.file.file_name for e in entries) == sorted(names) and names
    # as Java writes them: at the compaction's output level, sourced APPEND
    assert {(e.file.level, e.file.file_source) for e in entries} == {(table.options.num_levels - 1,
                                                                        FILE_SOURCE_APPEND)}


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_a_newer_record_ordered_first_by_sequence_field_still_changes_the_row(catalog: pc.Catalog, producer: str,
                                                                             engine: str) -> None:
    """The newer record sorts before the compacted row (its sequence.field is smaller), so the
    merged row keeps the old row's sequence number, yet holds the newer record's field."""
    schema = pa.schema([pa.field("k", pa.int64(), False), ("s", pa.int64()), ("n", pa.int32())])
    options = {"bucket": "1", "merge-engine": engine, "changelog-producer": producer, "sequence.field": "s"}
    if engine == "aggregation":
        options["fields.n.aggregate-function"] = "last_non_null_value"
    table = catalog.create_table("db.t", schema=schema, primary_keys=["k"], options=options)
    table.write(pa.table({"k": [0], "s": [1], "n": [None]}, schema=schema))
    table.write(pa.table({"k": [0], "s": [0], "n": [7]}, schema=schema))
    assert table.read().to_pylist() == [{"k": 0, "s": 1, "n": 7}]
    assert [(r["_row_kind"], r["n"]) for r in table.read_changes().to_pylist()] == [
        ("+I", None), ("-U", None), ("+U", 7)]
