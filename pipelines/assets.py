"""The ``logs/events`` asset: a daily-partitioned, write-only Paimon append table.

The asset is graph-backed so the ingestion shows up in the UI as its own op,
``ingest_log_events``. The op streams one day's events into the table and replaces that day
with a dynamic partition overwrite in a single commit, so re-running a day (retry, backfill,
schedule catch-up) never duplicates rows.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from paimon_core.errors import TableExistsError, UnsupportedFeatureError
from pipelines.log_events import (
    PARTITION_COLUMN,
    SCHEMA,
    TABLE,
    TABLE_OPTIONS,
    SourceDataError,
    event_batches,
)
from pipelines.partitions import daily_partitions
from resources import LogEventSource, PaimonCatalogResource, PaimonWrite, write_metadata
from resources.io_manager import PARTITION_EXPR_KEY, TABLE_METADATA_KEY

log = logging.getLogger(__name__)

LOG_EVENTS_KEY = dg.AssetKey(["logs", "events"])
IO_MANAGER_KEY = "paimon_io_manager"
TABLE_TAG = "paimon/table"
# Every run that writes logs.events carries this tag; dagster.yaml limits such runs to one per table.
RUN_TAGS = {TABLE_TAG: TABLE}
# Step retries of the ingestion steps (logs/events, shop/orders, shop/user_order_totals). A step
# that failed on something transient (an object-store error, a commit that lost every race or
# whose outcome is unknown) runs again in the same run, so with the same run id: the retry finds
# a commit of the day that already landed (commit user from the run, identifier from the day)
# instead of committing it again, and files a failed attempt wrote without committing are left
# to remove_orphan_files. Waits about 5, 15 and 35 s (exponential backoff, +/- 5 s of jitter so
# that runs failing together do not retry together). Bad input is not retried (see below).
INGEST_RETRY_POLICY = dg.RetryPolicy(max_retries=3, delay=5, backoff=dg.Backoff.EXPONENTIAL,
                                     jitter=dg.Jitter.PLUS_MINUS)
# Failures a retry would only repeat: source data that is missing or does not fit the table
# (SourceDataError and the engine's SchemaError are ValueErrors, as is a partition key that is
# not a day), a table that exists with another shape, a source resource misconfigured.
PERMANENT_ERRORS = (ValueError, TableExistsError, UnsupportedFeatureError)


@contextmanager
def permanent_failures() -> Iterator[None]:
    """Turn ``PERMANENT_ERRORS`` (and ``dg.Failure``s of the source resources) raised inside into
    ``dg.Failure(allow_retries=False)``, so ``INGEST_RETRY_POLICY`` does not retry them; the
    original error stays attached as the cause."""
    try:
        yield
    except dg.Failure as exc:
        if not exc.allow_retries:
            raise
        raise dg.Failure(description=exc.description, metadata=exc.metadata, allow_retries=False) from exc
    except PERMANENT_ERRORS as exc:
        raise dg.Failure(description=f"{type(exc).__name__}: {exc}", allow_retries=False) from exc


def commit_identifier(day: str) -> int:
    """``YYYYMMDD`` of the day written.

    The commit user is the run and a run writes one day, so (user, identifier) names the commit
    and a retried step finds it instead of committing again.
    """
    return int(day.replace("-", ""))


def overwrite_day(table: pc.Table, batches: Iterator[pa.RecordBatch], *, day: str,
                  run_id: str) -> PaimonWrite:
    """Stream ``batches`` into ``table`` and replace ``day`` with them in one commit.

    The commit user is the run, so a step retried after its commit landed gets the existing
    snapshot back instead of committing again.

    Raises:
        SourceDataError: the source produced no rows; the old partition is kept and nothing
            is committed (a dynamic overwrite with no rows would replace nothing anyway).
    """
    user, identifier = f"dagster-{run_id}", commit_identifier(day)
    landed = table.find_commit(user, identifier)
    if landed is not None:
        rows = table.read([PARTITION_COLUMN], filter=[(PARTITION_COLUMN, "=", day)]).num_rows
        log.info("%s partition %s was already committed by this run as snapshot %d; not rewriting it",
                 table.name, day, landed)
        return PaimonWrite(table=table.name, snapshot_id=landed, rows_written=rows,
                           partition={PARTITION_COLUMN: day})
    properties = {"dagster.run_id": run_id, "dagster.partition": day,
                  "dagster.asset_key": LOG_EVENTS_KEY.to_user_string()}
    with table.new_write(commit_user=user, commit_identifier=identifier,
                         overwrite=True, properties=properties) as writer:
        writer.write(batches)
        if writer.rows_written == 0:
            raise SourceDataError(f"the source produced no rows for {day}; {table.name} is unchanged")
        snapshot_id = writer.commit()
        rows = writer.rows_written
    log.info("overwrote %s partition %s with %d rows as snapshot %s", table.name, day, rows, snapshot_id)
    return PaimonWrite(table=table.name, snapshot_id=snapshot_id, rows_written=rows,
                       partition={PARTITION_COLUMN: day})


def check_run_tag(context: dg.OpExecutionContext, table: str, job_name: str) -> None:
    """Warn when the run escapes the per-table run limit (e.g. an ad-hoc UI materialization)."""
    if context.run.tags.get(TABLE_TAG) != table:
        context.log.warning(f"run has no tag {TABLE_TAG}={table}, so the per-table run limit does "
                            f"not apply; launch it through {job_name} or add the tag")


@dg.op(
    out=dg.Out(PaimonWrite, io_manager_key=IO_MANAGER_KEY,
               description="Receipt of the commit; the rows live in the Paimon table."),
    tags={"paimon/operation": "overwrite-partition"},
    retry_policy=INGEST_RETRY_POLICY,
)
def ingest_log_events(context: dg.OpExecutionContext, catalog: PaimonCatalogResource,
                      log_source: LogEventSource) -> dg.Output[PaimonWrite]:
    """Write one day of log events into logs.events, replacing that day (dynamic partition overwrite)."""
    day = context.partition_key
    check_run_tag(context, TABLE, "ingest_log_events_job")
    with permanent_failures():
        table = catalog.ensure_table(TABLE, schema=SCHEMA, partition_keys=[PARTITION_COLUMN],
                                     options=TABLE_OPTIONS)
        receipt = overwrite_day(table, event_batches(log_source, day), day=day, run_id=context.run_id)
    metadata = write_metadata(table, snapshot_id=receipt.snapshot_id, partition=receipt.partition,
                              rows_written=receipt.rows_written)
    return dg.Output(receipt, metadata=metadata)


@dg.graph_asset(
    key=LOG_EVENTS_KEY,
    group_name="logs",
    partitions_def=daily_partitions,
    metadata={TABLE_METADATA_KEY: TABLE, PARTITION_EXPR_KEY: PARTITION_COLUMN},
    kinds={"paimon"},
    description="Application log events, one Paimon partition (dt) per day. Write-only append "
    "table; re-materializing a day replaces it.",
)
def log_events() -> dg.Output[PaimonWrite]:
    return ingest_log_events()
