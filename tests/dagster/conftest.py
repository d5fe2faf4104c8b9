"""Fixtures for the Dagster layer: a temp warehouse, a test instance and the fixture project's
definitions (``tests/support/fixture_project``) on them."""

from __future__ import annotations

import dagster as dg
import pytest

from pipelines import names
from tests.support.dagster_runs import DayMaterializer, JobRunner, OrdersDayMaterializer
from tests.support.fixture_project.definitions import load
from tests.support.fixture_project.sources import EventSource, OrderSource
from tests.support.fixture_project.tables import EVENTS_TABLE, ORDERS_TABLE, TOTALS_TABLE

# Small partitions keep every materialization well under a second: about 1,100 changes a day,
# streamed in batches of 500 so the writer sees several batches.
ROWS = EventSource().rows_per_partition
ORDERS_PER_DAY = OrderSource().orders_per_partition
EVENTS_JOB = names.ingestion_job(EVENTS_TABLE)
ORDERS_JOB = names.ingestion_job(ORDERS_TABLE)
TOTALS_JOB = names.ingestion_job(TOTALS_TABLE)


@pytest.fixture
def project_defs(warehouse: str) -> dg.Definitions:
    """The fixture project's definitions (its YAML tables) on the test's warehouse."""
    return load(warehouse)


@pytest.fixture
def definitions(project_defs: dg.Definitions) -> dg.Definitions:
    """What ``resources``, ``catalog`` and ``run_job`` (``tests.support.dagster_runs``) run here."""
    return project_defs


@pytest.fixture
def materialize_day(run_job: JobRunner) -> DayMaterializer:
    """One day of app.events through its ingestion job."""
    return DayMaterializer(run_job, EVENTS_JOB)


@pytest.fixture
def materialize_orders(run_job: JobRunner) -> OrdersDayMaterializer:
    """One day of sales.orders, then of sales.user_totals."""
    return OrdersDayMaterializer(run_job, ORDERS_JOB, TOTALS_JOB)
