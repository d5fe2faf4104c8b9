"""``make demo``'s runs where the README sends its reader: on a deployment of ``workspace.yaml``
whose instance and warehouse the demo filled first, the job, sensor and schedule pages list the
demo's runs, and "Re-execute all" on one launches a run of the code location that succeeds.

The demo runs its jobs in its own process; it creates each run as the webserver does (with the
code location's origin), which is what those pages filter on and what re-execution loads.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import dagster as dg
import pytest

from pipelines import names
from pipelines.code_location import WAREHOUSE_ENV
from pipelines.definitions import REPO_ROOT
from resources import keys
from tests.support.live_dagster import FINISHED, LOCATION, LiveDagster
from tests.ui.conftest import Screenshot, served, skip_without_browser

skip_without_browser()

from playwright.sync_api import Locator, Page, expect  # noqa: E402 - after the skip: playwright may be missing

pytestmark = pytest.mark.slow

ORDERS = "shop.orders"
LOGS_JOB = names.ingestion_job("logs.events")
FULL_JOB = names.full_compaction_job(ORDERS)
SENSOR = names.compaction_sensor(ORDERS)
EXPIRE_JOB, EXPIRE_SCHEDULE = names.expire_job(ORDERS), names.expire_schedule(ORDERS)
REPOSITORY_LABEL = f"__repository__@{LOCATION}"
DEMO_TIMEOUT_S = 300
RERUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def dagster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDagster]:
    """The demo (two days of logs, five of orders) run into a temp instance and warehouse, then a
    webserver and a daemon on them (the sensors tick every 30 s; the demo left nothing for them)."""
    root = tmp_path_factory.mktemp("demo-runs")
    deployment = LiveDagster(root, warehouse=str(root / "warehouse"))
    deployment.home.mkdir(parents=True)
    env = {**os.environ, "DAGSTER_HOME": str(deployment.home), WAREHOUSE_ENV: deployment.warehouse}
    demo = subprocess.run([sys.executable, "-m", "pipelines.demo", "--days", "2", "--order-days", "5"], check=False,
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    yield from served(deployment)


def demo_runs(dagster: LiveDagster, job: str) -> list[str]:
    """The demo's runs of ``job``, from the instance itself (not through the UI under test)."""
    instance = dg.DagsterInstance.from_config(str(dagster.home))
    try:
        return [r.run_id for r in instance.get_runs(dg.RunsFilter(job_name=job))]
    finally:
        instance.dispose()


def run_link(page: Page, run_id: str) -> Locator:
    """The link to a run in a runs list (its name is the run icon's and the short id)."""
    return page.get_by_role("link", name=re.compile(rf"{run_id[:8]}$")).first


def test_demo_runs_carry_the_code_location(dagster: LiveDagster) -> None:
    """Every run the demo made is labelled with the location the webserver serves."""
    labelled = {r["runId"] for r in dagster.runs({".dagster/repository": REPOSITORY_LABEL}, limit=500)}
    everything = {r["runId"] for r in dagster.runs(limit=500)}
    assert everything and labelled == everything, everything - labelled


# The asset page's metadata table shows keys up to this long beside their values (1600 px wide,
# its monospace font; tests/ui/test_ui.py measures the cells).
KEY_CHARACTERS_SHOWN = 32


def metadata_of_every_event(dagster: LiveDagster) -> dict[str, set[tuple[str, str]]]:
    """Every metadata key of the demo's materializations and observations, with the value types
    it took and on which asset."""
    found: dict[str, set[tuple[str, str]]] = {}
    instance = dg.DagsterInstance.from_config(str(dagster.home))
    try:
        for key in instance.get_asset_keys():
            where = "/".join(key.path)
            events = [*(r.asset_materialization for r in instance.fetch_materializations(key, limit=1000).records),
                      *(r.asset_observation for r in instance.fetch_observations(key, limit=1000).records)]
            for event in events:
                for name, value in (event.metadata if event is not None else {}).items():
                    found.setdefault(name, set()).add((type(value).__name__, where))
    finally:
        instance.dispose()
    return found


def test_every_metadata_key_has_one_type_and_fits_its_column(dagster: LiveDagster) -> None:
    """A key is a number on every table or text on every table (Dagster plots a key by its type),
    and short enough not to run into its value on the asset page."""
    found = metadata_of_every_event(dagster)
    assert {keys.INGEST_ROWS_WRITTEN, keys.COMPACTION_FILES_IN, keys.MAINTENANCE_SNAPSHOTS_EXPIRED} <= set(found)
    mixed = {name: sorted(kinds) for name, kinds in found.items() if len({kind for kind, _ in kinds}) > 1}
    assert mixed == {}
    long = sorted(name for name in found if name.startswith("paimon/") and len(name) > KEY_CHARACTERS_SHOWN)
    assert long == []


def test_job_sensor_and_schedule_pages_list_the_demo_runs(page: Page, dagster: LiveDagster,
                                                          screenshot: Screenshot) -> None:
    logs_runs = demo_runs(dagster, LOGS_JOB)
    # Two days, then one of them again.
    assert len(logs_runs) == 3, logs_runs
    page.goto(f"{dagster.url}/locations/{LOCATION}/jobs/{LOGS_JOB}/runs", wait_until="domcontentloaded")
    for run_id in logs_runs:
        expect(run_link(page, run_id)).to_be_visible()
    expect(page.get_by_text("No runs found")).to_have_count(0)
    screenshot("job")

    full = dagster.runs({"dagster/sensor_name": SENSOR}, job=FULL_JOB)[-1]
    page.goto(f"{dagster.url}/locations/{LOCATION}/sensors/{SENSOR}", wait_until="domcontentloaded")
    page.get_by_role("button", name="Runs", exact=True).click()
    expect(run_link(page, full["runId"])).to_be_visible()
    screenshot("sensor")

    # A schedule's page lists runs by its ticks (the daemon's); the demo ran the schedule's job
    # with the schedule's tags, so the job's page lists it, launched by the schedule.
    [expiry] = demo_runs(dagster, EXPIRE_JOB)
    page.goto(f"{dagster.url}/locations/{LOCATION}/jobs/{EXPIRE_JOB}/runs", wait_until="domcontentloaded")
    expect(run_link(page, expiry)).to_be_visible()
    expect(page.get_by_text(EXPIRE_SCHEDULE, exact=True).first).to_be_visible()  # "Launched by"
    screenshot("schedule")


def test_reexecute_all_on_a_demo_run_succeeds(page: Page, dagster: LiveDagster, screenshot: Screenshot) -> None:
    parent = demo_runs(dagster, LOGS_JOB)[0]
    page.goto(f"{dagster.url}/runs/{parent}", wait_until="domcontentloaded")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible()
    page.get_by_role("button", name="Re-execute all").click()
    expect(page.get_by_text("Expected non-None value")).to_have_count(0)

    def child() -> dict[str, str] | None:
        runs = dagster.runs({"dagster/parent_run_id": parent})
        return runs[0] if runs and runs[0]["status"] in FINISHED else None

    rerun = dagster.wait(child, timeout=RERUN_TIMEOUT_S, what=f"the re-execution of run {parent}")
    assert rerun["status"] == "SUCCESS", dagster.run_logs(rerun["runId"])[-30:]
    # Launched by the webserver from the parent's origin: the same code location's run.
    assert rerun["runId"] in {r["runId"] for r in dagster.runs({".dagster/repository": REPOSITORY_LABEL})}
    page.goto(f"{dagster.url}/runs/{rerun['runId']}", wait_until="domcontentloaded")
    expect(page.get_by_text("RUN_SUCCESS").first).to_be_visible()
    screenshot("rerun")

