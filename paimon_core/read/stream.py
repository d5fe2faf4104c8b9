"""Streaming reads: a table's changes snapshot after snapshot, as they are committed.

Where a stream starts is a pure decision (:func:`start_position`, Paimon's ``scan.mode``
rules); a consumer id's saved progress overrides it, so a restarted job resumes where it
stopped. Progress is saved when the caller asks for the next batch (everything yielded before
was handled) or calls :meth:`ChangeStream.checkpoint`: at-least-once delivery.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from paimon_core.consumer import ConsumerStore
from paimon_core.errors import ExpiredStartWarning, OptionError, SnapshotNotFoundError
from paimon_core.snapshot import ChangeHistory

log = logging.getLogger(__name__)

SCAN_MODES = ("latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp")


@dataclass(frozen=True, slots=True)
class ChangeBatch:
    """The changes of one snapshot (``initial``: a full read of it, every row ``+I``)."""

    snapshot_id: int
    commit_kind: str
    data: pa.Table
    initial: bool = False


@dataclass(frozen=True, slots=True)
class StartPosition:
    """A full read of ``full_snapshot`` first (if set), then changes from ``next_snapshot`` on."""

    full_snapshot: int | None
    next_snapshot: int


def start_position(mode: str, *, latest: int | None, earliest: int | None, snapshot_id: int | None = None,
                   older_than_timestamp: int | None = None, consumer_next: int | None = None,
                   table: str = "") -> StartPosition:
    """Where a stream starts.

    ``older_than_timestamp``: for ``from-timestamp``, the newest snapshot committed strictly
    before the timestamp (None if there is none).
    """
    if mode not in SCAN_MODES:
        raise OptionError(f"scan mode {mode!r} of table {table} is not one of {', '.join(SCAN_MODES)}")
    if mode in ("from-snapshot", "from-snapshot-full") and snapshot_id is None:
        raise OptionError(f"scan mode {mode} of table {table} needs a snapshot id")
    if consumer_next is not None:
        return StartPosition(None, consumer_next)
    if latest is None or earliest is None:
        return StartPosition(None, snapshot_id if mode == "from-snapshot" and snapshot_id else 1)
    if mode == "latest-full":
        return StartPosition(latest, latest + 1)
    if mode == "latest":
        return StartPosition(None, latest + 1)
    if mode == "from-timestamp":
        return StartPosition(None, earliest if older_than_timestamp is None else older_than_timestamp + 1)
    assert snapshot_id is not None
    if snapshot_id < earliest:
        # Paimon starts such a stream at the earliest snapshot and says nothing; say it, since the
        # changes of snapshots snapshot_id..earliest-1 are gone.
        warnings.warn(ExpiredStartWarning(
            f"{mode} stream of table {table} from snapshot {snapshot_id} starts at {earliest}, the earliest "
            f"retained: the changes of snapshots {snapshot_id}..{earliest - 1} have expired (a consumer id keeps "
            "the snapshots a stream has not read)"), stacklevel=3)
    start = max(snapshot_id, earliest)
    if mode == "from-snapshot":
        return StartPosition(None, start)
    return StartPosition(min(start, latest), min(start, latest) + 1)


class ChangeStream(Iterator[ChangeBatch]):
    """Iterates :class:`ChangeBatch` es, polling for new snapshots (see the module docstring).

    ``until_latest``: stop once every snapshot committed so far is read (a batch job's
    "catch up"); otherwise wait for new snapshots, up to ``timeout_s`` of idleness if given.
    """

    def __init__(self, *, table: str, snapshots: ChangeHistory, start: StartPosition,
                 read_full: Callable[[int], ChangeBatch], read_changes: Callable[[int], ChangeBatch | None],
                 consumers: ConsumerStore | None, consumer_id: str | None, poll_interval_s: float,
                 until_latest: bool, timeout_s: float | None) -> None:
        self.table = table
        self.snapshots = snapshots
        self.pending_full = start.full_snapshot
        self.next_snapshot = start.next_snapshot
        self.read_full = read_full
        self.read_changes = read_changes
        self.consumers = consumers
        self.consumer_id = consumer_id
        self.poll_interval_s = poll_interval_s
        self.until_latest = until_latest
        self.timeout_s = timeout_s
        self._yielded = False

    def __iter__(self) -> ChangeStream:
        return self

    def __next__(self) -> ChangeBatch:
        if self._yielded:
            self.checkpoint()
        if self.pending_full is not None:
            snapshot_id, self.pending_full = self.pending_full, None
            return self._out(self.read_full(snapshot_id))
        idle_since = time.monotonic()
        while True:
            latest = self.snapshots.latest_id()
            while latest is not None and self.next_snapshot <= latest:
                self._check_not_expired()
                snapshot_id = self.next_snapshot
                batch = self.read_changes(snapshot_id)
                self.next_snapshot += 1
                if batch is not None:
                    return self._out(batch)
            if self.until_latest:
                self.checkpoint()
                raise StopIteration
            if self.timeout_s is not None and time.monotonic() - idle_since >= self.timeout_s:
                self.checkpoint()
                raise StopIteration
            time.sleep(self.poll_interval_s)

    def _out(self, batch: ChangeBatch) -> ChangeBatch:
        self._yielded = True
        log.debug("stream of %s: snapshot %d, %d change rows", self.table, batch.snapshot_id, batch.data.num_rows)
        return batch

    def _check_not_expired(self) -> None:
        earliest = self.snapshots.earliest_id()
        if earliest is not None and self.next_snapshot < earliest:
            hint = (f"; consumer {self.consumer_id} fell behind" if self.consumer_id else
                    "; a consumer-id keeps expiry from removing snapshots a stream has not read")
            raise SnapshotNotFoundError(
                f"snapshot {self.next_snapshot} of table {self.table}, next to stream, was expired (earliest is "
                f"{earliest}): its changes are gone{hint}; restart the stream with another scan mode")

    def checkpoint(self) -> None:
        """Save the consumer's progress: every batch yielded so far was handled."""
        if self.consumers is not None and self.consumer_id is not None:
            self.consumers.record(self.consumer_id, self.next_snapshot)
