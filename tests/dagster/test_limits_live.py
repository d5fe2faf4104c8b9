"""Per-table limits on a real deployment, on the launch paths that carry no table tag.

A backfill launched from an asset page (or a group's "Materialize all") makes runs of the implicit
asset job, one per partition, tagged with nothing of ours: only the asset's pool holds them to one
writer at a time. Dagster's queue creates a pool it has not seen in the same pass that decides, after
deciding, so a table's first backfill on a fresh instance went out all at once; the table's sensors
create its pool on their first tick. Here the queue is watched from the run records: no two runs of
the table overlap, the first backfill included; nor do two compactions launched at once from the
table's launchpad (its job's ``paimon/compaction`` tag).
"""

from __future__ import annotations

import datetime as dt_
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.compaction.jobs import compaction_run_config
from resources.keys import COMPACTION_TAG
from tests.support.fixture_project.definitions import CODE_LOCATION, WORKSPACE
from tests.support.fixture_project.tables import EVENTS_TABLE, spec
from tests.support.live_dagster import FINISHED, CodeLocation, live_dagster, overlaps

pytestmark = [pytest.mark.slow, pytest.mark.live]  # a real webserver and daemon

LOCATION = CodeLocation(WORKSPACE, CODE_LOCATION)
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
SETTLE_TIMEOUT_S = 300
FOLLOW_S = 5  # how long each launchpad compaction keeps following the table


def test_a_first_backfill_of_a_table_runs_one_writer_at_a_time(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    pool = names.pool(EVENTS_TABLE)
    with live_dagster(tmp_path, warehouse=warehouse, location=LOCATION) as dagster:
        # The table's sensors tick as the daemon starts; their first tick creates its pool.
        instance = dg.DagsterInstance.from_config(str(dagster.home))
        try:
            dagster.wait(lambda: pool in instance.event_log_storage.get_concurrency_keys(), timeout=60,
                         what=f"the pool {pool} created by the table's sensors")
            assert instance.event_log_storage.get_concurrency_info(pool).slot_count == 1
        finally:
            instance.dispose()

        # As the asset page launches it: no tags of ours on the runs.
        backfill_id = dagster.launch_backfill([list(spec(EVENTS_TABLE).key.path)], DAYS, tags={},
                                              title="events, first backfill")

        def finished() -> list[dict[str, Any]] | None:
            runs = dagster.runs({"dagster/backfill": backfill_id})
            if len(runs) < len(DAYS) or any(r["status"] not in FINISHED for r in runs):
                return None
            return runs

        runs = dagster.wait(finished, timeout=SETTLE_TIMEOUT_S, what="the backfill's runs to finish")

        # Two compactions of the table from its launchpad at once, each following the table for a
        # few seconds (long enough to overlap): its job's tag holds them apart.
        job = names.compaction_job(EVENTS_TABLE)
        config = compaction_run_config(spec(EVENTS_TABLE).target(), follow_seconds=FOLLOW_S)
        launched = {dagster.launch_run(job, run_config=config), dagster.launch_run(job, run_config=config)}

        def compacted() -> list[dict[str, Any]] | None:
            done = [r for r in dagster.runs(job=job) if r["runId"] in launched]
            return done if len(done) == 2 and all(r["status"] in FINISHED for r in done) else None

        compactions = dagster.wait(compacted, timeout=SETTLE_TIMEOUT_S, what="the two compactions to finish")
    assert not dagster.group_alive()

    assert {r["status"] for r in compactions} == {"SUCCESS"}, compactions
    assert all(r["tags"][COMPACTION_TAG] == EVENTS_TABLE for r in compactions)
    assert overlaps(compactions) == []

    assert {r["status"] for r in runs} == {"SUCCESS"}, runs
    assert sorted(r["tags"]["dagster/partition"] for r in runs) == DAYS
    assert overlaps(runs) == [], [(dt_.datetime.fromtimestamp(r["startTime"]), r["runId"]) for r in runs]
    table = pc.Catalog(warehouse).get_table(EVENTS_TABLE)
    assert sorted(set(table.read(["dt"])["dt"].to_pylist())) == DAYS
