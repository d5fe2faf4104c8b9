"""Fixtures for the Dagster layer: a temp warehouse, a test instance and the demo's definitions on it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from pipelines import names
from pipelines.definitions import load
from pipelines.demo.log_source import LogEventSource
from pipelines.demo.order_source import OrderEventSource
from resources import PaimonCatalogResource

# Small partitions keep every materialization well under a second.
ROWS = 1_500
# About 1,100 changes a day, streamed in batches of 500 so the writer sees several batches.
ORDERS = 300
LOGS_JOB = names.ingestion_job("logs.events")
ORDERS_JOB = names.ingestion_job("shop.orders")
TOTALS_JOB = names.ingestion_job("shop.user_order_totals")


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return str(tmp_path / "warehouse")


@pytest.fixture(scope="session")
def empty_instance_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A test instance's directory with its SQLite storages created and migrated (0.6 s of work
    each time), copied for every test instead of made again."""
    template = tmp_path_factory.mktemp("dagster-instance")
    with dg.instance_for_test(temp_dir=str(template)):
        pass
    return template


@pytest.fixture
def instance(empty_instance_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dg.DagsterInstance]:
    """A fresh, empty test instance of this test's own (outside ``tmp_path``, which tests list)."""
    home = tmp_path_factory.mktemp("dagster-instance")
    shutil.copytree(empty_instance_dir, home, dirs_exist_ok=True)
    with dg.instance_for_test(temp_dir=str(home)) as test_instance:
        yield test_instance


def small_sources(**changes: Any) -> dict[str, Any]:
    """The demo's sources with small partitions (``log_source`` / ``order_source`` overrides)."""
    return {"log_source": LogEventSource(rows_per_partition=ROWS, batch_size=500),
            "order_source": OrderEventSource(orders_per_partition=ORDERS, batch_size=500), **changes}


@pytest.fixture
def demo_defs(warehouse: str) -> dg.Definitions:
    """The demo's definitions (its YAML tables) on the test's warehouse, with small sources."""
    return load(warehouse, **small_sources())


@pytest.fixture
def resources(demo_defs: dg.Definitions) -> dict[str, Any]:
    return dict(demo_defs.resources or {})


@pytest.fixture
def catalog(resources: dict[str, Any]) -> PaimonCatalogResource:
    """The definitions' catalog resource (``paimon_catalog``)."""
    catalog = resources["paimon_catalog"]
    assert isinstance(catalog, PaimonCatalogResource)
    return catalog


def one_line_failure(result: dg.ExecuteInProcessResult) -> str:
    """The description of the run's one failed step, checked to be a one-line ``dg.Failure``
    (what the UI shows a user, rather than a stack trace)."""
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.event_specific_data.error
    assert error.cls_name == "Failure", error.message
    data = failure.event_specific_data.user_failure_data
    assert data is not None and "\n" not in data.description
    return str(data.description)


class JobRunner:
    """Runs a job of some definitions in process, into the test instance."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.defs = defs
        self.instance = instance

    def __call__(self, job: str, partition_key: str | None = None, *, run_config: dict[str, Any] | None = None,
                 tags: dict[str, str] | None = None, raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        return self.defs.resolve_job_def(job).execute_in_process(
            partition_key=partition_key, instance=self.instance, run_config=run_config, tags=tags,
            raise_on_error=raise_on_error)


@pytest.fixture
def run_job(demo_defs: dg.Definitions, instance: dg.DagsterInstance) -> JobRunner:
    return JobRunner(demo_defs, instance)


class DayMaterializer:
    """One day of logs/events through its ingestion job (with its checks); ``defs`` replaces the
    definitions (e.g. with other sources)."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner

    def __call__(self, day: str, *, defs: dg.Definitions | None = None,
                 raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        runner = JobRunner(defs, self.runner.instance) if defs is not None else self.runner
        return runner(LOGS_JOB, day, raise_on_error=raise_on_error)


@pytest.fixture
def materialize_day(run_job: JobRunner) -> DayMaterializer:
    return DayMaterializer(run_job)


class OrdersDayMaterializer:
    """One day of shop/orders (with its checks), then of shop/user_order_totals, each through its job."""

    def __init__(self, runner: JobRunner) -> None:
        self.runner = runner

    def __call__(self, day: str, *, defs: dg.Definitions | None = None,
                 raise_on_error: bool = True) -> tuple[dg.ExecuteInProcessResult, dg.ExecuteInProcessResult | None]:
        runner = JobRunner(defs, self.runner.instance) if defs is not None else self.runner
        orders = runner(ORDERS_JOB, day, raise_on_error=raise_on_error)
        if not orders.success:
            return orders, None
        return orders, runner(TOTALS_JOB, day, raise_on_error=raise_on_error)


@pytest.fixture
def materialize_orders(run_job: JobRunner) -> OrdersDayMaterializer:
    return OrdersDayMaterializer(run_job)
