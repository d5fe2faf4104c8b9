"""Commits: concurrent writers lose nothing, idempotent re-runs, cleanup only when provably lost."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.errors import CommitConflictError, CommitStateUnknownError, FileIOError
from paimon_core.fileio import FileIO
from paimon_core.names import Identifier
from paimon_core.read.scan import read_manifest_metas
from tests.integration.conftest import EVENTS, events, files_under, reopened


def _committer(warehouse: str, worker: int, commits: int, barrier: Any, queue: Any) -> None:
    outcomes: list[tuple[str, Any]] = []
    try:
        table = pc.Catalog(warehouse).get_table("db.t")
        barrier.wait()
        for i in range(commits):
            try:
                sid = table.write(events(range(worker * 1000 + i * 10, worker * 1000 + i * 10 + 10)))
                outcomes.append(("ok", sid))
            except CommitConflictError:
                outcomes.append(("conflict", None))
    except Exception as exc:  # reported to the test instead of hanging it
        outcomes.append(("error", repr(exc)))
    finally:
        queue.put(outcomes)


def _run_workers(warehouse: str, workers: int, commits: int) -> list[tuple[str, int | None]]:
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_committer, args=(warehouse, w, commits, barrier, queue))
             for w in range(workers)]
    for proc in procs:
        proc.start()
    outcomes = [o for _ in procs for o in queue.get(timeout=240)]
    for proc in procs:
        proc.join(timeout=60)
    return outcomes


def test_concurrent_writers_lose_no_commit(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"],
                                 options={"commit.min-retry-wait": "1 ms", "commit.max-retries": "50",
                                          "write-only": "true"})
    outcomes = _run_workers(catalog.warehouse, workers=4, commits=8)
    assert [o for o, _ in outcomes if o != "ok"] == [], outcomes
    assert sorted(sid for _, sid in outcomes) == list(range(1, 33))
    assert [s.id for s in table.snapshots()] == list(range(1, 33))
    assert table.read().num_rows == 320
    assert table.latest_snapshot().total_record_count == 320  # type: ignore[union-attr]


def test_losers_without_retries_clean_up_everything(catalog: pc.Catalog, tmp_path: Path) -> None:
    table = catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"],
                                 options={"commit.max-retries": "0", "write-only": "true"})
    outcomes = _run_workers(catalog.warehouse, workers=6, commits=5)
    landed = [sid for o, sid in outcomes if o == "ok"]
    assert landed and len(landed) + sum(1 for o, _ in outcomes if o == "conflict") == 30
    assert sorted(landed) == [s.id for s in table.snapshots()]
    assert table.read().num_rows == 10 * len(landed)
    referenced_data = {f.file_name for f in table.files()}
    on_disk = files_under(Path(table.path))
    data_on_disk = {p.rsplit("/", 1)[-1] for p in on_disk if p.startswith("dt=")}
    assert data_on_disk == referenced_data, "a losing commit left data files behind"
    referenced_meta = set()
    for snapshot in table.snapshots():
        referenced_meta |= {snapshot.base_manifest_list, snapshot.delta_manifest_list}
        referenced_meta |= {m.file_name for m in read_manifest_metas(table.file_io, table.paths, snapshot)}
    meta_on_disk = {p.split("/", 1)[1] for p in on_disk if p.startswith("manifest/")}
    assert meta_on_disk == referenced_meta, "a losing commit left manifests behind"


def test_same_commit_identifier_is_applied_once(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS)
    first = table.write(events(range(5)), commit_user="ingest-job", commit_identifier=7)
    files_after_first = files_under(Path(table.path))
    again = table.write(events(range(5)), commit_user="ingest-job", commit_identifier=7)
    assert again == first
    assert table.read().num_rows == 5
    assert files_under(Path(table.path)) == files_after_first, "the skipped re-run left files"
    assert table.write(events(range(5, 8)), commit_user="ingest-job", commit_identifier=6) == first
    newer = table.write(events(range(8, 9)), commit_user="ingest-job", commit_identifier=8)
    assert newer == first + 1 and table.read().num_rows == 6  # type: ignore[operator]
    other_user = table.write(events(range(9, 10)), commit_user="other", commit_identifier=7)
    assert other_user == first + 2  # type: ignore[operator]


def test_compacting_writers_keep_exactly_once_commits(catalog: pc.Catalog) -> None:
    """The COMPACT after a compacting writer's commit shares its identifier (never a batch one that
    would make the user's later identifiers look landed)."""
    schema = pa.schema([pa.field("k", pa.int64(), False), ("n", pa.int64())])
    table = catalog.create_table("db.agg", schema=schema, primary_keys=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
        "num-sorted-run.compaction-trigger": "2"})
    for identifier in range(1, 7):
        table.write(pa.table({"k": [1], "n": [identifier]}, schema=schema), commit_user="u",
                    commit_identifier=identifier)
    snapshots = table.snapshots()
    assert "COMPACT" in {s.commit_kind for s in snapshots}
    assert {s.commit_identifier for s in snapshots} == set(range(1, 7))
    assert table.read().to_pylist() == [{"k": 1, "n": 21}]
    again = table.write(pa.table({"k": [1], "n": [100]}, schema=schema), commit_user="u", commit_identifier=4)
    assert again is not None and table.read().to_pylist() == [{"k": 1, "n": 21}]  # a replay is skipped
    table.compact(commit_user="u")  # a batch compaction under the user does not hide its next commit
    table.write(pa.table({"k": [1], "n": [1]}, schema=schema), commit_user="u", commit_identifier=7)
    assert table.read().to_pylist() == [{"k": 1, "n": 22}]


class _FlakyFileIO(FileIO):
    """Real local storage whose snapshot creation fails as configured (fault injection)."""

    def __init__(self, base: FileIO, *, land_first: bool, failures: int) -> None:
        super().__init__(base.fs)
        self.land_first = land_first
        self.failures = failures

    def create_if_absent(self, path: str, data: bytes) -> bool:
        if "/snapshot/snapshot-" in path and self.failures > 0:
            self.failures -= 1
            if self.land_first:
                super().create_if_absent(path, data)
            raise FileIOError(f"connection reset while creating {path}")
        return super().create_if_absent(path, data)


def _flaky_table(catalog: pc.Catalog, *, land_first: bool, failures: int) -> pc.Table:
    table = catalog.create_table("db.t", schema=EVENTS, options={"commit.min-retry-wait": "1 ms",
                                                                 "commit.max-retries": "3"})
    flaky = _FlakyFileIO(table.file_io, land_first=land_first, failures=failures)
    return pc.Table(flaky, Identifier("db", "t"), table.path)


def test_reported_failure_that_landed_is_not_committed_twice(catalog: pc.Catalog) -> None:
    table = _flaky_table(catalog, land_first=True, failures=1)
    assert table.write(events(range(4))) == 1
    assert [s.id for s in table.snapshots()] == [1]
    assert table.read().num_rows == 4


def test_unknown_outcome_keeps_every_file(catalog: pc.Catalog) -> None:
    table = _flaky_table(catalog, land_first=False, failures=100)
    before = files_under(Path(table.path))
    with pytest.raises(CommitStateUnknownError, match="outcome is unknown"):
        table.write(events(range(4)))
    added = files_under(Path(table.path)) - before
    assert any(p.endswith(".parquet") for p in added), "data files must be kept when unsure"
    assert table.snapshots() == []


def test_transient_failure_then_success(catalog: pc.Catalog) -> None:
    table = _flaky_table(catalog, land_first=False, failures=2)
    assert table.write(events(range(3))) == 1
    assert table.read().num_rows == 3


def test_failure_before_publishing_removes_the_new_files(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS)
    table.write(events(range(3)))
    latest = table.latest_snapshot()
    assert latest is not None
    (Path(table.path) / "manifest" / latest.delta_manifest_list).unlink()
    before = files_under(Path(table.path))
    with pytest.raises(pc.errors.CorruptMetadataError, match="missing"):
        reopened(table).write(events(range(3, 6)))
    assert files_under(Path(table.path)) == before, "nothing landed, so nothing may stay behind"


def test_properties_known_at_commit_time(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.t", schema=EVENTS)
    with table.new_write(properties={"run": "r1"}) as writer:
        writer.write(events(range(3)))
        writer.commit(properties={"rows": str(writer.rows_written)})
    assert table.latest_snapshot().properties == {"run": "r1", "rows": "3"}  # type: ignore[union-attr]
