"""The Dagster UI over a live deployment, driven in headless Chromium (playwright's sync API).

One deployment of the project's ``workspace.yaml`` (webserver + daemon, temp ``DAGSTER_HOME`` and
warehouse, compaction sensors ticking every 5 s) serves every test of the module; each test saves
screenshots as ``.ui-screenshots/<test name>-<step>.png``:

1. ``shop/orders``' asset page before any run: every declared column with its Paimon type and
   description, the primary key marked, the table name, the kinds, the five checks, and the
   ``paimon/automation`` metadata naming the compaction sensor and maintenance schedules;
2. a backfill of three ``logs/events`` partitions launched from the asset page's Materialize
   dialog: its runs succeed with their steps in the run's own process, in seconds, without
   listing the table for ``no_orphan_files``; the Partitions tab shows the three materialized;
3. one day of ``shop/orders`` (five commits) makes ``compact_shop_orders_sensor`` request
   ``full_compact_shop_orders_job``: the tick and its run on the sensor's page, then the run page;
4. the compaction's observation in ``shop/orders``' Events tab, and the metadata plots; the
   columns after the run still as declared.

Selectors are texts and roles (the UI's DOM changes between Dagster versions); every wait is on a
condition with a deadline sized for a busy 2-core machine.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipelines import names
from pipelines.compaction.lsm import LEVEL0_CHECK, SMALL_FILES_CHECK
from pipelines.definitions import REPO_ROOT
from pipelines.maintenance.verdicts import ORPHANS_CHECK, RETENTION_CHECK
from resources import keys
from resources.keys import TABLE_TAG
from tests.support.live_dagster import FINISHED, LOCATION, LiveDagster
from tests.ui.conftest import Screenshot, skip_without_browser

skip_without_browser()

from playwright.sync_api import Locator, Page, expect  # noqa: E402 - after the skip: playwright may be missing

pytestmark = pytest.mark.slow

TABLES_YAML = REPO_ROOT / "pipelines" / "demo" / "defs" / "tables" / "defs.yaml"
CHECKS = {names.DATA_CHECK, LEVEL0_CHECK, SMALL_FILES_CHECK, RETENTION_CHECK, ORPHANS_CHECK, names.INSTANCE_CHECK}
ORDERS = "shop.orders"
SENSOR = names.compaction_sensor("shop.orders")
FULL_JOB = names.full_compaction_job(ORDERS)
LOGS_DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]
ORDERS_DAY = "2024-01-01"
# Runs wait in the queue behind each other (one writer per table) and each starts a process
# that loads the code location: minutes on a busy machine.
RUNS_TIMEOUT_S = 300
# A partition write of the demo takes about a second; the bound leaves room for a loaded machine.


def declared(table: str) -> dict[str, Any]:
    """The table's declaration in the demo's YAML, read here rather than through the code under test."""
    tables = yaml.safe_load(TABLES_YAML.read_text())["attributes"]["tables"]
    return dict(next(t for t in tables if t["table"] == table))


def visit(page: Page, dagster: LiveDagster, path: str) -> None:
    page.goto(dagster.url + path, wait_until="domcontentloaded")


def column_rows(page: Page) -> Locator:
    """The rows of the asset page's Columns table (the table whose header says "Column name")."""
    table = page.get_by_role("table").filter(has=page.get_by_text("Column name", exact=True))
    return table.get_by_role("row")


def column_row(page: Page, name: str) -> Locator:
    return column_rows(page).filter(has=page.get_by_text(name, exact=True))


def metadata_row(page: Page, key: str) -> Locator:
    return page.get_by_role("row").filter(has=page.get_by_text(key, exact=True))


def run_details(dagster: LiveDagster, run_id: str) -> dict[str, Any]:
    """The run with its step stats and its events (type, message, check evaluations)."""
    data = dagster.graphql("""
        query($runId: ID!) {
          runOrError(runId: $runId) {
            __typename
            ... on Run { runId status creationTime startTime endTime
                         stepStats { stepKey status startTime endTime } }
          }
          logsForRun(runId: $runId, limit: 2000) {
            __typename
            ... on EventConnection { events { __typename
              ... on MessageEvent { message stepKey }
              ... on AssetCheckEvaluationEvent { evaluation { checkName success description
                metadataEntries { label ... on BoolMetadataEntry { boolValue } } } } } }
          }
        }""", {"runId": run_id})
    run = data["runOrError"]
    assert run["__typename"] == "Run", run
    assert data["logsForRun"]["__typename"] == "EventConnection", data["logsForRun"]
    return {**run, "events": data["logsForRun"]["events"]}


def failures(dagster: LiveDagster, runs: list[dict[str, Any]]) -> str:
    failed = [r for r in runs if r["status"] not in ("SUCCESS", "QUEUED", "NOT_STARTED", "STARTING", "STARTED")]
    return "\n".join(f"run {r['runId']} ({r['jobName']}, {r['status']}):\n"
                     + "\n".join(dagster.run_logs(r["runId"])[-30:]) for r in failed)


def wait_succeeded(dagster: LiveDagster, find: Any, *, count: int, what: str) -> list[dict[str, Any]]:
    """Until ``find()`` returns ``count`` runs, all SUCCESS; fails at once when one did not succeed."""

    def done() -> list[dict[str, Any]] | None:
        runs: list[dict[str, Any]] = find()
        if any(r["status"] in FINISHED and r["status"] != "SUCCESS" for r in runs):
            raise AssertionError(f"{what}: a run did not succeed\n{failures(dagster, runs)}\n{dagster.logs()}")
        finished = [r for r in runs if r["status"] == "SUCCESS"]
        return finished if len(finished) >= count else None

    result: list[dict[str, Any]] = dagster.wait(done, timeout=RUNS_TIMEOUT_S, interval=1.0, what=what)
    return result


def step_seconds(run: dict[str, Any], step_key: str) -> float:
    stats = next(s for s in run["stepStats"] if s["stepKey"] == step_key)
    return float(stats["endTime"] - stats["startTime"])


def durations(run: dict[str, Any], step_key: str) -> str:
    return (f"queued+launch {run['startTime'] - run['creationTime']:.1f} s, "
            f"run {run['endTime'] - run['startTime']:.1f} s, step {step_key} {step_seconds(run, step_key):.2f} s")


def assert_declared_columns(page: Page, spec: dict[str, Any]) -> None:
    """The Columns table shows every declared column: Paimon type, description, keys."""
    rows = column_rows(page)
    # The header and one row per declared column, in the declared order.
    expect(rows).to_have_count(1 + len(spec["columns"]))
    for column in spec["columns"]:
        row = column_row(page, column["name"])
        expect(row).to_have_count(1)
        # The Paimon type as declared (DECIMAL(12, 2), TIMESTAMP(6), ...), not the Arrow one; NOT NULL
        # is the column's "non-nullable" constraint.
        declared = column["type"].removesuffix(" NOT NULL")
        expect(row).to_contain_text(declared)
        if declared != column["type"]:
            expect(row).to_contain_text("non-nullable")
        if "description" in column:
            expect(row).to_contain_text(column["description"])
        if column["name"] in spec["primary_key"]:
            expect(row).to_contain_text("primary key")
        else:
            expect(row).not_to_contain_text("primary key")
        if column["name"] in spec["partition_keys"]:
            expect(row).to_contain_text("partition key")
    expect(page.get_by_text(f"PRIMARY KEY ({', '.join(spec['primary_key'])})", exact=True)).to_be_visible()


def open_materialize_dialog(page: Page) -> Locator:
    page.get_by_role("button", name="Materialize").first.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    return dialog


# ---- 1: the asset page of shop/orders ------------------------------------------------------------


def test_orders_asset_page_shows_columns_checks_and_automation(page: Page, dagster: LiveDagster,
                                                                screenshot: Screenshot) -> None:
    """Before any run (the definition's metadata only): columns, keys, table name, kinds, automation."""
    spec = declared(ORDERS)
    visit(page, dagster, "/assets/shop/orders")
    expect(page.get_by_text("The change kind: +I, -U, +U or -D")).to_be_visible()
    screenshot("overview")

    assert_declared_columns(page, spec)

    # The sidebar: storage (the table name and its URI), kinds (the format's icon reads "Parquet").
    expect(page.get_by_text(ORDERS, exact=True).first).to_be_visible()
    expect(page.get_by_text(re.compile(r"^file://.*/shop\.db/orders$"))).to_be_visible()
    for kind in ("paimon", "Parquet", "Table"):
        expect(page.get_by_text(kind, exact=True).first).to_be_visible()

    # Definition metadata: every sensor and schedule acting on the table, by name.
    automation = metadata_row(page, keys.AUTOMATION_METADATA_KEY)
    for name in (SENSOR, names.expire_schedule("shop.orders"), names.orphans_schedule("shop.orders")):
        expect(automation).to_contain_text(name)
    automation.scroll_into_view_if_needed()
    screenshot("metadata")

    page.get_by_role("tab", name="Checks", exact=True).click()
    expect(page.get_by_text(re.compile(rf"Checks \({len(CHECKS)}\)"))).to_be_visible()
    for check in CHECKS:
        expect(page.get_by_text(check, exact=True).first).to_be_visible()
    screenshot("checks")

    # The job a sensor launches is a link from the asset page to its page, which names the sensor.
    visit(page, dagster, "/assets/shop/orders")
    full_job = names.full_compaction_job(ORDERS)
    link = metadata_row(page, keys.AUTOMATION_METADATA_KEY).get_by_role("link", name=full_job).first
    expect(link).to_have_attribute("href", f"/guess/{full_job}")
    link.click()
    expect(page).to_have_url(re.compile(rf"/jobs/{full_job}"))
    expect(page.get_by_text(SENSOR).first).to_be_visible()
    screenshot("automation-job")


# ---- 2: a backfill launched from the asset page ---------------------------------------------------


def test_backfill_from_the_asset_page_runs_in_process(page: Page, dagster: LiveDagster,
                                                      screenshot: Screenshot) -> None:
    visit(page, dagster, "/assets/logs/events")
    dialog = open_materialize_dialog(page)
    # A partitioned asset: the dialog asks which partitions; a range in the custom selection.
    ranged = dialog.get_by_placeholder(re.compile(r"^ex: "))
    ranged.fill(f"[{LOGS_DAYS[0]}...{LOGS_DAYS[-1]}]")
    ranged.press("Enter")
    expect(dialog).to_contain_text(f"{len(LOGS_DAYS)} partitions")
    screenshot("dialog")
    clicked = time.monotonic()
    dialog.get_by_role("button", name="Launch backfill").click()
    toast = page.get_by_text(re.compile(r"Created backfill \w+"))
    expect(toast).to_be_visible()
    match = re.search(r"Created backfill (\w+)", toast.inner_text())
    assert match, toast.inner_text()
    backfill_id = match.group(1)
    screenshot("launched")

    runs = wait_succeeded(dagster, lambda: dagster.runs({"dagster/backfill": backfill_id}), count=len(LOGS_DAYS),
                          what=f"the {len(LOGS_DAYS)} runs of backfill {backfill_id}")
    assert sorted(r["tags"]["dagster/partition"] for r in runs) == LOGS_DAYS
    # Dagster's backfill daemon looks for new backfills every 30 s: the click waits for its next pass.
    queued = max(r["endTime"] for r in runs) - min(r["creationTime"] for r in runs)
    print(f"\nclick to success: a {len(LOGS_DAYS)}-partition backfill from the asset page, "
          f"{time.monotonic() - clicked:.1f} s ({queued:.1f} s from its first run's creation)")

    # The UI: the three days materialized, the other two missing.
    visit(page, dagster, "/assets/logs/events?view=partitions")
    expect(page.get_by_text(f"Materialized ({len(LOGS_DAYS)})")).to_be_visible()
    expect(page.get_by_text("Missing (2)")).to_be_visible()
    expect(page.get_by_text("Failed (0)")).to_be_visible()
    screenshot("partitions")

    # Each partition's write: what it wrote, the partition's rows and the table's, one count each.
    data = dagster.graphql("""{ assetOrError(assetKey: {path: ["logs", "events"]}) { ... on Asset {
        assetMaterializations(limit: 10) { partition metadataEntries { label } } } } }""")
    for materialization in data["assetOrError"]["assetMaterializations"]:
        labels = [e["label"] for e in materialization["metadataEntries"]]
        counts = [label for label in labels if label.endswith("row_count") or label == keys.INGEST_ROWS_WRITTEN]
        assert sorted(counts) == sorted(["dagster/row_count", "dagster/partition_row_count",
                                         keys.INGEST_ROWS_WRITTEN]), (materialization["partition"], labels)

    print("\nlogs/events ingestion runs (backfill from the asset page, one per partition):")
    for summary in sorted(runs, key=lambda r: r["tags"]["dagster/partition"]):
        run = run_details(dagster, summary["runId"])
        events = run["events"]
        types = {e["__typename"] for e in events}
        messages = [e.get("message") or "" for e in events]
        # One process: the run worker executes every step itself (in_process_executor).
        assert not types & {"StepWorkerStartingEvent", "StepWorkerStartedEvent"}, types
        started = next(m for m in messages if m.startswith("Started process for run (pid: "))
        in_process = next(m for m in messages if m.startswith("Executing steps in process (pid: "))
        assert started.split("pid: ")[1].rstrip(").") == in_process.split("pid: ")[1].rstrip(")"), (started, in_process)
        assert {s["status"] for s in run["stepStats"]} == {"SUCCESS"}
        # How long the write and the checks took is reported, not asserted: the structure above
        # (one process) is what keeps it short, and a busy machine only makes it slower.
        steps = ", ".join(f"{s['stepKey']} {s['endTime'] - s['startTime']:.2f} s" for s in run["stepStats"])
        print(f"  {summary['tags']['dagster/partition']}: {durations(run, 'logs__events')}; steps: {steps}")
        # The orphan check was selected with the asset but not evaluated (it would list every
        # directory of the table): no verdict in the run, a line in its log saying so.
        orphans = [e["evaluation"] for e in events if e["__typename"] == "AssetCheckEvaluationEvent"
                   and e["evaluation"]["checkName"] == ORPHANS_CHECK]
        assert orphans == [], orphans
        assert any(m.startswith(f"{ORPHANS_CHECK} of ") and "not evaluated" in m for m in messages), messages
        # Every other check once: no "skipped" record before its verdict, no repeated verdict.
        evaluated = Counter(e["evaluation"]["checkName"] for e in events
                            if e["__typename"] == "AssetCheckEvaluationEvent")
        assert evaluated and set(evaluated.values()) == {1}, evaluated


# ---- 3: the compaction the sensor launched, on the sensor's page ---------------------------------


@pytest.fixture(scope="module")
def orders_compaction(dagster: LiveDagster) -> dict[str, Any]:
    """One day of shop/orders ingested through GraphQL (five commits of 1,500 changes), and the
    full compaction ``compact_shop_orders_sensor`` requested for it, both succeeded."""
    backfill_id = dagster.launch_backfill([["shop", "orders"]], [ORDERS_DAY], tags={TABLE_TAG: ORDERS},
                                          title=f"shop/orders {ORDERS_DAY}")
    ingestion = wait_succeeded(dagster, lambda: dagster.runs({"dagster/backfill": backfill_id}), count=1,
                               what=f"the shop/orders run of backfill {backfill_id}")[0]
    compaction = wait_succeeded(dagster, lambda: dagster.runs({"dagster/sensor_name": SENSOR}, job=FULL_JOB),
                                count=1, what=f"{FULL_JOB} launched by {SENSOR}")[-1]
    run = run_details(dagster, ingestion["runId"])
    print(f"\nshop/orders ingestion run ({ORDERS_DAY}, 5 commits): {durations(run, 'shop__orders')}")
    full = run_details(dagster, compaction["runId"])
    print(f"{FULL_JOB} ({compaction['tags'].get(keys.TRIGGER_REASON_TAG)}): queued+launch "
          f"{full['startTime'] - full['creationTime']:.1f} s, run {full['endTime'] - full['startTime']:.1f} s")
    return {"ingestion": ingestion, "compaction": compaction}


def test_sensor_page_shows_the_requested_compaction(page: Page, dagster: LiveDagster, screenshot: Screenshot,
                                                    orders_compaction: dict[str, Any]) -> None:
    run_id: str = orders_compaction["compaction"]["runId"]
    ticks = dagster.sensor(SENSOR, ticks=200)["sensorState"]["ticks"]
    assert [t for t in ticks if run_id in t["runIds"]], "no tick of the sensor names the run"

    visit(page, dagster, f"/locations/{LOCATION}/sensors/{SENSOR}")
    expect(page.get_by_text(SENSOR).first).to_be_visible()
    expect(page.get_by_text(FULL_JOB).first).to_be_visible()  # a target of the sensor
    # Only the ticks that requested runs (the 5 s ticks would page the one we want away).
    page.get_by_text("All ticks", exact=True).click()
    page.get_by_text("Requested", exact=True).click()
    expect(page.get_by_text(re.compile(r"^Loading ticks"))).to_have_count(0)
    # The filtered list can take a while to replace the unfiltered one on a busy machine: wait
    # for the tick that requested the run rather than for the others to go.
    tick = page.get_by_role("row").filter(has=page.get_by_text(run_id[:8], exact=True))
    expect(tick).to_have_count(1)
    expect(tick).to_contain_text("1 run requested")
    screenshot("ticks")

    # The run id links to the run page (in a new tab: followed here in this one).
    link = tick.get_by_role("link", name=run_id[:8], exact=True)
    expect(link).to_have_attribute("href", f"/runs/{run_id}")
    visit(page, dagster, f"/runs/{run_id}")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible()
    expect(page.get_by_text(FULL_JOB).first).to_be_visible()
    expect(page.get_by_text("RUN_SUCCESS").first).to_be_visible()
    # The run's header names the table it worked on (its asset), beside the job.
    expect(page.get_by_text("shop / orders", exact=True).first).to_be_visible()
    screenshot("run")

    # The ticks after it say where the table stands now, not that a snapshot was seen before.
    def quiet() -> str | None:
        latest = dagster.sensor(SENSOR, ticks=1)["sensorState"]["ticks"]
        reason = latest[0]["skipReason"] if latest else None
        return reason if reason and "level-0 file(s) per bucket" in reason else None

    reason = dagster.wait(quiet, timeout=60, what=f"a quiet tick of {SENSOR}")
    assert re.search(r"at most \d+ level-0 file\(s\) per bucket", reason), reason
    assert "evaluated already" not in reason, reason


# ---- 4: the compaction's observation and the plots on the asset page ------------------------------


def test_orders_events_show_the_compaction_observation(page: Page, dagster: LiveDagster, screenshot: Screenshot,
                                                       orders_compaction: dict[str, Any]) -> None:
    run_id: str = orders_compaction["compaction"]["runId"]
    visit(page, dagster, "/assets/shop/orders?view=events")
    # The list holds the day's materialization and the compaction run's one observation (of the
    # asset, not of the partition): the day's partition has a single event, its write.
    expect(page.get_by_text(ORDERS_DAY, exact=True)).to_have_count(1)
    observed = page.get_by_text(re.compile(r"^COMPACT snapshot\(s\) \d+ of dt=" + ORDERS_DAY))
    expect(observed.first).to_be_visible()
    observed.first.click()
    expect(page.get_by_text(re.compile(rf"[Oo]bserved in run {run_id[:8]}")).first).to_be_visible()
    for key in (keys.COMPACTION_PARTITIONS, keys.COMPACTION_FILES_IN, keys.COMPACTION_LEVEL0_FILES_AFTER,
                keys.COMPACTION_CHANGELOG_ROWS, keys.COMPACTION_BUCKETS):
        expect(page.get_by_text(key, exact=True)).to_be_visible()
    expect(metadata_row(page, keys.COMPACTION_LEVEL0_FILES_AFTER)).to_contain_text("0")
    # Every key fits its cell: the text's own width against the cell's (a longer key runs into its value).
    overflowing = page.evaluate("""() => [...document.querySelectorAll('td')]
        .filter(td => td.innerText.startsWith('paimon/'))
        .filter(td => { const r = document.createRange(); r.selectNodeContents(td);
                        const s = getComputedStyle(td);
                        return r.getBoundingClientRect().width > td.clientWidth - parseFloat(s.paddingLeft)
                               - parseFloat(s.paddingRight) + 1; })
        .map(td => td.innerText)""")
    assert overflowing == [], overflowing
    screenshot("observation")

    visit(page, dagster, "/assets/shop/orders")
    page.get_by_role("button", name="Plots").click()
    # One plot per numeric metadata key over the partitions (one point each so far), or the UI's
    # hint when there is nothing to plot; never an error.
    plots = page.locator("canvas").or_(page.get_by_text("Asset plots are automatically generated"))
    expect(plots.first).to_be_attached()
    plots.first.evaluate("element => element.scrollIntoView({block: 'center'})")
    expect(page.get_by_text(re.compile(r"Something went wrong|Unexpected error|PythonError"))).to_have_count(0)
    print(f"\nshop/orders plots over partitions: {page.locator('canvas').count()} chart(s)")
    screenshot("plots-partitions")
    # Over events (time): the write's rows, and the level 0 and debt after the compaction, each a chart.
    page.get_by_role("button", name=re.compile(r"Events$")).click()
    for series in (keys.INGEST_ROWS_WRITTEN, keys.LSM_MAX_LEVEL0_FILES, keys.LSM_DEBT_BYTES):
        expect(page.get_by_text(series, exact=True).first).to_be_attached()
    expect(page.locator("canvas").first).to_be_attached()
    page.locator("canvas").first.evaluate("element => element.scrollIntoView({block: 'center'})")
    print(f"shop/orders plots over events: {page.locator('canvas').count()} chart(s)")
    screenshot("plots-events")


def asset_health(dagster: LiveDagster, path: list[str]) -> dict[str, Any]:
    """The asset's freshness state and its checks' latest evaluations, as the asset page loads them."""
    data = dagster.graphql("""
        query($key: AssetKeyInput!) {
          assetNodeOrError(assetKey: $key) {
            ... on AssetNode {
              freshnessStatusInfo { freshnessStatus }
              assetChecksOrError { ... on AssetChecks { checks { name
                executionForLatestMaterialization { runId status evaluation { description } } } } }
            }
          }
        }""", {"key": {"path": path}})
    return dict(data["assetNodeOrError"])


def test_orders_health_is_current_after_the_sensors_compaction(page: Page, dagster: LiveDagster,
                                                               screenshot: Screenshot,
                                                               orders_compaction: dict[str, Any]) -> None:
    """The overview's checks show the table after the compaction the sensor launched (recorded by
    that run), with the compaction trigger, the debt and the last compaction; freshness passes."""
    run_id: str = orders_compaction["compaction"]["runId"]

    def evaluated() -> dict[str, Any] | None:
        health = asset_health(dagster, ["shop", "orders"])
        fresh = (health.get("freshnessStatusInfo") or {}).get("freshnessStatus")
        return health if fresh == "HEALTHY" else None

    # The freshness daemon evaluates every 30 s.
    health = dagster.wait(evaluated, timeout=120, what="shop/orders' freshness to be evaluated")
    level0 = next(c for c in health["assetChecksOrError"]["checks"] if c["name"] == LEVEL0_CHECK)
    latest = level0["executionForLatestMaterialization"]
    assert latest["runId"] == run_id, (latest, run_id)  # recorded by the compaction run, not the write's
    description = latest["evaluation"]["description"]
    assert re.match(r"at most 0 level-0 file\(s\) per bucket \(compaction at 5, stop-trigger 8\), 0 bytes of "
                    r"compaction debt; last compaction: snapshot \d+ at ", description), description

    # The orphan check was not evaluated by the write (it lists every directory): not a pass.
    orphans = next(c for c in health["assetChecksOrError"]["checks"] if c["name"] == ORPHANS_CHECK)
    assert (orphans["executionForLatestMaterialization"] or {}).get("status") != "SUCCEEDED", orphans

    # The overview's status: the checks' latest results, the freshness policy's state and the
    # table's row count (a primary-key table's, counted after the merge).
    visit(page, dagster, "/assets/shop/orders")
    expect(page.get_by_text("Row count", exact=True)).to_be_visible()
    expect(page.get_by_text("Latest check results")).to_be_visible()
    expect(page.get_by_text("Fails if more than 26 hours since last materialization")).to_be_visible()
    expect(page.get_by_text("Passing").first).to_be_visible()
    screenshot("overview")
    visit(page, dagster, f"/assets/shop/orders?view=checks&checkDetail={LEVEL0_CHECK}")
    expect(page.get_by_text(re.compile(r"last compaction: snapshot \d+ at")).first).to_be_visible()
    expect(page.get_by_text("compaction_trigger", exact=True)).to_be_visible()
    checks_list = page.get_by_text(ORPHANS_CHECK, exact=True).first.locator("xpath=..")
    expect(checks_list).not_to_contain_text("Succeeded")
    expect(page.get_by_text("last_compaction", exact=True)).to_be_visible()
    screenshot("level0-check")


# ---- 5: the launchpad, and Execute on a check ------------------------------------------------------


def open_launchpad(page: Page, dagster: LiveDagster, job: str, *, showing: str) -> None:
    """The job's launchpad, its config showing ``showing`` and never the table (the job's own)."""
    visit(page, dagster, f"/locations/{LOCATION}/jobs/{job}/playground")
    editor = page.locator(".CodeMirror").first
    expect(editor).to_contain_text(showing)
    expect(editor).not_to_contain_text("table:")


def launch_from_the_launchpad(page: Page, dagster: LiveDagster, job: str) -> tuple[str, float]:
    """Launch ``job`` with the config its launchpad opens with; the run's id and the seconds from
    the click to its success."""
    before = {r["runId"] for r in dagster.runs(job=job)}
    clicked = time.monotonic()
    page.get_by_role("button", name="Launch run").click()

    def launched() -> list[dict[str, Any]] | None:
        runs = [r for r in dagster.runs(job=job) if r["runId"] not in before]
        return runs or None

    [run] = dagster.wait(launched, timeout=60, what=f"a run of {job} from the launchpad")
    [done] = wait_succeeded(dagster, lambda: [r for r in dagster.runs(job=job) if r["runId"] == run["runId"]],
                            count=1, what=f"the launchpad's run of {job}")
    return str(done["runId"]), time.monotonic() - clicked


def observation_runs(dagster: LiveDagster, path: list[str]) -> set[str]:
    """The runs that recorded an observation of the asset (its Events list's observations)."""
    data = dagster.graphql("""
        query($key: AssetKeyInput!) {
          assetOrError(assetKey: $key) { ... on Asset { assetObservations(limit: 1000) { runId } } }
        }""", {"key": {"path": path}})
    return {o["runId"] for o in data["assetOrError"]["assetObservations"]}


def test_the_launchpad_opens_with_what_a_person_sets(page: Page, dagster: LiveDagster, screenshot: Screenshot,
                                                      orders_compaction: dict[str, Any]) -> None:
    """Maintenance opens as a dry run and compaction with only its partitions: the table is the job's
    own, never typed; both launch and succeed as they open."""
    expire_job = names.expire_job(ORDERS)
    open_launchpad(page, dagster, expire_job, showing="dry_run: true")
    screenshot("expiry")
    run_id, seconds = launch_from_the_launchpad(page, dagster, expire_job)
    logs = "\n".join(dagster.run_logs(run_id))
    assert "dry run, nothing deleted: " in logs, logs[-2000:]
    # A dry run changed nothing: the asset's events do not hear of it.
    assert run_id not in observation_runs(dagster, ["shop", "orders"])
    print(f"\nclick to success: {expire_job} from its launchpad (dry run), {seconds:.1f} s")

    compact_job = names.compaction_job(ORDERS)
    open_launchpad(page, dagster, compact_job, showing="partitions")
    screenshot("compaction")
    run_id, seconds = launch_from_the_launchpad(page, dagster, compact_job)
    [run] = [r for r in dagster.runs(job=compact_job) if r["runId"] == run_id]
    assert run["tags"][keys.COMPACTION_TAG] == ORDERS  # the per-table limit, launched without the sensor
    print(f"click to success: {compact_job} from its launchpad, {seconds:.1f} s")


def test_execute_on_a_check_records_a_new_evaluation(page: Page, dagster: LiveDagster, screenshot: Screenshot,
                                                     orders_compaction: dict[str, Any]) -> None:
    def latest_run() -> str | None:
        health = asset_health(dagster, ["shop", "orders"])
        check = next(c for c in health["assetChecksOrError"]["checks"] if c["name"] == RETENTION_CHECK)
        execution = check["executionForLatestMaterialization"]
        return execution["runId"] if execution else None

    before = latest_run()
    visit(page, dagster, f"/assets/shop/orders?view=checks&checkDetail={RETENTION_CHECK}")
    clicked = time.monotonic()
    page.get_by_role("button", name=re.compile(r"Execute$")).first.click()
    dagster.wait(lambda: (latest_run() or before) != before or None, timeout=RUNS_TIMEOUT_S,
                 what=f"{RETENTION_CHECK} to be evaluated again")
    print(f"\nclick to success: Execute {RETENTION_CHECK}, {time.monotonic() - clicked:.1f} s")
    visit(page, dagster, f"/assets/shop/orders?view=checks&checkDetail={RETENTION_CHECK}")
    expect(page.get_by_text(re.compile(r"snapshot\(s\) retained, none overdue")).first).to_be_visible()
    screenshot("evaluated")


def test_orders_columns_stay_as_declared_after_a_run(page: Page, dagster: LiveDagster, screenshot: Screenshot,
                                                     orders_compaction: dict[str, Any]) -> None:
    """Once the asset has run, the Columns table shows the write's ``dagster/column_schema``: it
    must keep the declared Paimon types, descriptions and keys (it once showed Arrow types)."""
    visit(page, dagster, "/assets/shop/orders")
    # The latest materialization (the run's metadata) is loaded, not only the definition's.
    expect(page.get_by_text(ORDERS_DAY, exact=True).first).to_be_visible()
    assert_declared_columns(page, declared(ORDERS))
    screenshot("columns")


def test_screenshots_folder_is_ignored() -> None:
    """The screenshots never end up in a commit."""
    assert ".ui-screenshots/" in Path(REPO_ROOT / ".gitignore").read_text().splitlines()
