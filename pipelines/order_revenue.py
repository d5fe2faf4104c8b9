"""``shop/order_revenue_by_status``: revenue and orders per day and status, from shop.orders' changelog.

shop.orders produces its changelog at full compaction (``changelog-producer = full-compaction``):
the compaction sensor's full compactions write, for every order that changed since the last
one, a ``+I`` (new), ``-U``/``+U`` (before and after an update) or ``-D`` (cancelled). The asset
streams those changes with its own consumer id and adds each batch to the aggregation table
``shop.order_revenue_by_status`` (key ``dt, status``; ``order_count`` and ``revenue`` summed):
``+I``/``+U`` add the order to its status, ``-U``/``-D`` take it away, so an order paid moves
from ``new`` to ``paid``. Each run reads what the consumer has not read yet and stops at the
latest snapshot; batches land exactly once (see ``pipelines.changelog``).

``order_revenue_sensor`` launches ``order_revenue_job`` when shop.orders has snapshots with
changes the consumer has not read, from snapshot metadata only.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from paimon_core import ROW_KIND
from paimon_core.errors import DatabaseNotFoundError, TableNotFoundError
from pipelines.assets import TABLE_TAG, check_run_tag
from pipelines.changelog import CHANGE_KINDS, Consumption, consume, pending_changes
from pipelines.lsm import TRIGGER_SNAPSHOT_TAG, sensor_interval_seconds
from pipelines.order_assets import ORDERS_KEY, REVENUE_KEY
from pipelines.orders import (
    ORDERS_TABLE,
    REVENUE_OPTIONS,
    REVENUE_PRIMARY_KEY,
    REVENUE_SCHEMA,
    REVENUE_SOURCE_COLUMNS,
    REVENUE_TABLE,
    revenue_deltas,
)
from resources import PaimonCatalogResource, column_schema
from resources.io_manager import TABLE_METADATA_KEY

REVENUE_JOB = "order_revenue_job"
# The consumer's id on shop.orders (its progress: shop.orders/consumer/consumer-<id>) and the
# fixed commit user of its commits to shop.order_revenue_by_status.
CONSUMER_ID = "order_revenue_by_status"
CONSUMER_USER = f"paimon-dagster-consumer-{CONSUMER_ID}"
# Runs that write the aggregate carry paimon/table=<it>: one at a time (dagster.yaml), which
# the exactly-once scheme needs (two runs of one consumer would read the same batches).
REVENUE_RUN_TAGS = {TABLE_TAG: REVENUE_TABLE}
CONSUMER_TAG = "paimon/consumer"
# Change rows shown in the materialization metadata, and the columns read from shop.orders.
PREVIEW_ROWS = 10
SOURCE_COLUMNS = ("order_id", *REVENUE_SOURCE_COLUMNS)
# Source snapshots listed by id in the metadata (the count is always there).
SNAPSHOTS_LISTED = 20
KIND_METADATA = {"+I": "changelog_inserts", "-U": "changelog_update_befores", "+U": "changelog_update_afters",
                 "-D": "changelog_deletes"}
ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
          dg.DagsterRunStatus.STARTED]


def changes_unusable(orders: pc.Table) -> str | None:
    """Why the orders table's changes cannot feed the aggregate, or None.

    Without a changelog producer a deduplicate table's changes are its merged delta files:
    updates arrive without their before-image, so the old status would keep its count.
    """
    if orders.schema.primary_keys and orders.options.changelog_producer == "none":
        return (f"{orders.name} has changelog-producer none: its changes carry no before-images (-U), so "
                "they cannot maintain a sum; set changelog-producer (the pipeline uses full-compaction)")
    return None


def update_revenue(orders: pc.Table, revenue: pc.Table) -> Consumption:
    """Apply the orders' unread changes to the revenue table (exactly once per source snapshot)."""
    return consume(orders, revenue, consumer_id=CONSUMER_ID, commit_user=CONSUMER_USER, transform=revenue_deltas,
                   columns=SOURCE_COLUMNS, preview_rows=PREVIEW_ROWS)


def preview_table(preview: pa.Table | None) -> dg.MetadataValue:
    """The first change rows read, as a Dagster table (amounts as exact strings)."""
    columns = [("source snapshot", "int"), ("row kind", "string"), ("dt", "string"), ("order_id", "int"),
               ("status", "string"), ("amount", "string")]
    rows = preview.to_pylist() if preview is not None else []
    records = [dg.TableRecord({
        "source snapshot": row["source_snapshot"], "row kind": row[ROW_KIND], "dt": row["dt"],
        "order_id": row["order_id"], "status": row["status"] or "-",
        "amount": str(row["amount"]) if row["amount"] is not None else "-"}) for row in rows]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(
        columns=[dg.TableColumn(name, kind) for name, kind in columns]))


def consumption_metadata(done: Consumption, revenue: pc.Table) -> dict[str, Any]:
    """Snapshots consumed, rows per change kind, commits, the consumer's position and a preview."""
    snapshots = done.snapshots
    listed = ", ".join(map(str, snapshots[:SNAPSHOTS_LISTED])) + (", ..." if len(snapshots) > SNAPSHOTS_LISTED else "")
    latest = revenue.latest_snapshot()
    return {
        "source": done.source,
        "consumer_id": done.consumer_id,
        "started_from": done.start,
        "snapshots_consumed": len(snapshots),
        "source_snapshots": listed or "-",
        "full_read": any(b.initial for b in done.batches),
        **{KIND_METADATA[kind]: done.kinds.get(kind, 0) for kind in CHANGE_KINDS},
        "rows_written": done.rows_written,
        "commits": done.commits,
        "replayed_batches": done.replayed,
        "consumer_next_snapshot": done.next_snapshot if done.next_snapshot is not None else -1,
        "snapshot_id": latest.id if latest is not None else -1,
        "changes_preview": preview_table(done.preview),
        "dagster/row_count": revenue.read(list(REVENUE_PRIMARY_KEY)).num_rows,
        "dagster/table_name": revenue.name,
        "dagster/uri": revenue.uri,
        "dagster/column_schema": column_schema(revenue.arrow_schema),
    }


@dg.asset(
    key=REVENUE_KEY,
    group_name="shop",
    deps=[ORDERS_KEY],
    metadata={TABLE_METADATA_KEY: REVENUE_TABLE},
    kinds={"paimon"},
    op_tags={"paimon/operation": "consume-changelog"},
    description="Revenue and order count per day (dt) and status, kept up to date from shop.orders' "
    "changelog (produced by its full compactions): a consumer with its own id streams the changes it "
    "has not read and adds them to the aggregation table shop.order_revenue_by_status (+I/+U add the "
    "order, -U/-D take it away; order_count and revenue summed). Every batch lands exactly once: "
    "committed under the source snapshot's id, then the consumer's progress is saved, and a "
    "re-run skips what already landed. Launched by order_revenue_sensor after full compactions.",
)
def order_revenue_by_status(context: dg.AssetExecutionContext,
                            catalog: PaimonCatalogResource) -> dg.MaterializeResult:
    """Consume shop.orders' unread changes into shop.order_revenue_by_status."""
    check_run_tag(context.op_execution_context, REVENUE_TABLE, REVENUE_JOB)
    try:
        orders = catalog.table(ORDERS_TABLE)
    except (DatabaseNotFoundError, TableNotFoundError):
        raise dg.Failure(f"{ORDERS_TABLE} does not exist yet; materialize shop/orders first") from None
    reason = changes_unusable(orders)
    if reason is not None:
        raise dg.Failure(reason)
    revenue = catalog.ensure_table(REVENUE_TABLE, schema=REVENUE_SCHEMA, primary_keys=REVENUE_PRIMARY_KEY,
                                   options=REVENUE_OPTIONS)
    done = update_revenue(orders, revenue)
    context.log.info(f"{ORDERS_TABLE} -> {REVENUE_TABLE} (from {done.start}): {len(done.snapshots)} snapshot(s) "
                     f"{done.snapshots}, changes {done.kinds}, {done.commits} commit(s), {done.replayed} replayed; "
                     f"consumer {CONSUMER_ID} now at snapshot {done.next_snapshot}")
    return dg.MaterializeResult(metadata=consumption_metadata(done, revenue))


order_revenue_job = dg.define_asset_job(
    REVENUE_JOB,
    selection=dg.AssetSelection.assets(order_revenue_by_status),
    tags=REVENUE_RUN_TAGS,
    description="Apply shop.orders' unread changelog to shop.order_revenue_by_status (one run per table "
    "at a time).",
)


# ---- sensor ---------------------------------------------------------------------------------


def active_run(instance: dg.DagsterInstance) -> dg.DagsterRun | None:
    """A run writing the aggregate that has not finished."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags=REVENUE_RUN_TAGS, statuses=ACTIVE), limit=1)
    return runs[0] if runs else None


def evaluate_revenue(context: dg.SensorEvaluationContext,
                     catalog: PaimonCatalogResource) -> dg.RunRequest | dg.SkipReason:
    """One tick of ``order_revenue_sensor``.

    The cursor is the last orders snapshot decided on and the run key
    ``<aggregate>@<orders snapshot>``, so one state of shop.orders launches at most one run.
    While a run of the job is active the tick skips without moving the cursor: the run may
    already have passed the newest changes, so the next tick looks again.
    """
    try:
        orders = catalog.table(ORDERS_TABLE)
    except (DatabaseNotFoundError, TableNotFoundError):
        return dg.SkipReason(f"{ORDERS_TABLE} does not exist yet")
    reason = changes_unusable(orders)
    if reason is not None:
        return dg.SkipReason(reason)
    pending = pending_changes(orders, CONSUMER_ID)
    if pending.latest is None:
        return dg.SkipReason(f"{ORDERS_TABLE} has no snapshot yet")
    if context.cursor == str(pending.latest):
        return dg.SkipReason(f"{ORDERS_TABLE} snapshot {pending.latest} was evaluated already")
    if not pending.due:
        context.update_cursor(str(pending.latest))
        return dg.SkipReason(f"consumer {CONSUMER_ID} is at snapshot {pending.progress} of {ORDERS_TABLE} (latest "
                             f"{pending.latest}) and no unread snapshot has changes; written rows become "
                             "changes at the next full compaction")
    active = active_run(context.instance)
    if active is not None:
        return dg.SkipReason(f"run {active.run_id} of {REVENUE_JOB} is {active.status.value.lower()}; looking "
                             "again at the next tick")
    context.update_cursor(str(pending.latest))
    why = ("first run" if pending.progress is None else
           f"changes up to snapshot {pending.newest_change}" if pending.newest_change is not None else
           "far behind")
    context.log.info(f"{ORDERS_TABLE} snapshot {pending.latest}: consumer {CONSUMER_ID} at {pending.progress}, "
                     f"{why}; requesting {REVENUE_JOB}")
    return dg.RunRequest(run_key=f"{REVENUE_TABLE}@{pending.latest}",
                         tags={**REVENUE_RUN_TAGS, CONSUMER_TAG: CONSUMER_ID,
                               TRIGGER_SNAPSHOT_TAG: str(pending.latest)})


@dg.sensor(
    name="order_revenue_sensor",
    job_name=REVENUE_JOB,
    minimum_interval_seconds=sensor_interval_seconds(),  # $PAIMON_COMPACTION_SENSOR_INTERVAL, as the compaction sensors
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Launch {REVENUE_JOB} when {ORDERS_TABLE} has snapshots with changes (its full "
    f"compactions' changelog) that consumer {CONSUMER_ID} has not read; reads snapshot metadata only.",
)
def order_revenue_sensor(context: dg.SensorEvaluationContext,
                         catalog: PaimonCatalogResource) -> dg.RunRequest | dg.SkipReason:
    return evaluate_revenue(context, catalog)
