"""Data-quality checks on the logs.events partitions, cheap enough to run after every write."""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import warnings

import dagster as dg
import pyarrow.compute as pac

from pipelines.assets import log_events
from pipelines.log_events import PARTITION_COLUMN, TABLE
from pipelines.partitions import daily_partitions
from resources import PaimonCatalogResource

# Partitioned asset checks are a preview feature in Dagster 1.13 (pinned); the check must
# know its partition, so the dependency is deliberate and acknowledged once here instead of
# warning on every load of the code location.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PreviewWarning)

    @dg.asset_check(
        asset=log_events,
        partitions_def=daily_partitions,
        blocking=True,
        description="The day's partition has rows and every event has a timestamp.",
    )
    def log_events_partition_valid(context: dg.AssetCheckExecutionContext,
                                   catalog: PaimonCatalogResource) -> dg.AssetCheckResult:
        """Reads only the ``ts`` column of one partition: partition pruning keeps it O(one day)."""
        day = context.partition_key
        ts = catalog.table(TABLE).read(["ts"], filter=[(PARTITION_COLUMN, "=", day)])["ts"]
        rows, null_ts = len(ts), ts.null_count
        bounds = pac.min_max(ts)
        return dg.AssetCheckResult(
            passed=rows > 0 and null_ts == 0,
            metadata={
                "rows": rows,
                "null_ts": null_ts,
                "min_ts": str(bounds["min"].as_py()),
                "max_ts": str(bounds["max"].as_py()),
            },
            description=None if rows else f"partition {day} of {TABLE} is empty",
        )
