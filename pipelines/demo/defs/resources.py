"""The resources the demo's source functions ask for by parameter name."""

import dagster as dg

from pipelines.demo.log_source import LogEventSource
from pipelines.demo.order_source import OrderEventSource


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources={"log_source": LogEventSource(), "order_source": OrderEventSource()})
