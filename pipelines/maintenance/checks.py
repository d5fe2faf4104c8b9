"""The maintenance checks every table gets on its asset: snapshots within retention, no orphans.

Whether maintenance keeps up with its schedules (:mod:`pipelines.maintenance.verdicts`). Each is
its own check, so the UI's "Execute" runs just that one; the expiry and cleanup jobs record them
again after each run.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

from collections.abc import Iterator

import dagster as dg

from pipelines.maintenance.runs import last_expiry_ms
from pipelines.maintenance.verdicts import ORPHANS_CHECK, RETENTION_CHECK, orphans_outcome, retention_outcome
from pipelines.target import TableTarget
from pipelines.watchdog import slot_holder


def maintenance_checks(target: TableTarget) -> list[dg.AssetChecksDefinition]:
    """``snapshots_within_retention`` and ``no_orphan_files`` of one table (WARN when its
    maintenance lags its schedule)."""

    @dg.asset_check(asset=target.asset_key, name=RETENTION_CHECK, blocking=False,
                    required_resource_keys={target.catalog_key},
                    description=f"{target.table} keeps no snapshot its expiry schedule should already have "
                    "expired (Paimon's retention: snapshot.num-retained.min/max, snapshot.time-retained; "
                    "consumers and tags respected), and no more than snapshot.num-retained.max.")
    def _retention(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return retention_outcome(target.catalog(context).table(target.table), target,
                                 last_expiry_ms=last_expiry_ms(context.instance, target.table),
                                 holder=slot_holder(context.instance, target.table)).result(target.asset_key)

    # A subsettable check: in a run that also writes the table (the asset page selects every
    # check of the asset) it yields nothing, so the run shows it as not evaluated rather than as a
    # verdict it did not reach; listing every directory after each write would cost more than the
    # write (thousands of LISTs on S3). Execute, and the cleanup job, evaluate it.
    @dg.multi_asset_check(
        specs=[dg.AssetCheckSpec(ORPHANS_CHECK, asset=target.asset_key, blocking=False, description=(
            f"{target.table} holds no orphan file (referenced by no snapshot or tag) that its cleanup schedule "
            "should already have deleted (older than a day before its previous run). It lists the table's "
            "directories, so runs writing the table leave it out: Execute and the cleanup job evaluate it."))],
        can_subset=True, required_resource_keys={target.catalog_key},
        name=f"{target.name}_{ORPHANS_CHECK}")
    def _orphans(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        if target.asset_key in (context.run.asset_selection or ()):
            context.log.info(f"{ORPHANS_CHECK} of {target.table} is not evaluated in a run writing the table; "
                             "Execute it, or see the cleanup job's")
            return
        yield orphans_outcome(target.catalog(context).table(target.table), target).result(target.asset_key)

    return [_retention, _orphans]
