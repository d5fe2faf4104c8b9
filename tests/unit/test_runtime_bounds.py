"""Reference test of the runtime bounds compaction runs carry (run monitoring fails a run past it)."""

from __future__ import annotations

from pipelines.runtime_bounds import COMPACTION_MIN_S, REWRITE_BYTES_PER_S, bound_tags, compaction_bound_s
from resources.keys import MAX_RUNTIME_TAG


def test_a_small_rewrite_gets_the_minimum_and_a_large_one_its_bytes_at_the_assumed_rate() -> None:
    assert compaction_bound_s(0) == compaction_bound_s(1024) == COMPACTION_MIN_S
    ten_gib = 10 * 1024**3
    assert compaction_bound_s(ten_gib) == ten_gib // REWRITE_BYTES_PER_S == 2560
    assert compaction_bound_s(1024, follow_seconds=120) == COMPACTION_MIN_S + 120


def test_the_bound_is_dagsters_max_runtime_tag_in_whole_seconds() -> None:
    assert bound_tags(900.7) == {MAX_RUNTIME_TAG: "900"}  # type: ignore[arg-type]
