"""Compaction on real files: reads unchanged, LSM shape, upgrades, appends, conflicts, writers."""

from __future__ import annotations

import itertools
import logging
import multiprocessing as mp
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pac
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from paimon_core.cli import main
from paimon_core.compaction.compactor import TableCompactor
from paimon_core.errors import CommitConflictError
from paimon_core.keyvalue import SEQUENCE_NUMBER
from paimon_core.schema import AddColumn, SetOption
from paimon_core.threads import worker_threads
from tests.integration.conftest import EVENTS, events, files_under, merged_view

SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                    ("name", pa.string()), ("amount", pa.int64()), ("ver", pa.int64()), ("rk", pa.string())])


def batch(rng: np.random.Generator, commit: int, *, n: int = 400, keys: int = 600,
          deletes: bool = True) -> pa.Table:
    ids = rng.choice(keys, size=n, replace=False)
    kinds = np.where(rng.random(n) < (0.15 if deletes and commit else 0.0), "-D", "+I")
    return pa.table({"dt": np.where(ids % 2 == 0, "2024-01-01", "2024-01-02"), "id": ids,
                     "name": [f"c{commit}-{i}" if i % 5 else None for i in ids],
                     "amount": rng.integers(1, 100, n), "ver": rng.integers(0, 1000, n), "rk": kinds},
                    schema=SCHEMA)


def canonical(table: pa.Table) -> list[dict[str, Any]]:
    return table.sort_by([("dt", "ascending"), ("id", "ascending")]).to_pylist()


def make(catalog: pc.Catalog, name: str, commits: int = 8, seed: int = 7, **options: str) -> pc.Table:
    table = catalog.create_table(name, schema=SCHEMA, primary_keys=["dt", "id"], partition_keys=["dt"],
                                 options={"bucket": "2", "rowkind.field": "rk", "write-only": "true", **options})
    rng = np.random.default_rng(seed)
    deletes = options.get("merge-engine") not in ("first-row", "partial-update", "aggregation")
    for commit in range(commits):
        table.write(batch(rng, commit, deletes=deletes))
    return table


ENGINES = {
    "deduplicate": {},
    "deduplicate-small-files": {"target-file-size": "4 kb"},
    "sequence-field": {"sequence.field": "ver"},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.amount.aggregate-function": "sum",
                    "fields.ver.aggregate-function": "max"},
    "first-row": {"merge-engine": "first-row"},
}


@pytest.mark.parametrize("engine", list(ENGINES))
def test_compaction_never_changes_what_a_read_returns(catalog: pc.Catalog, engine: str) -> None:
    table = make(catalog, f"db.{engine.replace('-', '_')}", **ENGINES[engine])
    before_id = table.latest_snapshot().id  # type: ignore[union-attr]
    expected = canonical(merged_view(table))
    if engine == "first-row":  # its batch reads show no level 0, as Java's
        assert table.read().num_rows == 0 < len(expected)
    else:
        assert canonical(table.read()) == expected
    state = table.lsm_state()
    assert state.max_level0_files == 8 and all(b.pending for b in state.buckets)
    auto = table.compact()
    assert auto.snapshot_id is not None and table.latest_snapshot().commit_kind == "COMPACT"  # type: ignore[union-attr]
    assert canonical(merged_view(table)) == expected
    full = table.compact(full=True)
    assert canonical(table.read()) == expected
    after = table.lsm_state()
    assert after.max_level0_files == 0 and after.max_sorted_runs == 1 and after.debt_bytes == 0
    assert all(b.level_files[-1] == b.files for b in after.buckets)  # everything in the max level
    if engine != "first-row":
        assert canonical(table.read(snapshot_id=before_id)) == expected  # time travel: old files kept
    assert full.snapshot_id is None or full.full
    assert table.compact(full=True).snapshot_id is None  # nothing left to do


def test_full_compaction_drops_deletes_and_keeps_sequence_numbers(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.t")
    live = table.read().num_rows
    result = table.compact(full=True)
    assert sum(f.row_count for f in table.files()) == live == result.rows_out  # no -D rows remain
    assert result.bytes_in > result.bytes_out > 0 and result.files_in == 32  # 2 partitions x 2 buckets x 8
    assert {b.level_files_after[-1] for b in result.buckets} == {1}
    old = table.read(filter=[("id", "=", 4)]).to_pylist()
    table.write(pa.table({"dt": ["2024-01-01"], "id": [4], "name": ["newest"], "amount": [1], "ver": [0],
                          "rk": ["+I"]}, schema=SCHEMA))
    assert table.read(filter=[("id", "=", 4)]).column("name").to_pylist() == ["newest"], old
    sequences = [pq.read_table(next(Path(table.path).rglob(f.file_name)), columns=[SEQUENCE_NUMBER])
                 for f in table.files() if f.level > 0]
    assert max(pac.max(s.column(0)).as_py() for s in sequences) > 0


def test_big_disjoint_files_change_level_without_a_rewrite(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.big", schema=SCHEMA, primary_keys=["dt", "id"],
                                 options={"bucket": "1", "target-file-size": "16 kb", "write-only": "true"})
    rng = np.random.default_rng(1)
    for commit in range(3):  # disjoint id ranges: each commit's files overlap no other file
        ids = np.arange(commit * 5000, commit * 5000 + 5000)
        table.write(pa.table({"dt": ["d"] * 5000, "id": ids, "name": [f"n{i}" * 5 for i in ids],
                              "amount": rng.integers(0, 10**9, 5000), "ver": ids, "rk": ["+I"] * 5000},
                             schema=SCHEMA))
    names_before = {f.file_name for f in table.files()}
    expected = canonical(table.read())
    result = table.compact(full=True)
    (bucket,) = result.buckets
    assert bucket.files_upgraded > 0
    moved = {f.file_name for f in table.files()} & names_before
    assert len(moved) == bucket.files_upgraded and all(f.level == 5 for f in table.files())
    assert canonical(table.read()) == expected


def test_compaction_reads_old_schema_versions_and_writes_the_latest(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.evolving", commits=4)
    table.alter([AddColumn("note", pa.string())])
    rng = np.random.default_rng(3)
    table.write(batch(rng, 9).append_column("note", pa.array(["x"] * 400)))
    expected = canonical(table.read())
    table.compact(full=True)
    assert {f.schema_id for f in table.files()} == {table.schema.id}
    assert canonical(table.read()) == expected


def test_partitions_and_buckets_select_what_is_compacted(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.sel")
    result = table.compact(partitions={"dt": "2024-01-01"}, buckets=[1], full=True)
    assert [(b.partition, b.bucket) for b in result.buckets] == [("dt=2024-01-01", 1)]
    state = {(b.partition, b.bucket): b.level0_files for b in table.lsm_state().buckets}
    assert state[("dt=2024-01-01", 1)] == 0 and state[("dt=2024-01-02", 0)] == 8


# ---- append tables ------------------------------------------------------------------------------

def test_unaware_bucket_small_files_are_concatenated_in_order(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.ev", schema=EVENTS, partition_keys=["dt"], options={"write-only": "true"})
    for i in range(12):
        table.write(events(range(i * 10, i * 10 + 10)))
    table.write(events(range(5), dt="2024-01-02"))
    before = table.read()
    result = table.compact()
    assert [(b.partition, b.files_in, b.files_out) for b in result.buckets] == [("dt=2024-01-01", 12, 1)]
    after = table.read()
    assert after.filter(pac.field("dt") == "2024-01-01").column("id").to_pylist() == list(range(120))
    assert sorted(after.to_pylist(), key=str) == sorted(before.to_pylist(), key=str)
    assert len(table.files()) == 2


def test_fixed_bucket_append_keeps_sequence_ranges(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.fixed", schema=EVENTS, options={"bucket": "2", "bucket-key": "id",
                                                                      "write-only": "true"})
    for i in range(6):
        table.write(events(range(i * 10, i * 10 + 10)))
    ranges_before = {}
    for split in table.plan():
        files = split.files
        ranges_before[split.bucket] = (min(f.min_sequence_number for f in files),
                                       max(f.max_sequence_number for f in files))
    order_before = {s.bucket: table.read_split(s).column("id").to_pylist() for s in table.plan()}
    table.compact()  # a window of compaction.min.file-num (5) of the 6 files per bucket
    for split in table.plan():
        compacted, last = sorted(split.files, key=lambda f: f.min_sequence_number)
        assert compacted.file_source == 1 and compacted.min_sequence_number == ranges_before[split.bucket][0]
        assert compacted.max_sequence_number + 1 == last.min_sequence_number  # ranges stay contiguous
        assert last.max_sequence_number == ranges_before[split.bucket][1]
        assert table.read_split(split).column("id").to_pylist() == order_before[split.bucket]


def stored(table: pc.Table) -> list[Any]:
    """The table's data files in sequence order."""
    return sorted((f for split in table.plan() for f in split.files), key=lambda f: f.min_sequence_number)


# one group: unaware buckets close a group at twice the target, counting each file's open cost
@pytest.mark.parametrize(("bucket", "commits"), [("-1", 20), ("1", 40)])
def test_a_group_worth_several_files_is_rewritten_by_several_writers_as_one_would(catalog: pc.Catalog,
                                                                                  bucket: str, commits: int) -> None:
    options = {"write-only": "true", "target-file-size": "16 kb", "source.split.open-file-cost": "1 b",
               "bucket": bucket, **({"bucket-key": "id"} if bucket != "-1" else {})}
    table = catalog.create_table(f"db.sliced{bucket}", schema=EVENTS, options=options)
    for i in range(commits):
        table.write(events(range(i * 50, i * 50 + 50)))
    first = stored(table)[0].min_sequence_number
    before = table.read().column("id").to_pylist()
    result = table.compact(full=True)
    assert [(b.files_in, b.files_out) for b in result.buckets] == [(commits, min(2, worker_threads()))]
    written = stored(table)
    assert all(f.file_source == 1 for f in written)
    assert written[0].min_sequence_number == first  # numbered as one writer of the whole group numbers
    assert all(a.max_sequence_number + 1 == b.min_sequence_number for a, b in itertools.pairwise(written))
    assert written[-1].max_sequence_number == first + 50 * commits - 1
    assert table.read().column("id").to_pylist() == before == list(range(50 * commits))
    in_files = [pq.read_table(Path(table.path) / "bucket-0" / f.file_name).column("id").to_pylist() for f in written]
    assert [i for ids in in_files for i in ids] == before


def test_a_failed_writer_slice_leaves_nothing_behind(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.slicefail", schema=EVENTS,
                                 options={"write-only": "true", "target-file-size": "16 kb"})
    for i in range(30):
        table.write(events(range(i * 50, i * 50 + 50)))
    files = stored(table)
    gone = files[len(files) // 2]  # in the first group's last slice
    (Path(table.path) / "bucket-0" / gone.file_name).unlink()
    on_disk = files_under(Path(table.path))
    snapshot = table.latest_snapshot()
    with pytest.raises(Exception, match=gone.file_name):
        table.compact(full=True)
    assert files_under(Path(table.path)) == on_disk  # what the other writers wrote is removed again
    assert table.latest_snapshot() == snapshot


# ---- conflicts ------------------------------------------------------------------------------------

def test_a_compaction_whose_inputs_are_gone_fails_and_leaves_nothing_behind(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.race")
    expected = canonical(table.read())
    first = TableCompactor(table.context()).prepare(full=True)
    second = TableCompactor(table.context()).prepare(full=True)
    TableCompactor(table.context()).commit(first)
    on_disk = files_under(Path(table.path))
    with pytest.raises(CommitConflictError, match="conflicts with a concurrent commit"):
        TableCompactor(table.context()).commit(second)
    written = {f.file_name for i in second.increments for f in i.new_files}
    remaining = {Path(p).name for p in files_under(Path(table.path))}
    assert written and not written & remaining
    assert files_under(Path(table.path)) - on_disk <= {p for p in files_under(Path(table.path))
                                                       if "manifest" in p or "snapshot" in p}
    assert canonical(table.read()) == expected


def test_an_overwrite_between_plan_and_commit_wins(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.ow")
    prepared = TableCompactor(table.context()).prepare(full=True)
    table.write(batch(np.random.default_rng(5), 0).filter(pac.field("dt") == "2024-01-01"),
                overwrite={"dt": "2024-01-01"})
    expected = canonical(table.read())
    with pytest.raises(CommitConflictError):
        TableCompactor(table.context()).commit(prepared)
    assert canonical(table.read()) == expected


def _appender(warehouse: str, commits: int, queue: Any) -> None:
    try:
        table = pc.Catalog(warehouse).get_table("db.cc")
        for i in range(commits):
            ids = list(range(i * 7, i * 7 + 50))  # overlapping keys: later commits update earlier ones
            table.write(pa.table({"dt": ["d"] * 50, "id": ids, "name": [f"w{i}"] * 50, "amount": ids,
                                  "ver": [i] * 50, "rk": ["+I"] * 50}, schema=SCHEMA))
        queue.put(("appender", "ok"))
    except Exception as exc:  # reported to the test instead of hanging it
        queue.put(("appender", repr(exc)))


def _compactor(warehouse: str, stop: Any, queue: Any) -> None:
    landed = conflicts = 0
    try:
        table = pc.Catalog(warehouse).get_table("db.cc")
        while not stop.is_set():
            try:
                if table.compact().snapshot_id is not None:
                    landed += 1
            except CommitConflictError:
                conflicts += 1
        queue.put(("compactor", (landed, conflicts)))
    except Exception as exc:
        queue.put(("compactor", repr(exc)))


def test_concurrent_append_and_compact_processes_both_land(catalog: pc.Catalog, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    options = {"bucket": "2", "write-only": "true", "num-sorted-run.compaction-trigger": "2"}
    catalog.create_table("db.cc", schema=SCHEMA, primary_keys=["dt", "id"], options=options)
    twin = catalog.create_table("db.twin", schema=SCHEMA, primary_keys=["dt", "id"], options=options)
    commits = 25
    ctx = mp.get_context("spawn")
    stop, queue = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_appender, args=(warehouse, commits, queue)),
             ctx.Process(target=_compactor, args=(warehouse, stop, queue))]
    for proc in procs:
        proc.start()
    first = queue.get(timeout=240)
    stop.set()
    second = queue.get(timeout=240)
    for proc in procs:
        proc.join(timeout=60)
    outcome = dict([first, second])
    assert outcome["appender"] == "ok", outcome
    landed, _ = outcome["compactor"]
    table = catalog.get_table("db.cc")
    kinds = [s.commit_kind for s in table.snapshots()]
    assert kinds.count("APPEND") == commits and landed >= 1 and kinds.count("COMPACT") == landed
    for i in range(commits):
        ids = list(range(i * 7, i * 7 + 50))
        twin.write(pa.table({"dt": ["d"] * 50, "id": ids, "name": [f"w{i}"] * 50, "amount": ids,
                             "ver": [i] * 50, "rk": ["+I"] * 50}, schema=SCHEMA))
    assert canonical(table.read()) == canonical(twin.read())


# ---- writers: compacting, write-only, stall -------------------------------------------------------------

def test_compacting_writers_keep_level0_below_the_trigger(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.auto", commits=10, **{"write-only": "false", "num-sorted-run.compaction-trigger": "3"})
    state = table.lsm_state()
    assert state.max_sorted_runs <= 3, state.rows()
    assert "COMPACT" in {s.commit_kind for s in table.snapshots()}
    with table.new_write() as writer:
        writer.write(batch(np.random.default_rng(11), 1))
        writer.commit()
    assert writer.stall_seconds == 0.0


def test_write_only_writers_never_compact(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.wo", commits=10)
    assert {s.commit_kind for s in table.snapshots()} == {"APPEND"}
    assert table.lsm_state().max_level0_files == 10


def test_a_writer_stalls_while_a_bucket_is_over_the_stop_trigger(catalog: pc.Catalog,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    table = make(catalog, "db.stall", commits=10)  # write-only: 10 level-0 runs pile up
    table.alter([SetOption("write-only", "false")])
    expected_runs = table.options.sorted_run_stop_trigger
    assert table.lsm_state().max_sorted_runs > expected_runs
    with caplog.at_level(logging.WARNING, logger="paimon_core.table"), table.new_write() as writer:
        assert writer.stall_seconds > 0  # the stall happened before the writer accepted rows
        assert table.lsm_state().max_sorted_runs <= expected_runs
        writer.write(batch(np.random.default_rng(2), 3))
        writer.commit()
    assert any("write stall" in r.message for r in caplog.records)


def test_deletion_vector_tables_mask_old_rows_instead_of_rewriting_them(catalog: pc.Catalog) -> None:
    options = {"deletion-vectors.enabled": "true", "write-only": "false"}
    table = make(catalog, "db.dv", commits=6, **options)
    twin = make(catalog, "db.dv_twin", commits=6)  # same rows, plain merge-on-read
    assert canonical(table.read()) == canonical(twin.read())
    state = table.lsm_state()
    assert state.max_level0_files == 0  # writers of DV tables push level 0 up at every commit
    deeper = [f for f in table.files() if f.level == 5]
    upper = [f for f in table.files() if 0 < f.level < 5]
    assert deeper and upper  # old rows stay in place, masked by deletion vectors
    splits = table.plan()
    assert any(s.deletion_files for s in splits)
    # levels >= 1 hold each key live once: reading them without any merge gives the table
    raw = [table.read_split(replace(s, files=(f,))) for s in splits for f in s.files]
    assert canonical(pa.concat_tables(raw)) == canonical(twin.read())
    before = {f.file_name for f in table.files()}
    table.compact(full=True)
    assert not any(s.deletion_files for s in table.plan())  # a full compaction consumes every vector
    assert canonical(table.read()) == canonical(twin.read()) and before != {f.file_name for f in table.files()}


def test_concurrent_compactions_of_a_deletion_vector_bucket_conflict(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.dvrace", commits=3, **{"deletion-vectors.enabled": "true"})
    TableCompactor(table.context()).compact()
    table.write(batch(np.random.default_rng(9), 4))
    first, second = TableCompactor(table.context()).prepare(), TableCompactor(table.context()).prepare()
    TableCompactor(table.context()).commit(first)
    expected = canonical(table.read())
    with pytest.raises(CommitConflictError):
        TableCompactor(table.context()).commit(second)
    leftovers = {e.file_name for i in second.increments for e in i.index_after}
    assert not any((Path(table.path) / "index" / name).exists() for name in leftovers)
    assert canonical(table.read()) == expected


def test_cli_lsm_and_compact(catalog: pc.Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make(catalog, "db.cli")
    warehouse = str(tmp_path / "warehouse")
    assert main(["--warehouse", warehouse, "lsm", "db.cli"]) == 0
    shown = capsys.readouterr().out
    assert "8/0/0/0/0/0" in shown and "size-amplification" in shown and "max L0 files 8" in shown
    assert main(["--warehouse", warehouse, "compact", "db.cli", "--partition", "dt=2024-01-02", "--full"]) == 0
    shown = capsys.readouterr().out
    assert "dt=2024-01-02" in shown and "dt=2024-01-01" not in shown and "0/0/0/0/0/1" in shown
    assert main(["--warehouse", warehouse, "lsm", "db.cli", "--partition", "dt=2024-01-02"]) == 0
    assert "max L0 files 0" in capsys.readouterr().out
    assert main(["--warehouse", warehouse, "compact", "db.cli", "--partition", "nope=1"]) == 1
    assert "not partition keys" in capsys.readouterr().err


def test_gentle_lookup_compaction_lets_level0_wait(catalog: pc.Catalog) -> None:
    radical = make(catalog, "db.radical", commits=4, **{"merge-engine": "first-row", "write-only": "false"})
    assert radical.lsm_state().max_level0_files == 0  # pushed up at every commit
    gentle = make(catalog, "db.gentle", commits=4, **{"merge-engine": "first-row", "write-only": "false",
                                                      "lookup-compact": "gentle"})
    assert gentle.lsm_state().max_level0_files == 4  # below the trigger (5) and max-interval (10)
    assert canonical(merged_view(gentle)) == canonical(radical.read())
    assert gentle.read().num_rows == 0  # batch reads see first-row tables' rows once out of level 0


def test_dynamic_bucket_tables_compact_and_keep_their_hash_index(catalog: pc.Catalog) -> None:
    table = make(catalog, "db.dyn", **{"bucket": "-1", "dynamic-bucket.target-row-num": "100"})
    index = table.latest_snapshot().index_manifest  # type: ignore[union-attr]
    expected = canonical(table.read())
    result = table.compact(full=True)
    assert result.snapshot_id is not None and len(result.buckets) > 2
    assert table.latest_snapshot().index_manifest == index  # type: ignore[union-attr]
    assert canonical(table.read()) == expected
    table.write(batch(np.random.default_rng(12), 3))  # keys still find their buckets
    placement: dict[tuple[str, int], int] = {}
    for split in table.plan():
        for row in table.read_split(split, columns=["dt", "id"]).to_pylist():
            assert (row["dt"], row["id"]) not in placement
            placement[(row["dt"], row["id"])] = split.bucket


def test_partitions_may_be_given_as_the_paths_lsm_state_reports(catalog: pc.Catalog) -> None:
    schema = pa.schema([pa.field("d", pa.date32(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                        ("v", pa.string())])
    table = catalog.create_table("db.dated", schema=schema, primary_keys=["d", "id"], partition_keys=["d"],
                                 options={"bucket": "1", "write-only": "true"})
    for i in range(3):
        table.write(pa.table({"d": pa.array([19723, 19724], pa.int32()).cast(pa.date32()), "id": [1, 2],
                              "v": [f"v{i}"] * 2}, schema=schema))
    paths = sorted(b.partition for b in table.lsm_state().buckets)
    assert paths == ["d=19723", "d=19724"]  # DATE partitions are day numbers in paths (legacy names)
    result = table.compact(partitions=paths[1], full=True)
    assert [b.partition for b in result.buckets] == ["d=19724"]
