"""What a Dagster instance lacks for the per-table limits (pure: its concurrency settings in), and
the tables' pools created before the run queue first meets them (on a test instance)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import dagster as dg
import pytest
import yaml

from pipelines import names
from pipelines.instance_limits import (
    InstanceSettings,
    InstanceSettingsWarning,
    ensure_pools,
    instance_gaps,
    instance_outcome,
    warn_at_load,
)
from resources.keys import COMPACTION_TAG, TABLE_TAG

TEMPLATE = Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml"
PRODUCTION = TEMPLATE.with_name("production.yaml")


def settings(**changes: object) -> InstanceSettings:
    shipped = InstanceSettings.of_yaml(yaml.safe_load(TEMPLATE.read_text()))
    return dataclasses.replace(shipped, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", [TEMPLATE, PRODUCTION], ids=["local", "production"])
def test_the_shipped_settings_lack_nothing(path: Path) -> None:
    shipped = InstanceSettings.of_yaml(yaml.safe_load(path.read_text()))
    assert instance_gaps(shipped) == [] and shipped.run_monitoring and shipped.run_retries == 2
    assert instance_outcome(shipped, "a.b").passed


def test_a_default_instance_lacks_every_setting() -> None:
    gaps = instance_gaps(InstanceSettings.of_yaml({}))

    assert [gap.split(":")[0] for gap in gaps] == ["concurrency.runs.tag_concurrency_limits"] * 2 + [
        "concurrency.pools.default_limit", "concurrency.pools.granularity", "run_monitoring", "run_retries"]
    assert TABLE_TAG in gaps[0] and COMPACTION_TAG in gaps[1]
    outcome = instance_outcome(InstanceSettings.of_yaml({}), "a.b")
    assert not outcome.passed and outcome.description.startswith("the instance lacks 6 setting(s) a.b relies on")


def test_a_limit_of_another_size_or_not_per_value_is_a_gap() -> None:
    limits = [{"key": TABLE_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 2},
              {"key": COMPACTION_TAG, "limit": 1}]

    assert len(instance_gaps(settings(tag_limits=limits))) == 2
    assert instance_gaps(settings(run_monitoring=False))[0].startswith("run_monitoring: {enabled: true}")
    assert instance_gaps(settings(run_retries=0))[0].startswith("run_retries: {enabled: true")


def test_a_loaded_instance_reads_as_its_yaml() -> None:
    config = yaml.safe_load(TEMPLATE.read_text())
    overrides = {key: config[key] for key in ("concurrency", "run_monitoring", "run_retries")}
    with dg.instance_for_test(overrides=overrides) as instance:
        assert InstanceSettings.of(instance) == InstanceSettings.of_yaml(config)
    with dg.instance_for_test() as instance:
        assert len(instance_gaps(InstanceSettings.of(instance))) == 6


def test_the_code_location_warns_at_load_when_its_instance_lacks_a_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump({"run_monitoring": {"enabled": True}}))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with pytest.warns(InstanceSettingsWarning, match="run_retries: {enabled: true"):
        assert len(warn_at_load()) == 5
    monkeypatch.setenv("DAGSTER_HOME", str(TEMPLATE.parent))
    assert warn_at_load() == []


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


def test_the_production_settings_are_the_local_ones_on_a_shared_storage() -> None:
    local, production = (yaml.safe_load(path.read_text()) for path in (TEMPLATE, PRODUCTION))
    for section in ("concurrency", "run_monitoring", "run_retries", "run_queue"):
        assert production[section] == local[section], section
    assert set(production["storage"]["postgres"]["postgres_db"]) >= {"hostname", "username", "password", "db_name"}
