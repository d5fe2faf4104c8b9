"""Changes of primary-key and append tables: producers, incremental reads, streams, consumers."""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.errors import SnapshotNotFoundError
from tests.integration.conftest import EVENTS, events, files_under

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("rk", pa.string())])


def history(seed: int, commits: int) -> list[pa.Table]:
    """A random CDC history over 40 keys: inserts, updates of present keys, deletes."""
    rng = random.Random(seed)
    present: dict[int, str] = {}
    out = []
    for c in range(commits):
        ids, values, kinds = [], [], []
        for _ in range(rng.randint(1, 30)):
            key = rng.randrange(40)
            if key in present and rng.random() < 0.3:
                ids.append(key), values.append(present.pop(key)), kinds.append("-D")
            else:
                value = f"c{c}-{rng.randrange(1000)}"
                kinds.append("+U" if key in present else "+I")
                present[key] = value
                ids.append(key), values.append(value)
        out.append(pa.table({"id": ids, "v": values, "rk": kinds}, schema=SCHEMA))
    return out


def apply(state: dict[int, Any], changes: pa.Table) -> dict[int, Any]:
    """Replay a changelog on a key -> value map (independent of the engine)."""
    state = dict(state)
    for row in changes.to_pylist():
        if row["_row_kind"] in ("+I", "+U"):
            state[row["id"]] = row["v"]
        else:
            state.pop(row["id"], None)
    return state


def contents(table: pc.Table, snapshot_id: int | None) -> dict[int, Any]:
    if snapshot_id is None:
        return {}
    return {r["id"]: r["v"] for r in table.read(snapshot_id=snapshot_id).to_pylist()}


def pk_table(catalog: pc.Catalog, name: str, **options: str) -> pc.Table:
    return catalog.create_table(f"db.{name}", schema=SCHEMA, primary_keys=["id"],
                                options={"bucket": "2", "rowkind.field": "rk", **options})


@pytest.mark.parametrize("producer", ["input", "none"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_changes_between_any_two_snapshots_replay_to_the_later_one(catalog: pc.Catalog, producer: str,
                                                                   seed: int) -> None:
    # a tiny write buffer: every commit flushes several runs (and changelog files) per bucket
    table = pk_table(catalog, f"t{seed}", **{"changelog-producer": producer, "write-buffer-size": "2 kb",
                                             "num-sorted-run.compaction-trigger": "3"})
    for batch in history(seed, 12):
        table.write(batch)
    ids = [s.id for s in table.snapshots()]
    assert any(s.commit_kind == "COMPACT" for s in table.snapshots())
    rng = random.Random(seed)
    for _ in range(8):
        a, b = sorted(rng.sample([0, *ids], 2))
        start = a or None
        replayed = apply(contents(table, start), table.read_changes(a, b))
        assert replayed == contents(table, b), f"changes ({a}, {b}] do not replay"
    kinds = set(table.read_changes().column("_row_kind").to_pylist())
    assert kinds <= {"+I", "+U", "-D"}  # no before-images: input replays the input, none the deltas


def test_input_changelog_keeps_every_input_row_unmerged(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "raw", **{"changelog-producer": "input", "bucket": "1"})
    table.write(pa.table({"id": [7, 7, 7, 8], "v": ["a", "b", "c", "x"], "rk": ["+I", "-U", "+U", "+I"]},
                         schema=SCHEMA))
    changes = table.read_changes()
    assert [(r["_row_kind"], r["id"], r["v"]) for r in changes.to_pylist()] == [
        ("+I", 7, "a"), ("-U", 7, "b"), ("+U", 7, "c"), ("+I", 8, "x")]
    snapshot = table.latest_snapshot()
    assert snapshot is not None and snapshot.changelog_record_count == 4
    assert table.read().num_rows == 2


def test_producer_none_reads_append_deltas_and_skips_compactions(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "none")
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"], "rk": ["+I", "+I"]}, schema=SCHEMA))
    table.write(pa.table({"id": [1, 1, 2], "v": ["a1", "a2", None], "rk": ["+U", "+U", "-D"]}, schema=SCHEMA))
    table.compact(full=True)
    batches = list(table.iter_changes())
    assert [b.commit_kind for b in batches] == ["APPEND", "APPEND"]
    assert sorted((r["_row_kind"], r["id"], r["v"]) for r in batches[1].data.to_pylist()) == [
        ("+U", 1, "a2"), ("-D", 2, None)]  # merged per commit, no before-image


def test_input_changes_of_a_partial_update_table_are_the_rows_as_written(
        catalog: pc.Catalog, caplog: pytest.LogCaptureFixture) -> None:
    """No -U before-images of merged rows: a consumer is told, in a warning naming the table."""
    options = {"bucket": "1", "merge-engine": "partial-update", "changelog-producer": "input"}
    table = catalog.create_table("db.pu", schema=SCHEMA, primary_keys=["id"], options=options)
    table.write(pa.table({"id": [1], "v": ["a"], "rk": ["x"]}, schema=SCHEMA))
    table.write(pa.table({"id": [1], "v": [None], "rk": ["y"]}, schema=SCHEMA))
    with caplog.at_level(logging.WARNING, logger="paimon_core"):
        changes = table.read_changes()
    assert [(r["_row_kind"], r["v"], r["rk"]) for r in changes.to_pylist()] == [("+I", "a", "x"), ("+I", None, "y")]
    assert any("changelog-producer input with merge-engine partial-update: its changes are partial rows as "
               "written" in r.getMessage() and "db.pu" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("engine", ["partial-update", "aggregation", "first-row"])
def test_changes_of_non_deduplicate_tables_without_producer_are_their_inputs(
        catalog: pc.Catalog, engine: str, caplog: pytest.LogCaptureFixture) -> None:
    """As Java's scans (only Flink's source refuses such tables): the delta files' rows, with a warning."""
    table = catalog.create_table(f"db.{engine.replace('-', '_')}", schema=SCHEMA, primary_keys=["id"],
                                 options={"bucket": "2", "merge-engine": engine})
    table.write(pa.table({"id": [1, 2], "v": ["a", None], "rk": ["x", "y"]}, schema=SCHEMA))
    table.write(pa.table({"id": [1], "v": [None], "rk": ["z"]}, schema=SCHEMA))
    with caplog.at_level(logging.WARNING, logger="paimon_core"):
        changes = table.read_changes()
    assert sorted((r["_row_kind"], r["id"], r["v"] or "") for r in changes.to_pylist()) == [
        ("+I", 1, ""), ("+I", 1, "a"), ("+I", 2, "")]  # the inputs, not the merged rows
    assert any("as written" in r.getMessage() and engine in r.getMessage() and table.name in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="paimon_core"):
        streamed = list(table.stream("from-snapshot", snapshot_id=1, until_latest=True, poll_interval_s=0))
    assert [b.data.num_rows for b in streamed] == [2, 1]
    assert any("as written" in r.getMessage() for r in caplog.records)


def test_append_table_changes_are_the_appended_rows(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.log", schema=EVENTS, partition_keys=["dt"])
    table.write(events(range(3)))
    table.write(events(range(3, 5), dt="2024-01-02"))
    table.write(events(range(10)), overwrite=True)  # an OVERWRITE carries no changes to stream
    changes = table.read_changes(columns=["id"], filter=[("id", ">", 1)])
    assert changes.column_names == ["_row_kind", "id"]
    assert changes.to_pylist() == [{"_row_kind": "+I", "id": i} for i in (2, 3, 4)]


def test_stream_modes_and_consumer_resume(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "s", **{"changelog-producer": "input"})
    batches = history(9, 4)
    for batch in batches[:2]:
        table.write(batch)
    full = list(table.stream("latest-full", until_latest=True))
    assert [(b.snapshot_id, b.initial) for b in full] == [(2, True)]
    assert full[0].data.num_rows == table.read().num_rows
    assert list(table.stream("latest", until_latest=True)) == []
    assert [b.snapshot_id for b in table.stream("from-snapshot", snapshot_id=2, until_latest=True)] == [2]
    stamp = table.snapshot(2).time_millis
    assert [b.snapshot_id for b in table.stream("from-timestamp", timestamp_ms=stamp, until_latest=True)] == [2]

    # a consumer reads one batch and stops: progress is saved when it asks for the next
    stream = table.stream("from-snapshot", snapshot_id=1, consumer_id="job-a", until_latest=True)
    assert next(stream).snapshot_id == 1
    assert table.consumers() == []
    assert next(stream).snapshot_id == 2
    assert [c.next_snapshot for c in table.consumers()] == [2]
    stream.checkpoint()
    assert [(c.consumer_id, c.next_snapshot) for c in table.consumers()] == [("job-a", 3)]
    for batch in batches[2:]:
        table.write(batch)
    resumed = list(table.stream("latest-full", consumer_id="job-a", until_latest=True))
    assert [b.snapshot_id for b in resumed] == [3, 4]  # the consumer's position wins over the mode
    assert Path(table.paths.consumer_file("job-a")).read_text() == '{"nextSnapshot": 5}'  # Paimon's format


def test_a_following_stream_sees_later_commits(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "follow", **{"changelog-producer": "input"})
    table.write(history(5, 1)[0])
    stream = table.stream("latest", poll_interval_s=0.05, timeout_s=5)
    started = time.monotonic()
    writer = threading.Timer(0.3, lambda: table.write(
        pa.table({"id": [99], "v": ["late"], "rk": ["+I"]}, schema=SCHEMA)))
    writer.start()
    batch = next(stream)
    writer.join()
    assert batch.snapshot_id == 2 and batch.data.to_pylist() == [{"_row_kind": "+I", "id": 99, "v": "late",
                                                                  "rk": "+I"}]
    assert time.monotonic() - started < 5
    quiet = table.stream("latest", poll_interval_s=0.05, timeout_s=0.3)
    assert list(quiet) == []


def test_stream_refuses_to_skip_expired_snapshots(catalog: pc.Catalog) -> None:
    table = pk_table(catalog, "gone", **{"changelog-producer": "input"})
    for batch in history(6, 3):
        table.write(batch)
    stream = table.stream("from-snapshot", snapshot_id=1, consumer_id="slow", until_latest=True)
    next(stream)
    stream.checkpoint()
    # what expiry will do: snapshot 2 goes (the hint first, then the file)
    table.snapshot_store.write_earliest_hint(3)
    Path(table.paths.snapshot_file(2)).unlink()
    Path(table.paths.snapshot_file(1)).unlink()
    with pytest.raises(SnapshotNotFoundError, match="snapshot 2 .* was expired"):
        list(table.stream(consumer_id="slow", until_latest=True))
    with pytest.raises(SnapshotNotFoundError, match="expired"):
        table.read_changes(0, 3)


def test_failed_write_leaves_no_changelog_file(catalog: pc.Catalog, tmp_path: Path) -> None:
    table = pk_table(catalog, "bad", **{"changelog-producer": "input", "write-buffer-size": "1 kb"})
    before = files_under(tmp_path)
    good = history(8, 1)[0]
    with pytest.raises(pc.PaimonError), table.new_write() as writer:
        writer.write(good)
        writer.write(good)  # spills: changelog files exist on disk now
        writer.write(pa.table({"id": [None], "v": ["x"], "rk": ["+I"]}))  # null key: rejected
    assert files_under(tmp_path) == before
    assert table.latest_snapshot() is None


def test_cli_prints_the_changes_between_snapshots(catalog: pc.Catalog, capsys: pytest.CaptureFixture[str]) -> None:
    from paimon_core.cli import main

    table = pk_table(catalog, "cli", **{"changelog-producer": "input", "bucket": "1"})
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"], "rk": ["+I", "+I"]}, schema=SCHEMA))
    table.write(pa.table({"id": [1, 2], "v": ["a", "b2"], "rk": ["-U", "+U"]}, schema=SCHEMA))
    assert main(["--warehouse", catalog.warehouse, "changes", "db.cli", "--from", "1", "--to", "2",
                 "--columns", "id,v"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["snapshot", "_row_kind", "id", "v"]
    assert [line.split() for line in lines[2:]] == [["2", "-U", "1", "a"], ["2", "+U", "2", "b2"]]
