"""The global lineage's "Materialize all" over the demo's tables, in headless Chromium, on a
deployment of its own (the backfill writes every table).

Dagster applies one partition selection to every partitioned asset it launches, so the demo's
tables share one daily range; the dialog's "All" then launches a backfill whose runs all
succeed, the unpartitioned changes consumer included. The deployment is fresh (no run before this
one), the hardest case for the per-table limits: no two runs writing one table overlap, judged from
the run records.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest

from tests.support.live_dagster import FINISHED, LiveDagster, overlaps
from tests.ui.conftest import Screenshot, skip_without_browser

skip_without_browser()

from playwright.sync_api import Page, expect  # noqa: E402 - after the skip: playwright may be missing

pytestmark = pytest.mark.slow

# Every table's partitions queue one writer at a time, each run a process loading the code location.
BACKFILL_TIMEOUT_S = 600


def test_materialize_all_from_the_lineage_backfills_every_table(page: Page, dagster: LiveDagster,
                                                                screenshot: Screenshot) -> None:
    page.goto(dagster.url + "/asset-groups", wait_until="domcontentloaded")
    page.get_by_role("button", name="Materialize all").first.click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text("Launch runs to materialize 4 assets")).to_be_visible()
    dialog.get_by_role("button", name="All", exact=True).click()
    expect(dialog.get_by_text("5 partitions")).to_be_visible()
    screenshot("dialog")
    clicked = time.monotonic()
    dialog.get_by_role("button", name="Launch backfill").click()
    expect(page.get_by_text("An unexpected error occurred")).to_have_count(0)

    def backfill() -> dict[str, str] | None:
        data = dagster.graphql("""{ partitionBackfillsOrError(limit: 5) {
            ... on PartitionBackfills { results { id status } } } }""")
        found = data["partitionBackfillsOrError"]["results"]
        return found[0] if found else None

    launched = dagster.wait(backfill, timeout=60, what="the backfill to be created")
    screenshot("launched")

    def finished() -> list[dict[str, Any]] | None:
        runs = dagster.runs({"dagster/backfill": launched["id"]})
        if not runs or any(r["status"] not in FINISHED for r in runs):
            return None
        state = backfill()
        return runs if state is not None and state["status"] not in ("REQUESTED",) else None

    runs = dagster.wait(finished, timeout=BACKFILL_TIMEOUT_S, what="the backfill's runs to finish")
    print(f"\nclick to success: Materialize all from the lineage ({len(runs)} runs), "
          f"{time.monotonic() - clicked:.1f} s")
    assert {r["status"] for r in runs} == {"SUCCESS"}, runs
    per_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        for asset in run["assets"]:
            per_table[asset].append(run)
    assert len(per_table) == 4, sorted(per_table)
    assert {asset: overlaps(writers) for asset, writers in per_table.items()} == {a: [] for a in per_table}
    partitions = {r["tags"].get("dagster/partition") for r in runs}
    assert {"2024-01-01", "2024-01-05"} <= partitions
