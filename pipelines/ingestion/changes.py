"""Tables kept up to date from another Paimon table's changes: their asset and sensor.

A spec with ``ingestion.changes_of`` names a source table; its asset streams the changes the
consumer (``ingestion.consumer_id``, default the table's name) has not read, turns each batch
into rows with the spec's function and appends them to the table, each batch exactly once
(committed under the source snapshot's id, then the consumer's progress saved: see
``pipelines.ingestion.consumer``). The consumer's progress also keeps the source's expiry from taking
snapshots it has not read. ``changes_<db>_<table>_sensor`` launches the asset's job when the
source has unread snapshots with changes, from snapshot metadata only.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

from typing import Any

import dagster as dg
import pyarrow as pa

import paimon_core as pc
from paimon_core import ROW_KIND
from paimon_core.errors import DatabaseNotFoundError, TableNotFoundError
from pipelines import names
from pipelines.ingestion.consumer import CHANGE_KINDS, Consumption, consume, pending_changes
from pipelines.instance_limits import ensure_pools
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.validation import change_source_problem, typo_of, unknown_source
from resources import PaimonCatalogResource, PaimonWrite, keys
from resources.keys import CONSUMER_TAG, TABLE_TAG, TRIGGER_SNAPSHOT_TAG
from resources.metadata import plottable, write_metadata

# Change rows shown in the materialization metadata; source snapshots listed by id.
PREVIEW_ROWS = 10
SNAPSHOTS_LISTED = 20
PREVIEW_COLUMNS = 6
ACTIVE = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
          dg.DagsterRunStatus.STARTED]
# What a consumer's run charts in the asset's Plots: the changes it read, per kind.
# Rows per change kind, and rows written as on every table's writes (one type per key across tables).
PLOTTED = frozenset({*keys.CHANGES_KIND_KEYS.values(), keys.INGEST_ROWS_WRITTEN})


def consumer_id_of(spec: PaimonTableSpec) -> str:
    assert spec.ingestion is not None
    return spec.ingestion.consumer_id or spec.name


def consumer_user(consumer_id: str) -> str:
    """The commit user of a consumer's commits: fixed, so a replayed batch is recognised."""
    return f"paimon-dagster-consumer-{consumer_id}"


def source_problem(spec: PaimonTableSpec, catalog: PaimonCatalogResource) -> tuple[pc.Table | None, str | None]:
    """The consumer's source table and why it cannot feed the consumer (the words the load-time
    check uses for a source declared beside it), or ``(table, None)``; ``(None, reason)`` when the
    source does not exist (with the nearest existing name when it looks like a typo)."""
    ingestion = spec.ingestion
    assert ingestion is not None and ingestion.changes_of is not None
    name = ingestion.changes_of
    try:
        source = catalog.table(name)
    except (DatabaseNotFoundError, TableNotFoundError):
        known = existing_tables(catalog.catalog())
        if typo_of(name, known) is not None:
            return None, unknown_source(spec.table, name, known)
        return None, f"table {spec.table}: its source {name} does not exist yet"
    return source, change_source_problem(spec.table, name, primary_key=bool(source.schema.primary_keys),
                                         options=source.options, columns=source.schema.field_names,
                                         change_columns=ingestion.change_columns)


def existing_tables(catalog: pc.Catalog) -> list[str]:
    """Every ``db.table`` of the warehouse (for a did-you-mean); none before the warehouse exists."""
    try:
        return [f"{db}.{name}" for db in catalog.list_databases() for name in catalog.list_tables(db)]
    except DatabaseNotFoundError:  # also the warehouse's WarehouseNotFoundError
        return []


def preview_table(preview: pa.Table | None) -> dg.MetadataValue:
    """The first change rows read, as a Dagster table (values as text, so decimals stay exact)."""
    if preview is None or preview.num_rows == 0:
        return dg.MetadataValue.md("(none)")
    names = ["source_snapshot", ROW_KIND, *[n for n in preview.column_names
                                            if n not in ("source_snapshot", ROW_KIND)][:PREVIEW_COLUMNS]]
    records = [dg.TableRecord({name: "-" if row[name] is None else str(row[name]) for name in names})
               for row in preview.select(names).to_pylist()]
    return dg.MetadataValue.table(records=records, schema=dg.TableSchema(
        columns=[dg.TableColumn(name, "string") for name in names]))


def consumption_metadata(done: Consumption, target: pc.Table) -> dict[str, Any]:
    """Snapshots consumed, rows per change kind, commits, the consumer's position and a preview."""
    snapshots = done.snapshots
    listed = ", ".join(map(str, snapshots[:SNAPSHOTS_LISTED])) + (", ..." if len(snapshots) > SNAPSHOTS_LISTED else "")
    latest = target.latest_snapshot()
    metadata = write_metadata(target, snapshot_id=latest.id if latest is not None else None, partition={},
                              rows_written=done.rows_written)
    return {
        **metadata,
        keys.CHANGES_SOURCE: done.source,
        keys.CHANGES_CONSUMER_ID: done.consumer_id,
        keys.CHANGES_STARTED_FROM: done.start,
        keys.CHANGES_SNAPSHOTS_CONSUMED: len(snapshots),
        keys.CHANGES_SOURCE_SNAPSHOTS: listed or "-",
        keys.CHANGES_FULL_READ: any(b.initial for b in done.batches),
        **{keys.CHANGES_KIND_KEYS[kind]: done.kinds.get(kind, 0) for kind in CHANGE_KINDS},
        keys.CHANGES_COMMITS: done.commits,
        keys.CHANGES_REPLAYED_BATCHES: done.replayed,
        keys.CHANGES_CONSUMER_NEXT_SNAPSHOT: done.next_snapshot if done.next_snapshot is not None else -1,
        keys.CHANGES_PREVIEW: preview_table(done.preview),
    }


def consume_changes(context: dg.AssetExecutionContext, spec: PaimonTableSpec, catalog: PaimonCatalogResource,
                    target: pc.Table) -> dg.Output[PaimonWrite | None]:
    """Apply the source's unread changes to ``target`` with the spec's function."""
    ingestion = spec.ingestion
    assert ingestion is not None and ingestion.changes_of is not None
    transform = ingestion.resolved_function(spec.table)
    assert transform is not None
    source, reason = source_problem(spec, catalog)
    if reason is not None or source is None:
        raise dg.Failure(description=reason, allow_retries=False)
    consumer_id = consumer_id_of(spec)
    done = consume(source, target, consumer_id=consumer_id, commit_user=consumer_user(consumer_id),
                   transform=transform, columns=list(ingestion.change_columns) or None, preview_rows=PREVIEW_ROWS)
    context.log.info(f"{source.name} -> {target.name} (from {done.start}): {len(done.snapshots)} snapshot(s), "
                     f"changes {done.kinds}, {done.commits} commit(s), {done.replayed} replayed; consumer "
                     f"{consumer_id} now at snapshot {done.next_snapshot}")
    latest = target.latest_snapshot()
    receipt = PaimonWrite(table=target.name, snapshot_id=latest.id if latest is not None else None,
                          rows_written=done.rows_written, mode="append", commits=done.commits)
    return dg.Output(receipt, metadata=plottable(consumption_metadata(done, target), PLOTTED))


def active_run(instance: dg.DagsterInstance, table: str) -> dg.DagsterRun | None:
    """A run writing ``table`` that has not finished."""
    runs = instance.get_runs(filters=dg.RunsFilter(tags={TABLE_TAG: table}, statuses=ACTIVE), limit=1)
    return runs[0] if runs else None


def changes_sensor(spec: PaimonTableSpec, job_name: str, *, interval_seconds: int,
                   catalog_key: str = keys.CATALOG_KEY) -> dg.SensorDefinition:
    """``changes_<db>_<table>_sensor``: RUNNING by default (it reads snapshot metadata only).

    The cursor is the last source snapshot decided on and the run key
    ``<table>@<source snapshot>``, so one state of the source launches at most one run. While a
    run of the job is active the tick skips without moving the cursor: the run may already have
    passed the newest changes, so the next tick looks again.
    """
    assert spec.ingestion is not None and spec.ingestion.changes_of is not None
    source_name = spec.ingestion.changes_of
    consumer_id = consumer_id_of(spec)

    @dg.sensor(name=names.changes_sensor(spec.table), job_name=job_name, minimum_interval_seconds=interval_seconds,
               default_status=dg.DefaultSensorStatus.RUNNING, required_resource_keys={catalog_key},
               description=f"Launch {job_name} when {source_name} has snapshots with changes that consumer "
               f"{consumer_id} has not read; reads snapshot metadata only.")
    def _sensor(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        ensure_pools(context.instance, [names.pool(spec.table)])
        source, reason = source_problem(spec, getattr(context.resources, catalog_key))
        if reason is not None or source is None:
            return dg.SkipReason(reason)
        pending = pending_changes(source, consumer_id)
        if pending.latest is None:
            return dg.SkipReason(f"{source_name} has no snapshot yet")
        if context.cursor == str(pending.latest):
            return dg.SkipReason(f"{source_name} snapshot {pending.latest} was evaluated already")
        if not pending.due:
            context.update_cursor(str(pending.latest))
            return dg.SkipReason(f"consumer {consumer_id} is at snapshot {pending.progress} of {source_name} (latest "
                                 f"{pending.latest}) and no unread snapshot has changes")
        active = active_run(context.instance, spec.table)
        if active is not None:
            return dg.SkipReason(f"run {active.run_id} of {job_name} is {active.status.value.lower()}; looking "
                                 "again at the next tick")
        context.update_cursor(str(pending.latest))
        return dg.RunRequest(run_key=f"{spec.table}@{pending.latest}",
                             tags={TABLE_TAG: spec.table, CONSUMER_TAG: consumer_id,
                                   TRIGGER_SNAPSHOT_TAG: str(pending.latest)})

    return _sensor
