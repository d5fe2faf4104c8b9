"""Three tables written in 10,000-row chunks (append, upsert) or one commit (overwrite), whose
ingestion jobs are reconstructable on a warehouse (an argument of the job, so that Dagster's
cache of reconstructed jobs cannot hand one test another's): a run can be executed in a process
of its own, killed, and re-executed from failure in another.

Run as a script (``python -m tests.support.exactly_once_defs TABLE DAY KILL_AFTER WAREHOUSE``) it executes
TABLE's job for DAY in this process and SIGKILLs itself right after the table's KILL_AFTER-th
commit landed: a run worker lost between its commits and its step's success.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import dagster as dg
import pyarrow as pa

from pipelines import Column, Ingestion, PaimonTableSpec, Partitions, names, paimon_definitions

ROWS, CHUNK, KEYS = 40_000, 10_000, 100
DAYS = Partitions("daily", start="2024-03-01", end="2024-03-05")
TABLES = {"append": "plant.readings", "upsert": "plant.totals", "overwrite": "plant.snapshot"}


def readings(context: dg.AssetExecutionContext) -> pa.Table:
    """The same 40,000 rows, in the same order, every time the partition is produced."""
    return pa.table({"id": pa.array(range(ROWS), pa.int64()), "value": pa.array(range(ROWS), pa.float64())})


def increments(context: dg.AssetExecutionContext) -> pa.Table:
    """40,000 increments of 1 over 100 keys: each key sums to 400 when every row lands once."""
    return pa.table({"k": pa.array([i % KEYS for i in range(ROWS)], pa.int64()), "n": pa.array([1] * ROWS, pa.int64())})


def specs() -> list[PaimonTableSpec]:
    dt = Column("dt", "STRING NOT NULL")
    return [
        PaimonTableSpec(TABLES["append"], columns=(Column("id", "BIGINT"), Column("value", "DOUBLE"), dt),
                        partition_keys=("dt",), partitions=DAYS,
                        ingestion=Ingestion(mode="append", function=readings, commit_every_rows=CHUNK, retries=0)),
        PaimonTableSpec(TABLES["upsert"], columns=(Column("k", "BIGINT NOT NULL"), Column("n", "BIGINT"), dt),
                        primary_key=("dt", "k"), partition_keys=("dt",), partitions=DAYS,
                        options={"bucket": "2", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum"},
                        ingestion=Ingestion(mode="upsert", function=increments, commit_every_rows=CHUNK, retries=0)),
        PaimonTableSpec(TABLES["overwrite"], columns=(Column("id", "BIGINT"), Column("value", "DOUBLE"), dt),
                        partition_keys=("dt",), partitions=DAYS,
                        ingestion=Ingestion(mode="overwrite", function=readings, retries=0)),
    ]


def ingestion_job(table: str, warehouse: str) -> Any:
    defs = paimon_definitions(specs(), warehouse=warehouse)
    return defs.resolve_job_def(names.ingestion_job(table))


def reconstructable(table: str, warehouse: str) -> Any:
    return dg.build_reconstructable_job("tests.support.exactly_once_defs", "ingestion_job",
                                        reconstructable_args=(table, warehouse))


def main(table: str, day: str, kill_after: int, warehouse: str) -> None:
    from paimon_core.commit import FileStoreCommit

    original = FileStoreCommit.commit
    landed: list[int | None] = []

    def commit(self: FileStoreCommit, *args: Any, **kwargs: Any) -> int | None:
        snapshot = original(self, *args, **kwargs)
        if self.table == table:
            landed.append(snapshot)
            if len(landed) == kill_after:
                os.kill(os.getpid(), signal.SIGKILL)
        return snapshot

    FileStoreCommit.commit = commit  # type: ignore[method-assign]
    with dg.execute_job(reconstructable(table, warehouse), instance=dg.DagsterInstance.get(),
                        tags={"dagster/partition": day}) as result:
        print(result.run_id, result.success)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
