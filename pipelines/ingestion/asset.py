"""The asset of a declared table, and the ingestion job, schedule and landing sensor that launch it.

The asset's step creates the table when it does not exist yet (atomic in paimon_core, so runs
racing to create it agree), gets the partition's data (the spec's function, or the landing
location's files for the partition) and writes it with the spec's mode in one commit whose
user names the root run, the asset and the partition: a retried step, or a re-execution from
failure, finds that commit instead of writing the rows again, however long ago it landed (the
table's commit ledger outlives expiry). A new run of a partition whose earlier run died in the
middle of a chunked write resumes that write (:mod:`pipelines.ingestion.resumption`). The step carries
the table's pool, so at most one writer of a table runs at a time however it was launched
(asset page, backfill, job, schedule, sensor, ``dg.materialize``): ``dagster.yaml`` gives every
pool one slot.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations of decorated
# functions as real types when the decorator runs.

import inspect
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dagster as dg

import paimon_core as pc
from paimon_core.errors import PaimonError
from pipelines import names
from pipelines.dagster_internals import UnresolvedAssetJobDefinition
from pipelines.executors.named import executor_named
from pipelines.ingestion.changes import consume_changes
from pipelines.ingestion.ranges import OnePartition, is_ranged, write_range
from pipelines.ingestion.resumption import earlier_runs, to_resume
from pipelines.instance_limits import ensure_pools, warn_about_gaps
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.validation import SLICE_PARAMETER
from resources import PaimonCatalogResource, PaimonWrite, commit_user_for, keys, write_metadata, write_partition
from resources.keys import (
    PARTITION_MAPPING_METADATA_KEY,
    RETRY_STRATEGY_TAG,
    TABLE_METADATA_KEY,
    TABLE_TAG,
    WRITE_MODE_METADATA_KEY,
)
from resources.metadata import INGEST_PLOTTED, column_schema, plottable
from resources.writes import landed_commits, snapshot_properties

# A partition's data: (table, Dagster partition key or None, its Paimon partition values) -> data.
Producer = Callable[[pc.Table, str | None, dict[str, str]], Any]


def declared_columns(spec: PaimonTableSpec) -> dg.TableSchema:
    """The declared columns as the UI shows them (the same form every write records)."""
    return column_schema(pc.validate_table(spec.table, schema=spec.arrow_schema(), partition_keys=spec.partition_keys,
                                           primary_keys=spec.primary_key, options=spec.table_options()))


def asset_metadata(spec: PaimonTableSpec, *, table_uri: str | None) -> dict[str, Any]:
    """Definition metadata: what the UI shows before any run, and what the IO manager reads back
    (table, mode, partition mapping)."""
    mapping = spec.partition_mapping()
    metadata: dict[str, Any] = {
        TABLE_METADATA_KEY: spec.table,
        "dagster/table_name": spec.table,
        "dagster/column_schema": declared_columns(spec),
        keys.OPTIONS_METADATA_KEY: dg.MetadataValue.json(spec.table_options()),
        keys.AUTOMATION_METADATA_KEY: automation_md(spec),
    }
    if spec.primary_key:
        metadata[keys.PRIMARY_KEY_METADATA_KEY] = ", ".join(spec.primary_key)
    if spec.partition_keys:
        metadata[keys.PARTITION_KEYS_METADATA_KEY] = ", ".join(spec.partition_keys)
    if spec.ingestion is not None:
        metadata[WRITE_MODE_METADATA_KEY] = spec.ingestion.mode
    if mapping is not None:
        metadata[PARTITION_MAPPING_METADATA_KEY] = mapping.to_metadata()
    if spec.consumers:
        metadata[keys.CONSUMERS_METADATA_KEY] = ", ".join(spec.consumers)
    if table_uri:
        metadata["dagster/uri"] = table_uri
    return metadata


def automation_md(spec: PaimonTableSpec) -> dg.MetadataValue:
    """Every sensor and schedule acting on the table, by name, with the job it launches linked
    (the job's page lists its sensor or schedule): Dagster's asset page lists only the automation
    of jobs containing the asset (ingestion), not that of the table's compaction and maintenance
    jobs. A list, not a table, so it wraps in the metadata column."""
    lines = []
    ingestion = spec.ingestion
    ingest = job_link(names.ingestion_job(spec.table))
    if ingestion is not None and ingestion.schedule:
        lines.append(f"- **{names.ingestion_schedule(spec.table)}** (schedule): each partition once it ended "
                     f"(stopped by default) → {ingest}")
    if ingestion is not None and ingestion.landing is not None and ingestion.landing_sensor:
        lines.append(f"- **{names.landing_sensor(spec.table)}** (sensor): files landing under "
                     f"`{ingestion.landing.path}` → {ingest}")
    if ingestion is not None and ingestion.changes_of is not None:
        lines.append(f"- **{names.changes_sensor(spec.table)}** (sensor): unread changes of {ingestion.changes_of} "
                     f"→ {ingest}")
    if spec.compaction.sensor:
        threshold = spec.compaction.level0_threshold
        full = names.full_compaction_job(spec.table)
        job = full if spec.full_compactions else names.compaction_job(spec.table)
        every = spec.full_compaction_every
        lines.append(f"- **{names.compaction_sensor(spec.table)}** (sensor): level 0 reaching "
                     f"{threshold if threshold else 'the compaction trigger'} → {job_link(job)}"
                     + (f"; every {every} commits → {job_link(full)}" if every else ""))
    if spec.maintenance.expire_cron:
        lines.append(f"- **{names.expire_schedule(spec.table)}** (schedule `{spec.maintenance.expire_cron}`) → "
                     f"{job_link(names.expire_job(spec.table))}")
    if spec.maintenance.orphans_cron:
        lines.append(f"- **{names.orphans_schedule(spec.table)}** (schedule `{spec.maintenance.orphans_cron}`) → "
                     f"{job_link(names.orphans_job(spec.table))}")
    lines.append(f"- **{names.watch_sensor(spec.table)}** (sensor): fails a run holding the table past its bound or "
                 "whose worker is gone; launches nothing")
    return dg.MetadataValue.md("\n".join(lines) if lines else "(none)")


def job_link(job: str) -> str:
    """A link to the job's page that needs no code location name (the UI finds the job)."""
    return f"[{job}](/guess/{job})"


def asset_kinds(spec: PaimonTableSpec) -> set[str]:
    """``paimon``, the file format (icons in the UI) and ``table``."""
    return {"paimon", spec.table_options().get("file.format", "parquet"), "table"}


@contextmanager
def permanent_failures(table: str) -> Iterator[None]:
    """Errors a retry would only repeat (bad data or declaration: paimon_core's typed errors, which
    are ValueErrors or LookupErrors, and any ValueError) fail the step in one line naming the
    table, without retrying; storage errors and lost commit races stay retryable."""
    try:
        yield
    except dg.Failure:
        raise
    except (ValueError, LookupError, NotImplementedError, PaimonError) as exc:
        if isinstance(exc, PaimonError) and not isinstance(exc, (ValueError, LookupError, NotImplementedError)):
            raise
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise dg.Failure(description=f"{table}: {first}" if table not in first else first,
                         allow_retries=False) from exc


def resource_parameters(function: Callable[..., Any]) -> list[str]:
    """The resources a source function asks for: every parameter after the context but its slice."""
    parameters = list(inspect.signature(function).parameters.values())
    return [p.name for p in parameters[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.name != SLICE_PARAMETER]


def takes_slice(function: Callable[..., Any] | None) -> bool:
    """Whether a source function produces a write step's part of the input (``ingest_slice``)."""
    return function is not None and SLICE_PARAMETER in inspect.signature(function).parameters


def code_references(spec: PaimonTableSpec, function: Callable[..., Any] | None,
                    declared_in: str | None) -> dg.CodeReferencesMetadataValue | None:
    references: list[dg.LocalFileCodeReference | dg.UrlCodeReference] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        if declared_in:
            references.append(dg.LocalFileCodeReference(file_path=declared_in, label=f"{spec.table} declaration"))
    if function is not None:
        try:
            path = inspect.getsourcefile(function)
            line = inspect.getsourcelines(function)[1]
        except (OSError, TypeError):
            path = None
        if path:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", dg.BetaWarning)
                references.append(dg.LocalFileCodeReference(file_path=path, line_number=line,
                                                            label=f"{function.__name__} (source)"))
    if not references:
        return None
    # Code references are a beta API in Dagster 1.13; they are what links the asset to its source.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.CodeReferencesMetadataValue(code_references=references)


def ensure_table(catalog: PaimonCatalogResource, spec: PaimonTableSpec,
                 report: Callable[[str], None] | None = None) -> pc.Table:
    """The spec's table, created if needed; options the declaration changed since are set (and
    ``report`` told, as are those kept: see ``PaimonCatalogResource.ensure_table``)."""
    return catalog.ensure_table(spec.table, schema=spec.arrow_schema(), partition_keys=spec.partition_keys,
                                primary_keys=spec.primary_key, options=spec.table_options(), report=report)


def ingest(context: dg.AssetExecutionContext, spec: PaimonTableSpec, catalog: PaimonCatalogResource,
           produce: Producer) -> dg.Output[PaimonWrite | None]:
    """Create the table if needed, produce the run's partition's data (each partition's, in a
    ranged run) and write it exactly once."""
    warn_about_gaps(context)
    ensure_pools(context.instance, [names.pool(spec.table)])  # for the next runs, if no sensor made it
    changed: list[str] = []

    def report(line: str) -> None:
        context.log.warning(line)
        changed.append(line)

    with permanent_failures(spec.table):
        table = ensure_table(catalog, spec, report)
    extra = {keys.INGEST_OPTIONS_CHANGED: dg.MetadataValue.text("; ".join(changed))} if changed else {}

    def write(partition_key: str | None) -> tuple[PaimonWrite, dict[str, Any]]:
        receipt, values = write_once(context, spec, table, partition_key, produce)
        return receipt, receipt_metadata(context, spec, table, values, receipt, partition_key, **extra)

    if is_ranged(context):
        return write_range(context, spec.table, write)
    receipt, metadata = write(context.partition_key if context.has_partition_key else None)
    return dg.Output(receipt, metadata=metadata)


def write_once(context: dg.AssetExecutionContext, spec: PaimonTableSpec, table: pc.Table,
               partition_key: str | None, produce: Producer) -> tuple[PaimonWrite, dict[str, str]]:
    """One partition's write, under the commit user naming (root run, asset, partition)."""
    mapping = spec.partition_mapping()
    values = mapping.values(partition_key) if mapping is not None and partition_key is not None else {}
    assert spec.ingestion is not None
    mode = spec.ingestion.mode
    asset = spec.key.to_user_string()
    run = context.run
    user = commit_user_for(run.root_run_id or run.run_id, asset, partition_key)
    with permanent_failures(spec.table):
        done, _, landed = landed_commits(table, user)
        if not done and spec.ingestion.commit_every_rows:
            user = resumed_user(context, table, asset, partition_key) or user
            _, _, landed = landed_commits(table, user)
        data = [] if landed else produce(table, partition_key, values)
        receipt = write_partition(table, data, mode=mode, partition=values, commit_user=user,
                                  properties=snapshot_properties(run_id=run.run_id, asset_key=asset,
                                                                 partition_key=partition_key, mode=mode),
                                  commit_every_rows=spec.ingestion.commit_every_rows,
                                  policy=spec.ingestion.input_policy(), report=context.log.warning)
    return receipt, values


def resumed_user(context: dg.AssetExecutionContext, table: pc.Table, asset: str,
                 partition_key: str | None) -> str | None:
    """The commit user of a dead run's unfinished chunked write of this partition, which this run
    takes over (see :mod:`pipelines.ingestion.resumption`), or None."""

    def progress(root: str) -> tuple[int, bool]:
        done, _, final = landed_commits(table, commit_user_for(root, asset, partition_key))
        return done, final

    runs = earlier_runs(context.instance, current=context.run, asset_key=context.asset_key,
                        partition_key=partition_key)
    found = to_resume(runs, progress)
    if found is None:
        return None
    root, done = found
    context.log.info(f"{table.name}: run {root} of {partition_key or 'the table'} died after {done} chunk(s) of "
                     "its write; resuming it (the chunks that landed are not written again)")
    return commit_user_for(root, asset, partition_key)


def receipt_metadata(context: dg.OpExecutionContext | dg.AssetExecutionContext, spec: PaimonTableSpec,
                     table: pc.Table, values: dict[str, str], receipt: PaimonWrite, partition_key: str | None,
                     **extra: Any) -> dict[str, Any]:
    """What a partition's materialization shows of its write and of the table after it."""
    metadata = write_metadata(table, snapshot_id=receipt.snapshot_id, partition=values,
                              rows_written=receipt.rows_written)
    metadata["dagster/column_schema"] = declared_columns(spec)  # as declared, whatever the table's history
    metadata[keys.INGEST_MODE] = receipt.mode
    metadata[keys.INGEST_COMMITS] = receipt.commits
    metadata[keys.INGEST_REUSED_COMMIT] = receipt.reused
    metadata.update(kind_metadata(receipt))
    metadata.update(extra)
    if receipt.reused:
        context.log.info(f"{spec.table}: the commit of {partition_key or 'the table'} by this run already landed as "
                         f"snapshot {receipt.snapshot_id}; not writing it again")
    return plottable(metadata, INGEST_PLOTTED)


def receipt_output(context: dg.OpExecutionContext | dg.AssetExecutionContext, spec: PaimonTableSpec, table: pc.Table,
                   values: dict[str, str], receipt: PaimonWrite, **extra: Any) -> dg.Output[PaimonWrite]:
    """The asset's output for a one-partition write: the receipt, with what the write and the
    table look like."""
    partition_key = context.partition_key if context.has_partition_key else None
    return dg.Output(receipt, metadata=receipt_metadata(context, spec, table, values, receipt, partition_key,
                                                       **extra))


def kind_metadata(receipt: PaimonWrite) -> dict[str, int]:
    """Rows per change kind written (tables taking row kinds from a column), plottable per partition."""
    if not receipt.kinds:
        return {}
    return {key: receipt.kinds.get(kind, 0) for kind, key in keys.INGEST_KIND_KEYS.items()}


def function_producer(function: Callable[..., Any], context: dg.AssetExecutionContext,
                      inputs: dict[str, Any]) -> Producer:
    """The source function's data for a partition; in a ranged run the function sees a context
    naming that one partition."""
    resources = {name: getattr(context.resources, name) for name in resource_parameters(function)
                 if name not in inputs}

    # One step writes the whole input: a function that can produce a slice is asked for none.
    whole = {SLICE_PARAMETER: None} if takes_slice(function) else {}

    def produce(table: pc.Table, partition_key: str | None, values: dict[str, str]) -> Any:
        seen = OnePartition(context, partition_key) if partition_key is not None and is_ranged(context) else context
        return function(seen, **inputs, **resources, **whole)

    return produce


def landing_producer(spec: PaimonTableSpec, context: dg.AssetExecutionContext) -> Producer:
    """The partition's landed files, read and checked against the table's columns."""
    assert spec.ingestion is not None and spec.ingestion.landing is not None
    landing = spec.ingestion.landing
    extra_columns = spec.ingestion.extra_columns

    def produce(table: pc.Table, partition_key: str | None, values: dict[str, str]) -> Any:
        files = landing.files(partition_key, values)
        if not files:
            raise dg.Failure(description=f"{spec.table}: no landed files for partition {partition_key or '-'} under "
                             f"{landing.path}", allow_retries=False)
        context.log.info(f"{spec.table}: ingesting {len(files)} landed file(s) of {partition_key or 'the table'}: "
                         + ", ".join(f.path for f in files[:5]) + (" ..." if len(files) > 5 else ""))
        return landing.read(partition_key, table.arrow_schema, table=spec.table, values=values, fill=values,
                            extra_columns=extra_columns)

    return produce


def table_asset(spec: PaimonTableSpec, *, table_uri: str | None = None, declared_in: str | None = None,
                changes_key: dg.AssetKey | None = None, catalog_name: str | None = None) -> dg.AssetsDefinition:
    """The asset that ingests ``spec``'s table (its ``ingestion`` says from where); a changes
    consumer depends on its source's asset (``changes_key``, default ``[db, table]``)."""
    ingestion = spec.ingestion
    if ingestion is None:
        raise ValueError(f"table {spec.table} declares no ingestion; use external_asset for it")
    function = ingestion.resolved_function(spec.table)
    changes = ingestion.changes_of is not None
    ins = {name: dg.AssetIn(key=dg.AssetKey(list(source.asset_key)),
                            metadata={"columns": list(source.columns)} if source.columns else None)
           for name, source in ingestion.inputs.items()}
    wanted = resource_parameters(function) if function is not None and not changes else []
    catalog_key = keys.catalog_key(catalog_name)
    resource_keys = {catalog_key, *(name for name in wanted if name not in ins)}
    metadata = asset_metadata(spec, table_uri=table_uri)
    references = code_references(spec, function, declared_in)
    if references is not None:
        metadata["dagster/code_references"] = references
    description = spec.description or (f"Paimon table {spec.table}" + (
        f", ingested from {ingestion.landing.path}" if ingestion.landing else "") + f" ({ingestion.mode}).")

    # backfill_policy is a beta parameter of dg.asset in Dagster 1.13; it is how a range of
    # partitions becomes one run, a table's declared choice, so the dependency is acknowledged here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)

        @dg.asset(
            key=spec.key, group_name=spec.group_name, description=description, owners=list(spec.owners) or None,
            tags=dict(spec.tags) or None, kinds=asset_kinds(spec), partitions_def=spec.partitions_def(),
            metadata=metadata, io_manager_key=keys.io_manager_key(catalog_name),
            required_resource_keys=resource_keys,
            backfill_policy=ingestion.dagster_backfill_policy(), freshness_policy=ingestion.freshness_policy(),
            pool=names.pool(spec.table), op_tags={keys.OPERATION_TAG: f"ingest-{ingestion.mode}"},
            retry_policy=dg.RetryPolicy(max_retries=ingestion.retries, delay=ingestion.retry_delay_seconds,
                                        backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS),
            ins=ins or None,
            deps=[changes_key or dg.AssetKey(ingestion.changes_of.split("."))] if ingestion.changes_of else None,
        )
        def _asset(context: dg.AssetExecutionContext, **inputs: Any) -> dg.Output[PaimonWrite | None]:
            catalog: PaimonCatalogResource = getattr(context.resources, catalog_key)
            if changes:
                with permanent_failures(spec.table):
                    return consume_changes(context, spec, catalog, ensure_table(catalog, spec))
            produce = (function_producer(function, context, inputs) if function is not None else
                       landing_producer(spec, context))
            return ingest(context, spec, catalog, produce)

    return _asset


def external_asset(spec: PaimonTableSpec, *, table_uri: str | None = None,
                   declared_in: str | None = None) -> dg.AssetSpec:
    """A table written outside these definitions (another engine, or an asset of the user's own
    that is merged in later): shown, compacted and maintained, never materialized here."""
    metadata = asset_metadata(spec, table_uri=table_uri)
    references = code_references(spec, None, declared_in)
    if references is not None:
        metadata["dagster/code_references"] = references
    return dg.AssetSpec(key=spec.key, group_name=spec.group_name, owners=list(spec.owners),
                        tags=dict(spec.tags), kinds=asset_kinds(spec), metadata=metadata,
                        partitions_def=spec.partitions_def(),
                        description=spec.description or f"Paimon table {spec.table} (written outside Dagster).")


def ingestion_job(spec: PaimonTableSpec, asset: dg.AssetsDefinition,
                  executor: dg.ExecutorDefinition | None) -> UnresolvedAssetJobDefinition:
    """``ingest_<db>_<table>_job``: the asset and its checks about its data, one partition per run
    (not the orphan check, which lists every directory of the table and which the cleanup job
    records, nor the instance check, which the table's watchdog records)."""
    left_out = [dg.AssetCheckKey(spec.key, name) for name in (names.ORPHANS_CHECK, names.INSTANCE_CHECK)]
    selection = dg.AssetSelection.assets(asset) - dg.AssetSelection.checks(*left_out)
    ingestion = spec.ingestion
    if ingestion is not None and ingestion.executor is not None:
        executor = executor_named(ingestion.executor, ingestion.executor_config, table=spec.table)
    elif ingestion is not None and ingestion.workers > 1 and executor is None:
        # A fanned-out write in one process would run its steps one after the other. The steps fork
        # from a server that imported the code location once, instead of each starting Python anew.
        executor = dg.multiprocess_executor.configured(
            {"max_concurrent": ingestion.workers, "start_method": {"forkserver": {}}},
            name=names.table_executor("multiprocess_executor", spec.table))
    tags = {TABLE_TAG: spec.table}
    if ingestion is not None and ingestion.workers > 1:
        # A retry of a fanned-out write re-runs every step: a re-execution from failure runs the
        # write steps that failed, not those a killed run never started, and the commit refuses
        # an incomplete set of shares. The commit still lands once (the root run's commit user).
        tags[RETRY_STRATEGY_TAG] = "ALL_STEPS"
    return dg.define_asset_job(
        names.ingestion_job(spec.table), selection=selection, tags=tags,
        executor_def=executor or dg.in_process_executor,
        description=f"Write one partition of {spec.table} ({spec.ingestion.mode if spec.ingestion else ''}) and "
        "check it.")


def ingestion_schedule(spec: PaimonTableSpec, job: UnresolvedAssetJobDefinition) -> Any:
    """``ingest_<db>_<table>_schedule``: each time partition once it ended (stopped by default:
    turn it on in the UI)."""
    assert spec.ingestion is not None
    return dg.build_schedule_from_partitioned_job(
        job, name=names.ingestion_schedule(spec.table), hour_of_day=spec.ingestion.schedule_hour,
        minute_of_hour=spec.ingestion.schedule_minute, tags={TABLE_TAG: spec.table},
        description=f"Materialize {spec.table}'s partition that just ended.")
