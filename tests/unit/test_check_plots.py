"""What a check's page charts: the numbers that move, not the settings and ids it reports; and
sizes shown as sizes where a number is shown as text."""

from __future__ import annotations

import dagster as dg

import paimon_core as pc
from pipelines.compaction.lsm import LastCompaction, level0_outcome
from resources import keys
from resources.metadata import number_text


def state(level0: list[int], stop: int = 8) -> pc.LsmState:
    buckets = tuple(pc.BucketState(partition="", bucket=i, level0_files=n, sorted_runs=n, level_files=(n,),
                                   level_bytes=(n * 100,), rows=n, small_files=n, debt_bytes=n * 100, pending=None)
                    for i, n in enumerate(level0))
    return pc.LsmState(table="a.b", snapshot_id=7, stop_trigger=stop, buckets=buckets)


def test_series_stay_numbers_and_settings_become_text() -> None:
    outcome = level0_outcome(state([3, 9]), trigger=5, last=LastCompaction(6, 1_000_000, 2), at_ms=1_090_000)

    shown = outcome.result(dg.AssetKey(["a", "b"])).metadata

    assert isinstance(shown["max_level0_files"], dg.IntMetadataValue) and shown["max_level0_files"].value == 9
    assert isinstance(shown["buckets_at_stop_trigger"], dg.IntMetadataValue)
    assert isinstance(shown["stop_trigger"], dg.TextMetadataValue) and shown["stop_trigger"].value == "8"
    assert isinstance(shown["snapshot_id"], dg.TextMetadataValue) and shown["snapshot_id"].value == "7"
    assert outcome.metadata["stop_trigger"] == 8  # the verdict itself keeps the number
    assert isinstance(shown["last_compaction"], dg.TimestampMetadataValue) and shown["last_compaction"].value == 1000


def test_a_failing_level0_verdict_names_the_run_holding_the_tables_slot() -> None:
    last = LastCompaction(6, 1_000_000, 2)
    assert level0_outcome(state([3, 9]), trigger=5, last=last, at_ms=1_090_000).description.endswith(
        "is the compaction sensor running?")
    held = level0_outcome(state([3, 9]), trigger=5, last=last, at_ms=1_090_000, holder="run r1 (j) has held a.b's "
                          "compaction slot for 2 h 0 min").description
    assert held.endswith("; run r1 (j) has held a.b's compaction slot for 2 h 0 min: the table's compactions "
                         "wait for it")


def test_sizes_read_as_sizes_and_stay_exact() -> None:
    assert number_text(keys.MAINTENANCE_BYTES, 832_166) == "812.7 KiB (832,166 bytes)"
    assert number_text("orphan_bytes", 320) == "320 bytes"
    assert number_text(keys.COMPACTION_BYTES_IN, 5 * 1024**3) == "5.0 GiB (5,368,709,120 bytes)"
    assert number_text("files", 12_345) == "12,345"
