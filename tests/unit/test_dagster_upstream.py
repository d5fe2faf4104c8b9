"""Dagster behaviours the docs tell users to work around, pinned so the workaround note goes when
Dagster changes: each test states the behaviour as it is in the pinned version."""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.partitions.context import PartitionLoadingContext
from dagster._core.definitions.temporal_context import TemporalContext
from dagster._time import get_current_datetime

from pipelines.dagster_internals import CHECKED_WITH


def partition_context() -> PartitionLoadingContext:
    """What the webserver passes when it pages an asset's partition keys: now, no event cursor."""
    return PartitionLoadingContext(temporal_context=TemporalContext(effective_dt=get_current_datetime(),
                                                                    last_event_id=None),
                                   dynamic_partitions_store=None)


def test_newest_partition_keys_ignore_the_end_of_a_time_partitions_definition() -> None:
    """The asset page's Plots "Partitions" view asks the definition for its newest keys (descending
    pagination), which runs back from today and ignores ``end``: a range that ended charts nothing.
    Ascending, the same definition gives its own keys. When this fails, Dagster fixed it: drop the
    note in pipelines/README.md ("Plots" paragraph)."""
    days = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-06")
    own = days.get_partition_keys()
    newest = days.get_paginated_partition_keys(context=partition_context(), limit=10, ascending=False)
    oldest = days.get_paginated_partition_keys(context=partition_context(), limit=10, ascending=True)

    assert oldest.results == own == ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
    assert not set(newest.results) & set(own), (CHECKED_WITH, newest.results)
