"""SIGKILL at named points and random storage faults (fail, fail after success, torn writes):
the table always reads, nothing committed is lost, nothing the client was told failed is
visible, a retried commit lands exactly once, and orphan cleanup reclaims every leftover.

The figures (trials per fault kind, outcomes) are printed; ``-rP`` shows them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.faults.trials import LOGS, NAMED_POINTS, PK, Trials
from tests.support.s3.servers import S3Server
from tests.support.s3.store import Store

pytestmark = pytest.mark.torture

NAMED_ROUNDS = 6  # per point: both tables, several states of the LSM
RANDOM_TRIALS = 100
S3_RANDOM_TRIALS = 6


@pytest.fixture(scope="module")
def trials(tmp_path_factory: pytest.TempPathFactory) -> Trials:
    root = tmp_path_factory.mktemp("crash")
    return Trials(root, seed=20261129, store=Store.local(str(root / "warehouse")))


@pytest.mark.parametrize("point", sorted(NAMED_POINTS))
def test_sigkill_at_named_point(trials: Trials, point: str) -> None:
    operation, fault = NAMED_POINTS[point]
    outcomes = [trials.run(point, operation, (fault,), name=(PK, LOGS)[i % 2])["outcome"]
                for i in range(NAMED_ROUNDS)]
    assert "killed" in outcomes, f"the {point!r} crash point was never reached: {outcomes}"


def test_random_faults(trials: Trials) -> None:
    """Trials until ``RANDOM_TRIALS`` faults struck (a fault past an operation's last call of
    its kind does not; the trials learn how many calls each operation makes)."""
    ran = 0
    while trials.tally.fired < RANDOM_TRIALS and ran < RANDOM_TRIALS * 3 // 2:
        label, operation, faults = trials.random_fault()
        trials.run(label, operation, faults)
        ran += 1
    figures = trials.tally.as_dict()
    print(json.dumps(figures, indent=1, sort_keys=True))
    assert trials.tally.fired >= RANDOM_TRIALS, f"{RANDOM_TRIALS} trials where the fault struck, in {ran}"
    assert figures["outcomes"].get("killed", 0) > 20 and figures["outcomes"].get("failed", 0) > 10


def test_crash_trials_on_s3(s3_servers: dict[str, S3Server], tmp_path: Path) -> None:
    """The same trials with the warehouse on SeaweedFS (fewer: each costs a few hundred requests;
    the S3 fault proxy trials cover moto)."""
    trials = Trials(tmp_path, seed=7, store=Store.on(s3_servers["seaweed"]))
    for i, point in enumerate(sorted(NAMED_POINTS)):
        operation, fault = NAMED_POINTS[point]
        trials.run(point, operation, (fault,), name=(PK, LOGS)[i % 2])
    for _ in range(S3_RANDOM_TRIALS):
        label, operation, faults = trials.random_fault()
        trials.run(label, operation, faults)
    figures = trials.tally.as_dict()
    print("seaweed", json.dumps(figures, sort_keys=True))
    assert figures["outcomes"].get("killed", 0) >= len(NAMED_POINTS)
