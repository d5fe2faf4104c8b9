"""Snapshot expiry (Paimon's ``ExpireSnapshotsImpl``), safe by construction.

Which snapshots go is a pure decision (:func:`expiry_end`, Paimon's rule, consumers included).
What their going frees is then planned from metadata alone, and only once the whole plan is
built does anything get deleted, so a metadata file that cannot be read stops the expiry with
nothing deleted. A file is freed only if a snapshot up to the new earliest one deleted it, and
no file reachable from the new earliest snapshot or from any tag is ever freed (file names are
never reused, and a file is live over a contiguous range of snapshots, so nothing newer can
reach it either). Changelog files go with their snapshot, tagged or not: as in Java, a tag keeps
its snapshot's data, not its changelog.

Before anything is deleted, each commit user's newest expiring commit is recorded in the commit
ledger (:mod:`paimon_core.commit_ledger`), so exactly-once retries outlive the snapshots.
Deletion order: the snapshot files oldest first and the ``EARLIEST`` hint (and expired
long-lived changelogs), then data, changelog and index files, then manifests and manifest lists.
So no snapshot that still exists ever misses a file, even if the expiry is killed half-way: a
crash leaves only files no snapshot references, which orphan-file cleanup reclaims (Paimon
deletes data files first and relies on the next expiry; that leaves doomed snapshots that no
longer read in between).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from paimon_core.commit_ledger import CommitLedger
from paimon_core.consumer import Consumer
from paimon_core.errors import FileIOError, OptionError, UnsupportedFeatureError
from paimon_core.maintenance.reachable import SNAPSHOT, TAG, References, manifest_lists
from paimon_core.manifest import ADD, DELETE, ManifestEntry, ManifestFileMeta
from paimon_core.options import TableOptions
from paimon_core.progress import Progress, no_progress
from paimon_core.read.scan import PartitionDecoder, live_entries, read_entries
from paimon_core.snapshot import ChangeHistory, Snapshot
from paimon_core.write.routing import make_partition

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext

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


def changelog_decoupled(options: TableOptions) -> bool:
    """Paimon's rule: changelog outlives its snapshots when any changelog retention option
    (each defaulting to its snapshot counterpart) keeps more than the snapshot one."""
    return ((options.changelog_num_retained_min or 0) > options.snapshot_num_retained_min
            or (options.changelog_num_retained_max or 0) > options.snapshot_num_retained_max
            or (options.changelog_time_retained_ms or 0) > options.snapshot_time_retained_ms)


def changelog_retention(options: TableOptions, now_ms: int) -> Retention:
    """How long long-lived changelogs stay: the changelog options, else the snapshot ones."""
    return Retention(retain_min=options.changelog_num_retained_min or options.snapshot_num_retained_min,
                     retain_max=options.changelog_num_retained_max or options.snapshot_num_retained_max,
                     keep_after_ms=now_ms - (options.changelog_time_retained_ms or options.snapshot_time_retained_ms),
                     limit=options.snapshot_expire_limit)


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
    changelogs_kept: tuple[int, ...] = ()  # expired snapshots whose changelog lives on (decoupled)
    changelogs_expired: tuple[int, ...] = ()  # long-lived changelogs that go
    file_sizes: Mapping[str, int] = field(default_factory=dict, repr=False)  # data, changelog, index files

    @property
    def changes(self) -> bool:
        return bool(self.snapshots or self.changelogs_expired or self.stale_consumers)

    @property
    def files(self) -> int:
        return len(self.data_files) + len(self.changelog_files) + len(self.index_files) + len(self.metadata_files)

    def summary(self) -> str:
        verb = "would expire" if self.dry_run else "expired"
        if not self.snapshots and not self.changelogs_expired:
            return f"{self.table}: no snapshot to expire"
        what = (f"snapshots {self.snapshots[0]}..{self.snapshots[-1]} ({len(self.snapshots)})" if self.snapshots
                else "no snapshot")
        kept = ", their changelog kept" if self.changelogs_kept else ""
        long_lived = (f", long-lived changelogs {self.changelogs_expired[0]}..{self.changelogs_expired[-1]}"
                      if self.changelogs_expired else "")
        return (f"{self.table}: {verb} {what}{kept}{long_lived}, {len(self.data_files)} data files, "
                f"{len(self.changelog_files)} changelog files, {len(self.index_files)} index files ({self.bytes} "
                f"bytes) and {len(self.metadata_files)} metadata files; earliest snapshot now {self.earliest_after}")


_DELETE_CHUNK = 1000  # files per progress report; data files go before metadata files


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

    def __init__(self, table: TableContext) -> None:
        self.table = table
        self.file_io = table.file_io
        self.paths = table.paths
        self.store = table.snapshots
        schema = table.schema
        self._decode = PartitionDecoder(schema.partition_types)
        self._partition_paths: dict[bytes, str] = {}
        self.references = References(self.file_io, self.paths)
        self.changelogs = table.changelogs
        self._history = ChangeHistory(self.store, self.changelogs)
        self._read: dict[int, Snapshot] = {}

    def _snapshot(self, snapshot_id: int) -> Snapshot:
        """A snapshot (or long-lived changelog), read once per expiry: the retention rule and the
        plan look at the same ones."""
        if snapshot_id not in self._read:
            self._read[snapshot_id] = self._history.snapshot(snapshot_id)
        return self._read[snapshot_id]

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

    def plan(self, retention: Retention, *, changelog_older_than_ms: int | None = None) -> ExpiryPlan:
        """Everything an expiry under ``retention`` would delete (reads metadata only).

        ``changelog_older_than_ms``: overrides ``changelog.time-retained`` for long-lived changelogs.
        """
        started = time.monotonic()
        name = self.table.name
        earliest, latest = self.store.earliest_id(), self.store.latest_id()
        if earliest is None or latest is None:
            return ExpiryPlan(name, dry_run=True)
        decoupled = self._check_changelog_lifecycle()
        consumers = self.table.consumer_store.consumers()
        stale = self._stale_consumers(consumers)
        consumer_next = min((c.next_snapshot for c in consumers if c.consumer_id not in stale), default=None)
        end = expiry_end(earliest, latest, retention, time_of=lambda i: self._snapshot(i).time_millis,
                         consumer_next=consumer_next)
        data, changelog, index, metadata = _Files(), _Files(), _Files(), _Files()
        long_lived = self._plan_long_lived(max(end, earliest), latest, consumer_next, changelog_older_than_ms,
                                           changelog, metadata)
        if end <= earliest:
            return ExpiryPlan(name, earliest_after=earliest, changelog_files=changelog.paths(),
                              metadata_files=metadata.paths(), bytes=changelog.bytes, dry_run=True,
                              duration_s=time.monotonic() - started, stale_consumers=stale,
                              changelogs_expired=long_lived, file_sizes=dict(changelog.sizes))
        expiring = [self._snapshot(i) for i in range(earliest, end)]
        tags = [t.snapshot for t in self.table.tags.tags()]
        keep = [self._snapshot(end), *tags]
        self._plan_data(expiring[1:] + keep[:1], keep, data)
        if not decoupled:
            for snapshot in expiring:
                self._plan_changelog(snapshot, changelog)
        self._plan_index(expiring, keep, index)
        self._plan_metadata(expiring, keep[:1], tags, metadata, keep_changelog=decoupled)
        return ExpiryPlan(name, tuple(s.id for s in expiring), end, data.paths(), changelog.paths(), index.paths(),
                          metadata.paths(), data.bytes + changelog.bytes + index.bytes, dry_run=True,
                          duration_s=time.monotonic() - started, stale_consumers=stale,
                          changelogs_kept=tuple(s.id for s in expiring) if decoupled else (),
                          changelogs_expired=long_lived,
                          file_sizes={**data.sizes, **changelog.sizes, **index.sizes})

    def _plan_long_lived(self, earliest_snapshot: int, latest: int, consumer_next: int | None,
                         older_than_ms: int | None, changelog: _Files, metadata: _Files) -> tuple[int, ...]:
        """Long-lived changelogs below ``earliest_snapshot`` past their own retention, and their files."""
        earliest = self.changelogs.earliest_id()
        if earliest is None:
            return ()
        retention = changelog_retention(self.table.options, int(time.time() * 1000))
        if older_than_ms is not None:
            retention = replace(retention, keep_after_ms=older_than_ms)
        end = min(expiry_end(earliest, latest, retention, time_of=lambda i: self._snapshot(i).time_millis,
                             consumer_next=consumer_next), earliest_snapshot)
        expired = tuple(i for i in range(earliest, end) if self.changelogs.exists(i))
        for changelog_id in expired:
            snapshot = self._snapshot(changelog_id)
            self._plan_changelog(snapshot, changelog)
            if snapshot.changelog_manifest_list is not None:
                metadata.add(self.paths.manifest_file(snapshot.changelog_manifest_list))
                for meta in self.references.manifests(snapshot.changelog_manifest_list):
                    metadata.add(self.paths.manifest_file(meta.file_name))
        return expired

    def _stale_consumers(self, consumers: Sequence[Consumer]) -> tuple[str, ...]:
        """Consumers idle for ``consumer.expiration-time``: they no longer pin snapshots (their
        files are removed by the expiry that ignores them)."""
        idle = self.table.options.consumer_expiration_ms
        if idle is None:
            return ()
        cutoff = int(time.time() * 1000) - idle
        return tuple(c.consumer_id for c in consumers if c.modified_ms is not None and c.modified_ms < cutoff)

    def execute(self, plan: ExpiryPlan, progress: Progress = no_progress) -> ExpiryPlan:
        """Delete what ``plan`` lists, in the safe order (see the module docstring)."""
        started = time.monotonic()
        consumers = self.table.consumer_store
        for consumer_id in plan.stale_consumers:
            consumers.remove(consumer_id)
            log.info("removed consumer %s of %s: idle longer than consumer.expiration-time", consumer_id,
                     self.table.name)
        if not plan.changes:
            return replace(plan, dry_run=False)
        for snapshot_id in plan.changelogs_kept:  # before the snapshot goes: a stream never misses it
            self.changelogs.publish(self.store.snapshot(snapshot_id))
        # Before the snapshots go: a writer retrying a commit they held must still find it.
        CommitLedger(self.file_io, self.paths, table=self.table.name).record_expiring(
            self._snapshot(i) for i in plan.snapshots)
        total, deleted = len(plan.snapshots) + len(plan.changelogs_expired) + plan.files, 0
        for snapshot_id in plan.snapshots:
            self._delete(self.paths.snapshot_file(snapshot_id))
            deleted += 1
            progress("expiring snapshots", deleted, total)
        if plan.snapshots and plan.earliest_after is not None:
            self.store.write_earliest_hint(plan.earliest_after)
        for changelog_id in plan.changelogs_expired:
            self._delete(self.changelogs.file(changelog_id))
        if plan.changelogs_expired:
            self.changelogs.write_earliest_hint(plan.changelogs_expired[-1] + 1)
        files = (*plan.data_files, *plan.changelog_files, *plan.index_files, *plan.metadata_files)
        deleted += len(plan.changelogs_expired)
        for start in range(0, len(files), _DELETE_CHUNK):
            chunk = files[start:start + _DELETE_CHUNK]
            self._delete_many(chunk)
            deleted += len(chunk)
            progress("expiring snapshots", deleted, total)
        done = replace(plan, dry_run=False, duration_s=plan.duration_s + time.monotonic() - started)
        log.info("%s", done.summary())
        return done

    def _delete(self, path: str) -> None:
        """Delete one planned file (snapshot files go one by one, oldest first, so the retained
        ids stay contiguous whenever the expiry stops)."""
        self._delete_many((path,))

    def _delete_many(self, paths: Sequence[str]) -> None:
        """A storage failure (no permission) stops the expiry with a typed error naming the file.
        Deletion is ordered (snapshots, then files, then metadata), so what was deleted before is
        unreferenced by every snapshot kept; orphan cleanup reclaims the rest."""
        try:
            self.file_io.delete_many(paths)
        except FileIOError as exc:
            raise FileIOError(f"expiry of table {self.table.name}: {exc}") from exc

    # ---- planning -------------------------------------------------------------------------------

    def _check_changelog_lifecycle(self) -> bool:
        """Whether changelog outlives snapshots; refused where the changelog is the data files
        themselves (producer none, append tables), which this version does not keep."""
        table = self.table
        if not changelog_decoupled(table.options):
            return False
        if not table.schema.primary_keys or table.options.changelog_producer == "none":
            raise UnsupportedFeatureError(
                f"table {table.name} keeps changelog longer than snapshots (changelog.num-retained.* / "
                "changelog.time-retained above the snapshot.* values) but has no changelog files "
                "(changelog-producer none): keeping its data files as changelog is not supported, so expiry "
                "refuses rather than delete what those options keep")
        return True

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

    def _plan_index(self, expiring: Sequence[Snapshot], keep: Sequence[Snapshot], out: _Files) -> None:
        kept = {name for snapshot in keep for name, _ in self.references.index_files(snapshot)}
        for snapshot in expiring:
            for name, size in self.references.index_files(snapshot):
                if name not in kept:
                    out.add(self.paths.index_file(name), size)

    def _metadata_of(self, snapshot: Snapshot, reach: str = SNAPSHOT) -> tuple[set[str], list[ManifestFileMeta]]:
        """The manifest lists ``reach`` covers, the index manifest and statistics file, and the manifests."""
        names = manifest_lists(snapshot, reach)
        manifests = [meta for name in names for meta in self.references.manifests(name)]
        files = {self.paths.manifest_file(name) for name in names}
        if snapshot.index_manifest is not None:
            files.add(self.paths.manifest_file(snapshot.index_manifest))
        if snapshot.statistics is not None:
            files.add(f"{self.paths.root}/statistics/{snapshot.statistics}")
        return files, manifests

    def _plan_metadata(self, expiring: Sequence[Snapshot], keep: Sequence[Snapshot], tags: Sequence[Snapshot],
                       out: _Files, *, keep_changelog: bool) -> None:
        kept: set[str] = set()
        for snapshot, reach in [*((s, SNAPSHOT) for s in keep), *((t, TAG) for t in tags)]:
            files, manifests = self._metadata_of(snapshot, reach)
            kept |= files | {self.paths.manifest_file(m.file_name) for m in manifests}
        for snapshot in expiring:
            # a decoupled changelog outlives its snapshot as changelog/changelog-N
            files, manifests = self._metadata_of(snapshot, TAG if keep_changelog else SNAPSHOT)
            for path in files | {self.paths.manifest_file(m.file_name) for m in manifests}:
                if path not in kept:
                    out.add(path)


def expire(table: TableContext, *, older_than_ms: int | None = None, retain_min: int | None = None,
           retain_max: int | None = None, limit: int | None = None, dry_run: bool = False,
           progress: Progress = no_progress) -> ExpiryPlan:
    """Plan an expiry under the table's retention (overridden by the arguments given) and, unless
    ``dry_run``, carry it out: the one path of both maintaining writers and explicit expiries.

    ``older_than_ms`` also overrides ``changelog.time-retained`` for long-lived changelogs.
    """
    expiry = SnapshotExpiry(table)
    plan = expiry.plan(expiry.retention(older_than_ms=older_than_ms, retain_min=retain_min,
                                        retain_max=retain_max, limit=limit),
                       changelog_older_than_ms=older_than_ms)
    return plan if dry_run else expiry.execute(plan, progress)
