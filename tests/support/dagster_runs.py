"""What tests of Dagster definitions share: a temp warehouse, a fresh test instance per test,
a runner of a definitions' jobs in process, and the materializers of a day.

A pytest plugin of the root conftest: its fixtures (``warehouse``, ``instance``) serve every tier;
``resources``, ``catalog`` and ``run_job`` serve a directory whose conftest says which
``definitions`` its tests run.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

import paimon_core as pc
from resources import PaimonCatalogResource
from tests.support.metadata_values import value_of


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


@pytest.fixture
def resources(definitions: dg.Definitions) -> dict[str, Any]:
    return dict(definitions.resources or {})


@pytest.fixture
def catalog(resources: dict[str, Any]) -> PaimonCatalogResource:
    """The definitions' catalog resource (``paimon_catalog``)."""
    catalog = resources["paimon_catalog"]
    assert isinstance(catalog, PaimonCatalogResource)
    return catalog


@pytest.fixture
def run_job(definitions: dg.Definitions, instance: dg.DagsterInstance) -> JobRunner:
    return JobRunner(definitions, instance)


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


class DayMaterializer:
    """One day of a table through its ingestion job (with its checks); ``defs`` replaces the
    definitions (e.g. with other sources)."""

    def __init__(self, runner: JobRunner, job: str) -> None:
        self.runner = runner
        self.job = job

    def __call__(self, day: str, *, defs: dg.Definitions | None = None,
                 raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        runner = JobRunner(defs, self.runner.instance) if defs is not None else self.runner
        return runner(self.job, day, raise_on_error=raise_on_error)


class OrdersDayMaterializer:
    """One day of an orders table (with its checks), then of the per-user totals read from it,
    each through its job; the totals are left alone when the orders failed."""

    def __init__(self, runner: JobRunner, orders_job: str, totals_job: str) -> None:
        self.runner = runner
        self.jobs = (orders_job, totals_job)

    def __call__(self, day: str, *, defs: dg.Definitions | None = None,
                 raise_on_error: bool = True) -> tuple[dg.ExecuteInProcessResult, dg.ExecuteInProcessResult | None]:
        runner = JobRunner(defs, self.runner.instance) if defs is not None else self.runner
        orders_job, totals_job = self.jobs
        orders = runner(orders_job, day, raise_on_error=raise_on_error)
        if not orders.success:
            return orders, None
        return orders, runner(totals_job, day, raise_on_error=raise_on_error)


def metadata_of(result: dg.ExecuteInProcessResult, key: dg.AssetKey | None = None) -> dict[str, Any]:
    """Plain values of the run's one materialization (of ``key``, when the run has several)."""
    events = [e for e in result.get_asset_materialization_events() if key is None or e.asset_key == key]
    assert len(events) == 1, [e.asset_key for e in events]
    metadata = events[0].step_materialization_data.materialization.metadata
    return {name: value_of(value) for name, value in metadata.items()}


def evaluation_of(result: dg.ExecuteInProcessResult, name: str) -> Any:
    """The run's one evaluation of the check ``name``."""
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


def step_failure(result: dg.ExecuteInProcessResult) -> str:
    """The error message of the run's first failed step."""
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert failure.step_failure_data is not None and failure.step_failure_data.error is not None
    return str(failure.step_failure_data.error.message)


def retries_of(result: dg.ExecuteInProcessResult) -> int:
    """How many times the run's steps were restarted."""
    return sum(1 for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_RESTARTED)


def orphans_now(table: pc.Table) -> set[str]:
    """Files of ``table`` that no snapshot references, however young (a dry run)."""
    return set(table.remove_orphan_files(dry_run=True, older_than=int(time.time() * 1000) + 1_000,
                                         force=True).orphans)


def asset_spec(definitions: dg.Definitions, key: dg.AssetKey) -> dg.AssetSpec:
    """The one asset spec of ``key`` in ``definitions``."""
    [spec] = [s for s in definitions.resolve_all_asset_specs() if s.key == key]
    return spec


def partitions_of(definitions: dg.Definitions, key: dg.AssetKey) -> dg.PartitionsDefinition:
    partitions = definitions.resolve_asset_graph().get(key).partitions_def
    assert partitions is not None
    return partitions


def plain(value: Any) -> Any:
    """A metadata value's plain value (``dg.MetadataValue`` or already plain)."""
    return getattr(value, "value", value)


def causes_of(error: BaseException) -> list[str]:
    """The messages of ``error`` and of every error it was raised from (a component's load wraps
    the refusal in Dagster's own errors), outermost first."""
    causes: list[str] = []
    cause: BaseException | None = error
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__ or cause.__context__
    return causes
