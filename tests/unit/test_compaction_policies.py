"""Reference tests of the compaction layer's pure decisions: what the sensor asks for, which
buckets a run compacts, the small-file verdict and when a following run sees activity.

Plain values in, plain values out (an ``LsmState`` is what the manifests say): no table, no
Dagster instance, so ``make check`` runs them.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from paimon_core.compaction.state import BucketState, LsmState
from pipelines.compaction.lsm import small_files_outcome
from pipelines.compaction.sensor import REASON_FULL_DUE, REASON_LEVEL0, decide
from pipelines.compaction.tasks import FollowState, mapping_key, needs_work, plan_tasks
from pipelines.target import TableTarget

ORDERS_TABLE = "shop.orders"
ORDERS_KEY = dg.AssetKey(["shop", "orders"])


def bucket(partition: str, level_files: tuple[int, ...], index: int = 0) -> BucketState:
    return BucketState(partition=partition, bucket=index, level0_files=level_files[0],
                       sorted_runs=level_files[0] + sum(1 for n in level_files[1:] if n), level_files=level_files,
                       level_bytes=tuple(100 * n for n in level_files), rows=10, small_files=0, debt_bytes=0,
                       pending=None)


A, B, C = "dt=2024-01-01", "dt=2024-01-02", "dt=2024-01-03"
FULL, MINOR = True, False  # the kind of compaction a request asks for
SETTLED = (0, 0, 0, 1)


@pytest.mark.parametrize(("buckets", "since", "changelog", "expected"), [
    # 5 commits since the last full compaction: every partition still above the max level.
    ([bucket(A, (2, 0, 0, 1)), bucket(B, SETTLED), bucket(C, (0, 1, 0, 1))], 5, True,
     (FULL, (A, C), (REASON_FULL_DUE,), 2)),
    ([bucket(A, (2, 0, 0, 1)), bucket(B, SETTLED)], 4, True, None),  # not due, level 0 below 5
    ([bucket(A, (5, 0, 0, 1)), bucket(B, (1, 0, 0, 0))], 4, True,  # level 0: full, only where it is over
     (FULL, (A,), (REASON_LEVEL0,), 5)),
    ([bucket(A, (5, 0, 0, 1)), bucket(B, (1, 0, 0, 0))], 4, False, (MINOR, (A,), (REASON_LEVEL0,), 5)),
    ([bucket(A, (6, 0, 0, 1)), bucket(B, (1, 0, 0, 0))], 5, True,
     (FULL, (A, B), (REASON_FULL_DUE, REASON_LEVEL0), 6)),
    ([bucket(A, SETTLED), bucket(B, SETTLED)], 5, True, None),  # due, but nothing left to fold
])
def test_decide(buckets: list[BucketState], since: int, changelog: bool, expected: tuple[Any, ...] | None) -> None:
    state = LsmState(ORDERS_TABLE, 9, 8, tuple(buckets), full_compaction_every=5, commits_since_full=since)

    request = decide(state, threshold=5, primary_key=True, changelog=changelog)

    got = None if request is None else (request.full, request.partitions, request.reasons, request.worst_level0)
    assert got == expected


def test_append_tables_never_get_scheduled_full_compactions() -> None:
    state = LsmState("logs.events", 9, 8, (bucket(A, (3,)),), full_compaction_every=1, commits_since_full=1)

    assert decide(state, threshold=5, primary_key=False, changelog=False) is None
    assert decide(state, threshold=3, primary_key=False, changelog=False).full is MINOR


def with_small_files(level_files: tuple[int, ...], small: int) -> BucketState:
    return BucketState(partition="dt=2024-01-03", bucket=0, level0_files=level_files[0],
                       sorted_runs=level_files[0] + sum(1 for n in level_files[1:] if n),
                       level_files=level_files, level_bytes=tuple(n * 100 for n in level_files),
                       rows=10, small_files=small, debt_bytes=0, pending=None)


@pytest.mark.parametrize(("level_files", "small", "primary_key", "passed"), [
    ((4, 1, 1, 1, 1, 0), 8, True, True),  # 4 small files above level 0
    ((0, 1, 1, 1, 1, 1), 5, True, False),  # a run of one small file on each level: merge them
    ((9,), 9, False, True),
    ((10,), 10, False, False),  # append tables: twice compaction.min.file-num
])
def test_small_files_check(level_files: tuple[int, ...], small: int, primary_key: bool, passed: bool) -> None:
    state = LsmState("db.t", 1, 8, (with_small_files(level_files, small),))

    outcome = small_files_outcome(state, min_file_num=5, primary_key=primary_key)

    assert outcome.passed is passed
    assert outcome.metadata["small_file_ratio"] == round(small / sum(level_files), 4)


def test_plan_tasks_group_buckets_needing_work_by_partition() -> None:
    target = TableTarget(ORDERS_TABLE, ORDERS_KEY)
    pending = BucketState("dt=2024-01-03", 1, 5, 5, (5, 0), (500, 0), 10, 5, 500, "size-amplification")
    quiet = BucketState("dt=2024-01-03", 0, 1, 1, (1, 0), (100, 0), 10, 1, 0, None)
    other = BucketState("dt=2024-01-04", 2, 6, 6, (6, 0), (600, 0), 10, 6, 600, "size-amplification")
    state = LsmState(ORDERS_TABLE, 3, 8, (quiet, pending, other))

    tasks = plan_tasks(state, target, full=False)

    assert [(t.partition, t.buckets, t.level0_files) for t in tasks] == [
        ("dt=2024-01-03", (1,), (5,)), ("dt=2024-01-04", (2,), (6,))]
    assert {t.target for t in tasks} == {target}
    assert [t.partition for t in plan_tasks(state, target, full=False, level0_threshold=6)] == ["dt=2024-01-04"]
    assert needs_work(quiet, full=True, level0_threshold=0)  # a level-0 file to move to the max level
    done = BucketState("dt=2024-01-03", 0, 0, 1, (0, 1), (0, 100), 10, 1, 0, None)
    assert not needs_work(done, full=True, level0_threshold=0)
    assert mapping_key(3, "dt=2024-01-03/region=eu west") == "p3_dt_2024_01_03_region_eu_west"


def test_follow_state_counts_only_other_writers_as_activity() -> None:
    watch = FollowState(last_seen=10, last_activity=0.0, own={11, 13})

    watch.observe(11, now=1.0)
    assert watch.last_activity == 0.0 and watch.last_seen == 11
    watch.observe(13, now=2.0)  # 12 is someone else's
    assert watch.last_activity == 2.0
    watch.observe(13, now=3.0)
    assert watch.last_activity == 2.0
