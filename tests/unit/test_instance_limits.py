"""What a Dagster instance lacks for the per-table limits (pure: its concurrency settings in), and
the tables' pools created before the run queue first meets them (on a test instance)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

from pipelines import names
from pipelines.instance_limits import ensure_pools, instance_gaps
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


def test_a_tables_pool_is_created_with_the_default_limit_once() -> None:
    overrides = {"concurrency": {"pools": {"default_limit": 1, "granularity": "run"}}}
    with dg.instance_for_test(overrides=overrides) as instance:
        assert ensure_pools(instance, [names.pool("a.b"), names.pool("c.d")]) == [names.pool("a.b"),
                                                                                   names.pool("c.d")]
        assert instance.event_log_storage.get_concurrency_info(names.pool("a.b")).slot_count == 1
        assert ensure_pools(instance, [names.pool("a.b")]) == []  # there already


def test_no_pool_is_created_on_an_instance_without_a_default_limit() -> None:
    with dg.instance_for_test() as instance:
        assert ensure_pools(instance, [names.pool("a.b")]) == []
        assert names.pool("a.b") not in instance.event_log_storage.get_concurrency_keys()
