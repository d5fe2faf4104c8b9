"""What a check's page charts: the numbers that move, not the settings and ids it reports."""

from __future__ import annotations

import dagster as dg

import paimon_core as pc
from pipelines.compaction.lsm import level0_outcome


def state(level0: list[int], stop: int = 8) -> pc.LsmState:
    buckets = tuple(pc.BucketState(partition="", bucket=i, level0_files=n, sorted_runs=n, level_files=(n,),
                                   level_bytes=(n * 100,), rows=n, small_files=n, debt_bytes=n * 100, pending=None)
                    for i, n in enumerate(level0))
    return pc.LsmState(table="a.b", snapshot_id=7, stop_trigger=stop, buckets=buckets)


def test_series_stay_numbers_and_settings_become_text() -> None:
    outcome = level0_outcome(state([3, 9]))

    shown = outcome.result(dg.AssetKey(["a", "b"])).metadata

    assert isinstance(shown["max_level0_files"], dg.IntMetadataValue) and shown["max_level0_files"].value == 9
    assert isinstance(shown["buckets_at_stop_trigger"], dg.IntMetadataValue)
    assert isinstance(shown["stop_trigger"], dg.TextMetadataValue) and shown["stop_trigger"].value == "8"
    assert isinstance(shown["snapshot_id"], dg.TextMetadataValue) and shown["snapshot_id"].value == "7"
    assert outcome.metadata["stop_trigger"] == 8  # the verdict itself keeps the number
