"""Two-phase writes: many writers prepare commit messages, one commit makes them one snapshot."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.binary_row import serialize_with_arity
from paimon_core.errors import CommitConflictError, CorruptMetadataError, SchemaError, UnsupportedFeatureError
from paimon_core.types import parse_type_string
from tests.integration.conftest import files_under

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64()), ("s", pa.string())])
KEYS = [("dt", "ascending"), ("id", "ascending")]


def rows(n: int, *, seed: int = 0, days: int = 3, ids: int | None = None) -> pa.Table:
    rng = np.random.default_rng(seed)
    key = rng.integers(0, ids or n, n)
    return pa.table({"dt": pa.array([f"2024-01-0{1 + d}" for d in rng.integers(0, days, n)]),
                     "id": pa.array(key), "v": pa.array(rng.integers(0, 1 << 40, n)),
                     "s": pa.array([f"s{k % 97}" for k in key])}, schema=SCHEMA)


def pk_table(catalog: pc.Catalog, name: str, **options: str) -> pc.Table:
    return catalog.create_table(f"db.{name}", schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                options={"bucket": "4", "write-only": "true", **options})


def placement(table: pc.Table) -> list[tuple[str, int, int, int, int, int]]:
    """Where every row landed: (partition, bucket, level, rows, first and last sequence number)."""
    snapshot = table.latest_snapshot()
    assert snapshot is not None
    out = []
    for split in table.plan():
        for f in split.files:
            out.append((str(split.partition), split.bucket, f.level, f.row_count, f.min_sequence_number,
                        f.max_sequence_number))
    return sorted(out)


def sharded_write(table: pc.Table, batches: list[pa.Table], count: int) -> list[bytes]:
    """``count`` writers, each seeing every batch and writing its own buckets."""
    out = []
    for index in range(count):
        with table.new_write(shard=(index, count)) as writer:
            for batch in batches:
                writer.write(batch)
            out.append(writer.prepare().to_bytes())
    return out


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_sharded_writers_make_the_table_one_writer_makes(catalog: pc.Catalog, workers: int) -> None:
    batches = [rows(20_000, seed=s, ids=15_000) for s in range(3)]
    single = pk_table(catalog, "single")
    with single.new_write() as writer:
        for batch in batches:
            writer.write(batch)
        writer.commit()
    fanned = pk_table(catalog, "fanned")
    prepared = sharded_write(fanned, batches, workers)
    assert [fanned.latest_snapshot()] == [None]  # prepared, nothing visible
    outcome = fanned.commit(prepared, commit_user="job-1", commit_identifier=7)
    assert outcome.data_snapshot == 1 and len(fanned.snapshots()) == 1
    assert fanned.read().sort_by(KEYS).equals(single.read().sort_by(KEYS))
    assert placement(fanned) == placement(single)
    written = [pc.PreparedCommit.from_bytes(p).rows for p in prepared]
    assert sum(written) == sum(b.num_rows for b in batches)

    # a second round on top: sequence numbers continue per bucket as for one writer
    more = [rows(5_000, seed=9, ids=15_000)]
    with single.new_write() as writer:
        writer.write(more[0])
        writer.commit()
    fanned.commit(sharded_write(fanned, more, workers), commit_user="job-1", commit_identifier=8)
    assert placement(fanned) == placement(single)
    assert fanned.read().sort_by(KEYS).equals(single.read().sort_by(KEYS))


def test_each_bucket_has_exactly_one_owner() -> None:
    string = parse_type_string("STRING")
    for count in (1, 2, 3, 5):
        for day in range(10):
            row = serialize_with_arity([f"2024-01-{day:02d}"], [string])
            for bucket in range(16):
                owners = [i for i in range(count) if pc.Shard(i, count).owns(row, bucket)]
                assert len(owners) == 1


def test_recommitting_the_same_messages_commits_nothing_twice(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "t")
    prepared = sharded_write(table, [rows(3_000)], 2)
    first = table.commit(prepared, commit_user="run-a", commit_identifier=1)
    again = table.commit(prepared, commit_user="run-a", commit_identifier=1)
    assert again.data_snapshot == first.data_snapshot == 1
    assert len(table.snapshots()) == 1
    assert table.read().num_rows == rows(3_000).group_by(["dt", "id"]).aggregate([]).num_rows


def test_messages_round_trip_through_bytes(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "t", **{"changelog-producer": "input"})
    with table.new_write(shard=(0, 2)) as writer:
        writer.write(rows(2_000))
        prepared = writer.prepare()
    back = pc.PreparedCommit.from_bytes(prepared.to_bytes())
    assert back.table == "db.t" and back.rows == prepared.rows and back.schema_id == prepared.schema_id
    assert [(m.partition.row, m.partition.path, m.bucket, m.total_buckets, m.new_files, m.changelog_files)
            for m in back.data] == [(m.partition.row, m.partition.path, m.bucket, m.total_buckets, m.new_files,
                                     m.changelog_files) for m in prepared.data]
    assert all(m.changelog_files for m in back.data)
    table.commit([back])
    assert table.read().num_rows == sum(f.row_count for m in back.data for f in m.new_files) > 0


def test_bad_messages_are_refused_and_change_nothing(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "t")
    other = pk_table(catalog, "other")
    prepared = sharded_write(other, [rows(500)], 1)
    with pytest.raises(SchemaError, match=r"db\.other cannot be committed to table db\.t"):
        table.commit(prepared)
    with pytest.raises(CorruptMetadataError, match="PDCM"):
        table.commit([b"not messages"])
    with pytest.raises(CorruptMetadataError, match="version 9"):
        table.commit([b"PDCM\x09rest"])
    with pytest.raises(SchemaError, match="shard 2 of 2 does not exist"):
        table.new_write(shard=(2, 2))
    same = sharded_write(table, [rows(500)], 1)
    with pytest.raises(SchemaError, match="in the commit messages twice"):
        table.commit(same + same)
    assert table.latest_snapshot() is None
    append = catalog.create_table("db.logs", schema=SCHEMA, options={"bucket": "-1"})
    with pytest.raises(UnsupportedFeatureError, match="own slice of the input"):
        append.new_write(shard=(0, 2))


def test_unaware_append_writers_take_slices_of_the_input(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.logs", schema=SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
    data = rows(30_000)
    prepared = []
    for offset in range(0, data.num_rows, 10_000):
        with table.new_write() as writer:
            writer.write(data.slice(offset, 10_000))
            prepared.append(writer.prepare())
    outcome = table.commit(prepared, commit_user="u", commit_identifier=1)
    assert outcome.data_snapshot == 1 and len(table.snapshots()) == 1
    assert table.read().sort_by([*KEYS, ("v", "ascending")]).equals(data.sort_by([*KEYS, ("v", "ascending")]))


def test_fixed_bucket_append_writers_own_buckets(catalog: pc.Catalog) -> None:
    options = {"bucket": "3", "bucket-key": "id"}
    single = catalog.create_table("db.a1", schema=SCHEMA, partition_keys=["dt"], options=options)
    fanned = catalog.create_table("db.a2", schema=SCHEMA, partition_keys=["dt"], options=options)
    data = rows(9_000)
    single.write(data)
    fanned.commit(sharded_write(fanned, [data], 2))
    assert placement(fanned) == placement(single)


def test_dynamic_bucket_writers_own_partitions(catalog: pc.Catalog) -> None:
    options = {"bucket": "-1", "dynamic-bucket.target-row-num": "2000", "write-only": "true"}
    single = pk_table(catalog, "d1", **options)
    fanned = pk_table(catalog, "d2", **options)
    for seed in range(2):
        data = rows(8_000, seed=seed, ids=6_000)
        single.write(data)
        fanned.commit(sharded_write(fanned, [data], 2))
        assert fanned.read().sort_by(KEYS).equals(single.read().sort_by(KEYS))
        assert placement(fanned) == placement(single)

    # writers that assigned buckets from different indexes cannot be committed together
    with fanned.new_write(shard=(0, 2)) as early:
        early.write(rows(1_000, seed=5, ids=20_000))
        stale = early.prepare()
    fanned.commit(sharded_write(fanned, [rows(1_000, seed=6, ids=20_000)], 2))
    fresh = sharded_write(fanned, [rows(1_000, seed=7, ids=20_000)], 2)
    with pytest.raises(CommitConflictError, match="different indexes"):
        fanned.commit([stale, pc.PreparedCommit.from_bytes(fresh[1])])


def test_fanned_out_compaction_equals_one_compaction(catalog: pc.Catalog) -> None:
    options = {"changelog-producer": "full-compaction"}
    one = pk_table(catalog, "one", **options)
    many = pk_table(catalog, "many", **options)
    per_task = pk_table(catalog, "per_task", **options)
    for seed in range(4):
        data = rows(6_000, seed=seed, ids=5_000)
        for table in (one, many, per_task):
            table.write(data)
    one.compact(full=True)
    tasks = [many.prepare_compaction(full=True, shard=(i, 3)) for i in range(3)]
    assert many.latest_snapshot().id == 4  # type: ignore[union-attr]
    compacted = [(c.partition.path, c.bucket) for t in tasks for c in t.compactions]
    assert len(compacted) == len(set(compacted)) == 12  # 3 partitions x 4 buckets, each once
    outcome = many.commit([t.to_bytes() for t in tasks], commit_user="compact-job", commit_identifier=1)
    assert outcome.compaction is not None and len(outcome.compaction.buckets) == 12
    assert len(many.snapshots()) == 5
    for i in range(3):  # one commit per task: progress survives a failed task
        per_task.commit([per_task.prepare_compaction(full=True, shard=(i, 3))])
    assert len(per_task.snapshots()) == 7
    for table in (many, per_task):
        assert table.read().sort_by(KEYS).equals(one.read().sort_by(KEYS))
        assert placement(table) == placement(one)
        changes = table.read_changes(4, None).sort_by([*KEYS, (pc.ROW_KIND, "ascending")])
        assert changes.equals(one.read_changes(4, None).sort_by([*KEYS, (pc.ROW_KIND, "ascending")]))
    again = many.commit([t.to_bytes() for t in tasks], commit_user="compact-job", commit_identifier=1)
    assert again.compaction_snapshot == outcome.compaction_snapshot and len(many.snapshots()) == 5


_KILLED_WRITER = textwrap.dedent("""
    import sys
    import numpy as np, pyarrow as pa
    import paimon_core as pc
    table = pc.Catalog(sys.argv[1]).get_table("db.t")
    writer = table.new_write(WRITER_ARGS)
    rng = np.random.default_rng(1)
    while True:  # until killed: flushes level-0 files as the small write buffer fills
        n = 50_000
        writer.write(pa.table({"dt": pa.array(["2024-01-01"] * n), "id": pa.array(rng.integers(0, 10**9, n)),
                               "v": pa.array(rng.integers(0, 10, n)), "s": pa.array(["x"] * n)}))
""")


def sliced_write(table: pc.Table, data: pa.Table, count: int) -> list[bytes]:
    """``count`` slice writers, writer ``i`` given part ``i`` of ``data`` in order."""
    out = []
    bounds = [i * data.num_rows // count for i in range(count + 1)]
    for index in range(count):
        with table.new_write(input_slice=(index, count)) as writer:
            writer.write(data.slice(bounds[index], bounds[index + 1] - bounds[index]))
            out.append(writer.prepare().to_bytes())
    return out


@pytest.mark.parametrize("how", ["shard", "slice"])
def test_a_killed_writer_leaves_only_files_orphan_cleanup_reclaims(catalog: pc.Catalog, tmp_path: Path,
                                                                   how: str) -> None:
    table = pk_table(catalog, "t", **{"write-buffer-size": "256 kb", "write-buffer-spillable": "false"})
    reference = pk_table(catalog, "reference")
    data = rows(4_000)
    reference.write(data)
    warehouse = catalog.warehouse
    before = files_under(Path(table.uri.removeprefix("file://")))
    script = _KILLED_WRITER.replace("WRITER_ARGS", "shard=(0, 2)" if how == "shard" else "input_slice=(1, 2)")
    child = subprocess.Popen([sys.executable, "-c", script, warehouse],
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    bucket_root = Path(table.uri.removeprefix("file://"))
    try:
        deadline = time.monotonic() + 600
        while not any(name.endswith(".parquet") for name in files_under(bucket_root)):
            assert child.poll() is None, "the writer died before writing a file"
            assert time.monotonic() < deadline, "the writer wrote no file in 600 s"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    leftovers = files_under(bucket_root) - before
    assert leftovers and table.latest_snapshot() is None
    # the retried writers (both shards, or both slices) commit as if the kill never happened
    retried = sharded_write(table, [data], 2) if how == "shard" else sliced_write(table, data, 2)
    table.commit(retried, commit_user="run", commit_identifier=1)
    assert table.read().sort_by(KEYS).equals(reference.read().sort_by(KEYS))
    future = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)
    removed = table.remove_orphan_files(older_than=future, dry_run=False, force=True)
    gone = {os.path.relpath(p.removeprefix("file://"), bucket_root) for p in removed.orphans}
    assert leftovers <= gone
    assert table.read().sort_by(KEYS).equals(reference.read().sort_by(KEYS))


def test_split_reads_ship_small_and_read_anywhere(catalog: pc.Catalog) -> None:
    """What a distributed read sends to a worker: the split and the table's location, no caches."""
    import pickle

    from paimon_core.read.distributed import split_read

    table = pk_table(catalog, "t")
    table.commit(sharded_write(table, [rows(5_000)], 2))
    table.read()  # warm the client's caches: none of it may travel
    reader = split_read(table, ["id", "v"], [("dt", "=", "2024-01-02")])
    splits = table.plan(filter=[("dt", "=", "2024-01-02")])
    assert splits and all(s.partition_values == ("2024-01-02",) for s in splits)
    shipped = pickle.dumps(reader)
    assert len(shipped) < 2_000 and max(len(pickle.dumps(s)) for s in splits) < 4_000
    remote = pickle.loads(shipped)
    got = pa.concat_tables([remote.read(s) for s in splits]).sort_by("id")
    assert got.equals(table.read(columns=["id", "v"], filter=[("dt", "=", "2024-01-02")]).sort_by("id"))
    assert remote(splits[0], columns=["v"]).columns.tolist() == ["v"]  # a column selection pushed down
