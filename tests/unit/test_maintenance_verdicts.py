"""Reference tests of the maintenance checks' pure verdicts and the schedule ticks they judge by.

The facts are plain values (what the dry runs of expiry and cleanup found, and when the
schedule ticked); no table, no Dagster instance, so ``make check`` runs them.
"""

from __future__ import annotations

import datetime as dt_

from pipelines import names
from pipelines.cron import age_text, scheduled_ticks
from pipelines.maintenance.verdicts import (
    OrphanFacts,
    RetentionFacts,
    SnapshotSpan,
    orphans_verdict,
    retention_verdict,
)

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
NINE = int(dt_.datetime(2024, 3, 5, 9, tzinfo=dt_.UTC).timestamp() * 1000)


def retention(**changes: object) -> RetentionFacts:
    facts = {"table": "logs.events", "schedule": "0 * * * *", "previous_tick_ms": NINE, "last_tick_ms": NINE + HOUR_MS,
             "overdue": (), "due": 2, "due_files": 3, "due_bytes": 4_096, "span": SnapshotSpan(5, 14),
             "retain_min": 10, "retain_max": 100, "time_retained_ms": HOUR_MS, "consumers": "-",
             "max_consumer_lag": 0, "at_ms": NINE + HOUR_MS + 90_000, "last_expiry_ms": NINE + HOUR_MS + 30_000}
    return RetentionFacts(**{**facts, **changes})  # type: ignore[arg-type]


def test_scheduled_ticks_are_the_last_two_at_or_before_now() -> None:
    at = int(dt_.datetime(2024, 3, 5, 10, 30, tzinfo=dt_.UTC).timestamp() * 1000)

    assert scheduled_ticks("0 * * * *", at) == (NINE, NINE + HOUR_MS)
    assert scheduled_ticks("0 3 * * *", at) == (NINE - 6 * HOUR_MS - DAY_MS, NINE - 6 * HOUR_MS)


def test_retention_passes_with_work_left_to_the_next_run() -> None:
    verdict = retention_verdict(retention())
    assert verdict.passed and verdict.name == names.RETENTION_CHECK
    assert verdict.description == ("10 snapshot(s) retained, none overdue; 2 expirable now (4,096 bytes), left to "
                                   "the next run; last expiry at 2024-03-05T10:00:30+00:00 (1 min 0 s before this "
                                   "check)")
    assert verdict.metadata["due_by_run_at"] == "2024-03-05T09:00:00+00:00"
    assert verdict.metadata["snapshots_retained"] == 10 and verdict.metadata["expirable_now_files"] == 3


def test_retention_warns_when_the_run_before_the_last_could_have_expired_snapshots() -> None:
    verdict = retention_verdict(retention(overdue=(5, 6, 7)))
    assert not verdict.passed
    assert verdict.description.startswith("3 snapshot(s) (5..7) were due for expiry by the run at 2024-03-05T09:00")
    assert names.expire_schedule("logs.events") in verdict.description and verdict.metadata["overdue_snapshots"] == 3
    assert "running?" in verdict.description
    # A run holding the table's compaction slot is what expiry waits for: the verdict names it.
    held = retention_verdict(retention(overdue=(5, 6, 7), holder="run r9 (its job) has held "
                                       "logs.events's compaction slot for 3 h 0 min"))
    assert ("are still there; run r9 (its job) has held logs.events's compaction slot for 3 h 0 min: "
            "expiry waits for it") in held.description and "running?" not in held.description


def test_retention_warns_above_num_retained_max_naming_the_consumers() -> None:
    verdict = retention_verdict(retention(span=SnapshotSpan(1, 120), consumers="revenue@7 (114 unread)",
                                          max_consumer_lag=114, last_expiry_ms=None))
    assert not verdict.passed
    assert verdict.description == ("120 snapshots retained, more than snapshot.num-retained.max 100; consumers "
                                   "(revenue@7 (114 unread)) may hold them; no expiry run recorded")
    assert verdict.metadata["max_consumer_lag"] == 114 and "last_expiry" not in verdict.metadata


def test_retention_names_consumers_that_lag() -> None:
    verdict = retention_verdict(retention(consumers="revenue@12 (3 unread), audit@15 (0 unread)", max_consumer_lag=3))
    assert verdict.passed
    assert verdict.description.endswith("; consumers revenue@12 (3 unread), audit@15 (0 unread)")


def test_ages_read_in_their_two_largest_units() -> None:
    assert [age_text(ms) for ms in (0, 12_000, 242_000, 7_500_000, 3 * DAY_MS + 4 * HOUR_MS + 5_000, -5)] == \
        ["0 s", "12 s", "4 min 2 s", "2 h 5 min", "3 d 4 h", "0 s"]


def test_an_empty_table_is_within_retention() -> None:
    verdict = retention_verdict(retention(span=SnapshotSpan(None, None), due=0, due_files=0, due_bytes=0))
    assert verdict.passed and verdict.metadata["earliest_snapshot"] == -1 == verdict.metadata["latest_snapshot"]


def orphans(**changes: object) -> OrphanFacts:
    facts = {"table": "logs.events", "schedule": "0 3 * * *", "previous_tick_ms": NINE - 6 * HOUR_MS,
             "last_tick_ms": NINE - 6 * HOUR_MS + DAY_MS, "orphans": (), "kinds": (), "orphan_bytes": 0,
             "candidates": 40, "older_than_ms": NINE - 6 * HOUR_MS - DAY_MS}
    return OrphanFacts(**{**facts, **changes})  # type: ignore[arg-type]


def test_no_orphans_passes_saying_how_many_files_were_old_enough() -> None:
    verdict = orphans_verdict(orphans())
    assert verdict.passed and verdict.name == names.ORPHANS_CHECK
    assert verdict.description == ("no orphan file older than 2024-03-04T03:00:00+00:00 (40 file(s) that old, all "
                                   "referenced)")


def test_orphans_the_cleanup_could_have_deleted_warn_by_kind() -> None:
    found = tuple(f"dt=2024-03-0{i}/bucket-0/data-{i}.parquet" for i in range(1, 13)) + ("manifest/manifest-x",)
    verdict = orphans_verdict(orphans(orphans=found, kinds=("data",) * 12 + ("manifest",), orphan_bytes=13_000))
    assert not verdict.passed
    assert verdict.description.startswith("13 orphan file(s) (13,000 bytes) older than 2024-03-04T03:00:00+00:00")
    assert names.orphans_schedule("logs.events") in verdict.description
    assert (verdict.metadata["orphan_data_files"], verdict.metadata["orphan_metadata_files"]) == (12, 1)
    listed = verdict.metadata["orphans"].value
    assert listed.count("\n- `") == 9 and listed.endswith("- ... and 3 more")
