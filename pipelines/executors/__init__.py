"""Where a run's steps execute: Dagster's executors by name for the tables' jobs, and the Dask
executor that also runs the steps a fan-out creates at run time."""

from pipelines.executors.named import EXECUTORS, executor_named

__all__ = ["EXECUTORS", "executor_named"]
