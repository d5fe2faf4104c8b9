"""Checks on the Paimon tables, cheap enough to run after every write.

Data quality per partition (logs.events, shop.orders), the LSM shape of every compacted table
(level 0 under the stop-trigger, few small files), from manifests only, and whether its
maintenance keeps up (snapshots within retention, no orphan files; see ``pipelines.maintenance``).
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import warnings
from collections.abc import Iterator

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac

from pipelines.assets import log_events
from pipelines.log_events import PARTITION_COLUMN, TABLE
from pipelines.lsm import COMPACTED_TABLES, LEVEL0_CHECK, SMALL_FILES_CHECK, CompactedTable, check_outcomes
from pipelines.maintenance import ORPHANS_CHECK, RETENTION_CHECK, orphans_outcome, retention_outcome
from pipelines.order_assets import shop_orders
from pipelines.orders import ORDER_STATUSES, ORDERS_TABLE
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


with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PreviewWarning)

    @dg.asset_check(
        asset=shop_orders,
        partitions_def=daily_partitions,
        blocking=True,
        description="Every live order of the day has a user and a status in new/paid/shipped, and "
        "no order appears twice.",
    )
    def orders_partition_valid(context: dg.AssetCheckExecutionContext,
                               catalog: PaimonCatalogResource) -> dg.AssetCheckResult:
        """Reads the merged partition (newest version per key): what every reader sees.

        Blocking, so shop/user_order_totals is not rebuilt from orders that fail it.
        """
        day = context.partition_key
        live = catalog.table(ORDERS_TABLE).read(["order_id", "user_id", "status"],
                                                filter=[(PARTITION_COLUMN, "=", day)])
        duplicates = live.num_rows - pac.count_distinct(live["order_id"]).as_py()
        allowed = pac.fill_null(pac.is_in(live["status"], value_set=pa.array(ORDER_STATUSES)), False)
        bad_status = live.num_rows - pac.sum(allowed).as_py() if live.num_rows else 0
        no_user = live["user_id"].null_count
        by_status = live.group_by("status").aggregate([("status", "count")]).sort_by("status")
        return dg.AssetCheckResult(
            passed=duplicates == 0 and bad_status == 0 and no_user == 0,
            metadata={
                "live_orders": live.num_rows,
                "duplicate_orders": duplicates,
                "bad_status_orders": bad_status,
                "orders_without_user": no_user,
                "orders_by_status": {str(r["status"]): r["status_count"] for r in by_status.to_pylist()},
            },
        )


def lsm_checks(spec: CompactedTable) -> dg.AssetChecksDefinition:
    """Both LSM checks of one compacted table, from one manifest read.

    Not partitioned: they judge the whole table's latest snapshot, so they run after every
    ingestion of the asset (any partition), and the compaction job records them again after it
    committed, so the asset shows whether compaction keeps up.
    """
    specs = [
        dg.AssetCheckSpec(LEVEL0_CHECK, asset=spec.asset_key, blocking=False,
                          description=f"Every bucket of {spec.table} has fewer level-0 files than the "
                          "stop-trigger (num-sorted-run.stop-trigger, default compaction trigger + 3): "
                          "WARN when one reaches it, ERROR at twice it."),
        dg.AssetCheckSpec(SMALL_FILES_CHECK, asset=spec.asset_key, blocking=False,
                          description=f"No bucket of {spec.table} holds compaction.min.file-num or more "
                          "small files above level 0 (append tables: twice that in all); the table-wide "
                          "small-file ratio is in the metadata."),
    ]

    @dg.multi_asset_check(specs=specs, name=f"{spec.name}_lsm_checks",
                          description=f"LSM shape of {spec.table} (manifests only).")
    def _checks(catalog: PaimonCatalogResource) -> Iterator[dg.AssetCheckResult]:
        table = catalog.table(spec.table)
        for outcome in check_outcomes(table):
            yield outcome.result(spec.asset_key)

    return _checks


lsm_asset_checks = [lsm_checks(spec) for spec in COMPACTED_TABLES]


def maintenance_checks(spec: CompactedTable) -> list[dg.AssetChecksDefinition]:
    """The two maintenance checks of one compacted table (WARN when its maintenance lags its schedule).

    Not partitioned, like the LSM checks: they judge the whole table. The maintenance jobs record
    them again after each run, so the asset shows the state the last expiry or cleanup left.
    """

    @dg.asset_check(asset=spec.asset_key, name=RETENTION_CHECK, blocking=False,
                    description=f"{spec.table} keeps no snapshot its expiry schedule should already have "
                    "expired (Paimon's retention: snapshot.num-retained.min/max, snapshot.time-retained; "
                    "consumers and tags respected), and no more than snapshot.num-retained.max.")
    def _retention(catalog: PaimonCatalogResource) -> dg.AssetCheckResult:
        return retention_outcome(catalog.table(spec.table), spec).result(spec.asset_key)

    @dg.asset_check(asset=spec.asset_key, name=ORPHANS_CHECK, blocking=False,
                    description=f"{spec.table} holds no orphan file (referenced by no snapshot or tag) that its "
                    "cleanup schedule should already have deleted (older than a day before its previous run); "
                    "lists the table's directories.")
    def _orphans(catalog: PaimonCatalogResource) -> dg.AssetCheckResult:
        return orphans_outcome(catalog.table(spec.table), spec).result(spec.asset_key)

    return [_retention, _orphans]


maintenance_asset_checks = [check for spec in COMPACTED_TABLES for check in maintenance_checks(spec)]
