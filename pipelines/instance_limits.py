"""What a Dagster instance must carry for the per-table limits to hold, and what one lacks.

The runs of a table's writers carry ``paimon/table=<db.table>``, its compactions and maintenance
``paimon/compaction=<db.table>``, and its write steps the pool ``paimon-write/<db.table>``; only
the instance's ``dagster.yaml`` turns those into limits (``dagster_home/dagster.yaml`` shows
how). A run on an instance without them says so in its log, once per run, naming what to add:
without them two writers of one table race (safely, by retried commits) and two compactions of
one table conflict (safely: one commits nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from resources.keys import COMPACTION_TAG, TABLE_TAG

TEMPLATE = "dagster_home/dagster.yaml"


def instance_gaps(tag_limits: Sequence[Mapping[str, Any]], default_pool_limit: int | None,
                  pool_granularity: str | None) -> list[str]:
    """What the instance's concurrency settings lack (pure): one line per missing setting."""
    gaps = []
    for tag in (TABLE_TAG, COMPACTION_TAG):
        limited = any(limit.get("key") == tag and limit.get("limit") == 1
                      and isinstance(limit.get("value"), Mapping) and limit["value"].get("applyLimitPerUniqueValue")
                      for limit in tag_limits)
        if not limited:
            gaps.append(f"concurrency.runs.tag_concurrency_limits: {{key: {tag}, value: {{applyLimitPerUniqueValue: "
                        "true}, limit: 1}")
    if default_pool_limit != 1:
        gaps.append("concurrency.pools.default_limit: 1")
    if pool_granularity != "run":
        gaps.append("concurrency.pools.granularity: run")
    return gaps


def warn_about_gaps(context: dg.OpExecutionContext | dg.AssetExecutionContext) -> None:
    """Log what the run's instance lacks (nothing when it has it all)."""
    config = context.instance.get_concurrency_config()
    granularity = config.pool_config.pool_granularity
    gaps = instance_gaps(config.run_queue_config.tag_concurrency_limits if config.run_queue_config else [],
                         config.pool_config.default_pool_limit,
                         granularity.value if granularity is not None else None)
    if gaps:
        context.log.warning("this Dagster instance does not limit Paimon runs per table (two runs writing or "
                            f"compacting one table may then collide); its dagster.yaml needs, as {TEMPLATE} has: "
                            + "; ".join(gaps))


def ensure_pools(instance: dg.DagsterInstance, pools: Sequence[str]) -> list[str]:
    """Create ``pools`` with the instance's default limit where they do not exist yet; the ones
    created.

    Dagster's run queue reads the pools that exist once per pass and creates a newly seen pool in
    that pass, after deciding: the first runs of a pool nobody created go out together, limit or
    not (a table's first backfill would start all its writers at once). The table's sensors and
    write steps create its pool beforehand, so the queue knows the limit from the first run on.
    """
    if not instance.global_op_concurrency_default_limit:
        return []
    storage = instance.event_log_storage
    existing = storage.get_concurrency_keys()
    created = [pool for pool in pools if pool not in existing]
    for pool in created:
        storage.initialize_concurrency_limit_to_default(pool)
    return created
