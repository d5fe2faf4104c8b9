"""Every symbol of Dagster's private modules (``dagster._*``) the integration uses, in one place.

Dagster does not promise these across releases. Each is listed in :data:`INTERNALS` with why it
is needed, the Dagster version its signature was checked against and the public alternative;
``tests/unit/test_dagster_internals.py`` (in ``make check``) fails when one moves or its
signature changes, before any run does. The step-execution body has a public fallback: the
``dagster api execute_step`` command, run in a subprocess when the in-process call is gone.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from types import FrameType

import dagster as dg

# The config checks of an executor's config at definition load (a bad `executor_config`
# names the table and field then, not when a run starts).
from dagster._config import resolve_to_config_type, validate_config

# The Dask executor: Dagster's step-delegating executor (as `k8s_job_executor` uses it) with a
# step handler submitting steps as Dask tasks; its config fields and requirements as Dagster's own.
from dagster._core.definitions.executor_definition import multiple_process_executor_requirements

# What `dg.define_asset_job` returns, for type hints of the ingestion job builders.
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.execution.retries import RetryMode, get_retries_config
from dagster._core.execution.tags import get_tag_concurrency_limits_config
from dagster._core.executor.step_delegating import (
    CheckStepHealthResult,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
)
from dagster._grpc.types import ExecuteStepArgs

# Dagster's version the symbols below were checked against (the pin in pyproject.toml).
CHECKED_WITH = "1.13.27"


@dataclass(frozen=True, slots=True)
class Internal:
    """One private symbol: where it lives, the parameters its callers pass, why, and the way out."""

    module: str
    name: str
    why: str
    public_alternative: str
    parameters: tuple[str, ...] | None = None  # of a callable (None: a class or type used as such)


INTERNALS: tuple[Internal, ...] = (
    Internal("dagster._config", "validate_config", "check an executor_config at load, naming the table",
             "none at load; dg.validate_run_config needs a whole job", ("config_schema", "config_value")),
    Internal("dagster._config", "resolve_to_config_type", "the config type validate_config takes",
             "none", ("obj",)),
    Internal("dagster._core.definitions.unresolved_asset_job_definition", "UnresolvedAssetJobDefinition",
             "the type dg.define_asset_job returns, for type hints", "typing.Any"),
    Internal("dagster._core.definitions.executor_definition", "multiple_process_executor_requirements",
             "the Dask executor's requirements (persistent instance, reconstructable job)", "none", ()),
    Internal("dagster._core.execution.retries", "RetryMode", "the Dask executor's step retries", "none"),
    Internal("dagster._core.execution.retries", "get_retries_config", "the executor's retries config field",
             "none", ()),
    Internal("dagster._core.execution.tags", "get_tag_concurrency_limits_config",
             "the executor's tag_concurrency_limits config field", "none", ()),
    Internal("dagster._core.executor.step_delegating", "StepDelegatingExecutor",
             "runs a plan's steps (dynamic ones too) through a step handler", "dagster-k8s builds on it too"),
    Internal("dagster._core.executor.step_delegating", "StepHandler", "the Dask step handler's base", "none"),
    Internal("dagster._core.executor.step_delegating", "StepHandlerContext", "what a step handler is given",
             "none"),
    Internal("dagster._core.executor.step_delegating", "CheckStepHealthResult",
             "a Dask task that failed or vanished fails its step", "none"),
    Internal("dagster._grpc.types", "ExecuteStepArgs", "the serialized step a Dask task executes", "none"),
    Internal("dagster.components.definitions", "LazyDefinitions",
             "what a @dg.definitions function becomes; its __call__ frame holds the load's `context` "
             "(see calling_definitions)", "a @dg.definitions function asking for context: dg.ComponentLoadContext"),
    Internal("dagster._cli.api", "_execute_step_command_body",
             "execute a step in the Dask worker's process (the body of `dagster api execute_step`)",
             "the `dagster api execute_step` command in a subprocess (used when this is gone)",
             ("args", "instance", "dagster_run")),
)


def execute_step_body() -> object | None:
    """The in-process body of ``dagster api execute_step``, or None when Dagster moved it."""
    try:
        return importlib.import_module("dagster._cli.api")._execute_step_command_body
    except (ImportError, AttributeError):
        return None


def calling_definitions() -> tuple[dg.ComponentLoadContext, str] | None:
    """The component load context of the ``@dg.definitions`` function this call is made in, and
    that function's file; None outside one (a plain ``definitions.py``, a test).

    Dagster passes the context only to functions that ask for it; ``LazyDefinitions.__call__``
    holds it in its local ``context`` either way, and the frame it calls is the user's function.
    """
    lazy = importlib.import_module("dagster.components.definitions").LazyDefinitions
    frame: FrameType | None = sys._getframe(1)
    below: FrameType | None = None
    while frame is not None:
        if frame.f_code.co_name == "__call__" and isinstance(frame.f_locals.get("self"), lazy):
            context = frame.f_locals.get("context")
            if isinstance(context, dg.ComponentLoadContext) and below is not None:
                return context, below.f_code.co_filename
            return None
        below, frame = frame, frame.f_back
    return None


__all__ = [
    "INTERNALS", "CheckStepHealthResult", "ExecuteStepArgs", "Internal", "RetryMode", "StepDelegatingExecutor",
    "StepHandler", "StepHandlerContext", "UnresolvedAssetJobDefinition", "calling_definitions",
    "execute_step_body",
    "get_retries_config", "get_tag_concurrency_limits_config", "multiple_process_executor_requirements",
    "resolve_to_config_type", "validate_config",
]
