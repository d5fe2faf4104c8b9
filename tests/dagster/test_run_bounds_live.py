"""A compaction run past its runtime bound is ended by the shipped run monitoring (or, on an
instance without it, by the table's watchdog), and its table's compaction slot frees: the next
compaction of the table runs.

The run here is alive but keeps following the table (a long ``follow_seconds``) with a bound of a
few seconds: to run monitoring that is the same as a run whose process died with its host, which
stays STARTED until something fails it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines import names
from pipelines.compaction.jobs import compaction_run_config
from pipelines.definitions import REPO_ROOT
from pipelines.target import SENSOR_INTERVAL_ENV
from resources.keys import COMPACTION_TAG, MAX_RUNTIME_TAG
from tests.support.fixture_project.definitions import CODE_LOCATION, WORKSPACE
from tests.support.fixture_project.tables import EVENTS_TABLE, spec
from tests.support.live_dagster import FINISHED, CodeLocation, live_dagster

pytestmark = [pytest.mark.slow, pytest.mark.live]  # a real webserver and daemon

LOCATION = CodeLocation(WORKSPACE, CODE_LOCATION)
DAY = "2024-01-01"
BOUND_S = 8
# The shipped settings, polled faster so the test is short.
SHIPPED = yaml.safe_load((REPO_ROOT / "dagster_home" / "dagster.yaml").read_text())["run_monitoring"]
MONITORING = {**SHIPPED, "poll_interval_seconds": 2}
SETTLE_TIMEOUT_S = 300


@pytest.mark.parametrize("monitoring", [True, False], ids=["run-monitoring", "watchdog"])
def test_a_compaction_past_its_bound_is_ended_and_the_table_compacts_again(tmp_path: Path, monitoring: bool) -> None:
    """With the shipped run monitoring, Dagster ends the run; on an instance without it, the
    table's watchdog sensor does, saying so in the run's log. Either way the slot frees."""
    assert SHIPPED["enabled"] is True and "max_runtime_seconds" not in SHIPPED  # per run, not global
    overrides = {"run_monitoring": MONITORING if monitoring else {"enabled": False}}
    with live_dagster(tmp_path, warehouse=str(tmp_path / "warehouse"), location=LOCATION,
                      env={SENSOR_INTERVAL_ENV: "2"}, instance_overrides=overrides) as dagster:
        backfill = dagster.launch_backfill([list(spec(EVENTS_TABLE).key.path)], [DAY], tags={}, title="one day")
        dagster.wait(lambda: [r for r in dagster.runs({"dagster/backfill": backfill}) if r["status"] == "SUCCESS"]
                     or None, timeout=SETTLE_TIMEOUT_S, what="the table's first partition")

        job = names.compaction_job(EVENTS_TABLE)
        config = compaction_run_config(spec(EVENTS_TABLE).target(), follow_seconds=3600)
        config["ops"]["plan_compaction"]["config"]["idle_seconds"] = 3600
        stuck = dagster.launch_run(job, run_config=config, tags={MAX_RUNTIME_TAG: str(BOUND_S)})

        def finished(run_id: str) -> dict[str, Any] | None:
            [run] = [r for r in dagster.runs(job=job) if r["runId"] == run_id]
            return run if run["status"] in FINISHED else None

        ended = dagster.wait(lambda: finished(stuck), timeout=SETTLE_TIMEOUT_S, what="the bounded run to end")
        freed = time.time()
        # The live run is asked to stop first: it may record its cancel before (or after) the
        # failure is recorded; ended past its bound, a canceled run counts as failed for the
        # compaction sensor's retries too.
        assert ended["status"] in ("FAILURE", "CANCELED"), ended
        assert ended["tags"][COMPACTION_TAG] == EVENTS_TABLE
        ran_for = ended["endTime"] - ended["startTime"]
        assert ran_for >= BOUND_S, ended
        logs = "\n".join(dagster.run_logs(stuck))
        if monitoring:
            assert f"maximum runtime of {BOUND_S} seconds" in logs, logs[-2000:]
        else:
            assert (f"paimon watchdog: failing compaction run {stuck} ({job}) holding {EVENTS_TABLE}'s compaction "
                    f"slot: it has run") in logs, logs[-2000:]
            # The tick that failed it says so (its record is written once the tick ends).
            dagster.wait(lambda: [t for t in dagster.sensor(names.watch_sensor(EVENTS_TABLE))["sensorState"]["ticks"]
                                  if f"failed {stuck}" in (t.get("skipReason") or "")],
                         timeout=60, what="the watchdog's tick saying it failed the run")

        # The table's slot is free: the next compaction (nothing to follow) runs and succeeds.
        after = dagster.launch_run(job, run_config=compaction_run_config(spec(EVENTS_TABLE).target()))
        next_run = dagster.wait(lambda: finished(after), timeout=SETTLE_TIMEOUT_S, what="the next compaction")
    assert next_run["status"] == "SUCCESS", next_run
    print(f"\n{'run monitoring' if monitoring else 'the watchdog'} ended the bounded run after {ran_for:.1f} s "
          f"(bound {BOUND_S} s, {ended['status']}); the next compaction of the table succeeded "
          f"{next_run['endTime'] - freed:.1f} s later")
