"""The ingestion asset of a table with ``workers > 1``: a partition written by many steps, committed once.

Paimon's two-phase write on Dagster's executor: a plan step fans the partition out to
``workers`` write steps (a ``DynamicOut``), each writes its share into files and hands its
commit messages on, and one commit step makes them one snapshot. The steps run wherever the
job's executor puts them (processes, Dask workers, Kubernetes pods); what travels between them
is a few kilobytes of messages per step, through the run's IO manager.

How the input is shared follows the table (as Paimon's writers do): a bucketed table gives each
step the buckets it owns, so every step reads the whole input and writes a part of it; an
append table without buckets gives each step its share of the partition's landed files
(balanced by size), or calls the source function with ``ingest_slice`` so it produces its
share. Exactly once as a single-step write: the whole write is one commit of the user that
names (root run, asset, partition), which steps check before writing and the commit step
before committing.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations as real types.

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from pipelines import names
from pipelines.ingestion.asset import (
    asset_kinds,
    asset_metadata,
    code_references,
    ensure_table,
    permanent_failures,
    receipt_output,
    resource_parameters,
)
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.validation import SLICE_PARAMETER
from resources import PaimonCatalogResource, PaimonWrite, commit_user_for, keys
from resources.landing_location import LandedFile
from resources.peak_memory import peak_rss_mib, reset_peak_rss
from resources.write_shares import WriteShare, commit_shares, prepare_share
from resources.writes import snapshot_properties


@dataclass(frozen=True, slots=True)
class IngestSlice:
    """Write step ``index`` of ``count`` of a partition: the buckets it owns (``sharded``), or
    its share of the input (``files``: its landed files; a source function gets the slice)."""

    index: int
    count: int
    sharded: bool
    files: tuple[str, ...] | None = None


def plan_slices(workers: int, *, sharded: bool, files: Sequence[LandedFile] | None) -> list[IngestSlice]:
    """The write steps of a partition.

    Sharded (bucketed tables): ``workers`` steps, each owning its buckets of the whole input.
    Otherwise each step gets a share of ``files``, largest first to the least loaded step (at
    most one step per file), or, for a source function (``files`` None), its slice number.
    """
    if sharded:
        return [IngestSlice(i, workers, True) for i in range(workers)]
    if files is None:
        return [IngestSlice(i, workers, False) for i in range(workers)]
    count = max(1, min(workers, len(files)))
    loads: list[tuple[int, int, list[str]]] = [(0, i, []) for i in range(count)]
    heapq.heapify(loads)
    for landed in sorted(files, key=lambda f: (-f.size, f.path)):
        size, index, paths = heapq.heappop(loads)
        paths.append(landed.path)
        heapq.heappush(loads, (size + landed.size, index, paths))
    return [IngestSlice(index, count, False, tuple(sorted(paths)))
            for _, index, paths in sorted(loads, key=lambda load: load[1])]


def _partition(context: dg.OpExecutionContext, spec: PaimonTableSpec) -> tuple[str | None, dict[str, str]]:
    key = context.partition_key if context.has_partition_key else None
    mapping = spec.partition_mapping()
    return key, (mapping.values(key) if mapping is not None and key is not None else {})


def _user(context: dg.OpExecutionContext, spec: PaimonTableSpec, key: str | None) -> str:
    run = context.run
    return commit_user_for(run.root_run_id or run.run_id, spec.key.to_user_string(), key)


@dataclass(frozen=True, slots=True)
class _Steps:
    """What the three ops of a fanned-out table share."""

    spec: PaimonTableSpec
    sharded: bool
    wanted: tuple[str, ...]  # resources the source function asks for
    retry: dg.RetryPolicy
    pool: str
    catalog_key: str  # the resource keys of the table's warehouse
    io_manager_key: str


def _plan_op(steps: _Steps) -> dg.OpDefinition:
    spec = steps.spec
    ingestion = spec.ingestion
    assert ingestion is not None
    landing = ingestion.landing

    @dg.op(name=names.plan_writes_op(spec.table), out=dg.DynamicOut(IngestSlice),
           required_resource_keys={steps.catalog_key}, pool=steps.pool, tags={keys.OPERATION_TAG: "plan-writes"})
    def plan_writes(context: dg.OpExecutionContext) -> Any:
        """Create the table if needed and fan the partition out to its write steps."""
        key, values = _partition(context, spec)
        with permanent_failures(spec.table):
            ensure_table(getattr(context.resources, steps.catalog_key), spec, context.log.warning)
        files = None
        if landing is not None and not steps.sharded:
            files = landing.files(key, values)
            if not files:
                raise dg.Failure(description=f"{spec.table}: no landed files for partition {key or '-'} under "
                                 f"{landing.path}", allow_retries=False)
        slices = plan_slices(ingestion.workers, sharded=steps.sharded, files=files)
        how = "each writing its buckets of the whole input" if steps.sharded else "each its share of the input"
        context.log.info(f"{spec.table}: {key or 'the table'} in {len(slices)} write step(s), {how}")
        for piece in slices:
            yield dg.DynamicOutput(piece, mapping_key=f"w{piece.index}")

    return plan_writes


def _write_op(steps: _Steps) -> dg.OpDefinition:
    spec = steps.spec
    ingestion = spec.ingestion
    assert ingestion is not None
    function = ingestion.resolved_function(spec.table)
    landing = ingestion.landing
    takes_slice = function is not None and SLICE_PARAMETER in resource_parameters(function)

    @dg.op(name=names.write_share_op(spec.table),
           ins={"ingest_slice": dg.In(IngestSlice), **{n: dg.In(dg.Any) for n in ingestion.inputs}},
           required_resource_keys={steps.catalog_key, *steps.wanted}, retry_policy=steps.retry, pool=steps.pool,
           tags={keys.OPERATION_TAG: f"write-{ingestion.mode}"})
    def write_share(context: dg.OpExecutionContext, ingest_slice: IngestSlice, **inputs: Any) -> WriteShare:
        """Write this step's share of the partition into files; the commit step commits them."""
        key, values = _partition(context, spec)
        catalog: PaimonCatalogResource = getattr(context.resources, steps.catalog_key)
        reset_peak_rss()
        with permanent_failures(spec.table):
            table = catalog.table(spec.table)
            if function is not None:
                arguments = {n: getattr(context.resources, n) for n in steps.wanted}
                if takes_slice:
                    arguments[SLICE_PARAMETER] = ingest_slice
                data = function(context, **inputs, **arguments)
            else:
                assert landing is not None
                data = landing.read(key, table.arrow_schema, table=spec.table, values=values, fill=values,
                                    only=ingest_slice.files, extra_columns=ingestion.extra_columns)
            share = prepare_share(table, data, mode=ingestion.mode, partition=values,
                                  commit_user=_user(context, spec, key), index=ingest_slice.index,
                                  count=ingest_slice.count, sharded=ingest_slice.sharded,
                                  policy=ingestion.input_policy())
        context.add_output_metadata({"rows": share.rows, "files": share.files, "seconds": round(share.seconds, 3),
                                     "peak_rss_mib": peak_rss_mib()})
        return share

    return write_share


def _commit_op(steps: _Steps) -> dg.OpDefinition:
    spec = steps.spec
    ingestion = spec.ingestion
    assert ingestion is not None

    @dg.op(name=names.commit_op(spec.table), out=dg.Out(PaimonWrite, io_manager_key=steps.io_manager_key),
           required_resource_keys={steps.catalog_key}, retry_policy=steps.retry, pool=steps.pool,
           tags={keys.OPERATION_TAG: "commit-writes"})
    def commit_writes(context: dg.OpExecutionContext, shares: list[WriteShare]) -> dg.Output[PaimonWrite]:
        """Commit every write step's files as one snapshot of the partition (exactly once)."""
        key, values = _partition(context, spec)
        catalog: PaimonCatalogResource = getattr(context.resources, steps.catalog_key)
        ordered = sorted(shares, key=lambda s: s.index)
        with permanent_failures(spec.table):
            table = catalog.table(spec.table)
            receipt = commit_shares(table, ordered, mode=ingestion.mode, partition=values,
                                    commit_user=_user(context, spec, key),
                                    properties=snapshot_properties(run_id=context.run_id,
                                                                   asset_key=spec.key.to_user_string(),
                                                                   partition_key=key, mode=ingestion.mode),
                                    policy=ingestion.input_policy())
        return receipt_output(context, spec, table, values, receipt, **{
            keys.INGEST_WRITE_STEPS: len(ordered),
            keys.INGEST_ROWS_PER_STEP: ", ".join(str(s.rows) for s in ordered),
            keys.INGEST_SLOWEST_STEP_S: round(max((s.seconds for s in ordered), default=0.0), 3)})

    return commit_writes


def fanned_asset(spec: PaimonTableSpec, *, table_uri: str | None = None, declared_in: str | None = None,
                 catalog_name: str | None = None) -> dg.AssetsDefinition:
    """The graph asset writing ``spec``'s partitions with ``ingestion.workers`` write steps."""
    ingestion = spec.ingestion
    assert ingestion is not None and ingestion.workers > 1 and ingestion.changes_of is None
    function = ingestion.resolved_function(spec.table)
    wanted = tuple(n for n in resource_parameters(function) if n not in ingestion.inputs and n != SLICE_PARAMETER) \
        if function is not None else ()
    steps = _Steps(spec, not spec.bucketless_append, wanted,
                   dg.RetryPolicy(max_retries=ingestion.retries, delay=ingestion.retry_delay_seconds,
                                  backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS),
                   names.pool(spec.table), keys.catalog_key(catalog_name), keys.io_manager_key(catalog_name))
    plan_writes, write_share, commit_writes = _plan_op(steps), _write_op(steps), _commit_op(steps)
    metadata = asset_metadata(spec, table_uri=table_uri)
    references = code_references(spec, function, declared_in)
    if references is not None:
        metadata["dagster/code_references"] = references
    source = f", ingested from {ingestion.landing.path}" if ingestion.landing else ""
    description = spec.description or (
        f"Paimon table {spec.table}{source} ({ingestion.mode}, {ingestion.workers} write steps).")
    ins = {n: dg.AssetIn(key=dg.AssetKey(list(source.asset_key)),
                         metadata={"columns": list(source.columns)} if source.columns else None)
           for n, source in ingestion.inputs.items()}

    def compose(**inputs: Any) -> Any:
        shares = plan_writes().map(lambda piece: write_share(piece, **inputs)).collect()
        return commit_writes(shares)

    decorate = dg.graph_asset(
        key=spec.key, group_name=spec.group_name, description=description, owners=list(spec.owners) or None,
        tags=dict(spec.tags) or None, kinds=asset_kinds(spec), partitions_def=spec.partitions_def(),
        metadata=metadata, ins=ins or None)
    return decorate(compose)
