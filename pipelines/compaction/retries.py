"""Compaction that resumes by itself: a sensor requests again the run it requested for a table
state when that run failed.

A sensor asks for one run per table state (run key ``<db.table>@<snapshot>``). When that run
fails (its worker killed, storage unreachable) and no writer commits again, the state does not
change, so without a retry level 0 would stay above the threshold until the next commit, which
after a backfill's last partition or on a quiet night may never come. A tick that finds the
table unchanged looks at the runs requested for that state: after a failure it asks again, with
``<run key>/retry-<n>`` (a new key, so Dagster launches it) once a backoff has passed, at most
``RETRY_LIMIT`` times; a run a person canceled is not retried (one canceled for running past its
bound is: see :func:`ended_by_bound`). The decision is pure
(:func:`retry_verdict`); :func:`failed_attempts` reads the runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from pipelines import names
from resources.keys import COMPACTION_TAG, MAX_RUNTIME_TAG, TRIGGER_SNAPSHOT_TAG

# Runs of one table state a sensor requests again after failures, and the wait before the first
# retry (doubling after each): 30 s, 1, 2, 4, 8 min, about a quarter of an hour in all.
RETRY_LIMIT = 5
RETRY_BASE_S = 30.0
# Runs of one table state looked at (the first request and its retries, with room to spare).
RUNS_LOOKED_AT = 2 * RETRY_LIMIT + 2


@dataclass(frozen=True, slots=True)
class FailedAttempts:
    """The failed runs requested for one table state, and the newest of them."""

    count: int
    last_run_id: str
    last_end_s: float  # when the newest failed run ended (epoch seconds)


@dataclass(frozen=True, slots=True)
class RetryVerdict:
    """Whether to request the state's run again now, as which attempt, and what the tick says."""

    due: bool
    attempt: int  # the retry's number (1 for the first retry)
    message: str


def backoff_s(attempt: int, base_s: float | None = None) -> float:
    """The wait after a failure before retry ``attempt`` (1-based): ``base_s`` (default
    ``RETRY_BASE_S``, read at the call), doubling each time."""
    return (RETRY_BASE_S if base_s is None else base_s) * 2 ** (attempt - 1)


def retry_verdict(failed: FailedAttempts, *, now_s: float, limit: int = RETRY_LIMIT,
                  base_s: float | None = None) -> RetryVerdict:
    """Retry once the backoff after the newest failure has passed, at most ``limit`` times."""
    attempt = failed.count
    if attempt > limit:
        return RetryVerdict(False, attempt, f"its run failed {failed.count} times (the last, {failed.last_run_id}, "
                            f"retry {limit} of {limit}); not retried again until the next commit: see that run's logs")
    wait = backoff_s(attempt, base_s) - (now_s - failed.last_end_s)
    if wait > 0:
        return RetryVerdict(False, attempt, f"its run {failed.last_run_id} failed; retry {attempt} of {limit} in "
                            f"{wait:.0f} s")
    return RetryVerdict(True, attempt, f"its run {failed.last_run_id} failed; requesting it again (retry {attempt} of "
                        f"{limit})")


def ended_by_bound(record: dg.RunRecord) -> bool:
    """Whether a canceled run was ended for running past its ``dagster/max_runtime`` bound: run
    monitoring (and the watchdog) cancel a live run first, so it may end CANCELED, not FAILURE."""
    run = record.dagster_run
    if run.status != dg.DagsterRunStatus.CANCELED or MAX_RUNTIME_TAG not in run.tags:
        return False
    try:
        bound = float(run.tags[MAX_RUNTIME_TAG])
    except ValueError:
        return False
    start = record.start_time if record.start_time is not None else record.create_timestamp.timestamp()
    end = record.end_time if record.end_time is not None else record.update_timestamp.timestamp()
    return end - start >= bound


def failed_attempts(instance: dg.DagsterInstance, table: str, snapshot_id: int) -> FailedAttempts | None:
    """The failed compaction runs requested for ``table`` at ``snapshot_id`` (those ended for
    their runtime bound included); None when there is none, when one of them succeeded or a person
    canceled one (nothing to retry), or when one has not ended yet."""
    jobs = (names.compaction_job(table), names.full_compaction_job(table))
    records = instance.get_run_records(dg.RunsFilter(tags={COMPACTION_TAG: table,
                                                           TRIGGER_SNAPSHOT_TAG: str(snapshot_id)}),
                                       limit=RUNS_LOOKED_AT)
    runs = [r for r in records if r.dagster_run.job_name in jobs]
    if any(not r.dagster_run.is_finished for r in runs):
        return None  # one is on its way (Dagster's run retries relaunch a dead run with its tags)
    failed = [r for r in runs if r.dagster_run.status == dg.DagsterRunStatus.FAILURE or ended_by_bound(r)]
    if any(r.dagster_run.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.CANCELED) and r not in failed
           for r in runs):
        return None
    if not failed:
        return None
    newest = max(failed, key=lambda r: r.end_time or r.create_timestamp.timestamp())
    return FailedAttempts(len(failed), newest.dagster_run.run_id,
                          newest.end_time or newest.create_timestamp.timestamp())


def retry_key(run_key: str, attempt: int) -> str:
    """The run key of retry ``attempt`` of the run keyed ``run_key`` (Dagster launches a key once)."""
    return f"{run_key}/retry-{attempt}"
