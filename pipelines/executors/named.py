"""Dagster's executors by name, for the tables' jobs: how a run's steps spread over processes and machines.

A table's ingestion job (``Ingestion.executor``) and the code location's compaction and
maintenance jobs (``paimon_definitions(executor=...)``) run on one of Dagster's executors:

- ``in_process``: every step in the run's process (the default: most steps are small).
- ``multiprocess``: a process per step on the run's host (``max_concurrent`` of them).
- ``dask``: steps as tasks of a Dask cluster (:mod:`pipelines.executors.dask`, on ``distributed``;
  ``cluster: {existing: {address: tcp://...}}``).
- ``k8s``: a Kubernetes job per step (``dagster-k8s``; image, namespace, env from secrets).
- ``celery``: steps on Celery workers (``dagster-celery``; ``broker``, ``backend``).

``executor_config`` is that executor's config as its run config would give it; it is checked
against the executor's schema when the definitions load, so a typo fails there, not at launch.
Steps that run in other processes hand their outputs over through the run's IO manager, which
must then be one every worker reaches (the local ``fs_io_manager`` on one host, an
S3/GCS pickle IO manager across machines).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import dagster as dg

from pipelines import names
from pipelines.dagster_internals import resolve_to_config_type, validate_config
from pipelines.errors import TableDefinitionError

EXECUTORS: dict[str, tuple[str, str, str, str]] = {
    # name: (module, attribute, the module it needs, the extra that installs that)
    "in_process": ("dagster", "in_process_executor", "dagster", ""),
    "multiprocess": ("dagster", "multiprocess_executor", "dagster", ""),
    "dask": ("pipelines.executors.dask", "dask_executor", "distributed", "dask"),
    "k8s": ("dagster_k8s", "k8s_job_executor", "dagster_k8s", "k8s"),
    "celery": ("dagster_celery", "celery_executor", "dagster_celery", "celery"),
}


def executor_named(name: str, config: Mapping[str, Any] | None = None, *, table: str,
                   field: str = "ingestion.executor") -> dg.ExecutorDefinition:
    """The executor ``name``, configured with ``config`` (validated now) when given."""
    if name not in EXECUTORS:
        raise TableDefinitionError(f"table {table}: {field} {name!r} is not one of {', '.join(EXECUTORS)}")
    module_name, attribute, needs, extra = EXECUTORS[name]
    try:
        importlib.import_module(needs)
        executor: dg.ExecutorDefinition = getattr(importlib.import_module(module_name), attribute)
    except ImportError:
        raise TableDefinitionError(f"table {table}: {field} {name!r} needs {needs.replace('_', '-')}: "
                                   f"pip install 'paimon-dagster[{extra}]'") from None
    if not config:
        return executor
    check_config(executor, config, table=table, field=field)
    return executor.configured(dict(config), name=names.table_executor(executor.name, table))


def check_config(executor: dg.ExecutorDefinition, config: Mapping[str, Any], *, table: str, field: str) -> None:
    """Refuse config the executor would refuse at launch, naming the field and the problem."""
    schema = executor.config_schema
    if schema is None:
        raise TableDefinitionError(f"table {table}: {field}_config given, but executor {executor.name} takes no config")
    # validated, not processed: {env: VAR} values are read where the run starts, not here
    result = validate_config(resolve_to_config_type(schema.as_field().config_type), dict(config))
    if not result.success:
        problems = "; ".join(error.message.split(" Expected:")[0] for error in result.errors or [])
        raise TableDefinitionError(f"table {table}: {field}_config is not valid for {executor.name}: {problems}")
