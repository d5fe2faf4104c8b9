"""What a Dagster instance lacks for the per-table limits (pure: its concurrency settings in)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipelines.instance_limits import instance_gaps
from resources.keys import COMPACTION_TAG, TABLE_TAG

TEMPLATE = Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml"


def test_the_shipped_template_lacks_nothing() -> None:
    concurrency = yaml.safe_load(TEMPLATE.read_text())["concurrency"]

    assert instance_gaps(concurrency["runs"]["tag_concurrency_limits"], concurrency["pools"]["default_limit"],
                         concurrency["pools"]["granularity"]) == []


def test_a_default_instance_lacks_every_limit() -> None:
    gaps = instance_gaps([], None, None)

    assert [gap.split(":")[0] for gap in gaps] == ["concurrency.runs.tag_concurrency_limits"] * 2 + [
        "concurrency.pools.default_limit", "concurrency.pools.granularity"]
    assert TABLE_TAG in gaps[0] and COMPACTION_TAG in gaps[1]


def test_a_limit_of_another_size_or_not_per_value_is_a_gap() -> None:
    limits = [{"key": TABLE_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 2},
              {"key": COMPACTION_TAG, "limit": 1}]

    assert len(instance_gaps(limits, 1, "run")) == 2
