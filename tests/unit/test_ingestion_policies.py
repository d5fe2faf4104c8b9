"""Reference tests of the ingestion layer's pure decisions: where a chunked write cuts its
stream, how a fanned-out write shares its input, and when a changes consumer has work.

No table, no Dagster instance: ``make check`` runs them.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from pipelines.ingestion.consumer import PendingChanges
from pipelines.ingestion.fanout import IngestSlice, plan_slices
from pipelines.ingestion.landing_sensor import landed_outcomes
from resources.landing_location import LandedFile
from resources.write_shares import SHARD_BY_BUCKET, SHARE_OF_INPUT, SLICE_IN_ORDER
from resources.writes import chunked, zone_notes


def test_chunks_cut_the_stream_at_fixed_row_positions() -> None:
    batches = [pa.record_batch({"x": list(range(n))}) for n in (3, 7, 1, 9)]

    pieces = list(chunked(batches, 5))

    assert [(chunk, piece.num_rows) for chunk, piece in pieces] == [
        (0, 3), (0, 2), (1, 5), (2, 1), (2, 4), (3, 5)]
    assert [c for c, _ in chunked(batches, 0)] == [0, 0, 0, 0]


def test_plan_slices_balances_files_and_shards_buckets() -> None:
    files = [LandedFile(f"f{i}", size, "") for i, size in enumerate([50, 10, 40, 30, 20, 5])]
    slices = plan_slices(3, split=SHARE_OF_INPUT, files=files)
    assert [s.files for s in slices] == [("f0", "f5"), ("f1", "f2"), ("f3", "f4")]  # loads 55, 50, 50
    assert plan_slices(8, split=SHARE_OF_INPUT, files=files[:2]) == [
        IngestSlice(0, 2, SHARE_OF_INPUT, ("f0",)), IngestSlice(1, 2, SHARE_OF_INPUT, ("f1",))]
    assert plan_slices(3, split=SHARD_BY_BUCKET, files=None) == [IngestSlice(i, 3, SHARD_BY_BUCKET) for i in range(3)]
    assert all(s.sharded for s in plan_slices(2, split=SHARD_BY_BUCKET, files=None))


def test_slices_in_input_order_are_runs_of_the_sorted_files() -> None:
    # Listed out of order: slices follow the paths (the order one writer reads them in).
    files = [LandedFile(f"f{i}", size, "") for i, size in [(3, 30), (0, 50), (5, 5), (1, 10), (4, 20), (2, 40)]]
    slices = plan_slices(3, split=SLICE_IN_ORDER, files=files)
    # 155 bytes: cuts nearest 51.7 and 103.3 of the running total 50, 60, 100, 130, 150, 155.
    assert [s.files for s in slices] == [("f0",), ("f1", "f2"), ("f3", "f4", "f5")]
    assert [(s.index, s.count, s.split) for s in slices] == [(i, 3, SLICE_IN_ORDER) for i in range(3)]
    # Every file in one slice, in order, none empty, whatever the sizes.
    for workers in range(1, 8):
        got = plan_slices(workers, split=SLICE_IN_ORDER, files=files)
        assert [p for s in got for p in s.files or ()] == [f"f{i}" for i in range(6)]
        assert len(got) == min(workers, 6) and all(s.files for s in got)
    # A function source gets slice numbers; a single file cannot be cut, so its steps own buckets.
    assert plan_slices(2, split=SLICE_IN_ORDER, files=None) == [IngestSlice(i, 2, SLICE_IN_ORDER) for i in range(2)]
    assert plan_slices(2, split=SLICE_IN_ORDER, files=files[:1]) == [
        IngestSlice(i, 2, SHARD_BY_BUCKET) for i in range(2)]


def test_pending_changes_need_a_snapshot() -> None:
    assert not PendingChanges(progress=None, latest=None).due
    assert PendingChanges(progress=None, latest=3).due
    assert not PendingChanges(progress=4, latest=3).due
    assert PendingChanges(progress=2, latest=9, unscanned=True).due


def test_a_quiet_landing_tick_says_how_the_launched_partitions_fared() -> None:
    expected = {f"2024-01-0{d}": f"t:2024-01-0{d}:f{d}" for d in range(1, 9)}
    latest = {f"t:2024-01-0{d}:f{d}": dg.DagsterRunStatus.FAILURE for d in range(1, 7)}
    latest["t:2024-01-07:f7"] = dg.DagsterRunStatus.SUCCESS

    text = landed_outcomes(expected, latest)

    assert text == ("8 partition(s) with files: 1 ingested, 6 whose run failed (2024-01-01, 2024-01-02, 2024-01-03, "
                    "2024-01-04, 2024-01-05 and 1 more): they run again when their files change, or re-execute their "
                    "runs, 1 in progress or not known to this instance")
    assert landed_outcomes({"a": "k"}, {"k": dg.DagsterRunStatus.SUCCESS}) == "1 partition(s) with files: 1 ingested"


def test_zoned_timestamps_into_a_timestamp_column_are_noted_once_per_column(tmp_path: Any) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("a")
    table = catalog.create_table("a.t", schema=pa.schema([("ts", pa.timestamp("us")),
                                                          ("at", pa.timestamp("us", tz="UTC")), ("n", pa.int64())]))
    given = pa.schema([("ts", pa.timestamp("us", tz="Asia/Tokyo")), ("at", pa.timestamp("us", tz="Asia/Tokyo")),
                       ("n", pa.int64()), ("other", pa.timestamp("us", tz="UTC"))])

    [note] = zone_notes(given, table)

    assert note.startswith("table a.t: column ts: timestamps with time zone Asia/Tokyo are stored as their UTC")
    assert zone_notes(pa.schema([("ts", pa.timestamp("us"))]), table) == []
