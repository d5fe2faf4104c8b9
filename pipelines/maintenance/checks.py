"""The maintenance checks every table gets on its asset: snapshots within retention, no orphans.

Whether maintenance keeps up with its schedules (:mod:`pipelines.maintenance.verdicts`). Each is
its own check, so the UI's "Execute" runs just that one; the expiry and cleanup jobs record them
again after each run.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import dagster as dg

from pipelines.maintenance.verdicts import ORPHANS_CHECK, RETENTION_CHECK, orphans_outcome, retention_outcome
from pipelines.target import TableTarget

# Past executions of the orphan check looked at for its last verdict (newest first).
HISTORY_LOOKED_AT = 20


def maintenance_checks(target: TableTarget) -> list[dg.AssetChecksDefinition]:
    """``snapshots_within_retention`` and ``no_orphan_files`` of one table (WARN when its
    maintenance lags its schedule)."""

    @dg.asset_check(asset=target.asset_key, name=RETENTION_CHECK, blocking=False,
                    required_resource_keys={target.catalog_key},
                    description=f"{target.table} keeps no snapshot its expiry schedule should already have "
                    "expired (Paimon's retention: snapshot.num-retained.min/max, snapshot.time-retained; "
                    "consumers and tags respected), and no more than snapshot.num-retained.max.")
    def _retention(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        return retention_outcome(target.catalog(context).table(target.table), target).result(target.asset_key)

    @dg.asset_check(asset=target.asset_key, name=ORPHANS_CHECK, blocking=False,
                    required_resource_keys={target.catalog_key},
                    description=f"{target.table} holds no orphan file (referenced by no snapshot or tag) that its "
                    "cleanup schedule should already have deleted (older than a day before its previous run); "
                    "lists the table's directories, so the ingestion jobs leave it out: the cleanup job records it.")
    def _orphans(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        if target.asset_key in (context.run.asset_selection or ()):
            return last_verdict(context.instance, dg.AssetCheckKey(target.asset_key, ORPHANS_CHECK),
                                own_run_id=context.run.run_id)
        return orphans_outcome(target.catalog(context).table(target.table), target).result(target.asset_key)

    return [_retention, _orphans]


def last_verdict(instance: dg.DagsterInstance, key: dg.AssetCheckKey, *, own_run_id: str) -> dg.AssetCheckResult:
    """The check's latest recorded result again, for runs that materialize the asset.

    Materializing from the asset page selects every check of the asset; listing every directory
    of the table after each partition write would cost more than the write (thousands of LISTs
    on S3), so such runs repeat what the cleanup job (or an Execute from the UI) last found.
    """
    event, evaluation = None, None
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=HISTORY_LOOKED_AT):
        # This run's own execution is planned, without an evaluation yet.
        if record.run_id != own_run_id and record.event is not None and record.event.asset_check_evaluation:
            event, evaluation = record.event, record.event.asset_check_evaluation
            break
    if event is None or evaluation is None:
        return dg.AssetCheckResult(asset_key=key.asset_key, check_name=key.name, passed=True,
                                   severity=dg.AssetCheckSeverity.WARN,
                                   description="not evaluated by writes (it lists the table's directories); the "
                                   "cleanup job records it, and Execute runs it now",
                                   metadata={"evaluated": False})
    return dg.AssetCheckResult(asset_key=key.asset_key, check_name=key.name, passed=evaluation.passed,
                               severity=evaluation.severity,
                               description=f"as last evaluated (run {event.run_id[:8]}): {evaluation.description}",
                               metadata={"evaluated": False})
