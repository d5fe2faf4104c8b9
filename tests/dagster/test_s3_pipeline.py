"""The Dagster pipelines with the warehouse on S3 (SeaweedFS on 127.0.0.1): ingestion of the
tables, compaction, the changelog consumer, expiry and orphan cleanup, configured the way a
deployment is: a project's declared tables (the fixture project's) on an S3 warehouse, storage options on the catalog
resource, secrets as ``dg.EnvVar``."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

import paimon_core as pc
from pipelines import names
from pipelines.compaction.jobs import compaction_tags, full_compaction_run_config
from pipelines.factory import paimon_definitions
from pipelines.maintenance.expiry import expire_run_config
from pipelines.maintenance.orphans import orphans_run_config
from pipelines.maintenance.runs import maintenance_tags
from pipelines.target import declared_targets
from resources import PaimonCatalogResource
from resources.keys import TABLE_TAG
from tests.dagster.conftest import EVENTS_JOB, ORDERS_JOB, ROWS, TOTALS_JOB
from tests.support.dagster_runs import JobRunner, OrdersDayMaterializer
from tests.support.fixture_project.definitions import python_definitions
from tests.support.fixture_project.tables import (
    EVENTS_KEY,
    EVENTS_TABLE,
    ORDERS_TABLE,
    REVENUE_TABLE,
    declared,
)
from tests.support.fixture_project.tables import spec as declared_spec
from tests.support.s3.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.support.s3.store import Store

DAYS = ("2024-01-01", "2024-01-02")
REVENUE_JOB = names.ingestion_job(REVENUE_TABLE)
CONSUMER_ID = declared_spec(REVENUE_TABLE).ingestion.consumer_id  # type: ignore[union-attr]


@pytest.fixture
def s3_defs(s3_servers: dict[str, S3Server], monkeypatch: pytest.MonkeyPatch) -> tuple[dg.Definitions, Store]:
    store = Store.on(s3_servers["seaweed"])
    assert store.server is not None
    monkeypatch.setenv("PAIMON_TEST_S3_KEY", ACCESS_KEY)
    monkeypatch.setenv("PAIMON_TEST_S3_SECRET", SECRET_KEY)
    options: dict[str, Any] = {"key": dg.EnvVar("PAIMON_TEST_S3_KEY"), "secret": dg.EnvVar("PAIMON_TEST_S3_SECRET"),
                               "endpoint_url": store.server.endpoint, "client_kwargs.region_name": REGION}
    catalog = PaimonCatalogResource(warehouse=store.warehouse, storage_options=options)
    return python_definitions(catalog=catalog), store


def test_storage_options_may_be_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAIMON_TEST_S3_KEY", ACCESS_KEY)

    defs = paimon_definitions(list(declared()), warehouse="s3://bucket/warehouse",
                              storage_options={"key": dg.EnvVar("PAIMON_TEST_S3_KEY")})

    assert (defs.resources or {})["paimon_catalog"].storage_options == {"key": dg.EnvVar("PAIMON_TEST_S3_KEY")}


def test_secrets_stay_environment_variables(s3_defs: tuple[dg.Definitions, Store]) -> None:
    defs, _ = s3_defs

    catalog = (defs.resources or {})["paimon_catalog"]
    assert catalog.storage_options["key"] == dg.EnvVar("PAIMON_TEST_S3_KEY")
    assert ACCESS_KEY not in repr(catalog) and SECRET_KEY not in repr(catalog)
    # The URI needs the resolved options, which only a run has; the table name is still shown.
    [logs] = [spec for spec in defs.resolve_all_asset_specs() if spec.key == EVENTS_KEY]
    assert "dagster/uri" not in logs.metadata
    assert logs.metadata["dagster/table_name"] == EVENTS_TABLE


def test_pipelines_run_on_s3(s3_defs: tuple[dg.Definitions, Store]) -> None:
    defs, store = s3_defs
    targets = declared_targets(defs)
    with dg.instance_for_test() as instance:
        run_job = JobRunner(defs, instance)
        for day in DAYS:
            logs = run_job(EVENTS_JOB, day)
            assert logs.dagster_run.tags[TABLE_TAG] == EVENTS_TABLE
            orders, totals = OrdersDayMaterializer(run_job, ORDERS_JOB, TOTALS_JOB)(day)
            assert orders.success and totals is not None and totals.success
        for table in (EVENTS_TABLE, ORDERS_TABLE):
            assert run_job(names.full_compaction_job(table), run_config=full_compaction_run_config(targets[table]),
                           tags=compaction_tags(table)).success
        assert run_job(REVENUE_JOB).success
        events = targets[EVENTS_TABLE]
        for job, config in (
                (names.expire_job(EVENTS_TABLE), expire_run_config(events, older_than="now", retain_min=1)),
                (names.orphans_job(EVENTS_TABLE), orphans_run_config(events, older_than="now", force=True))):
            assert run_job(job, run_config=config, tags=maintenance_tags(EVENTS_TABLE)).success
    catalog = pc.Catalog(store.warehouse, storage_options=store.storage_options)
    events = catalog.get_table(EVENTS_TABLE)
    assert events.read(["dt"]).num_rows == ROWS * len(DAYS)
    assert len(events.snapshots()) == 1, "expired down to the compacted snapshot"
    orders_table = catalog.get_table(ORDERS_TABLE)
    assert set(orders_table.read(["dt"])["dt"].to_pylist()) == set(DAYS)
    assert {f.level for f in orders_table.files()} == {orders_table.options.num_levels - 1}
    assert orders_table.read_changes().num_rows > 0, "the full compaction produced sales.orders' changelog"
    revenue = catalog.get_table(REVENUE_TABLE).read()
    assert sum(revenue["order_count"].to_pylist()) == orders_table.read(["dt"]).num_rows, "one count per live order"
    assert orders_table.consumer(CONSUMER_ID) == orders_table.latest_snapshot().id + 1  # type: ignore[union-attr]
