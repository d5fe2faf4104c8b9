"""Every symbol of Dagster's private modules (``dagster._*``) the integration uses, in one place.

Dagster does not promise these across releases. Each is listed in :data:`INTERNALS` with why it
is needed, the Dagster version its signature was checked against and the public alternative;
``tests/unit/test_dagster_internals.py`` (in ``make check``) fails when one moves or its
signature changes, before any run does. The step-execution body has a public fallback: the
``dagster api execute_step`` command, run in a subprocess when the in-process call is gone.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import dagster as dg
import grpc

# The config checks of an executor's config at definition load (a bad `executor_config`
# names the table and field then, not when a run starts).
from dagster._config import resolve_to_config_type, validate_config

# The Dask executor: Dagster's step-delegating executor (as `k8s_job_executor` uses it) with a
# step handler submitting steps as Dask tasks; its config fields and requirements as Dagster's own.
from dagster._core.definitions.executor_definition import multiple_process_executor_requirements

# A job run in this process as the code location's run worker runs it: the run created with the
# origin a workspace file gives the location (what the webserver loads), so its job, sensor and
# schedule pages list it and "Re-execute" finds its code location.
from dagster._core.definitions.reconstruct import ReconstructableJob, ReconstructableRepository

# What `dg.define_asset_job` returns, for type hints of the ingestion job builders.
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.errors import DagsterUserCodeUnreachableError
from dagster._core.execution.api import execute_run

# Metadata of one partition's materialization from the last op of a graph asset in a run of
# several partitions (an @asset's context has add_asset_metadata; a graph asset's ops get an
# OpExecutionContext without it).
from dagster._core.execution.context.system import StepExecutionContext
from dagster._core.execution.retries import RetryMode, get_retries_config
from dagster._core.execution.tags import get_tag_concurrency_limits_config
from dagster._core.executor.step_delegating import (
    CheckStepHealthResult,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
)
from dagster._core.remote_origin import RemoteJobOrigin, RemoteRepositoryOrigin

# Whether a run's worker still runs (GRPC_INFO_TAG, DagsterGrpcClient, CanCancelExecution*,
# deserialize_value, DagsterUserCodeUnreachableError): the code server that launched it (Dagster's
# default run launcher starts run workers as its subprocesses and records where it listens on the
# run) is asked whether it still executes the run.
from dagster._core.storage.tags import GRPC_INFO_TAG
from dagster._core.workspace.load import location_origins_from_yaml_paths
from dagster._grpc.client import DagsterGrpcClient
from dagster._grpc.types import CanCancelExecutionRequest, CanCancelExecutionResult, ExecuteStepArgs
from dagster._serdes import deserialize_value

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
    Internal("dagster._core.workspace.load", "location_origins_from_yaml_paths",
             "the origin of a code location as the webserver loads it from workspace.yaml",
             "none; runs created without it are not listed on their job's page", ("yaml_paths",)),
    Internal("dagster._core.definitions.reconstruct", "ReconstructableRepository",
             "the code location's repository as a run worker loads it", "dg.reconstructable (jobs only)"),
    Internal("dagster._core.definitions.reconstruct", "ReconstructableJob",
             "a job of that repository, for execute_run", "dg.reconstructable (jobs only)"),
    Internal("dagster._core.remote_origin", "RemoteRepositoryOrigin",
             "the repository part of a run's origin (its label tags the run)", "none"),
    Internal("dagster._core.remote_origin", "RemoteJobOrigin", "a run's origin: which job of which location",
             "none"),
    Internal("dagster._core.execution.api", "execute_run",
             "execute a created run in this process, as a run worker does",
             "dg.execute_job (a run without origin)", ("job", "dagster_run", "instance", "raise_on_error")),
    Internal("dagster._core.storage.tags", "GRPC_INFO_TAG",
             "where the code server that launched a run listens (a hidden run tag)", "none"),
    Internal("dagster._grpc.client", "DagsterGrpcClient", "ask that code server whether the run's worker runs",
             "none; run monitoring's worker health check, which Dagster's default launcher lacks"),
    Internal("dagster._grpc.types", "CanCancelExecutionRequest", "the question (by run id)", "none"),
    Internal("dagster._grpc.types", "CanCancelExecutionResult", "the answer", "none"),
    Internal("dagster._serdes", "deserialize_value", "read the answer", "none", ("val", "as_type", "whitelist_map")),
    Internal("dagster._core.errors", "DagsterUserCodeUnreachableError", "the code server is not there",
             "dg.DagsterError (too broad: a timeout is not an absence)"),
    Internal("dagster._core.execution.context.system", "StepExecutionContext",
             "add_asset_metadata for one partition from a graph asset's last op in a ranged run",
             "dg.AssetExecutionContext.add_asset_metadata (@asset ops only)"),
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


def run_of_code_location(instance: dg.DagsterInstance, workspace_file: Path, location_name: str, job_name: str,
                         *, run_config: Mapping[str, Any] | None = None,
                         tags: Mapping[str, str] | None = None) -> dg.ExecutionResult:
    """Run ``job_name`` of the code location ``location_name`` of ``workspace_file`` in this process,
    as the location's run worker would run a run the webserver launched.

    The run is created as the webserver creates one: with the location's origin (its runs are
    labelled ``<repository>@<location>``, which the job, sensor and schedule pages filter on),
    the code's origin (so Re-execute loads it) and the job's tags under the given ones. It then
    goes from NOT_STARTED straight to execution here, without the instance's run queue.
    """
    origins = {o.location_name: o for o in location_origins_from_yaml_paths([str(workspace_file)])}
    if location_name not in origins:
        raise ValueError(f"{workspace_file} declares no code location {location_name!r} (it has "
                         f"{sorted(origins)})")
    origin = origins[location_name]
    target = getattr(origin, "loadable_target_origin", None)
    if target is None or not (target.module_name or target.python_file) or not target.attribute:
        raise ValueError(f"code location {location_name!r} of {workspace_file} is not a python_module or "
                         "python_file entry with an attribute: its runs can only be launched by the webserver")
    if target.module_name:
        repository = ReconstructableRepository.for_module(target.module_name, target.attribute,
                                                          target.working_directory)
    else:
        repository = ReconstructableRepository.for_file(target.python_file, target.attribute,
                                                        target.working_directory)
    recon_job: ReconstructableJob = repository.get_reconstructable_job(job_name)
    job_def = recon_job.get_definition()
    remote_origin = RemoteJobOrigin(RemoteRepositoryOrigin(origin, repository.get_definition().name), job_name)
    run = instance.create_run_for_job(job_def=job_def, run_config=run_config,
                                      tags={**job_def.run_tags, **(tags or {})},
                                      remote_job_origin=remote_origin, job_code_origin=recon_job.get_python_origin())
    return execute_run(recon_job, run, instance)


def run_worker_gone(run: dg.DagsterRun, *, timeout_s: int = 5) -> bool | None:
    """Whether the worker of a run that Dagster's default run launcher started is gone: the code
    server that launched it is not there any more (refused: it died, with its host or the whole
    deployment), or it no longer executes the run. None when the run names no such server (other
    launchers: their run monitoring checks worker health) or the server did not answer in time."""
    info = run.tags.get(GRPC_INFO_TAG)
    if not info:
        return None
    where = json.loads(info)
    client = DagsterGrpcClient(port=where.get("port"), socket=where.get("socket"), host=where.get("host"),
                               use_ssl=bool(where.get("use_ssl", False)))
    try:
        answer = client.can_cancel_execution(CanCancelExecutionRequest(run_id=run.run_id), timeout=timeout_s)
    except DagsterUserCodeUnreachableError as error:
        cause = error.__cause__
        return isinstance(cause, grpc.RpcError) and cause.code() == grpc.StatusCode.UNAVAILABLE
    return not deserialize_value(answer, CanCancelExecutionResult).can_cancel


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
    "GRPC_INFO_TAG",
    "INTERNALS",
    "CheckStepHealthResult",
    "ExecuteStepArgs",
    "Internal",
    "RetryMode",
    "StepDelegatingExecutor",
    "StepHandler",
    "StepHandlerContext",
    "UnresolvedAssetJobDefinition",
    "calling_definitions",
    "execute_step_body",
    "get_retries_config",
    "get_tag_concurrency_limits_config",
    "multiple_process_executor_requirements",
    "resolve_to_config_type",
    "run_of_code_location",
    "run_worker_gone",
    "validate_config",
]


def add_partition_metadata(context: dg.OpExecutionContext, metadata: Mapping[str, Any], partition_key: str) -> None:
    """What ``dg.AssetExecutionContext.add_asset_metadata(metadata, partition_key=)`` does, for the
    op of a graph asset whose output is the asset: metadata of that partition's materialization."""
    step: StepExecutionContext = context._step_execution_context
    step.add_asset_metadata(metadata=metadata, partition_key=partition_key)
