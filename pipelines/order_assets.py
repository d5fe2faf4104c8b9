"""The ``shop`` assets: a CDC-fed primary-key table and an aggregation table derived from it.

``shop/orders`` (graph-backed, op ``ingest_orders``) applies one day's change stream to the
deduplicate primary-key table ``shop.orders`` as APPEND commits of ``commit_every_rows``
changes each (one per checkpoint, as a streaming CDC sink commits). Applying the same stream
twice yields the same table (the newest change of each key wins, its -D rows remove the same
keys again), so re-running a day needs no overwrite. The table is write-only: the level-0
files the commits add are folded by the dedicated compaction job (``pipelines.compaction``).

``shop/user_order_totals`` recomputes one day of the aggregation table
``shop.user_order_totals`` from the live orders of that day: one contribution row per order,
folded per user by the merge engine, replacing the day's partition so nothing is counted twice.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac

import paimon_core as pc
from pipelines.assets import (
    INGEST_RETRY_POLICY,
    IO_MANAGER_KEY,
    TABLE_TAG,
    check_run_tag,
    commit_identifier,
    permanent_failures,
)
from pipelines.landing import SourceDataError
from pipelines.orders import (
    CDC_KINDS,
    CONTRIBUTION_COLUMNS,
    OP_COLUMN,
    ORDERS_OPTIONS,
    ORDERS_PRIMARY_KEY,
    ORDERS_SCHEMA,
    ORDERS_TABLE,
    PARTITION_COLUMN,
    TOTALS_OPTIONS,
    TOTALS_PRIMARY_KEY,
    TOTALS_SCHEMA,
    TOTALS_TABLE,
    order_batches,
    user_contributions,
)
from pipelines.partitions import daily_partitions
from resources import OrderEventSource, PaimonCatalogResource, PaimonWrite, write_metadata
from resources.io_manager import COLUMNS_METADATA_KEY, PARTITION_EXPR_KEY, TABLE_METADATA_KEY

log = logging.getLogger(__name__)

ORDERS_KEY = dg.AssetKey(["shop", "orders"])
USER_ORDER_TOTALS_KEY = dg.AssetKey(["shop", "user_order_totals"])
# Defined here with its siblings so that pipelines.lsm can list it without importing the asset.
REVENUE_KEY = dg.AssetKey(["shop", "order_revenue_by_status"])
ORDERS_JOB = "ingest_orders_job"
# Runs of the shop job carry this tag; dagster.yaml allows one such run at a time. It also
# covers shop.user_order_totals, which only this job writes and only from shop.orders.
ORDERS_RUN_TAGS = {TABLE_TAG: ORDERS_TABLE}
# Names of the change kinds in the materialization metadata.
KIND_METADATA = {"+I": "cdc_inserts", "-U": "cdc_update_befores", "+U": "cdc_update_afters",
                 "-D": "cdc_deletes"}
# Snapshot properties of a day's commits: which chunk of the day's stream, and whether it was the last.
CHUNK_PROPERTY = "dagster.chunk"
FINAL_CHUNK_PROPERTY = "dagster.final_chunk"


@dataclass(frozen=True, slots=True)
class AppliedChanges:
    """What applying a day's change stream did: the last commit's receipt and the rows per kind.

    ``reused`` is true when a retried step found commits of its run already landed: it then
    skipped their changes (counted in neither ``kinds`` nor ``rows_written``); when the whole
    day had landed, the stream was not read at all. ``commits`` counts the commits made now.
    """

    receipt: PaimonWrite
    kinds: dict[str, int] = field(default_factory=dict)
    reused: bool = False
    commits: int = 0


def commit_user(run_id: str) -> str:
    """The run is the writer: (run, day) names one commit, so a retried step can find it."""
    return f"dagster-{run_id}"


def chunk_user(run_id: str, chunk: int) -> str:
    """The commit user of a day's ``chunk``-th commit (the first keeps the run's own user).

    Each commit of a day gets its own user with the day as identifier, so a single-commit day
    looks exactly as before and a retried step finds every chunk that landed.
    """
    return commit_user(run_id) if chunk == 0 else f"{commit_user(run_id)}-{chunk}"


def count_kinds(batches: Iterable[pa.RecordBatch], counts: Counter[str]) -> Iterator[pa.RecordBatch]:
    """Pass ``batches`` through, adding up their ``op`` values (one Arrow kernel per batch)."""
    for batch in batches:
        for entry in pac.value_counts(batch.column(OP_COLUMN)).to_pylist():
            counts[entry["values"]] += entry["counts"]
        yield batch


def chunked(batches: Iterable[pa.RecordBatch], rows_per_chunk: int) -> Iterator[tuple[int, pa.RecordBatch]]:
    """``(chunk, slice)`` pairs: the stream cut into chunks of exactly ``rows_per_chunk`` rows.

    Slices never straddle a chunk boundary; 0 keeps the whole stream in chunk 0. The cut
    depends only on row positions, so re-reading the same stream gives the same chunks.
    """
    position = 0
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            chunk = position // rows_per_chunk if rows_per_chunk else 0
            room = (chunk + 1) * rows_per_chunk - position if rows_per_chunk else batch.num_rows
            piece = batch.slice(offset, min(room, batch.num_rows - offset))
            yield chunk, piece
            offset += piece.num_rows
            position += piece.num_rows


def landed_chunks(table: pc.Table, *, day: str, run_id: str) -> tuple[int, int | None, bool]:
    """How many leading chunks of ``day`` this run already committed, the last one's snapshot,
    and whether that one was the day's final chunk."""
    identifier, chunk, snapshot_id = commit_identifier(day), 0, None
    while (landed := table.find_commit(chunk_user(run_id, chunk), identifier)) is not None:
        snapshot_id = landed
        chunk += 1
        properties = table.snapshot(landed).properties or {}
        if properties.get(FINAL_CHUNK_PROPERTY, "true") == "true":
            return chunk, snapshot_id, True
    return chunk, snapshot_id, False


def apply_day(table: pc.Table, batches: Iterable[pa.RecordBatch], *, day: str, run_id: str,
              commit_every_rows: int = 0) -> AppliedChanges:
    """Stream one day's changes into ``table`` as APPEND commits (row kinds from ``op``).

    With ``commit_every_rows`` > 0 the writer commits after every that many changes, as a
    streaming CDC sink commits at each checkpoint; each commit adds one level-0 sorted run to
    every bucket it touches, which the compaction sensor later folds (the table is write-only).
    0 applies the whole day in one commit.

    The run's commits are looked up before ``batches`` is touched, so a step retried after the
    day landed neither regenerates nor re-reads it, and one retried after some chunks landed
    skips their changes and continues with the next chunk.

    Raises:
        SourceDataError: the stream was empty; nothing is committed.
    """
    if commit_every_rows < 0:
        raise ValueError(f"commit_every_rows must be >= 0, got {commit_every_rows}")
    identifier = commit_identifier(day)
    partition = {PARTITION_COLUMN: day}
    done, landed, final = landed_chunks(table, day=day, run_id=run_id)
    if final:
        assert landed is not None
        log.info("%s changes of %s were already committed by this run (last as snapshot %d); not applying "
                 "them again", table.name, day, landed)
        return AppliedChanges(PaimonWrite(table.name, landed, 0, partition), reused=True)
    counts: Counter[str] = Counter()
    properties = {"dagster.run_id": run_id, "dagster.partition": day,
                  "dagster.asset_key": ORDERS_KEY.to_user_string()}
    pieces = ((chunk, piece) for chunk, piece in chunked(batches, commit_every_rows) if chunk >= done)
    snapshot_id, rows, commits = landed, 0, 0
    current = next(pieces, None)
    if current is None and not done:
        raise SourceDataError(f"the source produced no changes for {day}; {table.name} is unchanged")
    while current is not None:
        chunk = current[0]
        with table.new_write(commit_user=chunk_user(run_id, chunk), commit_identifier=identifier,
                             properties=properties) as writer:
            while current is not None and current[0] == chunk:
                writer.write(count_kinds([current[1]], counts))
                current = next(pieces, None)
            last = current is None
            snapshot_id = writer.commit(properties={CHUNK_PROPERTY: str(chunk),
                                                    FINAL_CHUNK_PROPERTY: str(last).lower()})
            rows += writer.rows_written
            commits += 1
    log.info("applied %d changes of %s to %s in %d commit(s), the last as snapshot %s", rows, day, table.name,
             commits, snapshot_id)
    return AppliedChanges(PaimonWrite(table.name, snapshot_id, rows, partition),
                          kinds={kind: counts.get(kind, 0) for kind in CDC_KINDS}, reused=done > 0,
                          commits=commits)


def replace_partition(table: pc.Table, data: pa.Table, *, day: str, run_id: str,
                      asset_key: dg.AssetKey) -> PaimonWrite:
    """Replace ``day`` of ``table`` with ``data`` (static partition overwrite), once per run.

    An empty ``data`` still commits: the day is then emptied, as its source is.
    """
    user, identifier = commit_user(run_id), commit_identifier(day)
    partition = {PARTITION_COLUMN: day}
    landed = table.find_commit(user, identifier)
    if landed is not None:
        log.info("%s partition %s was already replaced by this run as snapshot %d", table.name, day, landed)
        return PaimonWrite(table.name, landed, data.num_rows, partition)
    properties = {"dagster.run_id": run_id, "dagster.partition": day,
                  "dagster.asset_key": asset_key.to_user_string()}
    snapshot_id = table.write(data, overwrite=partition, commit_user=user, commit_identifier=identifier,
                              properties=properties)
    return PaimonWrite(table.name, snapshot_id, data.num_rows, partition)


def changes_metadata(applied: AppliedChanges) -> dict[str, int | bool]:
    """Rows per change kind (plottable per partition in the UI), the commits made and whether
    commits of an earlier attempt were reused."""
    return {**{KIND_METADATA[kind]: applied.kinds.get(kind, 0) for kind in CDC_KINDS},
            "commits": applied.commits, "reused_commit": applied.reused}


@dg.op(
    out=dg.Out(PaimonWrite, io_manager_key=IO_MANAGER_KEY,
               description="Receipt of the commit; the changes live in the Paimon table."),
    tags={"paimon/operation": "apply-changes"},
    retry_policy=INGEST_RETRY_POLICY,
)
def ingest_orders(context: dg.OpExecutionContext, catalog: PaimonCatalogResource,
                  order_source: OrderEventSource) -> dg.Output[PaimonWrite]:
    """Apply one day of order changes (+I/-U/+U/-D) to shop.orders as APPEND commits of
    ``commit_every_rows`` changes each (the source's setting; 0: one commit)."""
    day = context.partition_key
    check_run_tag(context, ORDERS_TABLE, ORDERS_JOB)
    with permanent_failures():
        table = catalog.ensure_table(ORDERS_TABLE, schema=ORDERS_SCHEMA, partition_keys=[PARTITION_COLUMN],
                                     primary_keys=ORDERS_PRIMARY_KEY, options=ORDERS_OPTIONS)
        applied = apply_day(table, order_batches(order_source, day), day=day, run_id=context.run_id,
                            commit_every_rows=order_source.commit_every_rows)
    receipt = applied.receipt
    metadata = write_metadata(table, snapshot_id=receipt.snapshot_id, partition=receipt.partition,
                              rows_written=receipt.rows_written)
    metadata["live_orders"] = metadata["dagster/partition_row_count"]
    return dg.Output(receipt, metadata={**metadata, **changes_metadata(applied)})


@dg.graph_asset(
    key=ORDERS_KEY,
    group_name="shop",
    partitions_def=daily_partitions,
    metadata={TABLE_METADATA_KEY: ORDERS_TABLE, PARTITION_EXPR_KEY: PARTITION_COLUMN},
    kinds={"paimon"},
    description="Shop orders, one Paimon partition (dt) per creation day: a write-only primary-key "
    "table (dt, order_id), merge-engine deduplicate, fed by the day's CDC stream with each row's "
    "kind in its op column (rowkind.field). Readers see the newest version of every order; "
    "cancelled orders are deleted. Re-materializing a day applies the same changes again and "
    "leaves the same orders.",
)
def shop_orders() -> dg.Output[PaimonWrite]:
    return ingest_orders()


@dg.asset(
    key=USER_ORDER_TOTALS_KEY,
    group_name="shop",
    partitions_def=daily_partitions,
    ins={"orders": dg.AssetIn(key=ORDERS_KEY, metadata={COLUMNS_METADATA_KEY: list(CONTRIBUTION_COLUMNS)})},
    io_manager_key=IO_MANAGER_KEY,
    metadata={TABLE_METADATA_KEY: TOTALS_TABLE, PARTITION_EXPR_KEY: PARTITION_COLUMN},
    kinds={"paimon"},
    op_tags={"paimon/operation": "overwrite-partition"},
    retry_policy=INGEST_RETRY_POLICY,
    description="Orders per user and day, showing the aggregation merge engine: one row per live "
    "order is written to the primary-key table (dt, user_id) and Paimon folds them per user "
    "(order_count and total_amount sum, max_amount max, last_status last_non_null_value, statuses "
    "distinct listagg, last_updated_at max). Each run recomputes the day from the orders "
    "partition and replaces it (static partition overwrite), so a re-run replaces the "
    "contributions instead of summing them a second time.",
)
def user_order_totals(context: dg.AssetExecutionContext, catalog: PaimonCatalogResource,
                      orders: pa.Table) -> dg.Output[PaimonWrite]:
    """Rebuild one day of shop.user_order_totals from that day's live orders."""
    day = context.partition_key
    check_run_tag(context.op_execution_context, ORDERS_TABLE, ORDERS_JOB)
    with permanent_failures():
        table = catalog.ensure_table(TOTALS_TABLE, schema=TOTALS_SCHEMA, partition_keys=[PARTITION_COLUMN],
                                     primary_keys=TOTALS_PRIMARY_KEY, options=TOTALS_OPTIONS)
        receipt = replace_partition(table, user_contributions(orders, day), day=day, run_id=context.run.run_id,
                                    asset_key=USER_ORDER_TOTALS_KEY)
    metadata = write_metadata(table, snapshot_id=receipt.snapshot_id, partition=receipt.partition,
                              rows_written=receipt.rows_written)
    metadata["users"] = metadata["dagster/partition_row_count"]
    return dg.Output(receipt, metadata=metadata)
