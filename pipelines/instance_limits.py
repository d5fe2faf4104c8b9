"""What a Dagster instance must carry for the tables' limits and recovery to hold, and what one
lacks.

The runs of a table's writers carry ``paimon/table=<db.table>``, its compactions and maintenance
``paimon/compaction=<db.table>``, and its write steps the pool ``paimon-write/<db.table>``; only
the instance's ``dagster.yaml`` turns those into limits (``dagster_home/dagster.yaml`` shows
how). Without them two writers of one table race (safely, by retried commits) and two
compactions of one table conflict (safely: one commits nothing). Run monitoring fails a dead run
past its bound and run retries launch it again; without them a crash leaves the table to its
watchdog and to the next trigger. A run on an instance without them says so in its log, naming
what to add, the code location warns when it loads, and each table's ``instance_settings``
check shows it on the asset.
"""

# No `from __future__ import annotations`: Dagster reads the check's context annotation as a real
# type when the decorator runs.

import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from pipelines.names import INSTANCE_CHECK, suffix
from pipelines.verdicts import CheckOutcome
from resources.keys import COMPACTION_TAG, TABLE_TAG

TEMPLATE = "dagster_home/dagster.yaml"
PRODUCTION = "dagster_home/production.yaml"


class InstanceSettingsWarning(UserWarning):
    """The Dagster instance the code location loads on lacks a setting the tables rely on."""


@dataclass(frozen=True, slots=True)
class InstanceSettings:
    """What of an instance's settings the tables rely on."""

    tag_limits: Sequence[Mapping[str, Any]]
    default_pool_limit: int | None
    pool_granularity: str | None
    run_monitoring: bool
    run_retries: int  # the retries of a run whose worker died (0: run retries off)

    @classmethod
    def of_yaml(cls, config: Mapping[str, Any]) -> "InstanceSettings":
        """From a ``dagster.yaml`` (Dagster's defaults where it says nothing)."""
        concurrency = config.get("concurrency") or {}
        pools = concurrency.get("pools") or {}
        retries = config.get("run_retries") or {}
        return cls((concurrency.get("runs") or {}).get("tag_concurrency_limits") or [], pools.get("default_limit"),
                   pools.get("granularity"), bool((config.get("run_monitoring") or {}).get("enabled", False)),
                   int(retries.get("max_retries", 0)) if retries.get("enabled", False) else 0)

    @classmethod
    def of(cls, instance: dg.DagsterInstance) -> "InstanceSettings":
        """From a loaded instance."""
        config = instance.get_concurrency_config()
        granularity = config.pool_config.pool_granularity
        return cls(config.run_queue_config.tag_concurrency_limits if config.run_queue_config else [],
                   config.pool_config.default_pool_limit, granularity.value if granularity is not None else None,
                   bool(instance.run_monitoring_enabled),
                   instance.run_retries_max_retries if instance.run_retries_enabled else 0)


def instance_gaps(settings: InstanceSettings) -> list[str]:
    """What the instance lacks (pure): one line per missing setting, naming it as in dagster.yaml."""
    gaps = []
    for tag in (TABLE_TAG, COMPACTION_TAG):
        limited = any(limit.get("key") == tag and limit.get("limit") == 1
                      and isinstance(limit.get("value"), Mapping) and limit["value"].get("applyLimitPerUniqueValue")
                      for limit in settings.tag_limits)
        if not limited:
            gaps.append(f"concurrency.runs.tag_concurrency_limits: {{key: {tag}, value: {{applyLimitPerUniqueValue: "
                        "true}, limit: 1}")
    if settings.default_pool_limit != 1:
        gaps.append("concurrency.pools.default_limit: 1")
    if settings.pool_granularity != "run":
        gaps.append("concurrency.pools.granularity: run")
    if not settings.run_monitoring:
        gaps.append("run_monitoring: {enabled: true} (a run whose process died is failed past its "
                    "dagster/max_runtime; without it only the tables' watchdog sensors do it)")
    if settings.run_retries < 1:
        gaps.append("run_retries: {enabled: true, max_retries: 2, retry_on_asset_or_op_failure: false} (a run "
                    "whose worker died is launched again; without it its table waits for the next trigger)")
    return gaps


def gaps_message(gaps: Sequence[str]) -> str:
    return (f"this Dagster instance lacks what the Paimon tables rely on; its dagster.yaml needs, as {TEMPLATE} "
            f"(and {PRODUCTION} for a deployment) has: " + "; ".join(gaps))


def warn_about_gaps(context: dg.OpExecutionContext | dg.AssetExecutionContext) -> None:
    """Log what the run's instance lacks (nothing when it has it all)."""
    gaps = instance_gaps(InstanceSettings.of(context.instance))
    if gaps:
        context.log.warning(gaps_message(gaps))


def instance_outcome(settings: InstanceSettings, table: str) -> CheckOutcome:
    """``instance_settings`` of ``table`` (pure): WARN naming each setting its instance lacks."""
    gaps = instance_gaps(settings)
    if not gaps:
        return CheckOutcome(INSTANCE_CHECK, True, dg.AssetCheckSeverity.WARN,
                            f"the instance limits {table}'s runs per table, fails its dead runs (run monitoring) and "
                            f"retries them (run retries, {settings.run_retries})", {"gaps": "-"})
    return CheckOutcome(INSTANCE_CHECK, False, dg.AssetCheckSeverity.WARN,
                        f"the instance lacks {len(gaps)} setting(s) {table} relies on: " + "; ".join(gaps),
                        {"gaps": str(len(gaps))})


def instance_check(asset_key: dg.AssetKey, table: str) -> dg.AssetChecksDefinition:
    """The table's ``instance_settings`` check. Its watchdog records it when the verdict changes;
    Execute evaluates it; runs writing the table (the asset page selects every check of the
    asset) leave it out rather than repeat the same verdict after every write."""

    @dg.multi_asset_check(
        specs=[dg.AssetCheckSpec(INSTANCE_CHECK, asset=asset_key, blocking=False, description=(
            f"The Dagster instance limits {table}'s runs per table (tags, pools), fails a run whose process "
            f"died (run monitoring) and launches it again (run retries), as {TEMPLATE} does; WARN naming what "
            "it lacks. Recorded by the table's watchdog sensor when that changes."))],
        can_subset=True, name=f"{suffix(table)}_{INSTANCE_CHECK}")
    def _instance(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        if asset_key in (context.run.asset_selection or ()):
            return
        yield instance_outcome(InstanceSettings.of(context.instance), table).result(asset_key)

    return _instance


_WARNED: set[str] = set()


def warn_at_load() -> list[str]:
    """At code-location load: warn (once per process) when ``$DAGSTER_HOME/dagster.yaml`` lacks a
    setting; the gaps. Nothing without ``$DAGSTER_HOME`` (an ephemeral instance, as in tests)."""
    home = os.environ.get("DAGSTER_HOME")
    path = Path(home) / "dagster.yaml" if home else None
    if path is None or not path.is_file():
        return []
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []  # Dagster itself reports a file it cannot read
    gaps = instance_gaps(InstanceSettings.of_yaml(config))
    if gaps and str(path) not in _WARNED:
        _WARNED.add(str(path))
        warnings.warn(f"{path}: {gaps_message(gaps)}", InstanceSettingsWarning, stacklevel=2)
    return gaps


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
