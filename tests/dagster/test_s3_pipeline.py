"""The Dagster pipelines with the warehouse on S3 (SeaweedFS on 127.0.0.1): ingestion of both
tables, compaction, the changelog consumer, expiry and orphan cleanup, configured the way a
deployment is: storage options on the catalog resource, secrets as ``dg.EnvVar``."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

import paimon_core as pc
from pipelines.compaction import FULL_COMPACTION_JOB, compaction_tags, full_compaction_run_config
from pipelines.definitions import build_resources, defs
from pipelines.log_events import TABLE as LOG_TABLE
from pipelines.maintenance import (
    EXPIRE_JOB,
    ORPHANS_JOB,
    expire_run_config,
    maintenance_tags,
    orphans_run_config,
)
from pipelines.order_assets import ORDERS_TABLE
from pipelines.order_revenue import CONSUMER_ID, REVENUE_JOB, REVENUE_RUN_TAGS, REVENUE_TABLE
from resources import LogEventSource, OrderEventSource
from tests.dagster.conftest import ORDERS, ROWS, DayMaterializer, OrdersDayMaterializer
from tests.s3.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.s3.store import Store

DAYS = ("2024-01-01", "2024-01-02")


@pytest.fixture
def s3_resources(s3_servers: dict[str, S3Server], monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Store]:
    store = Store.on(s3_servers["seaweed"])
    monkeypatch.setenv("PAIMON_TEST_S3_KEY", ACCESS_KEY)
    monkeypatch.setenv("PAIMON_TEST_S3_SECRET", SECRET_KEY)
    options = {"key": dg.EnvVar("PAIMON_TEST_S3_KEY"), "secret": dg.EnvVar("PAIMON_TEST_S3_SECRET"),
               "endpoint_url": store.server.endpoint if store.server else "", "client_kwargs.region_name": REGION}
    resources = build_resources(warehouse=store.warehouse, storage_options=options,
                                log_source=LogEventSource(rows_per_partition=ROWS, batch_size=500),
                                order_source=OrderEventSource(orders_per_partition=ORDERS, batch_size=500))
    return resources, store


def test_pipelines_run_on_s3(s3_resources: tuple[dict[str, Any], Store]) -> None:
    resources, store = s3_resources
    job_defs = dg.Definitions(assets=defs.assets, asset_checks=defs.asset_checks, jobs=defs.jobs,
                              resources=resources)
    with dg.instance_for_test() as instance:
        for day in DAYS:
            DayMaterializer(resources, instance)(day)
            OrdersDayMaterializer(resources, instance)(day)
        full = job_defs.resolve_job_def(FULL_COMPACTION_JOB)
        for table in (LOG_TABLE, ORDERS_TABLE):
            assert full.execute_in_process(run_config=full_compaction_run_config(table), instance=instance,
                                           tags=compaction_tags(table)).success
        assert job_defs.resolve_job_def(REVENUE_JOB).execute_in_process(instance=instance,
                                                                        tags=REVENUE_RUN_TAGS).success
        for job, config in ((EXPIRE_JOB, expire_run_config(LOG_TABLE, older_than="now", retain_min=1)),
                            (ORPHANS_JOB, orphans_run_config(LOG_TABLE, older_than="now", force=True))):
            assert job_defs.resolve_job_def(job).execute_in_process(
                run_config=config, instance=instance, tags=maintenance_tags(LOG_TABLE)).success
    catalog = pc.Catalog(store.warehouse, storage_options=store.storage_options)
    events = catalog.get_table(LOG_TABLE)
    assert events.read(["dt"]).num_rows == ROWS * len(DAYS)
    assert len(events.snapshots()) == 1, "expired down to the compacted snapshot"
    orders = catalog.get_table(ORDERS_TABLE)
    assert set(orders.read(["dt"])["dt"].to_pylist()) == set(DAYS)
    assert {f.level for f in orders.files()} == {orders.options.num_levels - 1}
    assert orders.read_changes().num_rows > 0, "the full compaction produced shop.orders' changelog"
    revenue = catalog.get_table(REVENUE_TABLE).read()
    assert sum(revenue["order_count"].to_pylist()) == orders.read(["dt"]).num_rows, "one count per live order"
    assert orders.consumer(CONSUMER_ID) == orders.latest_snapshot().id + 1  # type: ignore[union-attr]
