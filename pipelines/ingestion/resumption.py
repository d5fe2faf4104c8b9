"""A fresh materialization of a partition finishes the chunked write a dead run left unfinished.

A write with ``commit_every_rows`` commits chunk after chunk under a commit user naming its root
run; a retry or a re-execution from failure shares that root, so it finds the chunks that landed
and writes only the rest. A *new* run of the partition (the asset page, another backfill) has a
root of its own: without this it would write every chunk again next to the ones the dead run
left. So before writing, the partition's earlier runs are looked at, newest first: the first
finished one whose commits stopped before the final chunk, with nothing of its run group still
running and no successful materialization of the partition after it, is resumed (its commit
user is taken over, so the chunks it landed are skipped). Overwrites commit once, so there is
never anything to resume: a new run replaces the partition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dagster as dg

ROOT_RUN_TAG = "dagster/root_run_id"
PARTITION_TAG = "dagster/partition"
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
LOOKED_AT = 50  # earlier runs of the partition considered, newest first


@dataclass(frozen=True, slots=True)
class EarlierRun:
    """A finished run of the partition, as the decision needs it."""

    run_id: str
    root_run_id: str
    succeeded: bool
    group_running: bool  # a run of its run group (a re-execution) has not finished


def to_resume(runs: Sequence[EarlierRun], progress: Callable[[str], tuple[int, bool]]) -> tuple[str, int] | None:
    """The root run whose unfinished write to resume, and its chunks landed, or None.

    ``runs``: the partition's finished runs, newest first. ``progress(root)``: the chunks the
    root's commit user landed and whether the last was final. A success, or a write whose final
    chunk landed (its run died after it), ends the search: the partition was written whole after
    anything older. A group still running is left alone.
    """
    for run in runs:
        if run.succeeded:
            return None
        if run.group_running:
            continue
        done, final = progress(run.root_run_id)
        if done:
            return None if final else (run.root_run_id, done)
    return None


def earlier_runs(instance: dg.DagsterInstance, *, current: dg.DagsterRun, asset_key: dg.AssetKey,
                 partition_key: str | None) -> list[EarlierRun]:
    """The finished runs that materialized ``asset_key`` (in ``partition_key``) before ``current``,
    newest first."""
    tags = {PARTITION_TAG: partition_key} if partition_key is not None else {}
    found = instance.get_runs(filters=dg.RunsFilter(tags=tags, statuses=list(FINISHED)), limit=LOOKED_AT)
    out = []
    current_root = current.root_run_id or current.run_id
    for run in found:
        root = run.root_run_id or run.run_id
        if root == current_root or (run.asset_selection is not None and asset_key not in run.asset_selection):
            continue
        if partition_key is None and run.tags.get(PARTITION_TAG):
            continue
        group = instance.get_runs(filters=dg.RunsFilter(tags={ROOT_RUN_TAG: root}))
        running = any(r.status not in FINISHED for r in group if r.run_id != current.run_id)
        out.append(EarlierRun(run.run_id, root, run.status == dg.DagsterRunStatus.SUCCESS, running))
    return out
