"""Snapshot expiry (Paimon's ``ExpireSnapshotsImpl``), safe by construction.

Which snapshots go is a pure decision (:func:`expiry_end`, Paimon's rule, consumers included).
What their going frees is then planned from metadata alone, and only once the whole plan is
built does anything get deleted, so a metadata file that cannot be read stops the expiry with
nothing deleted. A file is freed only if a snapshot up to the new earliest one deleted it, and
no file reachable from the new earliest snapshot or from any tag is ever freed (file names are
never reused, and a file is live over a contiguous range of snapshots, so nothing newer can
reach it either). Changelog files go with their snapshot, unless a tag keeps that snapshot.

Deletion order: data, changelog and index files, then the snapshot files oldest first and the
``EARLIEST`` hint, then manifests and manifest lists. A crash before the snapshot files are
gone leaves a plan that the next expiry rebuilds the same; a crash after leaves only
unreferenced metadata, which orphan-file cleanup reclaims.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from paimon_core.consumer import Consumer, ConsumerStore
from paimon_core.errors import OptionError, UnsupportedFeatureError
from paimon_core.maintenance.reachable import References, manifest_lists
from paimon_core.manifest import ADD, DELETE, ManifestEntry, ManifestFileMeta, read_index_manifest
from paimon_core.read.scan import PartitionDecoder, live_entries, read_entries
from paimon_core.snapshot import Snapshot
from paimon_core.tags import TagStore
from paimon_core.write.routing import make_partition

if TYPE_CHECKING:
    from paimon_core.table import Table

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Retention:
    """What expiry must keep: the newest ``retain_min`` snapshots, at most ``retain_max``, and
    every snapshot whose successor was committed at or after ``keep_after_ms``; it expires at most
    ``limit`` snapshots in one run."""

    retain_min: int
    retain_max: int
    keep_after_ms: int
    limit: int


def expiry_end(earliest: int, latest: int, retention: Retention, *, time_of: Callable[[int], int],
               consumer_next: int | None = None) -> int:
    """Snapshots ``[earliest, end)`` expire (none when ``end == earliest``).

    ``time_of(id)``: commit time of snapshot ``id``; ``consumer_next``: the smallest snapshot a
    consumer has not read. A snapshot stays while its successor is younger than the window: it
    was the current one within the window, so a reader may still be on it (Paimon's rule).
    """
    keep_by_max = max(latest - retention.retain_max + 1, earliest)
    end = latest - retention.retain_min + 1
    if consumer_next is not None:
        end = min(end, consumer_next)
    end = min(end, earliest + retention.limit)
    for snapshot_id in range(keep_by_max, end):
        if time_of(snapshot_id + 1) >= retention.keep_after_ms:
            end = snapshot_id
            break
    return max(end, earliest)


@dataclass(frozen=True, slots=True)
class ExpiryPlan:
    """What an expiry deletes (``dry_run``: what it would delete) and the earliest snapshot after."""

    table: str
    snapshots: tuple[int, ...] = ()
    earliest_after: int | None = None
    data_files: tuple[str, ...] = ()
    changelog_files: tuple[str, ...] = ()
    index_files: tuple[str, ...] = ()
    metadata_files: tuple[str, ...] = ()  # manifests, manifest lists, index manifests, statistics
    bytes: int = 0  # of the data, changelog and index files
    dry_run: bool = False
    duration_s: float = 0.0
    stale_consumers: tuple[str, ...] = ()  # idle past consumer.expiration-time: removed

    @property
    def files(self) -> int:
        return len(self.data_files) + len(self.changelog_files) + len(self.index_files) + len(self.metadata_files)

    def summary(self) -> str:
        verb = "would expire" if self.dry_run else "expired"
        if not self.snapshots:
            return f"{self.table}: no snapshot to expire"
        return (f"{self.table}: {verb} snapshots {self.snapshots[0]}..{self.snapshots[-1]} "
                f"({len(self.snapshots)}), {len(self.data_files)} data files, {len(self.changelog_files)} "
                f"changelog files, {len(self.index_files)} index files ({self.bytes} bytes) and "
                f"{len(self.metadata_files)} metadata files; earliest snapshot now {self.earliest_after}")


class _Files:
    """Paths and sizes of files to delete, deduplicated."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}

    def add(self, path: str, size: int = 0) -> None:
        self.sizes.setdefault(path, size)

    def paths(self) -> tuple[str, ...]:
        return tuple(sorted(self.sizes))

    @property
    def bytes(self) -> int:
        return sum(self.sizes.values())


class SnapshotExpiry:
    """Plans and carries out the expiry of one table's snapshots."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.file_io = table.file_io
        self.paths = table.paths
        self.store = table.snapshot_store
        schema = table.schema
        self._decode = PartitionDecoder(schema.partition_types)
        self._partition_paths: dict[bytes, str] = {}
        self.references = References(self.file_io, self.paths)

    def retention(self, *, older_than_ms: int | None = None, retain_min: int | None = None,
                  retain_max: int | None = None, limit: int | None = None) -> Retention:
        """The table's options, overridden by the arguments given."""
        options = self.table.options
        for label, value in (("retain_min", retain_min), ("retain_max", retain_max), ("limit", limit)):
            if value is not None and value < 1:
                raise OptionError(f"expiry of table {self.table.name}: {label} must be at least 1, not {value}")
        keep_after = older_than_ms if older_than_ms is not None else (
            int(time.time() * 1000) - options.snapshot_time_retained_ms)
        return Retention(retain_min=retain_min or options.snapshot_num_retained_min,
                         retain_max=retain_max or options.snapshot_num_retained_max,
                         keep_after_ms=keep_after, limit=limit or options.snapshot_expire_limit)

    def plan(self, retention: Retention) -> ExpiryPlan:
        """Everything an expiry under ``retention`` would delete (reads metadata only)."""
        started = time.monotonic()
        name = self.table.name
        earliest, latest = self.store.earliest_id(), self.store.latest_id()
        if earliest is None or latest is None:
            return ExpiryPlan(name, dry_run=True)
        self._refuse_decoupled_changelog()
        consumers = self.table.consumers()
        stale = self._stale_consumers(consumers)
        consumer_next = min((c.next_snapshot for c in consumers if c.consumer_id not in stale), default=None)
        end = expiry_end(earliest, latest, retention, time_of=lambda i: self.store.snapshot(i).time_millis,
                         consumer_next=consumer_next)
        if end <= earliest:
            return ExpiryPlan(name, earliest_after=earliest, dry_run=True, duration_s=time.monotonic() - started,
                              stale_consumers=stale)
        expiring = [self.store.snapshot(i) for i in range(earliest, end)]
        tags = [t.snapshot for t in TagStore(self.file_io, self.paths, name).tags()]
        keep = [self.store.snapshot(end), *tags]
        data, changelog, index, metadata = _Files(), _Files(), _Files(), _Files()
        self._plan_data(expiring[1:] + keep[:1], keep, data)
        tagged = {t.id for t in tags}  # a tag keeps its snapshot whole, changelog included
        for snapshot in expiring:
            if snapshot.id not in tagged:
                self._plan_changelog(snapshot, changelog)
        self._plan_index(expiring, keep, index)
        self._plan_metadata(expiring, keep, metadata)
        return ExpiryPlan(name, tuple(s.id for s in expiring), end, data.paths(), changelog.paths(), index.paths(),
                          metadata.paths(), data.bytes + changelog.bytes + index.bytes, dry_run=True,
                          duration_s=time.monotonic() - started, stale_consumers=stale)

    def _stale_consumers(self, consumers: Sequence[Consumer]) -> tuple[str, ...]:
        """Consumers idle for ``consumer.expiration-time``: they no longer pin snapshots (their
        files are removed by the expiry that ignores them)."""
        idle = self.table.options.consumer_expiration_ms
        if idle is None:
            return ()
        cutoff = int(time.time() * 1000) - idle
        return tuple(c.consumer_id for c in consumers if c.modified_ms is not None and c.modified_ms < cutoff)

    def execute(self, plan: ExpiryPlan) -> ExpiryPlan:
        """Delete what ``plan`` lists, in the safe order (see the module docstring)."""
        started = time.monotonic()
        consumers = ConsumerStore(self.file_io, self.paths, self.table.name)
        for consumer_id in plan.stale_consumers:
            consumers.remove(consumer_id)
            log.info("removed consumer %s of %s: idle longer than consumer.expiration-time", consumer_id,
                     self.table.name)
        if not plan.snapshots:
            return replace(plan, dry_run=False)
        assert plan.earliest_after is not None
        for path in (*plan.data_files, *plan.changelog_files, *plan.index_files):
            self.file_io.delete(path)
        for snapshot_id in plan.snapshots:
            self.file_io.delete(self.paths.snapshot_file(snapshot_id))
        self.store.write_earliest_hint(plan.earliest_after)
        for path in plan.metadata_files:
            self.file_io.delete(path)
        done = replace(plan, dry_run=False, duration_s=plan.duration_s + time.monotonic() - started)
        log.info("%s", done.summary())
        return done

    # ---- planning -------------------------------------------------------------------------------

    def _refuse_decoupled_changelog(self) -> None:
        options = self.table.options
        longer = [
            (options.changelog_num_retained_min or 0) > options.snapshot_num_retained_min,
            (options.changelog_num_retained_max or 0) > options.snapshot_num_retained_max,
            (options.changelog_time_retained_ms or 0) > options.snapshot_time_retained_ms,
        ]
        if any(longer):
            raise UnsupportedFeatureError(
                f"table {self.table.name} keeps changelog longer than snapshots (changelog.num-retained.* / "
                "changelog.time-retained above the snapshot.* values): long-lived changelog is not supported "
                "yet, so expiry refuses rather than delete changelog those options keep")

    def _partition_path(self, row: bytes) -> str:
        path = self._partition_paths.get(row)
        if path is None:
            schema = self.table.schema
            path = self._partition_paths[row] = make_partition(
                self._decode(row), schema.partition_keys, schema.partition_types, self.table.options).path
        return path

    def _data_path(self, entry: ManifestEntry) -> Iterable[str]:
        directory = self.paths.bucket_dir(self._partition_path(entry.partition), entry.bucket)
        yield f"{directory}/{entry.file.file_name}"
        for extra in entry.file.extra_files:
            yield f"{directory}/{extra}"

    def _plan_data(self, deltas: Sequence[Snapshot], keep: Sequence[Snapshot], out: _Files) -> None:
        """Files a delta of (earliest, end] deleted, unless the end snapshot or a tag holds them."""
        live = {e.file.file_name for snapshot in keep for e in live_entries(self.file_io, self.paths, snapshot)}
        for snapshot in deltas:
            metas = self.references.manifests(snapshot.delta_manifest_list)
            for entries in read_entries(self.file_io, self.paths, metas):
                for entry in entries:
                    if entry.kind == DELETE and entry.file.file_name not in live:
                        for path in self._data_path(entry):
                            out.add(path, entry.file.file_size if path.endswith(entry.file.file_name) else 0)

    def _plan_changelog(self, snapshot: Snapshot, out: _Files) -> None:
        if snapshot.changelog_manifest_list is None:
            return
        metas = self.references.manifests(snapshot.changelog_manifest_list)
        for entries in read_entries(self.file_io, self.paths, metas):
            for entry in entries:
                if entry.kind == ADD:
                    for path in self._data_path(entry):
                        out.add(path, entry.file.file_size)

    def _index_entries(self, snapshot: Snapshot) -> list[tuple[str, int]]:
        if snapshot.index_manifest is None:
            return []
        entries = read_index_manifest(self.file_io, self.paths.manifest_file(snapshot.index_manifest))
        return [(e.file_name, e.file_size) for e in entries if e.kind == ADD]

    def _plan_index(self, expiring: Sequence[Snapshot], keep: Sequence[Snapshot], out: _Files) -> None:
        kept = {name for snapshot in keep for name, _ in self._index_entries(snapshot)}
        for snapshot in expiring:
            for name, size in self._index_entries(snapshot):
                if name not in kept:
                    out.add(self.paths.index_file(name), size)

    def _metadata_of(self, snapshot: Snapshot) -> tuple[set[str], list[ManifestFileMeta]]:
        """A snapshot's manifest lists, index manifest and statistics file, and its manifests."""
        names = manifest_lists(snapshot)
        manifests = [meta for name in names for meta in self.references.manifests(name)]
        files = {self.paths.manifest_file(name) for name in names}
        if snapshot.index_manifest is not None:
            files.add(self.paths.manifest_file(snapshot.index_manifest))
        if snapshot.statistics is not None:
            files.add(f"{self.paths.root}/statistics/{snapshot.statistics}")
        return files, manifests

    def _plan_metadata(self, expiring: Sequence[Snapshot], keep: Sequence[Snapshot], out: _Files) -> None:
        kept: set[str] = set()
        for snapshot in keep:
            files, manifests = self._metadata_of(snapshot)
            kept |= files | {self.paths.manifest_file(m.file_name) for m in manifests}
        for snapshot in expiring:
            files, manifests = self._metadata_of(snapshot)
            for path in files | {self.paths.manifest_file(m.file_name) for m in manifests}:
                if path not in kept:
                    out.add(path)
