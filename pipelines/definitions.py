"""The code location ``paimon``: every asset, check, job, schedule, sensor and resource, in one ``defs``.

Load it with ``dagster dev -w workspace.yaml``. The warehouse is ``$PAIMON_WAREHOUSE`` (a path
or fsspec URL), defaulting to ``warehouse/`` at the repository root; on S3 see
:func:`default_storage_options`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg

from pipelines.assets import IO_MANAGER_KEY, log_events
from pipelines.checks import (
    log_events_partition_valid,
    lsm_asset_checks,
    maintenance_asset_checks,
    orders_partition_valid,
)
from pipelines.compaction import paimon_compaction_job, paimon_full_compaction_job
from pipelines.jobs import ingest_log_events_job, ingest_orders_job
from pipelines.maintenance import paimon_expire_snapshots_job, paimon_remove_orphan_files_job
from pipelines.order_assets import shop_orders, user_order_totals
from pipelines.order_revenue import order_revenue_by_status, order_revenue_job, order_revenue_sensor
from pipelines.schedules import ingest_log_events_daily, ingest_orders_daily, maintenance_schedules
from pipelines.sensors import compaction_sensors
from resources import LogEventSource, OrderEventSource, PaimonCatalogResource, PaimonTableIOManager

REPO_ROOT = Path(__file__).resolve().parents[1]
WAREHOUSE_ENV = "PAIMON_WAREHOUSE"
ENDPOINT_ENV = "PAIMON_S3_ENDPOINT_URL"


def default_warehouse() -> str:
    """``$PAIMON_WAREHOUSE`` (relative paths against the current directory) or ``<repo>/warehouse``.

    Made absolute here because the webserver, daemon and run workers may start in different
    directories and must all see the same tables.
    """
    configured = os.environ.get(WAREHOUSE_ENV, "").strip()
    if not configured:
        return str(REPO_ROOT / "warehouse")
    if "://" in configured:
        return configured
    return str(Path(configured).expanduser().resolve())


def default_storage_options() -> dict[str, Any]:
    """For an S3 warehouse: the endpoint of an S3-compatible store from ``$PAIMON_S3_ENDPOINT_URL``
    (AWS itself needs none) and, when they are set, the keys from ``$AWS_ACCESS_KEY_ID`` /
    ``$AWS_SECRET_ACCESS_KEY`` as ``dg.EnvVar`` (resolved per run, shown by name in the UI; without
    them botocore's own chain applies: environment, profile, instance role)."""
    options: dict[str, Any] = {}
    if os.environ.get(ENDPOINT_ENV):
        options["endpoint_url"] = dg.EnvVar(ENDPOINT_ENV)
    for option, variable in (("key", "AWS_ACCESS_KEY_ID"), ("secret", "AWS_SECRET_ACCESS_KEY")):
        if os.environ.get(variable):
            options[option] = dg.EnvVar(variable)
    return options


def build_resources(*, warehouse: str | None = None, log_source: LogEventSource | None = None,
                    order_source: OrderEventSource | None = None,
                    storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The resources every definition expects, sharing one catalog config between them."""
    warehouse = warehouse or default_warehouse()
    if storage_options is None:
        storage_options = default_storage_options() if "://" in warehouse else {}
    catalog = PaimonCatalogResource(warehouse=warehouse, storage_options=storage_options)
    return {
        "catalog": catalog,
        "log_source": log_source or LogEventSource(),
        "order_source": order_source or OrderEventSource(),
        IO_MANAGER_KEY: PaimonTableIOManager(catalog=catalog),
    }


defs = dg.Definitions(
    assets=[log_events, shop_orders, user_order_totals, order_revenue_by_status],
    asset_checks=[log_events_partition_valid, orders_partition_valid, *lsm_asset_checks, *maintenance_asset_checks],
    jobs=[ingest_log_events_job, ingest_orders_job, order_revenue_job, paimon_compaction_job,
          paimon_full_compaction_job, paimon_expire_snapshots_job, paimon_remove_orphan_files_job],
    schedules=[ingest_log_events_daily, ingest_orders_daily, *maintenance_schedules],
    sensors=[*compaction_sensors, order_revenue_sensor],
    resources=build_resources(),
)
