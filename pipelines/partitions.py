"""Partition definitions shared by assets, checks, jobs and schedules."""

from __future__ import annotations

import dagster as dg

START_DATE = "2024-01-01"

# Open-ended so the schedule keeps producing new days; UTC so a day means the same everywhere.
daily_partitions = dg.DailyPartitionsDefinition(start_date=START_DATE, timezone="UTC")
