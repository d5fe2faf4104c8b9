"""The LSM-shape checks every compacted table gets on its asset, one check each.

Level 0 under the stop-trigger and few small files (:mod:`pipelines.compaction.lsm`, manifests
only). Each is its own check, so the UI's "Execute" runs just that one. Not partitioned: they
judge the whole table's latest snapshot; the compaction jobs record them again after each run,
so the asset shows whether compaction keeps up.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import dagster as dg

from pipelines.compaction.lsm import LEVEL0_CHECK, SMALL_FILES_CHECK, check_outcomes, small_files_outcome
from pipelines.target import TableTarget
from pipelines.watchdog import slot_holder


def lsm_checks(target: TableTarget) -> list[dg.AssetChecksDefinition]:
    """``level0_below_stop_trigger`` and ``small_files`` of one table."""

    @dg.asset_check(asset=target.asset_key, name=LEVEL0_CHECK, blocking=False,
                    required_resource_keys={target.catalog_key},
                    description=f"Every bucket of {target.table} has fewer level-0 files than the stop-trigger "
                    "(num-sorted-run.stop-trigger, default compaction trigger + 3): WARN when one reaches it, "
                    "ERROR at twice it. Manifests only.")
    def _level0(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        level0, _ = check_outcomes(target.catalog(context).table(target.table), target,
                                   holder=slot_holder(context.instance, target.table))
        return level0.result(target.asset_key)

    @dg.asset_check(asset=target.asset_key, name=SMALL_FILES_CHECK, blocking=False,
                    required_resource_keys={target.catalog_key},
                    description=f"No bucket of {target.table} holds compaction.min.file-num or more small files "
                    "above level 0 (append tables: twice that in all); the table-wide small-file ratio is in the "
                    "metadata. Manifests only.")
    def _small_files(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        table = target.catalog(context).table(target.table)
        return small_files_outcome(table.lsm_state(), min_file_num=table.options.compaction_min_file_num,
                                   primary_key=bool(table.schema.primary_keys)).result(target.asset_key)

    return [_level0, _small_files]
