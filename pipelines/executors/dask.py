"""Dagster steps as tasks on a Dask cluster, including the steps a fan-out creates at run time.

``dagster-dask``'s ``dask_executor`` (0.29.27) plans every step before the run starts, so the
write and compaction steps a ``DynamicOut`` maps at run time never run on it, it has no step
retries, and it fails on current ``distributed`` (``client.submit`` walks its arguments, and
Dagster's ``@record`` execution state refuses to be iterated). This executor is Dagster's own
step-delegating executor (the one ``k8s_job_executor`` is built on: dynamic steps, retries,
``max_concurrent``, tag limits, op concurrency pools) with a step handler that runs each step as
a task on the user's Dask cluster. A task executes the step in the worker process, exactly as
``dagster api execute_step`` would in a pod, and writes its events to the run's instance.

Requirements, as for any executor whose steps leave the run's process: a persistent instance
every worker reaches (one host: ``$DAGSTER_HOME``; several: Postgres), the code location
importable on the workers, and an IO manager every worker reaches for step outputs.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import dagster as dg
from dagster_shared.serdes import deserialize_value, serialize_value

from pipelines.dagster_internals import (
    CheckStepHealthResult,
    ExecuteStepArgs,
    RetryMode,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
    execute_step_body,
    get_retries_config,
    get_tag_concurrency_limits_config,
    multiple_process_executor_requirements,
)

log = logging.getLogger(__name__)


def run_step(payload: str) -> str:
    """Execute one step on a Dask worker, as ``dagster api execute_step`` would: in the worker's
    process through Dagster's own body of that command, or, when a Dagster release moved it, by
    running the public command itself with the same serialized arguments."""
    args = deserialize_value(payload, ExecuteStepArgs)
    body = execute_step_body()
    if body is None:
        execute_step_command(payload)
        return ",".join(args.step_keys_to_execute or [])
    instance = worker_instance(args.instance_ref)
    run = instance.get_run_by_id(args.run_id)
    if run is None:
        raise RuntimeError(f"run {args.run_id} not found in the instance the step was given")
    for _ in body(args, instance, run):  # type: ignore[operator]
        pass  # the events are in the instance's event log, where the executor reads them
    return ",".join(args.step_keys_to_execute or [])


_INSTANCES: dict[str, dg.DagsterInstance] = {}
_INSTANCES_LOCK = threading.Lock()


def worker_instance(ref: Any) -> dg.DagsterInstance:
    """The worker process's instance for ``ref``, opened by its first step and kept for the next
    ones (and closed when the process exits), as a code server keeps its instance: opening one per
    step checked the storage's schema again every time, a quarter of a second of a short step."""
    key = serialize_value(ref)
    with _INSTANCES_LOCK:
        instance = _INSTANCES.get(key)
        if instance is None:
            instance = _INSTANCES[key] = dg.DagsterInstance.from_ref(ref)
            atexit.register(instance.dispose)
    return instance


def execute_step_command(payload: str) -> None:
    """``dagster api execute_step`` in a subprocess of the worker (arguments in the environment,
    as Dagster's own step launchers pass them; the worker's import path, so the code location
    imports there as it does in the worker); its events land in the run's instance."""
    path = os.pathsep.join(entry for entry in sys.path if entry)
    env = {**os.environ, "DAGSTER_EXECUTE_STEP_ARGS": payload, "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-m", "dagster", "api", "execute_step"], env=env, check=False,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"dagster api execute_step exited with {done.returncode}: {done.stderr[-2000:]}")


class DaskStepHandler(StepHandler):
    """Launches steps as Dask tasks and reports a task that failed or vanished as unhealthy."""

    def __init__(self, address: str | None, local: dict[str, Any] | None) -> None:
        self.address = address
        self.local = local
        self._client: Any = None
        self._cluster: Any = None
        self._futures: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return "DaskStepHandler"

    def client(self) -> Any:
        if self._client is None:
            from distributed import Client, LocalCluster

            if self.address is None:
                self._cluster = LocalCluster(**(self.local or {}))
            self._client = Client(self.address or self._cluster)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()
        self._client = self._cluster = None

    @staticmethod
    def _step_key(context: StepHandlerContext) -> str:
        keys = context.execute_step_args.step_keys_to_execute or []
        if len(keys) != 1:
            raise dg.DagsterInvariantViolationError(f"a Dask task runs one step, was asked for {keys}")
        return keys[0]

    def _task_key(self, context: StepHandlerContext) -> str:
        args = context.execute_step_args
        attempt = args.known_state.get_retry_state().get_attempt_count(self._step_key(context)) \
            if args.known_state else 0
        return f"dagster-{args.run_id}-{self._step_key(context)}-{attempt}"

    def launch_step(self, step_handler_context: StepHandlerContext) -> Iterator[dg.DagsterEvent]:
        step_key = self._step_key(step_handler_context)
        task = self._task_key(step_handler_context)
        payload = serialize_value(step_handler_context.execute_step_args)
        self._futures[task] = self.client().submit(run_step, payload, key=task, pure=False, retries=0)
        yield dg.DagsterEvent.step_worker_starting(
            step_handler_context.get_step_context(step_key),
            message=f'Executing step "{step_key}" as Dask task {task}.',
            metadata={"Dask task": dg.MetadataValue.text(task),
                      "Dask scheduler": dg.MetadataValue.text(str(self.client().scheduler.address))})

    def check_step_health(self, step_handler_context: StepHandlerContext) -> CheckStepHealthResult:
        task = self._task_key(step_handler_context)
        future = self._futures.get(task)
        if future is None:
            return CheckStepHealthResult.unhealthy(f"Dask task {task} is unknown to this run's executor")
        if future.status in ("error", "cancelled", "lost"):
            reason = future.exception() if future.status == "error" else future.status
            return CheckStepHealthResult.unhealthy(f"Dask task {task}: {reason}")
        return CheckStepHealthResult.healthy()

    def terminate_step(self, step_handler_context: StepHandlerContext) -> Iterator[dg.DagsterEvent]:
        task = self._task_key(step_handler_context)
        future = self._futures.pop(task, None)
        if future is not None:
            future.cancel()
        yield from ()


class DaskExecutor(StepDelegatingExecutor):
    """The step-delegating executor that closes its Dask client (and local cluster) after the run."""

    def __init__(self, handler: DaskStepHandler, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self.handler = handler

    def execute(self, plan_context: Any, execution_plan: Any) -> Any:
        try:
            yield from super().execute(plan_context, execution_plan)
        finally:
            self.handler.close()


@dg.executor(
    name="paimon_dask",
    config_schema={
        "cluster": dg.Field(dg.Selector({
            "existing": dg.Field({"address": dg.Field(dg.StringSource, description="The scheduler, tcp://host:8786")}),
            "local": dg.Field(dg.Permissive(), description="A distributed.LocalCluster started for the run "
                              "(its keyword arguments, e.g. n_workers)."),
        }), is_required=False, default_value={"local": {}}, description="The Dask cluster the steps run on."),
        "max_concurrent": dg.Field(dg.IntSource, is_required=False,
                                   description="At most this many steps at once (default: no limit)."),
        "tag_concurrency_limits": get_tag_concurrency_limits_config(),
        "retries": get_retries_config(),
        "sleep_seconds": dg.Field(float, is_required=False, default_value=0.2,
                                  description="How often the executor looks at the event log for step events."),
    },
    requirements=multiple_process_executor_requirements(),
)
def dask_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Run each step as a task on a Dask cluster (``cluster: {existing: {address: ...}}``)."""
    config: dict[str, Any] = dict(init_context.executor_config)
    ((kind, cluster),) = dict(config["cluster"]).items()
    handler = DaskStepHandler(cluster["address"] if kind == "existing" else None,
                              dict(cluster) if kind == "local" else None)
    return DaskExecutor(handler, retries=RetryMode.from_config(config["retries"]),
                        max_concurrent=config.get("max_concurrent"),
                        tag_concurrency_limits=config.get("tag_concurrency_limits"),
                        sleep_seconds=config["sleep_seconds"], check_step_health_interval_seconds=1)
