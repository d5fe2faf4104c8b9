"""The ingestion asset of a table with ``workers > 1``: a partition written by many steps, committed once.

Paimon's two-phase write on Dagster's executor: a plan step fans the partition out to
``workers`` write steps (a ``DynamicOut``), each writes its share into files and hands its
commit messages on, and one commit step makes them one snapshot. The steps run wherever the
job's executor puts them (processes, Dask workers, Kubernetes pods); what travels between them
is a few kilobytes of messages per step, through the run's IO manager.

How the input is shared follows the table. A table with fixed buckets gives each step its slice
of the input in input order (``ingestion.fan_out: slices``, the default): a run of the
partition's landed files (sorted by path, balanced by size) or the function called with
``ingest_slice``; the step writes every bucket it meets, with sequence numbers reserved for its
slice, so the commit merges as one writer's would and no step reads another's input. With
``fan_out: buckets``, for dynamic-bucket tables, for a function without ``ingest_slice`` and
for a single landed file, each step reads the whole input and writes the buckets it owns
(Paimon's one writer per bucket). An append table without buckets gives each step its share of
the files (balanced by size), or its ``ingest_slice``. Exactly once as a single-step write: the
whole write is one commit of the user that names (root run, asset, partition), which steps check
before writing and the commit step before committing.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations as real types.

import heapq
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import dagster as dg

from pipelines import names
from pipelines.ingestion.asset import (
    asset_kinds,
    asset_metadata,
    code_references,
    ensure_table,
    permanent_failures,
    receipt_metadata,
    resource_parameters,
    takes_slice,
)
from pipelines.ingestion.ranges import OnePartition, write_range
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.validation import SLICE_PARAMETER
from resources import PaimonCatalogResource, PaimonWrite, commit_user_for, keys
from resources.landing_location import LandedFile
from resources.peak_memory import peak_rss_mib, reset_peak_rss
from resources.write_shares import (
    SHARD_BY_BUCKET,
    SHARE_OF_INPUT,
    SLICE_IN_ORDER,
    WriteShare,
    commit_shares,
    prepare_share,
)
from resources.writes import snapshot_properties


@dataclass(frozen=True, slots=True)
class IngestSlice:
    """Write step ``index`` of ``count`` of a partition and how it shares the input (``split``, one
    of :data:`resources.write_shares.SPLITS`): the buckets it owns of the whole input, its slice
    of the input in input order, or its share; ``files``: its landed files (a source function
    gets the slice instead)."""

    index: int
    count: int
    split: str
    files: tuple[str, ...] | None = None
    partition: str | None = None  # in a run of several partitions, the one this step writes

    @property
    def sharded(self) -> bool:
        """The step reads the whole input and keeps the buckets it owns."""
        return self.split == SHARD_BY_BUCKET


def plan_slices(workers: int, *, split: str, files: Sequence[LandedFile] | None) -> list[IngestSlice]:
    """The write steps of a partition.

    Sharded by bucket: ``workers`` steps, each owning its buckets of the whole input. For a source
    function (``files`` None) ``workers`` slices. Otherwise at most one step per file: in input
    order, runs of the files sorted by path of about equal size (a single file falls back to
    buckets); as shares, largest first to the least loaded step.
    """
    if split == SLICE_IN_ORDER and files is not None and len(files) < 2:
        split = SHARD_BY_BUCKET
    if split == SHARD_BY_BUCKET or files is None:
        return [IngestSlice(i, workers, split) for i in range(workers)]
    count = max(1, min(workers, len(files)))
    groups = runs_in_order(files, count) if split == SLICE_IN_ORDER else balanced_shares(files, count)
    return [IngestSlice(index, count, split, tuple(paths)) for index, paths in enumerate(groups)]


def runs_in_order(files: Sequence[LandedFile], count: int) -> list[list[str]]:
    """``files`` sorted by path and cut into ``count`` runs of about equal bytes (none empty): each
    cut at the file boundary nearest its share of the total."""
    ordered = sorted(files, key=lambda f: f.path)
    ends = list(itertools.accumulate(max(f.size, 1) for f in ordered))
    cuts = [0]
    for k in range(1, count):
        target = ends[-1] * k / count
        first, last = cuts[-1] + 1, len(ordered) - (count - k)
        cuts.append(min(range(first, last + 1), key=lambda cut: (abs(ends[cut - 1] - target), cut)))
    cuts.append(len(ordered))
    return [[f.path for f in ordered[a:b]] for a, b in itertools.pairwise(cuts)]


def balanced_shares(files: Sequence[LandedFile], count: int) -> list[list[str]]:
    """``files`` spread over ``count`` shares, largest first to the least loaded (each sorted)."""
    loads: list[tuple[int, int, list[str]]] = [(0, i, []) for i in range(count)]
    heapq.heapify(loads)
    for landed in sorted(files, key=lambda f: (-f.size, f.path)):
        size, index, paths = heapq.heappop(loads)
        paths.append(landed.path)
        heapq.heappush(loads, (size + landed.size, index, paths))
    return [sorted(paths) for _, _, paths in sorted(loads, key=lambda load: load[1])]


def split_of(spec: PaimonTableSpec) -> str:
    """How ``spec``'s write steps share a partition (see the module docstring)."""
    ingestion = spec.ingestion
    assert ingestion is not None
    if spec.bucketless_append:
        return SHARE_OF_INPUT
    function = ingestion.resolved_function(spec.table)
    sliceable = function is None or takes_slice(function)
    return SLICE_IN_ORDER if spec.fixed_buckets and ingestion.fan_out == SLICE_IN_ORDER and sliceable \
        else SHARD_BY_BUCKET


def _partitions(context: dg.OpExecutionContext) -> list[str | None]:
    """The partitions this run writes: one, the run's range in order, or none (an unpartitioned table)."""
    if context.has_partition_key:
        return [context.partition_key]
    return list(context.partition_keys) if context.has_partition_key_range else [None]


def _values(spec: PaimonTableSpec, key: str | None) -> dict[str, str]:
    mapping = spec.partition_mapping()
    return mapping.values(key) if mapping is not None and key is not None else {}


def _mapping_key(key: str | None, index: int, ranged: bool) -> str:
    """``w<index>``, prefixed in a run of several partitions by the partition (as Dagster's keys allow)."""
    return f"{re.sub(r'[^A-Za-z0-9_]', '_', key or '')}_w{index}" if ranged else f"w{index}"


def _user(context: dg.OpExecutionContext, spec: PaimonTableSpec, key: str | None) -> str:
    run = context.run
    return commit_user_for(run.root_run_id or run.run_id, spec.key.to_user_string(), key)


@dataclass(frozen=True, slots=True)
class _Steps:
    """What the three ops of a fanned-out table share."""

    spec: PaimonTableSpec
    split: str  # resources.write_shares.SPLITS
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
        """Create the table if needed and fan each partition of the run out to its write steps (the
        steps of every partition of a ranged run at once, each partition committed on its own)."""
        with permanent_failures(spec.table):
            ensure_table(getattr(context.resources, steps.catalog_key), spec, context.log.warning)
        wanted = _partitions(context)
        ranged = len(wanted) > 1
        for key in wanted:
            files = None
            if landing is not None and steps.split != SHARD_BY_BUCKET:
                files = landing.files(key, _values(spec, key))
                if not files:
                    raise dg.Failure(description=f"{spec.table}: no landed files for partition {key or '-'} under "
                                     f"{landing.path}", allow_retries=False)
            slices = plan_slices(ingestion.workers, split=steps.split, files=files)
            how = {SHARD_BY_BUCKET: "each writing its buckets of the whole input",
                   SLICE_IN_ORDER: "each writing its slice of the input (in input order) into every bucket",
                   SHARE_OF_INPUT: "each its share of the input"}[slices[0].split]
            context.log.info(f"{spec.table}: {key or 'the table'} in {len(slices)} write step(s), {how}")
            for piece in slices:
                yield dg.DynamicOutput(replace(piece, partition=key if ranged else None),
                                       mapping_key=_mapping_key(key, piece.index, ranged))

    return plan_writes


def _write_op(steps: _Steps) -> dg.OpDefinition:
    spec = steps.spec
    ingestion = spec.ingestion
    assert ingestion is not None
    function = ingestion.resolved_function(spec.table)
    landing = ingestion.landing
    sliced = takes_slice(function)

    @dg.op(name=names.write_share_op(spec.table),
           ins={"ingest_slice": dg.In(IngestSlice), **{n: dg.In(dg.Any) for n in ingestion.inputs}},
           required_resource_keys={steps.catalog_key, *steps.wanted}, retry_policy=steps.retry, pool=steps.pool,
           tags={keys.OPERATION_TAG: f"write-{ingestion.mode}"})
    def write_share(context: dg.OpExecutionContext, ingest_slice: IngestSlice, **inputs: Any) -> WriteShare:
        """Write this step's share of the partition into files; the commit step commits them."""
        key = ingest_slice.partition if ingest_slice.partition is not None else _partitions(context)[0]
        values = _values(spec, key)
        catalog: PaimonCatalogResource = getattr(context.resources, steps.catalog_key)
        reset_peak_rss()
        with permanent_failures(spec.table):
            table = catalog.table(spec.table)
            if function is not None:
                arguments = {n: getattr(context.resources, n) for n in steps.wanted}
                if sliced:
                    arguments[SLICE_PARAMETER] = ingest_slice
                seen = OnePartition(context, key) if ingest_slice.partition is not None else context  # type: ignore[arg-type]
                data = function(seen, **inputs, **arguments)
            else:
                assert landing is not None
                data = landing.read(key, table.arrow_schema, table=spec.table, values=values, fill=values,
                                    only=ingest_slice.files, extra_columns=ingestion.extra_columns)
            share = prepare_share(table, data, mode=ingestion.mode, partition=values,
                                  commit_user=_user(context, spec, key), index=ingest_slice.index,
                                  count=ingest_slice.count, split=ingest_slice.split,
                                  partition_key=ingest_slice.partition,
                                  policy=ingestion.input_policy())
        context.add_output_metadata({"rows": share.rows, "files": share.files, "seconds": round(share.seconds, 3),
                                     "peak_rss_mib": peak_rss_mib()})
        return share

    return write_share


def _commit_op(steps: _Steps) -> dg.OpDefinition:
    spec = steps.spec
    ingestion = spec.ingestion
    assert ingestion is not None

    @dg.op(name=names.commit_op(spec.table), out=dg.Out(io_manager_key=steps.io_manager_key),
           required_resource_keys={steps.catalog_key}, retry_policy=steps.retry, pool=steps.pool,
           tags={keys.OPERATION_TAG: "commit-writes"})
    def commit_writes(context: dg.OpExecutionContext, shares: list[WriteShare]) -> dg.Output[PaimonWrite | None]:
        """Commit every write step's files as one snapshot per partition (exactly once each)."""
        catalog: PaimonCatalogResource = getattr(context.resources, steps.catalog_key)
        with permanent_failures(spec.table):
            table = catalog.table(spec.table)
        wanted = _partitions(context)

        def commit(key: str | None) -> tuple[PaimonWrite, dict[str, Any]]:
            ordered = sorted((s for s in shares if len(wanted) == 1 or s.partition_key == key), key=lambda s: s.index)
            values = _values(spec, key)
            with permanent_failures(spec.table):
                receipt = commit_shares(table, ordered, mode=ingestion.mode, partition=values,
                                        commit_user=_user(context, spec, key),
                                        properties=snapshot_properties(run_id=context.run_id,
                                                                       asset_key=spec.key.to_user_string(),
                                                                       partition_key=key, mode=ingestion.mode),
                                        policy=ingestion.input_policy())
            return receipt, receipt_metadata(context, spec, table, values, receipt, key, **{
                keys.INGEST_WRITE_STEPS: len(ordered),
                keys.INGEST_ROWS_PER_STEP: ", ".join(str(s.rows) for s in ordered),
                keys.INGEST_SLOWEST_STEP_S: round(max((s.seconds for s in ordered), default=0.0), 3)})

        if len(wanted) > 1:
            return write_range(context, spec.table, commit)
        receipt, metadata = commit(wanted[0])
        return dg.Output(receipt, metadata=metadata)

    return commit_writes


def fanned_asset(spec: PaimonTableSpec, *, table_uri: str | None = None, declared_in: str | None = None,
                 catalog_name: str | None = None) -> dg.AssetsDefinition:
    """The graph asset writing ``spec``'s partitions with ``ingestion.workers`` write steps."""
    ingestion = spec.ingestion
    assert ingestion is not None and ingestion.workers > 1 and ingestion.changes_of is None
    function = ingestion.resolved_function(spec.table)
    wanted = tuple(n for n in resource_parameters(function) if n not in ingestion.inputs) \
        if function is not None else ()
    steps = _Steps(spec, split_of(spec), wanted,
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
        metadata=metadata, ins=ins or None, backfill_policy=ingestion.dagster_backfill_policy())
    return decorate(compose)
