"""Paimon's universal picker: hand-worked cases and properties on random LSM shapes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.compaction.levels import Levels, SortedRun
from paimon_core.compaction.picker import (
    Reason,
    force_pick_level0,
    pick,
    pick_for_size_ratio,
    pick_full,
    pick_size_amplification,
)
from paimon_core.manifest import DataFileMeta
from paimon_core.options import TableOptions

MB = 1024 * 1024
DEFAULTS = TableOptions.from_map({})


def run(level: int, size: int, name: str = "") -> SortedRun:
    return SortedRun(level, (DataFileMeta(name or f"f-{level}-{size}", size, 1, level=level),))


def test_worked_example_five_small_level0_runs_over_a_big_max_level() -> None:
    runs = [run(0, MB, f"l0-{i}") for i in range(5)] + [run(5, 100 * MB)]
    assert pick_size_amplification(runs, 5, DEFAULTS) is None
    plan = pick(runs, 6, DEFAULTS)
    assert plan is not None and plan.reason is Reason.SIZE_RATIO
    assert len(plan.runs) == 5 and plan.output_level == 4


def test_size_amplification_compacts_everything_into_the_max_level() -> None:
    runs = [run(0, 30 * MB, f"l0-{i}") for i in range(5)] + [run(5, 10 * MB)]
    plan = pick(runs, 6, DEFAULTS)
    assert plan is not None and plan.reason is Reason.SIZE_AMPLIFICATION
    assert len(plan.runs) == 6 and plan.output_level == 5


def test_below_the_trigger_nothing_is_picked() -> None:
    runs = [run(0, MB, f"l0-{i}") for i in range(4)]
    assert pick(runs, 6, DEFAULTS) is None


def test_run_count_picks_enough_newest_runs_to_get_back_to_the_trigger() -> None:
    # sizes grow so fast that the ratio picker alone never triggers
    runs = [run(0, 2**i * MB, f"l0-{i}") for i in range(7)]
    runs.append(run(5, 10**6 * MB))
    plan = pick(runs, 6, DEFAULTS)
    assert plan is not None and plan.reason is Reason.RUN_COUNT
    assert len(plan.runs) >= len(runs) - 5 + 1


def test_output_never_level0_and_swallows_through_the_next_nonzero_level() -> None:
    runs = [run(0, MB, "a"), run(0, 100 * MB, "b"), run(0, 100 * MB, "c"), run(3, 10 * MB), run(5, 10**5 * MB)]
    plan = pick_for_size_ratio(runs, 5, DEFAULTS, candidates=1)
    assert plan is None  # 1.01 MB < 100 MB: not triggered
    forced = force_pick_level0(runs, 6, DEFAULTS)
    assert forced is not None and forced.output_level >= 1
    assert [r.level for r in forced.runs][:3] == [0, 0, 0]


def test_full_compaction_plan() -> None:
    runs = [run(0, MB), run(2, 5 * MB)]
    plan = pick_full(runs, 6)
    assert plan is not None and plan.output_level == 5 and plan.reason is Reason.FULL


def test_optimization_interval() -> None:
    options = TableOptions.from_map({"compaction.optimization-interval": "1 h"})
    runs = [run(0, MB), run(5, 100 * MB)]
    plan = pick(runs, 6, options, now_ms=10_000_000, last_full_ms=None)
    assert plan is not None and plan.reason is Reason.EARLY_FULL and plan.output_level == 5
    assert pick(runs, 6, options, now_ms=10_000_000, last_full_ms=10_000_000 - 60_000) is None


def test_levels_order_level0_newest_first() -> None:
    files = [DataFileMeta("old", 1, 1, min_sequence_number=0, max_sequence_number=5),
             DataFileMeta("new", 1, 1, min_sequence_number=6, max_sequence_number=9),
             DataFileMeta("l2", 1, 1, level=2)]
    levels = Levels.of(files, 6, lambda key: ())
    assert [f.file_name for f in levels.level0] == ["new", "old"]
    assert [r.level for r in levels.sorted_runs()] == [0, 0, 2]
    assert levels.number_of_sorted_runs == 3 and levels.highest_non_empty_level == 2


shapes = st.lists(st.tuples(st.integers(0, 5), st.integers(1, 1000)), min_size=1, max_size=14)


@settings(max_examples=400, deadline=None)
@given(shape=shapes, trigger=st.integers(2, 6), ratio=st.integers(0, 20))
def test_plans_are_prefixes_whose_output_level_is_free(shape: list[tuple[int, int]], trigger: int,
                                                     ratio: int) -> None:
    options = TableOptions.from_map({"num-sorted-run.compaction-trigger": str(trigger),
                                     "compaction.size-ratio": str(ratio)})
    level0 = [s for level, s in shape if level == 0]
    upper = {}
    for level, size in shape:
        if level > 0:
            upper[level] = upper.get(level, 0) + size
    runs = [run(0, s, f"l0-{i}") for i, s in enumerate(level0)] + [run(lv, upper[lv]) for lv in sorted(upper)]
    num_levels = max(options.num_levels, max(lv for lv, _ in shape) + 1)
    for plan in (pick(runs, num_levels, options), force_pick_level0(runs, num_levels, options)):
        if plan is None:
            continue
        count = len(plan.runs)
        assert list(plan.runs) == runs[:count], "a plan takes the newest runs, contiguously"
        assert plan.output_level >= 1, "compaction never writes level 0"
        unpicked_levels = {r.level for r in runs[count:]}
        assert plan.output_level not in unpicked_levels, "output would overlap an untouched run"
        assert all(r.level <= plan.output_level for r in plan.runs), "data never moves to a lower level"


def test_full_compaction_leaves_a_single_max_level_run_alone() -> None:
    assert pick_full([run(5, 5 * MB)], 6) is None
    forced = pick_full([run(5, 5 * MB)], 6, force_rewrite=True)
    assert forced is not None and forced.output_level == 5
    assert pick_full([], 6) is None
