"""One partition written by many steps: each prepares its share, one step commits them all.

Pure Paimon logic, no Dagster, as :mod:`resources.writes` (whose exactly-once rule it keeps):
the whole fanned-out write is commit identifier ``COMMIT_IDENTIFIER`` of the commit user that
names the (root run, asset, partition). A share step that finds that commit landed writes
nothing; the commit step that finds it returns its receipt. A share retried after a failure
rewrites only its own files (the failed attempt's are removed, or, when its process died,
left unreachable for orphan cleanup), and a re-executed run commits nothing twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import paimon_core as pc
from resources import keys
from resources.writes import (
    COMMIT_IDENTIFIER,
    DEFAULT_POLICY,
    InputPolicy,
    PaimonWrite,
    as_batches,
    check_write,
    count_kinds,
    fit_columns,
    refuse_empty_overwrite,
    with_partition,
)

log = logging.getLogger(__name__)


# How a write step's share of a partition is cut (:func:`prepare_share`'s ``split``).
SHARD_BY_BUCKET = "buckets"  # every step reads the whole input and writes the buckets it owns
SLICE_IN_ORDER = "slices"  # each step its part of the input, in input order, into every bucket
SHARE_OF_INPUT = "shares"  # each step its share of the input (append tables without buckets)
SPLITS = (SHARD_BY_BUCKET, SLICE_IN_ORDER, SHARE_OF_INPUT)


@dataclass(frozen=True, slots=True)
class WriteShare:
    """What one write step prepared: its commit messages (bytes) and what it wrote."""

    index: int
    count: int
    prepared: bytes | None  # None: the partition's commit had landed, nothing was written
    rows: int = 0
    files: int = 0
    kinds: Mapping[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    partition_key: str | None = None  # in a run writing several partitions, the one this share is of


def prepare_share(table: pc.Table, data: Any, *, mode: str, partition: Mapping[str, str], commit_user: str,
                  index: int, count: int, split: str, policy: InputPolicy = DEFAULT_POLICY,
                  partition_key: str | None = None) -> WriteShare:
    """Write step ``index`` of ``count``'s rows into files, committing nothing.

    ``split``: :data:`SHARD_BY_BUCKET`, the step sees the whole input and writes the buckets it
    owns; :data:`SLICE_IN_ORDER`, ``data`` is part ``index`` of the input in input order, written
    into every bucket it meets (fixed-bucket tables); :data:`SHARE_OF_INPUT`, ``data`` is the
    step's share (append tables without buckets).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    sharded = split == SHARD_BY_BUCKET
    started = time.monotonic()
    schema = check_write(table, mode, partition)
    batches = as_batches(data, table=table.name)
    if table.find_commit(commit_user, COMMIT_IDENTIFIER) is not None:
        log.info("%s: the commit of %s already landed; write step %d of %d writes nothing", table.name,
                 commit_user, index, count)
        return WriteShare(index, count, None, partition_key=partition_key)
    overwrite: bool | dict[str, str] = dict(partition) if mode == "overwrite" else False
    kind_column = table.options.rowkind_field if schema.primary_keys else None
    # Sharded steps all see the whole input, so the first counts its kinds for the write.
    counting = kind_column is not None and (not sharded or index == 0)
    kinds: dict[str, int] = {}
    with table.new_write(overwrite=overwrite, shard=(index, count) if sharded else None,
                         input_slice=(index, count) if split == SLICE_IN_ORDER else None) as writer:
        for batch in batches:
            batch = with_partition(fit_columns(batch, table, policy), table, partition)
            if counting and kind_column in batch.schema.names:
                count_kinds(batch.column(kind_column), kinds)
            writer.write(batch)
        prepared = writer.prepare()
    log.info("%s: write step %d of %d prepared %d rows in %d files", table.name, index, count, prepared.rows,
             prepared.files)
    return WriteShare(index, count, prepared.to_bytes(), prepared.rows, prepared.files, kinds,
                      time.monotonic() - started, partition_key)


def commit_shares(table: pc.Table, shares: Sequence[WriteShare], *, mode: str, partition: Mapping[str, str],
                  commit_user: str, properties: Mapping[str, str] | None = None,
                  policy: InputPolicy = DEFAULT_POLICY) -> PaimonWrite:
    """Commit every step's share as one snapshot, or find that commit landed. An overwrite whose
    shares hold no rows empties the partition only as :func:`resources.writes.write_partition`'s does."""
    check_write(table, mode, partition)
    landed = table.find_commit(commit_user, COMMIT_IDENTIFIER)
    if landed is not None:
        log.info("%s: commit of %s already landed as snapshot %s; not committing it again", table.name,
                 commit_user, landed)
        return PaimonWrite(table=table.name, snapshot_id=landed, rows_written=0, partition=dict(partition),
                           mode=mode, reused=True, commits=0)
    expected = set(range(shares[0].count)) if shares else set()
    missing = sorted(expected - {s.index for s in shares})
    if not shares or missing or any(s.prepared is None for s in shares):
        raise pc.PaimonError(f"table {table.name}: the write's shares are incomplete (steps {missing or 'all'} "
                             "missing, or a step found the commit landed that this step does not see); re-run "
                             "the partition")
    overwrite: bool | dict[str, str] = dict(partition) if mode == "overwrite" else False
    if overwrite is not False and not any(s.rows for s in shares) and not policy.allow_empty_partitions:
        refuse_empty_overwrite(table, partition)
    outcome = table.commit([s.prepared for s in shares if s.prepared is not None], commit_user=commit_user,
                           commit_identifier=COMMIT_IDENTIFIER, overwrite=overwrite,
                           properties={**(properties or {}), keys.WRITE_MODE_PROPERTY: mode,
                                       "dagster.write_steps": str(len(shares))})
    kinds: dict[str, int] = {}
    for share in shares:
        for kind, number in share.kinds.items():
            kinds[kind] = kinds.get(kind, 0) + number
    rows = sum(s.rows for s in shares)
    log.info("%s: %s of %d rows from %d write steps into %s as snapshot %s", table.name, mode, rows, len(shares),
             dict(partition) or "the table", outcome.data_snapshot)
    return PaimonWrite(table=table.name, snapshot_id=outcome.data_snapshot, rows_written=rows,
                       partition=dict(partition), mode=mode, reused=False,
                       commits=int(outcome.data_snapshot is not None), kinds=kinds)
