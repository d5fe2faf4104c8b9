"""Jobs: how runs that write Paimon tables are launched (and tagged for the per-table run limit)."""

from __future__ import annotations

import dagster as dg

from pipelines.assets import RUN_TAGS, log_events

# Partitioned by inference from the asset; each partition is its own run, so a UI backfill of
# past days is a series of idempotent partition overwrites, one at a time per table.
ingest_log_events_job = dg.define_asset_job(
    "ingest_log_events_job",
    selection=dg.AssetSelection.assets(log_events),
    tags=RUN_TAGS,
    description="Ingest one day of log events into the Paimon table logs.events (and check it).",
)
