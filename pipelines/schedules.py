"""Schedules: the daily runs that materialize the day that just ended, and the tables' maintenance."""

from __future__ import annotations

import dagster as dg

from pipelines.assets import RUN_TAGS
from pipelines.jobs import ingest_log_events_job, ingest_orders_job
from pipelines.lsm import COMPACTED_TABLES
from pipelines.maintenance import expire_schedule, orphans_schedule
from pipelines.order_assets import ORDERS_RUN_TAGS

# The tick at 01:00 UTC on day D requests partition D-1 (the last complete day). Stopped by
# default so loading the code never starts writing; turn it on in the UI or with
# `dagster schedule start ingest_log_events_daily -w workspace.yaml`.
ingest_log_events_daily = dg.build_schedule_from_partitioned_job(
    ingest_log_events_job,
    name="ingest_log_events_daily",
    description="Materialize yesterday's logs.events partition every day at 01:00 UTC.",
    hour_of_day=1,
    minute_of_hour=0,
    tags=RUN_TAGS,
)

# Same idea for the shop tables, a quarter of an hour later so the two daily runs do not start
# together; also stopped by default.
ingest_orders_daily = dg.build_schedule_from_partitioned_job(
    ingest_orders_job,
    name="ingest_orders_daily",
    description="Materialize yesterday's shop.orders and shop.user_order_totals partitions every "
    "day at 01:15 UTC.",
    hour_of_day=1,
    minute_of_hour=15,
    tags=ORDERS_RUN_TAGS,
)

# Per table of COMPACTED_TABLES: snapshot expiry (hourly) and orphan-file cleanup (daily at
# 03:00 UTC), both RUNNING by default; crons, tags and why they run are in pipelines.maintenance.
maintenance_schedules = [make(spec) for spec in COMPACTED_TABLES for make in (expire_schedule, orphans_schedule)]
