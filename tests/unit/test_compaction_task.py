"""What a compaction does with the files it picked: sections, rewrites, upgrades (pure, no files)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.compaction.append import (
    AppendLimits,
    pick_bucketed,
    pick_bucketed_full,
    pick_unaware,
    writer_slices,
)
from paimon_core.compaction.intervals import section_runs, sections
from paimon_core.compaction.levels import Levels
from paimon_core.compaction.merge_tree import Rewrite, TaskPlan, Upgrade, plan_task
from paimon_core.compaction.picker import CompactionPlan, Reason, pick, pick_full
from paimon_core.manifest import DataFileMeta
from paimon_core.options import TableOptions

MB = 1024 * 1024
SMALL = int(0.7 * 128 * MB)
# Tests put the integer key range into file names' metadata through these two maps.
_BOUNDS: dict[str, tuple[tuple[int], tuple[int]]] = {}


def kv(name: str, low: int, high: int, *, level: int = 0, size: int = MB, deletes: int | None = 0,
       seq: int = 0) -> DataFileMeta:
    _BOUNDS[name] = ((low,), (high,))
    return DataFileMeta(name, size, 1, min_key=name.encode(), level=level, delete_row_count=deletes,
                        min_sequence_number=seq, max_sequence_number=seq)


def bounds(meta: DataFileMeta) -> tuple[tuple[int], tuple[int]]:
    return _BOUNDS[meta.file_name]


def key_of(row: bytes) -> tuple[int]:
    return _BOUNDS[row.decode()][0]


def task_for(files: list[DataFileMeta], output_level: int, num_levels: int = 6, **kwargs: bool) -> TaskPlan:
    levels = Levels.of(files, num_levels, key_of)
    plan = CompactionPlan(tuple(levels.sorted_runs()), output_level, Reason.FULL, "")
    return plan_task(plan, levels, bounds, min_file_size=SMALL, **kwargs)


def test_sections_group_transitive_overlaps_and_runs_pack_them() -> None:
    a, b, c, d = kv("a", 0, 10), kv("b", 5, 20), kv("c", 15, 30), kv("d", 40, 50)
    assert sections([d, c, b, a], bounds) == [[a, b, c], [d]]
    assert section_runs([a, b, c], bounds) == [[a, c], [b]]  # a and c do not overlap: one run


def test_overlapping_files_are_rewritten_and_a_big_disjoint_file_only_moves() -> None:
    task = task_for([kv("a", 0, 10), kv("b", 5, 20), kv("big", 30, 40, size=SMALL + 1)], output_level=5)
    rewrite, upgrade = task.actions
    assert isinstance(rewrite, Rewrite) and {f.file_name for f in rewrite.files} == {"a", "b"}
    assert isinstance(upgrade, Upgrade) and upgrade.file.file_name == "big" and upgrade.check_deletes
    assert task.drop_delete  # output is the max level


def test_small_disjoint_files_are_rewritten_together_and_a_big_one_splits_them() -> None:
    files = [kv("s1", 0, 1), kv("s2", 2, 3), kv("big", 4, 5, size=SMALL), kv("s3", 6, 7)]
    task = task_for(files, output_level=3)
    kinds = [(type(a).__name__, sorted(f.file_name for f in (a.files if isinstance(a, Rewrite) else (a.file,))))
             for a in task.actions]
    assert kinds == [("Rewrite", ["s1", "s2"]), ("Upgrade", ["big"]), ("Upgrade", ["s3"])]
    assert task.drop_delete  # nothing older lies below level 3


def test_a_file_already_at_the_max_level_with_deletes_is_rewritten_to_drop_them() -> None:
    clean = task_for([kv("top", 0, 9, level=5, size=SMALL, deletes=0), kv("l0", 20, 30, size=SMALL)], 5)
    assert [type(a) for a in clean.actions] == [Upgrade]  # top stays; l0 moves up
    dirty = task_for([kv("top", 0, 9, level=5, size=SMALL, deletes=3),
                      kv("l0", 20, 30, size=SMALL, deletes=None)], 5)
    assert isinstance(dirty.actions[0], Rewrite) and dirty.actions[0].files[0].file_name == "top"
    # an upgrade into the max level of a file that may hold deletes is debt too
    assert dirty.rewrite_bytes == SMALL + SMALL


def test_deletes_survive_below_the_highest_level() -> None:
    task = task_for([kv("l0a", 0, 10), kv("l0b", 0, 10), kv("deep", 0, 10, level=5)], output_level=5)
    assert task.drop_delete
    levels = Levels.of([kv("x", 0, 10), kv("y", 0, 10), kv("deep2", 0, 10, level=5)], 6, key_of)
    partial = CompactionPlan(tuple(levels.sorted_runs()[:2]), 4, Reason.SIZE_RATIO, "")
    assert not plan_task(partial, levels, bounds, min_file_size=SMALL).drop_delete


def test_first_row_rewrites_level0_and_looks_up_deeper_levels() -> None:
    files = [kv("new", 0, 10, size=SMALL), kv("old", 0, 10, level=5, size=SMALL)]
    levels = Levels.of(files, 6, key_of)
    runs = levels.sorted_runs()
    plan = CompactionPlan(tuple(runs[:1]), 4, Reason.FORCE_LEVEL0, "")
    task = plan_task(plan, levels, bounds, min_file_size=SMALL, first_row=True)
    assert [type(a) for a in task.actions] == [Rewrite]  # a big level-0 file is not just moved
    assert [f.file_name for f in task.lookup_files] == ["old"]
    assert plan_task(plan, levels, bounds, min_file_size=SMALL).lookup_files == ()


def test_force_rewrite_rewrites_big_files() -> None:
    task = task_for([kv("big", 0, 10, size=SMALL * 2)], 5, force_rewrite=True)
    assert [type(a) for a in task.actions] == [Rewrite]


# ---- property: a plan never leaves overlapping files in a level >= 1 ---------------------------

ranges = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 30), st.integers(1, 150)), min_size=1, max_size=9)


def _bucket(level0: list[tuple[int, int, int]], upper: list[tuple[int, list[tuple[int, int, int]]]]
            ) -> list[DataFileMeta]:
    files = [kv(f"l0-{i}", low, low + width, size=size * MB, seq=100 + i)
             for i, (low, width, size) in enumerate(level0)]
    for level, spans in upper:
        cursor = 0
        for j, (gap, width, size) in enumerate(spans):  # disjoint, increasing ranges within a level
            low = cursor + gap
            files.append(kv(f"l{level}-{j}", low, low + width, level=level, size=size * MB, seq=level))
            cursor = low + width + 1
    return files


@settings(max_examples=300, deadline=None)
@given(level0=ranges, upper=st.lists(st.tuples(st.integers(1, 5), ranges), max_size=3, unique_by=lambda x: x[0]),
       full=st.booleans(), trigger=st.integers(1, 5))
def test_applying_a_plan_keeps_every_level_above_zero_disjoint(
        level0: list[tuple[int, int, int]], upper: list[tuple[int, list[tuple[int, int, int]]]],
        full: bool, trigger: int) -> None:
    files = _bucket(level0, upper)
    options = TableOptions.from_map({"num-sorted-run.compaction-trigger": str(trigger), "num-levels": "6"})
    levels = Levels.of(files, 6, key_of)
    runs = levels.sorted_runs()
    plan = pick_full(runs, 6) if full else pick(runs, 6, options)
    if plan is None:
        return
    assert list(plan.runs) == runs[:len(plan.runs)]  # a contiguous prefix: newest runs first
    task = plan_task(plan, levels, bounds, min_file_size=SMALL)
    picked = {f.file_name for f in plan.files}
    acted = [f.file_name for a in task.actions for f in (a.files if isinstance(a, Rewrite) else (a.file,))]
    assert len(acted) == len(set(acted)) and set(acted) <= picked
    after: list[tuple[int, tuple[int], tuple[int]]] = [(f.level, *bounds(f)) for f in files
                                                       if f.file_name not in acted]
    for action in task.actions:
        members = action.files if isinstance(action, Rewrite) else (action.file,)
        after.append((task.output_level, min(bounds(f)[0] for f in members), max(bounds(f)[1] for f in members)))
    for level in range(1, 6):
        spans = sorted((low, high) for lvl, low, high in after if lvl == level)
        for (_, high), (low, _) in itertools.pairwise(spans):
            assert low > high, f"level {level} overlaps after {plan.reason}: {spans}"


# ---- append tables -----------------------------------------------------------------------------

LIMITS = AppendLimits(target_size=100, small_file_size=70, min_file_num=3, open_file_cost=0)


def app(name: str, size: int, seq: int, created: int = 0) -> DataFileMeta:
    return DataFileMeta(name, size, 10, min_sequence_number=seq, max_sequence_number=seq + 9,
                        creation_time_ms=created)


def test_unaware_groups_small_files_in_write_order() -> None:
    files = [app("c", 10, 0, created=3), app("a", 10, 0, created=1), app("big", 90, 0, created=2),
             app("b", 10, 0, created=2)]
    assert [[f.file_name for f in g] for g in pick_unaware(files, LIMITS)] == [["a", "b", "c"]]
    assert pick_unaware(files[:2], LIMITS) == []  # below compaction.min.file-num
    assert [[f.file_name for f in g] for g in pick_unaware(files[:2], LIMITS, full=True)] == [["a", "c"]]


def test_unaware_closes_a_group_at_twice_the_target() -> None:
    files = [app(f"f{i}", 60, 0, created=i) for i in range(7)]
    groups = pick_unaware(files, LIMITS)
    assert [len(g) for g in groups] == [4, 3]  # 4 x 60 >= 200, then the remaining 3 reach min.file-num


def test_bucketed_window_slides_past_big_files() -> None:
    files = [app("big1", 150, 0), app("big2", 150, 10), app("s1", 10, 20), app("s2", 10, 30), app("s3", 10, 40)]
    picked = pick_bucketed(files, LIMITS)
    assert picked is not None and [f.file_name for f in picked] == ["big2", "s1", "s2"]
    assert pick_bucketed(files[:2], LIMITS) is None


def test_bucketed_full_skips_leading_big_files_and_needs_more_small_than_big() -> None:
    files = [app("big", 150, 0), app("s1", 10, 10), app("s2", 10, 20), app("s3", 10, 30)]
    picked = pick_bucketed_full(files, LIMITS)
    assert picked is not None and [f.file_name for f in picked] == ["s1", "s2", "s3"]
    assert pick_bucketed_full([app("big", 150, 0), app("s1", 10, 10)], LIMITS) is None
    forced = pick_bucketed_full([app("big", 150, 0)], LIMITS, force=True)
    assert forced is not None and len(forced) == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 500), st.integers(0, 50)), min_size=1, max_size=30),
       st.integers(1, 400), st.integers(1, 4), st.integers(0, 1000))
def test_writer_slices_keep_the_group_its_order_and_its_numbering(
        files: list[tuple[int, int]], target: int, writers: int, first: int) -> None:
    group = tuple(DataFileMeta(f"f{i}", size, rows, min_sequence_number=first + 7 * i)
                  for i, (size, rows) in enumerate(files))
    slices = writer_slices(group, target, writers)
    total = sum(size for size, _ in files)
    assert len(slices) == min(writers, len(group), -(-total // target))  # no more files than one writer makes
    assert tuple(f for s in slices for f in s.files) == group and all(s.files for s in slices)
    biggest = max(size for size, _ in files)
    assert all(sum(f.file_size for f in s.files) <= total / len(slices) + biggest for s in slices)
    sequence = first  # one writer numbers the group's rows from its first file's first sequence number
    for piece in slices:
        assert piece.first_sequence == sequence
        sequence += sum(f.row_count for f in piece.files)


def test_a_group_of_one_file_worth_is_one_slice() -> None:
    group = tuple(app(f"f{i}", 10, 10 * i) for i in range(5))
    assert [len(s.files) for s in writer_slices(group, 100, 4)] == [5]
    assert [len(s.files) for s in writer_slices(group, 20, 2)] == [3, 2]
    assert [s.first_sequence for s in writer_slices(group, 20, 2)] == [0, 30]
