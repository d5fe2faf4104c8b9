"""The resources the fixture project's source functions ask for by parameter name.

``FIXTURE_ORDERS_PER_DAY`` sizes the order source of a code location the tests start as a
server (the live tests want days of several commits); in process, tests pass their own.
"""

import os

import dagster as dg

from tests.support.fixture_project.sources import OrderSource
from tests.support.fixture_project.sources import resources as source_resources

ORDERS_ENV = "FIXTURE_ORDERS_PER_DAY"


@dg.definitions
def resources() -> dg.Definitions:
    orders = os.environ.get(ORDERS_ENV)
    changes = {"order_source": OrderSource(orders_per_partition=int(orders))} if orders else {}
    return dg.Definitions(resources=source_resources(**changes))
