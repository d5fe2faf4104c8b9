"""Reference test of the compaction sensor's retry decision: pure values, no table, no instance."""

from __future__ import annotations

from pipelines.compaction.retries import FailedAttempts, backoff_s, retry_key, retry_verdict

FAILED_AT = 1_000_000.0


def failed(count: int) -> FailedAttempts:
    return FailedAttempts(count, "run-9", FAILED_AT)


def test_backoff_doubles_from_the_base() -> None:
    assert [backoff_s(n, 30) for n in (1, 2, 3, 4, 5)] == [30, 60, 120, 240, 480]


def test_a_failed_run_is_requested_again_once_its_backoff_passed() -> None:
    waiting = retry_verdict(failed(1), now_s=FAILED_AT + 10, base_s=30)
    assert (waiting.due, waiting.attempt) == (False, 1)
    assert waiting.message == "its run run-9 failed; retry 1 of 5 in 20 s"
    due = retry_verdict(failed(1), now_s=FAILED_AT + 30, base_s=30)
    assert (due.due, due.attempt) == (True, 1)
    assert due.message == "its run run-9 failed; requesting it again (retry 1 of 5)"
    # The third failure (the first run and two retries) waits 2 x 60 s before retry 3.
    assert not retry_verdict(failed(3), now_s=FAILED_AT + 119, base_s=30).due
    assert retry_verdict(failed(3), now_s=FAILED_AT + 120, base_s=30).attempt == 3


def test_retries_stop_at_the_limit_until_the_next_commit() -> None:
    assert retry_verdict(failed(5), now_s=FAILED_AT + 10_000, limit=5).due
    stopped = retry_verdict(failed(6), now_s=FAILED_AT + 10_000, limit=5)
    assert not stopped.due
    assert stopped.message == ("its run failed 6 times (the last, run-9, retry 5 of 5); not retried again until the "
                               "next commit: see that run's logs")


def test_each_retry_has_its_own_run_key() -> None:
    assert retry_key("sales.orders@7", 2) == "sales.orders@7/retry-2"
