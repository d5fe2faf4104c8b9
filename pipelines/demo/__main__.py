"""``make demo``: ingest a few days of log events and of order changes through Dagster, re-run a day, query,
compact (shop.orders' full compactions write its changelog), keep a revenue aggregate up to date from it,
and finally expire shop.orders' old snapshots and clean its orphan files through the maintenance jobs.

Run as ``python -m pipelines.demo [--days N] [--order-days N]`` (at most the partitions its YAML
declares). Runs go into the Dagster
instance at ``$DAGSTER_HOME`` (default ``.dagster_home/`` at the repo root, seeded from
``dagster_home/dagster.yaml``), so ``dagster dev -w workspace.yaml`` shows them afterwards;
the table goes to ``$PAIMON_WAREHOUSE`` (default ``warehouse/``).
"""

from __future__ import annotations

import argparse
import datetime as dt_
import decimal
import itertools
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac

import paimon_core as pc
from pipelines import names
from pipelines.compaction.lsm import check_outcomes, format_state
from pipelines.dagster_internals import run_of_code_location
from pipelines.definitions import REPO_ROOT, defs
from pipelines.demo.log_events import PARTITION_COLUMN, TABLE
from pipelines.demo.order_source import OrderEventSource
from pipelines.demo.orders import ORDERS_SCHEMA, ORDERS_TABLE, REVENUE_TABLE, TOTALS_TABLE, order_batches
from pipelines.maintenance.expiry import expire_run_config
from pipelines.maintenance.orphans import orphans_run_config
from pipelines.maintenance.runs import maintenance_tags
from pipelines.maintenance.verdicts import SnapshotSpan, relative, retention_outcome
from pipelines.target import TableTarget, declared_targets
from resources import PaimonCatalogResource, keys
from resources.keys import COMPACTION_TAG, TRIGGER_COMMITS_TAG, TRIGGER_REASON_TAG

log = logging.getLogger(__name__)

DAGSTER_HOME_TEMPLATE = REPO_ROOT / "dagster_home" / "dagster.yaml"
DEFAULT_DAGSTER_HOME = REPO_ROOT / ".dagster_home"
# Keep the demo's output to what it prints itself: Dagster's per-event DEBUG log goes to the
# instance (visible in the UI), only warnings reach the terminal.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
SNAPSHOTS_SHOWN = 12
ORDERS_KEY = dg.AssetKey(["shop", "orders"])
USER_ORDER_TOTALS_KEY = dg.AssetKey(["shop", "user_order_totals"])
REVENUE_KEY = dg.AssetKey(["shop", "order_revenue_by_status"])
LOGS_JOB = names.ingestion_job("logs.events")
ORDERS_JOB = names.ingestion_job("shop.orders")
TOTALS_JOB = names.ingestion_job("shop.user_order_totals")
COMPACT_ORDERS_SENSOR = names.compaction_sensor("shop.orders")
REVENUE_SENSOR = names.changes_sensor("shop.order_revenue_by_status")
CONSUMER_ID = "order_revenue_by_status"
# Tags Dagster's own launches put on runs: the demo's runs carry them too, so they show on the
# sensor's and the schedule's pages in the UI.
SENSOR_TAG = "dagster/sensor_name"
PARTITION_TAG = "dagster/partition"
# The code location the README's `dagster dev -w workspace.yaml` serves: the demo's runs are its runs.
WORKSPACE_FILE = REPO_ROOT / "workspace.yaml"
LOCATION_NAME = "paimon"
TOP_USERS_SHOWN = 5
CHANGELOG_ROWS_SHOWN = 12
# Late changes to the first order day, committed as shop.orders' full-compaction.delta-commits
# commits (as a CDC connector committing every few minutes would), so a full compaction is due.
LATE_PAID, LATE_CANCELLED, LATE_REPRICED, LATE_COMMITS = 3, 2, 2, 5
# The demo's snapshots are seconds old, so the table's retention (1 h) expires none of them: the
# demo's expiry keeps the newest few whatever their age, and its orphan cleanup looks at files of
# any age (forced: the demo knows no writer is running).
DEMO_RETAIN_MIN = 5
ORPHANS_SHOWN = 3


def ensure_dagster_home() -> Path:
    """Use ``$DAGSTER_HOME`` or ``.dagster_home/``, seeding ``dagster.yaml`` from the template."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_DAGSTER_HOME).resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(DAGSTER_HOME_TEMPLATE, config)
    elif COMPACTION_TAG not in config.read_text() or "pools:" not in config.read_text():
        print(f"Note: {config} predates the compaction jobs or the writers' pools; kept as it "
              f"is. Copy {DAGSTER_HOME_TEMPLATE} over it (or delete it) to get the current settings.\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def run_job(instance: dg.DagsterInstance, job_name: str, *, partition_key: str | None = None,
            run_config: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None) -> dg.ExecutionResult:
    """One run of a job of the code location ``paimon`` of ``workspace.yaml``, in this process, into
    the instance the UI reads: created as the webserver creates runs (with the location's origin),
    so the job's, sensor's and schedule's pages list it and Re-execute launches it again."""
    partition = {PARTITION_TAG: partition_key} if partition_key is not None else {}
    return run_of_code_location(instance, WORKSPACE_FILE, LOCATION_NAME, job_name,
                                run_config={**(run_config or {}), **QUIET_RUN_CONFIG},
                                tags={**(tags or {}), **partition})


def output_of(result: dg.ExecutionResult, node: str) -> Any:
    """An op's output in a run: loaded by the job's IO manager, with the run's resources opened again."""
    assert isinstance(result, dg.JobExecutionResult)
    with result:
        return result.output_for_node(node)


def materialize_day(instance: dg.DagsterInstance, day: str) -> dg.ExecutionResult:
    """One partition of logs/events through its ingestion job (with its checks)."""
    return run_job(instance, LOGS_JOB, partition_key=day)


def plain_metadata(result: dg.ExecutionResult, key: dg.AssetKey) -> dict[str, Any]:
    """The values of one asset's materialization metadata in a run, by their last name part
    (``paimon/ingest/files`` as ``files``; the table-wide ``paimon/lsm/*`` shape is left out)."""
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == key]
    metadata = event.step_materialization_data.materialization.metadata
    return {name.rsplit("/", 1)[-1]: getattr(value, "value", value) for name, value in metadata.items()
            if not name.startswith(keys.LSM_PREFIX)}


def data_check_verdict(result: dg.ExecutionResult) -> str:
    """The partition's data-quality check (the LSM checks are shown with the compaction)."""
    checks = [c for c in result.get_asset_check_evaluations() if c.check_name == names.DATA_CHECK]
    return "check passed" if checks and all(c.passed for c in checks) else "CHECK FAILED"


def describe_run(result: dg.ExecutionResult) -> str:
    """``snapshot 3 (OVERWRITE), 20,000 rows, 1 file(s), check passed``."""
    key = result.get_asset_materialization_events()[0].asset_key
    assert key is not None
    metadata = plain_metadata(result, key)
    verdict = data_check_verdict(result)
    return (f"snapshot {metadata['snapshot_id']} ({metadata['commit_kind']}), "
            f"{metadata['rows_written']:,} rows, {metadata['files']} file(s), {verdict}")


def print_snapshots(table: pc.Table) -> None:
    snapshots = table.snapshots()
    shown = f", the last {SNAPSHOTS_SHOWN} shown" if len(snapshots) > SNAPSHOTS_SHOWN else ""
    # A primary-key table's files keep superseded versions and -D rows until compaction.
    counted = "records" if table.schema.primary_keys else "total rows"
    print(f"\nSnapshots of {table.name} ({len(snapshots)}{shown}):")
    print(f"  {'id':>4}  {'kind':<10} {'committed (UTC)':<19}  {counted:>11}  partition")
    for snap in snapshots[-SNAPSHOTS_SHOWN:]:
        when = dt_.datetime.fromtimestamp(snap.time_millis / 1000, tz=dt_.UTC)
        partition = (snap.properties or {}).get(keys.PARTITION_PROPERTY, "")
        print(f"  {snap.id:>4}  {snap.commit_kind:<10} {when:%Y-%m-%d %H:%M:%S}  "
              f"{snap.total_record_count:>11,}  {partition}")


def errors_per_service(table: pc.Table, day: str) -> pa.Table:
    """ERROR events and their mean latency per service for one day, most errors first."""
    errors = table.read(["service", "latency_ms"],
                        filter=[(PARTITION_COLUMN, "=", day), ("level", "=", "ERROR")])
    summary = errors.group_by("service").aggregate([("latency_ms", "count"), ("latency_ms", "mean")])
    return summary.sort_by([("latency_ms_count", "descending"), ("service", "ascending")])


def print_errors(table: pc.Table, day: str) -> None:
    summary = errors_per_service(table, day).to_pylist()
    print(f"\nErrors per service on {day} (filter dt = '{day}' AND level = 'ERROR'):")
    print(f"  {'service':<15} {'errors':>7}  {'mean latency ms':>15}")
    for row in summary:
        print(f"  {row['service']:<15} {row['latency_ms_count']:>7,}  {row['latency_ms_mean']:>15.1f}")


def materialize_shop_day(instance: dg.DagsterInstance, day: str) -> tuple[dg.ExecutionResult, ...]:
    """One day of shop/orders, then of shop/user_order_totals, each through its ingestion job."""
    orders = run_job(instance, ORDERS_JOB, partition_key=day)
    return orders, run_job(instance, TOTALS_JOB, partition_key=day)


def describe_orders_run(results: tuple[dg.ExecutionResult, ...]) -> str:
    """``orders snapshot 6 (APPEND): 7,191 changes in 5 commits (+I 2,000 ...) -> 1,845 live, check passed; ...``."""
    orders = plain_metadata(results[0], ORDERS_KEY)
    totals = plain_metadata(results[1], USER_ORDER_TOTALS_KEY)
    verdict = data_check_verdict(results[0])
    return (f"orders snapshot {orders['snapshot_id']} ({orders['commit_kind']}): "
            f"{orders['rows_written']:,} changes in {orders['commits']} commits (+I {orders.get('inserts', 0):,}, "
            f"-U/+U {orders.get('update_afters', 0):,}, -D {orders.get('deletes', 0):,}) -> "
            f"{orders['partition_row_count']:,} live, {verdict}; totals snapshot {totals['snapshot_id']} "
            f"({totals['commit_kind']}): {totals['partition_row_count']:,} users")


def day_changes(day: str) -> pa.Table:
    """The day's change stream again, from the same (deterministic) source the asset used."""
    source: OrderEventSource = (defs.resources or {})["order_source"]
    return pa.Table.from_batches(order_batches(source, day))


def most_changed(changes: pa.Table, *, deleted: bool) -> int:
    """The order with the most changes among those (not) deleted that day."""
    gone = pac.unique(changes.filter(pac.equal(changes["op"], "-D"))["order_id"])
    is_gone = pac.is_in(changes["order_id"], value_set=gone)
    subset = changes.filter(is_gone if deleted else pac.invert(is_gone))
    counts = subset.group_by("order_id").aggregate([("op", "count")])
    ranked = counts.sort_by([("op_count", "descending"), ("order_id", "ascending")])
    return int(ranked["order_id"][0].as_py())


def print_order_rows(rows: pa.Table, *, with_op: bool = True) -> None:
    for row in rows.to_pylist():
        op = f"{row['op']:<3} " if with_op else ""
        print(f"    {op}{row['status']:<8} {row['amount']!s:>8}  {row['updated_at']:%H:%M:%S}  user {row['user_id']}")


def print_order(table: pc.Table, changes: pa.Table, day: str, order_id: int, *, label: str) -> None:
    """One order's changes of the day, then what a reader of the table sees for it."""
    history = changes.filter(pac.equal(changes["order_id"], order_id))
    print(f"\nOrder {order_id} ({label}): its {history.num_rows} changes on {day}, in stream order:")
    print(f"    {'op':<3} {'status':<8} {'amount':>8}  updated   user")
    print_order_rows(history)
    merged = table.read(filter=[(PARTITION_COLUMN, "=", day), ("order_id", "=", order_id)])
    if merged.num_rows == 0:
        print("  merged (what readers see): absent -- the -D removed it")
        return
    print("  merged (what readers see): one row, the newest version")
    print_order_rows(merged.select(["status", "amount", "updated_at", "user_id"]), with_op=False)


def print_top_users(totals: pc.Table, day: str) -> None:
    rows = totals.read(filter=[(PARTITION_COLUMN, "=", day)]).sort_by(
        [("total_amount", "descending"), ("user_id", "ascending")]).slice(0, TOP_USERS_SHOWN)
    print(f"\nTop {TOP_USERS_SHOWN} users on {day} in {totals.name} (aggregation merge engine: "
          f"one row per order written, folded per user on read):")
    print(f"  {'user':>5}  {'orders':>6}  {'total':>9}  {'max':>8}  {'last status':<11}  statuses")
    for row in rows.to_pylist():
        print(f"  {row['user_id']:>5}  {row['order_count']:>6}  {row['total_amount']!s:>9}  "
              f"{row['max_amount']!s:>8}  {row['last_status']:<11}  {row['statuses']}")


def run_orders(instance: dg.DagsterInstance, catalog: PaimonCatalogResource, days: Sequence[str]) -> None:
    """Apply a few days of order changes, re-apply one, and show what merge-on-read makes of them."""
    print(f"\nMaterializing {len(days)} daily partitions of shop/orders and shop/user_order_totals:")
    for day in days:
        started = time.monotonic()
        results = materialize_shop_day(instance, day)
        print(f"  {day}: {describe_orders_run(results)} in {time.monotonic() - started:.1f}s")
    again = days[len(days) // 2]
    orders = catalog.table(ORDERS_TABLE)
    before = orders.read(filter=[(PARTITION_COLUMN, "=", again)]).sort_by("order_id")
    results = materialize_shop_day(instance, again)
    after = orders.read(filter=[(PARTITION_COLUMN, "=", again)]).sort_by("order_id")
    print(f"\nRe-materialized {again}: {describe_orders_run(results)}")
    print(f"  live orders in {again}: {before.num_rows:,} before, {after.num_rows:,} after, "
          f"{'identical' if before.equals(after) else 'DIFFERENT'} (same changes applied again, newest wins)")
    print_snapshots(orders)
    changes = day_changes(again)
    print_order(orders, changes, again, most_changed(changes, deleted=False), label="updated")
    print_order(orders, changes, again, most_changed(changes, deleted=True), label="cancelled")
    print_top_users(catalog.table(TOTALS_TABLE), again)
    run_compaction(instance, catalog)
    run_changelog(instance, catalog, days[0])
    run_maintenance(instance, catalog, days[-1])


# ---- compaction -----------------------------------------------------------------------------


def timed_read(table: pc.Table) -> tuple[int, float]:
    """Rows of a full merged read and the best of three read times, in milliseconds."""
    best, rows = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        rows = table.read().num_rows
        best = min(best, time.perf_counter() - started)
    return rows, best * 1000


def print_checks(table: pc.Table, state: pc.LsmState) -> None:
    for outcome in check_outcomes(table, orders_target(), state):
        verdict = "passed" if outcome.passed else f"FAILED ({outcome.severity.value})"
        print(f"  check {outcome.name}: {verdict}: {outcome.description}")


def run_requested(instance: dg.DagsterInstance, request: dg.RunRequest, sensor: str) -> dg.ExecutionResult:
    """Run what a sensor requested, tagged as the daemon tags the runs it launches for a sensor."""
    job = request.job_name or defs.resolve_sensor_def(sensor).job_name or ""
    return run_job(instance, job, run_config=request.run_config, partition_key=request.partition_key,
                   tags={**request.tags, SENSOR_TAG: sensor})


def tick(instance: dg.DagsterInstance, catalog: PaimonCatalogResource, name: str,
         cursor: str | None = None) -> dg.SensorExecutionData:
    """One evaluation of a sensor of the code location, as the daemon would run it."""
    sensor = defs.resolve_sensor_def(name)
    return sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor,
                                                        resources={"paimon_catalog": catalog}))


def compact_orders(instance: dg.DagsterInstance, catalog: PaimonCatalogResource) -> list[int]:
    """Evaluate shop.orders' compaction sensor, run what it requests; the COMPACT snapshots made."""
    name = COMPACT_ORDERS_SENSOR
    first = tick(instance, catalog, name)
    if not first.run_requests:
        print(f"\nSensor {name}: skipped: {first.skip_message}")
        return []
    [request] = first.run_requests
    [config] = [op["config"] for op in request.run_config["ops"].values()]
    print(f"\nSensor {name} (cursor -> {first.cursor}) requests run {request.run_key!r} of {request.job_name}:\n"
          f"  partitions {config['partitions']}, reason {request.tags[TRIGGER_REASON_TAG]} "
          f"({request.tags.get(TRIGGER_COMMITS_TAG, '-')} commits since the last full compaction)")
    started = time.monotonic()
    result = run_requested(instance, request, name)
    report = output_of(result, "report_compaction")
    print(f"  run {result.run_id[:8]} {'succeeded' if result.success else 'FAILED'} in "
          f"{time.monotonic() - started:.1f}s: {report['partitions_compacted']} COMPACT snapshot(s) "
          f"{report['snapshots']}, {report['files_in']} files ({report['bytes_in']:,} bytes) -> "
          f"{report['files_out']} files ({report['bytes_out']:,} bytes), {report['changelog_rows']:,} changelog rows")
    again = tick(instance, catalog, name, cursor=first.cursor)
    print(f"Sensor {name} again: {again.skip_message or again.run_requests}")
    return list(report["snapshots"])


def run_compaction(instance: dg.DagsterInstance, catalog: PaimonCatalogResource) -> None:
    """Evaluate the compaction sensor of shop.orders as the daemon would, run what it requests, show the LSM."""
    orders = catalog.table(ORDERS_TABLE)
    before = orders.lsm_state()
    partitions = sorted({b.partition for b in before.buckets})
    rows_before, read_before = timed_read(orders)
    print(f"\nLSM shape of {ORDERS_TABLE} before compaction (snapshot {before.snapshot_id}; write-only, so every "
          f"commit added a level-0 file per bucket;\ncompaction trigger "
          f"{orders.options.sorted_run_compaction_trigger}, stop-trigger {before.stop_trigger}, a full compaction "
          f"every {before.full_compaction_every} commits for the changelog):")
    print(format_state(before))
    print_checks(orders, before)
    snapshots = compact_orders(instance, catalog)
    if not snapshots:
        return
    after = orders.lsm_state()
    rows_after, read_after = timed_read(orders)
    print(f"\nLSM shape of {ORDERS_TABLE} after compaction (snapshot {after.snapshot_id}):")
    print(format_state(after, partitions=partitions))
    print_checks(orders, after)
    print(f"  full read: {rows_before:,} rows in {read_before:.1f} ms before, {rows_after:,} rows in "
          f"{read_after:.1f} ms after ({'same rows' if rows_before == rows_after else 'ROWS DIFFER'})")
    print_changelog(orders, snapshots)


# ---- changelog and the revenue aggregate -----------------------------------------------------


def print_changelog(orders: pc.Table, snapshots: Sequence[int]) -> None:
    """What the full compactions' COMPACT snapshots changed: rows per kind, then a few rows."""
    parts = [part for s in snapshots if (part := orders.read_changes(s - 1, s)).num_rows]
    if not parts:
        print(f"\nChangelog of snapshots {list(snapshots)}: none")
        return
    changes = pa.concat_tables(parts)
    counts = dict(Counter(changes.column("_row_kind").to_pylist()))
    shown = f", the first {CHANGELOG_ROWS_SHOWN}" if changes.num_rows > CHANGELOG_ROWS_SHOWN else ""
    print(f"\nChangelog written by the full compaction (snapshots {list(snapshots)}): {changes.num_rows:,} rows "
          f"{counts}{shown}:")
    print(f"    {'kind':<4} {'dt':<10} {'order_id':>14}  {'status':<8} {'amount':>8}  updated")
    for row in changes.slice(0, CHANGELOG_ROWS_SHOWN).to_pylist():
        print(f"    {row['_row_kind']:<4} {row['dt']:<10} {row['order_id']:>14}  {row['status']:<8} "
              f"{row['amount']!s:>8}  {row['updated_at']:%H:%M:%S}")


def late_changes(orders: pc.Table, day: str) -> pa.Table:
    """Late CDC for ``day``: new orders paid, others cancelled or repriced (by half), an hour later."""
    rows = orders.read(filter=[(PARTITION_COLUMN, "=", day)]).sort_by("order_id").to_pylist()
    paid = [r for r in rows if r["status"] == "new"][:LATE_PAID]
    rest = [r for r in rows if r["status"] != "new"]
    later = dt_.timedelta(hours=1)
    out = [{**r, "status": "paid", "updated_at": r["updated_at"] + later, "op": "+U"} for r in paid]
    out += [{**r, "op": "-D"} for r in rest[:LATE_CANCELLED]]
    out += [{**r, "amount": (r["amount"] / 2).quantize(decimal.Decimal("0.01")), "updated_at": r["updated_at"] + later,
             "op": "+U"} for r in rest[LATE_CANCELLED:LATE_CANCELLED + LATE_REPRICED]]
    return pa.Table.from_pylist(out, schema=ORDERS_SCHEMA)


def revenue_by_status(catalog: PaimonCatalogResource) -> dict[tuple[str, str], tuple[int, Any]]:
    """The aggregate table (groups whose orders all moved away read 0 and are left out)."""
    rows = catalog.table(REVENUE_TABLE).read().to_pylist()
    return {(r["dt"], r["status"]): (r["order_count"], r["revenue"]) for r in rows if r["order_count"] or r["revenue"]}


def direct_revenue(orders: pc.Table) -> dict[tuple[str, str], tuple[int, Any]]:
    """The same aggregate straight from shop.orders (a GROUP BY of a merged read)."""
    sums = orders.read(["dt", "status", "amount"]).group_by(["dt", "status"]).aggregate(
        [("amount", "count"), ("amount", "sum")])
    return {(r["dt"], r["status"]): (r["amount_count"], r["amount_sum"]) for r in sums.to_pylist()}


def consume_changes(instance: dg.DagsterInstance, catalog: PaimonCatalogResource) -> None:
    """Evaluate order_revenue_sensor, run order_revenue_job if it asks, and sum the run up."""
    first = tick(instance, catalog, REVENUE_SENSOR)
    if not first.run_requests:
        print(f"\nSensor order_revenue_sensor: skipped: {first.skip_message}")
        return
    [request] = first.run_requests
    result = run_requested(instance, request, REVENUE_SENSOR)
    meta = plain_metadata(result, REVENUE_KEY)
    print(f"\nSensor {REVENUE_SENSOR} requests run {request.run_key!r}; {REVENUE_KEY.to_user_string()} "
          f"{'succeeded' if result.success else 'FAILED'}: from {meta['started_from']}, "
          f"{meta['snapshots_read']} snapshot(s) [{meta['source_snapshots']}]"
          f"{' (a full read)' if meta['full_read'] else ''}; +I {meta['inserts']:,}, -U "
          f"{meta['update_befores']:,}, +U {meta['update_afters']:,}, -D "
          f"{meta['deletes']:,} -> {meta['rows_written']} aggregate rows in {meta['commits']} commit(s); "
          f"consumer now at snapshot {meta['consumer_next']}")


def print_revenue(before: dict[tuple[str, str], tuple[int, Any]], after: dict[tuple[str, str], tuple[int, Any]],
                  orders: pc.Table) -> None:
    print(f"\n{REVENUE_TABLE} (aggregation merge engine, sums per dt and status):")
    print(f"  {'dt':<10}  {'status':<8}  {'orders':>13}  {'revenue':>21}")
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key, (0, 0)), after.get(key, (0, 0))
        count = f"{new[0]:,}" if old == new or not before else f"{old[0]:,} -> {new[0]:,}"
        total = f"{new[1]}" if old == new or not before else f"{old[1]} -> {new[1]}"
        print(f"  {key[0]:<10}  {key[1]:<8}  {count:>13}  {total:>21}")
    same = after == direct_revenue(orders)
    print(f"  equal to a GROUP BY of {ORDERS_TABLE} read now: {'yes' if same else 'NO'}")


def run_changelog(instance: dg.DagsterInstance, catalog: PaimonCatalogResource, day: str) -> None:
    """Consume the changelog into the aggregate, then late changes -> full compaction -> changelog -> aggregate."""
    orders = catalog.table(ORDERS_TABLE)
    consume_changes(instance, catalog)
    before = revenue_by_status(catalog)
    print_revenue({}, before, orders)
    late = late_changes(orders, day)
    bounds = [i * late.num_rows // LATE_COMMITS for i in range(LATE_COMMITS + 1)]
    landed = [orders.write(late.slice(start, end - start)) for start, end in itertools.pairwise(bounds)]
    print(f"\nLate changes to {day}: {LATE_PAID} orders paid, {LATE_CANCELLED} cancelled, {LATE_REPRICED} repriced, "
          f"in {LATE_COMMITS} commits (snapshots {[s for s in landed if s is not None]})")
    snapshots = compact_orders(instance, catalog)
    print_changelog(orders, snapshots)
    consume_changes(instance, catalog)
    print_revenue(before, revenue_by_status(catalog), orders)
    again = tick(instance, catalog, REVENUE_SENSOR)
    print(f"Sensor {REVENUE_SENSOR} again: {again.skip_message or again.run_requests}")


# ---- maintenance ----------------------------------------------------------------------------


def orders_target() -> TableTarget:
    """shop.orders as its compaction and maintenance runs see it (from its asset's metadata)."""
    return declared_targets(defs)[ORDERS_TABLE]


def directory_bytes(table: pc.Table) -> int | None:
    """Bytes under the table's directory when it is on the local disk (what expiry and cleanup free)."""
    root = Path(table.paths.root)
    if not root.is_dir():
        return None
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def run_maintenance_job(instance: dg.DagsterInstance, job_name: str, run_config: dict[str, Any],
                        table: str, schedule: str) -> dg.ExecutionResult:
    """One maintenance run in process, tagged as its schedule's runs are."""
    return run_job(instance, job_name, run_config=run_config,
                   tags={**maintenance_tags(table), "dagster/schedule_name": schedule})


def crash_leftover(table: pc.Table) -> Path | None:
    """A data file as a writer that crashed before its commit leaves it, in a bucket directory."""
    buckets = sorted(p for p in Path(table.paths.root).glob("*=*/bucket-*") if p.is_dir())
    if not buckets:
        return None
    stray = buckets[0] / "data-00000000-crashed-writer-0.parquet"
    stray.write_bytes(b"PAR1" + bytes(4096) + b"PAR1")
    return stray


def expire_orders(instance: dg.DagsterInstance, orders: pc.Table) -> None:
    """The expiry job on shop.orders with the demo's overrides; what it deleted, and what readers still see."""
    spec = orders_target()
    before, consumer = SnapshotSpan.of(orders), orders.consumer(CONSUMER_ID)
    rows_before = orders.read().sort_by([("dt", "ascending"), ("order_id", "ascending")])
    default = retention_outcome(orders, spec)
    print(f"\nMaintenance of {ORDERS_TABLE}: {before.count} snapshots ({before.earliest}..{before.latest}); consumer "
          f"{CONSUMER_ID} resumes at snapshot {consumer}.\n  Under the table's retention (the newest "
          f"{orders.options.snapshot_num_retained_min}, and all current within "
          f"{orders.options.snapshot_time_retained_ms // 60000} min) {default.metadata['expirable_now']} snapshot(s) "
          "are expirable; check "
          f"{default.name}: {'passed' if default.passed else 'FAILED'}")
    job = names.expire_job(ORDERS_TABLE)
    config = expire_run_config(orders_target(), older_than="now", retain_min=DEMO_RETAIN_MIN)
    result = run_maintenance_job(instance, job, config, ORDERS_TABLE, names.expire_schedule(ORDERS_TABLE))
    plan = output_of(result, "expire_snapshots")
    after = SnapshotSpan.of(orders)
    rows_after = orders.read().sort_by([("dt", "ascending"), ("order_id", "ascending")])
    expired = f"snapshots {plan.snapshots[0]}..{plan.snapshots[-1]}" if plan.snapshots else "no snapshot"
    print(f"  {job} (older_than now, retain_min {DEMO_RETAIN_MIN}), run {result.run_id[:8]} "
          f"{'succeeded' if result.success else 'FAILED'}: expired {expired} ({len(plan.snapshots)}), deleting "
          f"{len(plan.data_files)} data, {len(plan.changelog_files)} changelog and {len(plan.index_files)} index "
          f"files ({plan.bytes:,} bytes) and {len(plan.metadata_files)} metadata files")
    print(f"  snapshots {before.count} -> {after.count} (now {after.earliest}..{after.latest}); latest snapshot "
          f"reads {rows_after.num_rows:,} rows, {'the same' if rows_after.equals(rows_before) else 'DIFFERENT'} as "
          f"before; consumer {CONSUMER_ID} still resumes at snapshot {orders.consumer(CONSUMER_ID)}")


def clean_orders(instance: dg.DagsterInstance, orders: pc.Table) -> None:
    """The orphan-file job on shop.orders, after a simulated crash left a file behind."""
    stray = crash_leftover(orders)
    if stray is not None:
        print(f"  simulated crash leftover: {relative(orders, str(stray))} ({stray.stat().st_size:,} bytes, "
              "written by no commit)")
    job = names.orphans_job(ORDERS_TABLE)
    result = run_maintenance_job(instance, job, orphans_run_config(
        orders_target(), older_than="now", force=True), ORDERS_TABLE, names.orphans_schedule(ORDERS_TABLE))
    done = output_of(result, "remove_orphan_files")
    shown = ", ".join(relative(orders, p) for p in done.orphans[:ORPHANS_SHOWN])
    more = f" and {len(done.orphans) - ORPHANS_SHOWN} more" if len(done.orphans) > ORPHANS_SHOWN else ""
    print(f"  {job} (older_than now, force), run {result.run_id[:8]} "
          f"{'succeeded' if result.success else 'FAILED'}: of {done.candidates} file(s) listed, "
          f"{len(done.orphans)} referenced by no snapshot or tag, deleted ({done.bytes:,} bytes)"
          f"{': ' + shown + more if shown else ''}")


def consume_after_maintenance(instance: dg.DagsterInstance, catalog: PaimonCatalogResource, day: str) -> None:
    """More late changes, their full compaction and the consumer's run: the aggregate still adds up."""
    orders = catalog.table(ORDERS_TABLE)
    late = late_changes(orders, day)
    bounds = [i * late.num_rows // LATE_COMMITS for i in range(LATE_COMMITS + 1)]
    for start, end in itertools.pairwise(bounds):
        orders.write(late.slice(start, end - start))
    compaction = tick(instance, catalog, COMPACT_ORDERS_SENSOR)
    for request in compaction.run_requests:
        run_requested(instance, request, COMPACT_ORDERS_SENSOR)
    consumer = tick(instance, catalog, REVENUE_SENSOR)
    consumed: list[str] = []
    for request in consumer.run_requests:
        meta = plain_metadata(run_requested(instance, request, REVENUE_SENSOR), REVENUE_KEY)
        consumed.append(f"{meta['snapshots_read']} snapshot(s) read from {meta['started_from']}")
    same = revenue_by_status(catalog) == direct_revenue(orders)
    print(f"  then {late.num_rows} late changes to {day} in {LATE_COMMITS} commits, "
          f"{len(compaction.run_requests)} full compaction run(s), consumer run: "
          f"{'; '.join(consumed) or 'NOT REQUESTED'};\n  {REVENUE_TABLE} equal to a GROUP BY of {ORDERS_TABLE}: "
          f"{'yes' if same else 'NO'}")


def run_maintenance(instance: dg.DagsterInstance, catalog: PaimonCatalogResource, day: str) -> None:
    """Expire shop.orders' snapshots and clean its orphans through the jobs, then keep consuming its changelog."""
    orders = catalog.table(ORDERS_TABLE)
    size_before = directory_bytes(orders)
    expire_orders(instance, orders)
    clean_orders(instance, orders)
    size_after = directory_bytes(orders)
    if size_before is not None and size_after is not None:
        print(f"  {ORDERS_TABLE} directory: {size_before:,} -> {size_after:,} bytes "
              f"({size_before - size_after:,} reclaimed)")
    consume_after_maintenance(instance, catalog, day)


def run(days: Sequence[str], order_days: Sequence[str] = ()) -> None:
    home = ensure_dagster_home()
    instance = dg.DagsterInstance.get()
    catalog: PaimonCatalogResource = (defs.resources or {})["paimon_catalog"]
    print(f"Dagster home: {home}\nWarehouse:    {catalog.warehouse}\n")
    print(f"Materializing {len(days)} daily partitions of logs/events:")
    for day in days:
        started = time.monotonic()
        result = materialize_day(instance, day)
        print(f"  {day}: {describe_run(result)} in {time.monotonic() - started:.1f}s")
    again = days[len(days) // 2]
    table = catalog.table(TABLE)
    before = table.read([PARTITION_COLUMN], filter=[(PARTITION_COLUMN, "=", again)]).num_rows
    result = materialize_day(instance, again)
    after = table.read([PARTITION_COLUMN], filter=[(PARTITION_COLUMN, "=", again)]).num_rows
    print(f"\nRe-materialized {again}: {describe_run(result)}")
    print(f"  rows in {again}: {before:,} before, {after:,} after (replaced, not appended)")
    print_snapshots(table)
    print_errors(table, days[0])
    if order_days:
        run_orders(instance, catalog, order_days)
    print(f"\nBrowse these runs: DAGSTER_HOME={home} dagster dev -w workspace.yaml -h 127.0.0.1")


def partition_keys(key: dg.AssetKey) -> list[str]:
    """The asset's daily partitions as its YAML declaration bounds them."""
    partitions = defs.resolve_assets_def(key).partitions_def
    assert partitions is not None
    return list(partitions.get_partition_keys())


def main(argv: Sequence[str] | None = None) -> None:
    log_days, order_days = partition_keys(dg.AssetKey(["logs", "events"])), partition_keys(ORDERS_KEY)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--days", type=int, default=len(log_days),
                        help=f"daily partitions of logs/events to materialize (at most {len(log_days)})")
    parser.add_argument("--order-days", type=int, default=len(order_days),
                        help=f"daily partitions of the shop assets to materialize (at most {len(order_days)})")
    args = parser.parse_args(argv)
    if not 1 <= args.days <= len(log_days) or not 1 <= args.order_days <= len(order_days):
        parser.error(f"--days must be 1..{len(log_days)} and --order-days 1..{len(order_days)}: the partitions "
                     f"declared in pipelines/demo/defs/tables/defs.yaml")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    run(log_days[:args.days], order_days[:args.order_days])


if __name__ == "__main__":
    main()
