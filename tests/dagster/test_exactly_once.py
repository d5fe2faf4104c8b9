"""Exactly once does not depend on snapshot retention: a run worker is SIGKILLed after its
commits landed and before its step succeeded, expiry then deletes every snapshot it wrote, and
the partition is written again — by a re-execution from failure, or by a fresh run — without a
row landing twice (append: 40,000 rows, not 80,000; upsert into a sum: 400 per key, not 800)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac
import pytest

import paimon_core as pc
from resources import keys
from resources.writes import commit_user_for
from tests.support.exactly_once_defs import KEYS, ROWS, TABLES, reconstructable

REPO = Path(__file__).resolve().parents[2]
DAY, OTHER_DAY = "2024-03-01", "2024-03-02"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dg.DagsterInstance, Path]]:
    """A DAGSTER_HOME shared by this process and the killed run's, and the warehouse."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    warehouse = tmp_path / "warehouse"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    instance = dg.DagsterInstance.get()
    try:
        yield instance, warehouse
    finally:
        instance.dispose()


def killed_run(instance: dg.DagsterInstance, warehouse: Path, table: str, kill_after: int) -> dg.DagsterRun:
    """Run ``table``'s job for DAY in a process that dies right after its ``kill_after``-th
    commit; then mark the run failed, as run monitoring does for a dead worker."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tests.support.exactly_once_defs", table, DAY, str(kill_after),
                           str(warehouse)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == -9, f"the run was to be killed: {done.returncode}\n{done.stderr[-3000:]}"
    [run] = instance.get_runs(limit=1)
    assert run.status == dg.DagsterRunStatus.STARTED  # nobody reported its end
    instance.report_run_failed(run)
    return run


def expire_its_snapshots(table: pc.Table, user: str) -> None:
    """Another writer commits, then expiry keeps only the newest snapshot: every snapshot of
    ``user`` is gone."""
    with table.new_write(commit_user="another-writer") as writer:
        schema = table.arrow_schema
        writer.write(pa.Table.from_pylist([{name: (OTHER_DAY if name == "dt" else 1) for name in schema.names}],
                                          schema=schema))
        writer.commit()
    table.expire_snapshots(dry_run=False, older_than=int(time.time() * 1000) + 1000, retain_min=1, retain_max=1)
    assert all(s.commit_user != user for s in table.snapshots())


def day_state(table: pc.Table, mode: str) -> object:
    """What the partition holds: rows (append, overwrite) or the distinct sums per key (upsert)."""
    data = table.read(filter=[("dt", "=", DAY)])
    if mode == "upsert":
        return (data.num_rows, sorted(set(data.column("n").to_pylist())))
    return (data.num_rows, pac.sum(data.column("id")).as_py())


def logged(instance: dg.DagsterInstance, run_id: str, text: str) -> bool:
    return any(text in entry.user_message for entry in instance.all_logs(run_id))


EXPECTED = {"append": (ROWS, ROWS * (ROWS - 1) // 2), "overwrite": (ROWS, ROWS * (ROWS - 1) // 2),
            "upsert": (KEYS, [ROWS // KEYS])}


@pytest.mark.parametrize(("mode", "kill_after"), [("append", 4), ("append", 2), ("upsert", 4), ("upsert", 3),
                                                  ("overwrite", 1)])
def test_a_reexecution_after_expiry_writes_nothing_twice(home: tuple[dg.DagsterInstance, Path], mode: str,
                                                          kill_after: int) -> None:
    instance, warehouse = home
    name = TABLES[mode]
    failed = killed_run(instance, warehouse, name, kill_after)
    table = pc.Catalog(str(warehouse)).get_table(name)
    user = commit_user_for(failed.run_id, name.replace(".", "/"), DAY)
    expire_its_snapshots(table, user)

    with dg.execute_job(reconstructable(name, str(warehouse)), instance=instance, tags={"dagster/partition": DAY},
                        reexecution_options=dg.ReexecutionOptions.from_failure(failed.run_id, instance)) as again:
        assert again.success
    assert day_state(table, mode) == EXPECTED[mode]
    chunks = {"append": 4, "upsert": 4, "overwrite": 1}[mode]
    rewritten = [s for s in table.snapshots() if s.commit_user == user]
    assert len(rewritten) == chunks - kill_after, "only the chunks that had not landed are written"
    [materialization] = instance.fetch_materializations(dg.AssetKey(name.split(".")), limit=1).records
    event = materialization.asset_materialization
    assert event is not None and event.metadata[keys.INGEST_REUSED_COMMIT].value is True


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_a_fresh_run_resumes_the_unfinished_write_of_a_dead_run(home: tuple[dg.DagsterInstance, Path],
                                                                 mode: str) -> None:
    instance, warehouse = home
    name = TABLES[mode]
    failed = killed_run(instance, warehouse, name, 2)
    table = pc.Catalog(str(warehouse)).get_table(name)
    dead_user = commit_user_for(failed.run_id, name.replace(".", "/"), DAY)
    expire_its_snapshots(table, dead_user)

    job, day = reconstructable(name, str(warehouse)), {"dagster/partition": DAY}
    with dg.execute_job(job, instance=instance, tags=day) as fresh:
        assert fresh.success
        assert logged(instance, fresh.run_id, "died after 2 chunk(s) of its write; resuming it")
    assert day_state(table, mode) == EXPECTED[mode]
    assert len([s for s in table.snapshots() if s.commit_user == dead_user]) == 2, "chunks 3 and 4"

    # Once the partition is whole, a further run is a new append of the partition, as append means.
    with dg.execute_job(job, instance=instance, tags=day) as next_run:
        assert next_run.success
        assert not logged(instance, next_run.run_id, "resuming it")
