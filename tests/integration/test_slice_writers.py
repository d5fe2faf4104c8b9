"""Slice writers: each of many writers takes its part of the input, in input order, and writes
every bucket it meets; one commit of their files merges as one writer's write of the whole input.

The reference is one writer given the same batches in the same order (itself checked against Java
Paimon and pypaimon elsewhere). Keys repeat across slices with every row kind, so a later slice's
version must win for every merge engine, with or without a sequence field, in line compaction,
deletion vectors or an input changelog; before and after a full compaction, and for the next
writer, which must number its rows above every slice's.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.errors import InvalidArgumentError, SchemaError, UnsupportedFeatureError
from paimon_core.write.input_slice import SEQUENCE_SPAN
from tests.integration.conftest import merged_view

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64()), ("ts", pa.int64()),
                    ("op", pa.string())])
KEYS = [("dt", "ascending"), ("id", "ascending")]
KINDS = ("+I", "+U", "-U", "-D")

# Every merge engine and the options that change how versions meet.
ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "deduplicate-sequence-field": {"sequence.field": "ts"},
    "deduplicate-not-write-only": {"write-only": "false"},
    "deduplicate-deletion-vectors": {"deletion-vectors.enabled": "true", "write-only": "false"},
    "deduplicate-input-changelog": {"changelog-producer": "input"},
    "partial-update": {"merge-engine": "partial-update", "ignore-delete": "true"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                    "fields.ts.aggregate-function": "max", "fields.ts.ignore-retract": "true",
                    "fields.op.aggregate-function": "last_non_null_value", "fields.op.ignore-retract": "true"},
    "first-row": {"merge-engine": "first-row", "ignore-delete": "true"},
}


def changes(n: int, *, seed: int, ids: int, kinds: tuple[str, ...] = KINDS) -> pa.Table:
    """``n`` changes to ``ids`` keys over two days, nulls in ``v``, each row's kind in ``op``."""
    rng = np.random.default_rng(seed)
    v = rng.integers(-1000, 1000, n)
    return pa.table({
        "dt": pa.array([f"2024-01-0{1 + d}" for d in rng.integers(0, 2, n)]),
        "id": pa.array(rng.integers(0, ids, n)),
        "v": pa.array(v, mask=rng.random(n) < 0.1),
        "ts": pa.array(rng.integers(0, 50, n)),
        "op": pa.array([kinds[k] for k in rng.integers(0, len(kinds), n)]),
    }, schema=SCHEMA)


def table_of(catalog: pc.Catalog, name: str, options: dict[str, str]) -> pc.Table:
    return catalog.create_table(f"db.{name}", schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                options={"bucket": "3", "write-only": "true", "rowkind.field": "op", **options})


def sliced(table: pc.Table, parts: list[pa.Table], **commit: Any) -> pc.CommitOutcome:
    """One writer per part (part ``i`` is slice ``i``), prepared in reverse order, one commit."""
    prepared: list[bytes] = []
    for index in reversed(range(len(parts))):
        with table.new_write(input_slice=(index, len(parts))) as writer:
            writer.write(parts[index])
            prepared.append(writer.prepare().to_bytes())
    return table.commit(prepared, **commit)


def view(table: pc.Table, options: dict[str, str]) -> pa.Table:
    """What a reader sees: level 0 included where the batch read leaves it out."""
    skips_level0 = options.get("deletion-vectors.enabled") == "true" or options.get("merge-engine") == "first-row"
    return (merged_view(table) if skips_level0 else table.read()).sort_by(KEYS)


def kinds_for(options: dict[str, str]) -> tuple[str, ...]:
    """Row kinds the engine takes (partial-update and first-row drop deletes; aggregation by sum
    retracts, first-row refuses -U)."""
    if options.get("merge-engine") == "first-row":
        return ("+I",)
    if options.get("merge-engine") == "partial-update":
        return ("+I", "+U")
    return KINDS


def latest_changes(table: pc.Table) -> pa.Table:
    """The latest commit's changelog rows, in one order whatever files they came in."""
    latest = table.latest_snapshot()
    assert latest is not None
    rows = table.read_changes(latest.id - 1, latest.id)
    return rows.sort_by([(name, "ascending") for name in rows.schema.names])


def level0_files(table: pc.Table) -> int:
    return sum(1 for split in table.plan() for f in split.files if f.level == 0)


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("slices", [2, 5])
def test_slices_merge_as_one_writer(catalog: pc.Catalog, engine: str, slices: int) -> None:
    options = ENGINES[engine]
    kinds = kinds_for(options)
    single, fanned = table_of(catalog, "single", options), table_of(catalog, "fanned", options)
    for round_ in range(3):
        data = changes(3_000, seed=round_, ids=400, kinds=kinds)
        bounds = np.linspace(0, data.num_rows, slices + 1).astype(int)
        parts = [data.slice(int(a), int(b - a)) for a, b in itertools.pairwise(bounds)]
        single.write(data)
        outcome = sliced(fanned, parts, commit_user="job", commit_identifier=round_ + 1)
        assert outcome.data_snapshot is not None
        assert view(fanned, options).equals(view(single, options)), (engine, round_)
        if options.get("changelog-producer") == "input":  # the commit's changelog: its input, as written
            assert latest_changes(fanned).equals(latest_changes(single))
            assert latest_changes(fanned).num_rows == data.num_rows
        if round_ == 1:  # a single writer on top: it numbers its rows above every slice's
            extra = changes(500, seed=99, ids=400, kinds=kinds)
            single.write(extra)
            fanned.write(extra)
            assert view(fanned, options).equals(view(single, options))
    fanned.compact(full=True)
    single.compact(full=True)
    assert fanned.read().sort_by(KEYS).equals(single.read().sort_by(KEYS))


def test_later_slices_win_and_sequence_numbers_leave_room(catalog: pc.Catalog) -> None:
    table = table_of(catalog, "order", {"bucket": "1"})
    first = pa.table({"dt": ["2024-01-01"] * 2, "id": [1, 2], "v": [10, 20], "ts": [0, 0], "op": ["+I", "+I"]},
                     schema=SCHEMA)
    second = pa.table({"dt": ["2024-01-01"] * 2, "id": [1, 2], "v": [11, None], "ts": [0, 0], "op": ["+U", "-D"]},
                      schema=SCHEMA)
    sliced(table, [first, second], commit_user="u", commit_identifier=1)
    assert table.read().to_pylist() == [{"dt": "2024-01-01", "id": 1, "v": 11, "ts": 0, "op": "+U"}]
    numbers = sorted((f.min_sequence_number, f.max_sequence_number) for s in table.plan() for f in s.files)
    assert numbers == [(0, 1), (SEQUENCE_SPAN, SEQUENCE_SPAN + 1)]
    assert level0_files(table) == 2
    table.write(first)  # the next writer starts above the last slice
    assert table.read().sort_by(KEYS)["v"].to_pylist() == [10, 20]
    assert max(f.max_sequence_number for s in table.plan() for f in s.files) == SEQUENCE_SPAN + 3


def test_slices_are_refused_where_they_cannot_keep_the_order(catalog: pc.Catalog) -> None:
    dynamic = table_of(catalog, "dynamic", {"bucket": "-1"})
    with pytest.raises(UnsupportedFeatureError, match="dynamic-bucket table"):
        dynamic.new_write(input_slice=(0, 2))
    logs = catalog.create_table("db.logs", schema=SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
    with pytest.raises(UnsupportedFeatureError, match="append table without buckets"):
        logs.new_write(input_slice=(0, 2))
    fixed = table_of(catalog, "fixed", {})
    with pytest.raises(InvalidArgumentError, match="a shard .* or a slice"):
        fixed.new_write(shard=(0, 2), input_slice=(0, 2))
    with pytest.raises(SchemaError, match="slice 2 of 2 does not exist"):
        fixed.new_write(input_slice=(2, 2))
    assert fixed.latest_snapshot() is None


def test_fixed_bucket_append_slices_keep_input_order(catalog: pc.Catalog) -> None:
    options = {"bucket": "2", "bucket-key": "id"}
    single = catalog.create_table("db.a1", schema=SCHEMA, partition_keys=["dt"], options=options)
    fanned = catalog.create_table("db.a2", schema=SCHEMA, partition_keys=["dt"], options=options)
    data = changes(4_000, seed=3, ids=100, kinds=("+I",))
    single.write(data)
    sliced(fanned, [data.slice(0, 1_500), data.slice(1_500)], commit_user="u", commit_identifier=1)
    # Within a bucket, files in sequence order read the rows in input order.
    assert fanned.read().equals(single.read())
