"""Consuming a Paimon table's changelog into another Paimon table, exactly once.

A consumer follows the source with its own consumer id (Paimon's ``consumer/consumer-<id>``
file holds the first snapshot it has not read) and turns each batch of changes (one source
snapshot) into rows of the target table. Each batch is one target commit, made by the
consumer's fixed commit user with the batch's source snapshot id as commit identifier; the
consumer's progress is saved only after that commit (when the stream is asked for the next
batch, or when it ends). A run that dies between the two leaves the progress behind the
commit, so the next run reads that batch again and finds its identifier already landed: it
skips the batch instead of applying it twice. The one case progress cannot tell is a first run
that died after its first commit (no progress saved at all): the target's newest commit by the
consumer then says where to resume.

Two runs of one consumer at the same time could both miss each other's commit; the Dagster
jobs that run consumers carry ``paimon/table=<target>``, which the instance limits to one run
per table.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pac

import paimon_core as pc
from paimon_core import ROW_KIND, ChangeStream
from paimon_core.errors import SnapshotNotFoundError

log = logging.getLogger(__name__)

CHANGE_KINDS = ("+I", "-U", "+U", "-D")
# Snapshot properties of the target's commits: which source snapshot and consumer they came from.
SOURCE_PROPERTY = "paimon-dagster.source"
CONSUMER_PROPERTY = "paimon-dagster.consumer"
# Source snapshots read before deciding whether a consumer has changes waiting (each is one
# small JSON file); beyond that the consumer is far enough behind to just run it.
PENDING_SCAN_LIMIT = 500


@dataclass(frozen=True, slots=True)
class ConsumedBatch:
    """One source snapshot's changes and what became of them in the target.

    ``target_snapshot``: the commit that applied them (None when they added nothing);
    ``replayed``: an earlier run had already committed them, so they were skipped.
    """

    snapshot_id: int
    commit_kind: str
    initial: bool
    kinds: dict[str, int]
    rows_written: int
    target_snapshot: int | None
    replayed: bool


@dataclass(frozen=True, slots=True)
class Consumption:
    """What one run of a consumer read and wrote."""

    consumer_id: str
    source: str
    target: str
    start: str  # where the stream started, in words
    batches: tuple[ConsumedBatch, ...]
    next_snapshot: int | None  # the consumer's saved progress at the end
    preview: pa.Table | None  # the first change rows read, with their source snapshot
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def snapshots(self) -> list[int]:
        return [b.snapshot_id for b in self.batches]

    @property
    def commits(self) -> int:
        return sum(1 for b in self.batches if b.target_snapshot is not None and not b.replayed)

    @property
    def replayed(self) -> int:
        return sum(1 for b in self.batches if b.replayed)

    @property
    def rows_written(self) -> int:
        return sum(b.rows_written for b in self.batches)


def last_landed(target: pc.Table, commit_user: str) -> int | None:
    """The identifier of ``commit_user``'s newest APPEND commit to ``target``, or None.

    Walks back from the latest snapshot; only needed when a consumer has no saved progress.
    """
    latest = target.latest_snapshot()
    if latest is None:
        return None
    for snapshot_id in range(latest.id, 0, -1):
        try:
            snapshot = target.snapshot(snapshot_id)
        except SnapshotNotFoundError:  # expired: nothing older is left
            return None
        if snapshot.commit_user == commit_user and snapshot.commit_kind == "APPEND":
            return snapshot.commit_identifier
    return None


def open_stream(source: pc.Table, target: pc.Table, *, consumer_id: str, commit_user: str,
                columns: Sequence[str] | None = None) -> tuple[ChangeStream, str]:
    """The consumer's stream up to the source's latest snapshot, and where it starts (in words).

    Saved progress decides; without it, a consumer whose commit already landed in the target
    resumes after it, and a new consumer starts with the source's current contents
    (``latest-full``: for full-compaction tables, what the last full compactions wrote) and
    then follows its changes.
    """
    common: dict[str, Any] = {"consumer_id": consumer_id, "until_latest": True, "columns": columns}
    progress = source.consumer(consumer_id)
    if progress is not None:
        return source.stream("latest-full", **common), f"saved progress: snapshot {progress}"
    landed = last_landed(target, commit_user)
    if landed is not None:
        stream = source.stream("from-snapshot", snapshot_id=landed + 1, **common)
        return stream, f"snapshot {landed + 1}: no saved progress, and {target.name} already has snapshot {landed}"
    return source.stream("latest-full", **common), "latest-full (a new consumer)"


def count_kinds(changes: pa.Table) -> dict[str, int]:
    """Rows per change kind (every kind present, zeros included)."""
    counts = {entry["values"]: entry["counts"] for entry in pac.value_counts(changes.column(ROW_KIND)).to_pylist()}
    return {kind: int(counts.get(kind, 0)) for kind in CHANGE_KINDS}


def apply_batch(target: pc.Table, rows: pa.Table, *, commit_user: str, snapshot_id: int,
                properties: Mapping[str, str]) -> tuple[int | None, bool]:
    """Commit ``rows`` as ``(commit_user, snapshot_id)`` unless that commit already landed.

    Returns the target snapshot (the earlier one when replayed, None when ``rows`` is empty)
    and whether the batch was a replay. ``TableWrite.commit`` makes the same check again at
    commit time; looking first only saves writing files that would be thrown away.
    """
    landed = target.find_commit(commit_user, snapshot_id)
    if landed is not None:
        log.info("%s: the changes of source snapshot %d already landed as snapshot %d; skipping them",
                 target.name, snapshot_id, landed)
        return landed, True
    if rows.num_rows == 0:
        return None, False
    with target.new_write(commit_user=commit_user, commit_identifier=snapshot_id,
                          properties=properties) as writer:
        writer.write(rows)
        return writer.commit(), False


def consume(source: pc.Table, target: pc.Table, *, consumer_id: str, commit_user: str,
            transform: Callable[[pa.Table], pa.Table], columns: Sequence[str] | None = None,
            preview_rows: int = 10) -> Consumption:
    """Apply every change of ``source`` that ``consumer_id`` has not read to ``target``, exactly once.

    ``transform`` turns one batch of change rows (``_row_kind`` first, then ``columns``) into
    the rows to write; it must be deterministic, since a replayed batch is recognised by its
    snapshot id alone.
    """
    stream, start = open_stream(source, target, consumer_id=consumer_id, commit_user=commit_user, columns=columns)
    done: list[ConsumedBatch] = []
    totals: Counter[str] = Counter()
    preview: list[pa.Table] = []
    shown = 0
    for batch in stream:  # asking for the next batch saves the progress past this one
        kinds = count_kinds(batch.data)
        totals.update(kinds)
        rows = transform(batch.data)
        properties = {SOURCE_PROPERTY: f"{source.name}@{batch.snapshot_id}", CONSUMER_PROPERTY: consumer_id}
        written, replayed = apply_batch(target, rows, commit_user=commit_user, snapshot_id=batch.snapshot_id,
                                        properties=properties)
        done.append(ConsumedBatch(batch.snapshot_id, batch.commit_kind, batch.initial, kinds,
                                  0 if replayed else rows.num_rows, written, replayed))
        if shown < preview_rows and batch.data.num_rows:
            head = batch.data.slice(0, preview_rows - shown)
            preview.append(head.append_column("source_snapshot", pa.repeat(pa.scalar(batch.snapshot_id),
                                                                          head.num_rows)))
            shown += head.num_rows
        log.info("%s -> %s: snapshot %d (%s%s), %d change rows -> %d rows%s", source.name, target.name,
                 batch.snapshot_id, batch.commit_kind, ", full read" if batch.initial else "", batch.data.num_rows,
                 rows.num_rows, " (already applied)" if replayed else f", snapshot {written}")
    return Consumption(consumer_id, source.name, target.name, start, tuple(done),
                       source.consumer(consumer_id), pa.concat_tables(preview) if preview else None,
                       {kind: totals.get(kind, 0) for kind in CHANGE_KINDS})


@dataclass(frozen=True, slots=True)
class PendingChanges:
    """Where a consumer stands against its source, from snapshot metadata only.

    ``newest_change``: the newest unread snapshot carrying changes (None: none found);
    ``unscanned``: the consumer is too far behind (or its next snapshot expired) to look.
    """

    progress: int | None  # the consumer's next snapshot; None: it never ran
    latest: int | None
    newest_change: int | None = None
    unscanned: bool = False

    @property
    def due(self) -> bool:
        """A run would read something: a first run, or unread changes (or maybe some)."""
        if self.latest is None:
            return False
        return self.progress is None or self.unscanned or self.newest_change is not None


def pending_changes(source: pc.Table, consumer_id: str) -> PendingChanges:
    """Whether ``source`` has snapshots with changes that ``consumer_id`` has not read.

    Reads the unread snapshots' metadata newest first and stops at the first with changes, at
    most ``PENDING_SCAN_LIMIT`` of them.
    """
    progress = source.consumer(consumer_id)
    latest = source.latest_snapshot()
    if latest is None or progress is None or progress > latest.id:
        return PendingChanges(progress, latest.id if latest is not None else None)
    if latest.id - progress >= PENDING_SCAN_LIMIT:
        return PendingChanges(progress, latest.id, unscanned=True)
    for snapshot_id in range(latest.id, progress - 1, -1):
        try:
            snapshot = latest if snapshot_id == latest.id else source.snapshot(snapshot_id)
        except SnapshotNotFoundError:  # expired under the consumer: the run reports it
            return PendingChanges(progress, latest.id, unscanned=True)
        if source.has_changes(snapshot):
            return PendingChanges(progress, latest.id, newest_change=snapshot_id)
    return PendingChanges(progress, latest.id)
