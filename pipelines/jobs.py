"""Jobs: how runs that write Paimon tables are launched (and tagged for the per-table run limit)."""

from __future__ import annotations

import dagster as dg

from pipelines.assets import LOG_EVENTS_KEY, RUN_TAGS, log_events
from pipelines.maintenance import ORPHANS_CHECK
from pipelines.order_assets import ORDERS_JOB, ORDERS_KEY, ORDERS_RUN_TAGS, shop_orders, user_order_totals


def without_orphan_check(selection: dg.AssetSelection, *keys: dg.AssetKey) -> dg.AssetSelection:
    """``no_orphan_files`` lists every directory of the table (thousands of LISTs on S3): it runs
    with the cleanup job and its schedule, not after every ingestion."""
    return selection - dg.AssetSelection.checks(*(dg.AssetCheckKey(key, ORPHANS_CHECK) for key in keys))


# Partitioned by inference from the asset; each partition is its own run, so a UI backfill of
# past days is a series of idempotent partition overwrites, one at a time per table.
ingest_log_events_job = dg.define_asset_job(
    "ingest_log_events_job",
    selection=without_orphan_check(dg.AssetSelection.assets(log_events), LOG_EVENTS_KEY),
    tags=RUN_TAGS,
    description="Ingest one day of log events into the Paimon table logs.events (and check it).",
)

# One run per day applies the day's order changes, checks them (blocking) and rebuilds the
# day's per-user totals from them; both steps are idempotent, so backfills may repeat days.
ingest_orders_job = dg.define_asset_job(
    ORDERS_JOB,
    selection=without_orphan_check(dg.AssetSelection.assets(shop_orders, user_order_totals), ORDERS_KEY),
    tags=ORDERS_RUN_TAGS,
    description="Apply one day of order changes to shop.orders (and check it), then rebuild that "
    "day of shop.user_order_totals.",
)
