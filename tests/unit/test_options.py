"""Table options: parsing, defaults, errors and round-tripping of unknown keys."""

from __future__ import annotations

import pytest

from paimon_core.errors import OptionError
from paimon_core.options import (
    MiB,
    StatsMode,
    TableOptions,
    option_specs,
    options_markdown,
    parse_duration_ms,
    parse_memory_size,
)


@pytest.mark.parametrize(("text", "size"), [
    ("256 mb", 256 * MiB), ("128MB", 128 * MiB), ("64kb", 64 * 1024), ("1 gb", 1024 * MiB),
    ("1024", 1024), ("2 b", 2), ("1.5 mb", int(1.5 * MiB)),
])
def test_memory_sizes(text: str, size: int) -> None:
    assert parse_memory_size(text) == size


@pytest.mark.parametrize(("text", "millis"), [
    ("1 h", 3_600_000), ("10 s", 10_000), ("500ms", 500), ("30 min", 1_800_000), ("2 d", 172_800_000),
    ("100", 100),
])
def test_durations(text: str, millis: int) -> None:
    assert parse_duration_ms(text) == millis


def test_defaults_match_paimon() -> None:
    options = TableOptions.from_map({})
    assert options.bucket == -1
    assert options.write_buffer_size == 256 * MiB
    assert options.target_file_size_for(primary_key=True) == 128 * MiB
    assert options.target_file_size_for(primary_key=False) == 256 * MiB
    assert options.stats_mode == StatsMode("truncate", 16)
    assert options.sorted_run_compaction_trigger == 5
    assert options.sorted_run_stop_trigger == 8
    assert options.num_levels == 6
    assert options.snapshot_expire_limit == 50
    assert options.commit_max_retries == 10
    assert options.manifest_target_file_size == 8 * MiB
    assert options.file_format == "parquet" and options.file_compression == "zstd"


def test_derived_triggers_follow_the_compaction_trigger() -> None:
    options = TableOptions.from_map({"num-sorted-run.compaction-trigger": "3"})
    assert (options.sorted_run_stop_trigger, options.num_levels) == (6, 4)


@pytest.mark.parametrize(("key", "value"), [
    ("bucket", "0"), ("bucket", "many"), ("write-buffer-size", "lots"), ("write-only", "yes"),
    ("metadata.stats-mode", "truncate(0)"), ("merge-engine", "upsert"), ("file.format", "csv"),
    ("snapshot.time-retained", "forever"), ("commit.max-retries", "-1"),
    ("fields.msg.stats-mode", "most"),
])
def test_bad_values_name_key_and_value(key: str, value: str) -> None:
    with pytest.raises(OptionError) as info:
        TableOptions.from_map({key: value}, table="db.t")
    assert key in str(info.value) and repr(value) in str(info.value) and "db.t" in str(info.value)


def test_unknown_keys_round_trip_unchanged() -> None:
    raw = {"bucket": "4", "bucket-key": "id", "some.future-option": "x y z", "write-buffer-size": "64 mb"}
    options = TableOptions.from_map(raw)
    assert options.to_map() == raw
    assert options.bucket == 4 and options.bucket_key == ("id",)


def test_per_field_stats_mode() -> None:
    options = TableOptions.from_map({"metadata.stats-mode": "none", "fields.msg.stats-mode": "full"})
    assert options.field_stats_mode("msg") == StatsMode("full")
    assert options.field_stats_mode("other") == StatsMode("none")


def test_every_option_is_documented_once() -> None:
    keys = [spec.key for spec in option_specs()]
    assert len(keys) == len(set(keys)) >= 40
    assert all(spec.doc for spec in option_specs())
    table = options_markdown()
    assert "`write-buffer-size`" in table and "`256 mb`" in table
