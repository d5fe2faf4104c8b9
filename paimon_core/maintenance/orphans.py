"""Orphan-file cleanup (Paimon's ``remove_orphan_files``): files no snapshot, tag or long-lived
changelog references, left by crashed commits and compactions, failed writes, rollbacks, tag
deletions or an expiry that stopped half-way.

Candidates are listed **before** the references are collected, and only files older than
``older_than`` are candidates: a commit landing meanwhile only adds references, and a commit
still in flight writes files younger than the window. References are matched by file name (names
are unique). A snapshot or tag that vanishes while being read was expired or rolled back and is
skipped; any other metadata that cannot be read stops the cleanup with nothing deleted.
"""

from __future__ import annotations

import datetime
import logging
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from paimon_core.errors import FileIOError, MissingFileError, OptionError, SnapshotNotFoundError
from paimon_core.fileio import FileStatus
from paimon_core.maintenance.reachable import CHANGELOG, SNAPSHOT, TAG, References
from paimon_core.progress import Progress, no_progress
from paimon_core.snapshot import Snapshot, utc_text

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext

log = logging.getLogger(__name__)

DAY_MS = 24 * 3600 * 1000
# Below this age a file may belong to a commit still being written or retried: never a
# candidate unless the caller forces it (Paimon's default window is a day).
SAFE_FLOOR_MS = 3600 * 1000
_METADATA_DIRS = ("manifest", "index", "statistics")
_NOT_DATA = {"schema", "snapshot", "manifest", "index", "statistics", "tag", "consumer", "changelog", "branch",
             "commit-ledger"}
_SNAPSHOT_FILES = re.compile(r"^(snapshot-\d+|changelog-\d+|EARLIEST|LATEST)$")


@dataclass(frozen=True, slots=True)
class OrphanFiles:
    """What a cleanup deleted (``dry_run``: would delete)."""

    table: str
    older_than_ms: int
    candidates: int
    orphans: tuple[str, ...]
    bytes: int
    dry_run: bool
    duration_s: float
    file_sizes: Mapping[str, int] = field(default_factory=dict, repr=False)  # of each orphan

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (f"{self.table}: {verb} {len(self.orphans)} orphan files ({self.bytes} bytes) of {self.candidates} "
                f"files older than {utc_text(self.older_than_ms)}")


class OrphanFilesClean:
    """Finds and removes one table's orphan files."""

    def __init__(self, table: TableContext) -> None:
        self.table = table
        self.file_io = table.file_io
        self.paths = table.paths

    def run(self, *, older_than_ms: int | None = None, dry_run: bool = True, force: bool = False,
            progress: Progress = no_progress) -> OrphanFiles:
        started = time.monotonic()
        now = int(time.time() * 1000)
        older_than = now - DAY_MS if older_than_ms is None else older_than_ms
        if older_than > now - SAFE_FLOOR_MS and not force:
            moment = datetime.datetime.fromtimestamp(older_than / 1000, datetime.UTC).isoformat(timespec="seconds")
            raise OptionError(f"orphan cleanup of table {self.table.name}: older_than {moment} is within "
                              f"{SAFE_FLOOR_MS // 60000} minutes of now, where files of commits in flight live; "
                              "pass force=True if no writer is running")
        candidates = []
        for listed, status in enumerate(self._candidates(), 1):
            if status.mtime_ms is not None and status.mtime_ms < older_than:
                candidates.append(status)
            if listed % 100 == 0:
                progress("listing files", listed, None)
        used = self._used_names(progress)
        orphans = [f for f in candidates if f.name not in used]
        if not dry_run:
            try:
                self.file_io.delete_many([status.path for status in orphans])
            except FileIOError as exc:  # e.g. no write permission: typed, naming the file
                raise FileIOError(f"orphan cleanup of table {self.table.name}: {exc}") from exc
        result = OrphanFiles(self.table.name, older_than, len(candidates), tuple(sorted(f.path for f in orphans)),
                             sum(f.size for f in orphans), dry_run, time.monotonic() - started,
                             {f.path: f.size for f in orphans})
        log.info("%s", result.summary())
        return result

    # ---- candidates -------------------------------------------------------------------------

    def _candidates(self) -> Iterator[FileStatus]:
        root = self.paths.root
        for directory in _METADATA_DIRS:
            yield from self._files(f"{root}/{directory}")
        for directory in ("snapshot", "changelog"):
            yield from (f for f in self._files(f"{root}/{directory}") if not _SNAPSHOT_FILES.match(f.name))
        yield from self._data_files(root, len(self.table.schema.partition_keys))

    def _files(self, directory: str) -> Iterator[FileStatus]:
        return (f for f in self.file_io.list_dir(directory) if not f.is_dir)

    def _data_files(self, directory: str, partition_depth: int) -> Iterator[FileStatus]:
        """Files of every bucket directory, below ``partition_depth`` levels of partitions."""
        for entry in self.file_io.list_dir(directory):
            if not entry.is_dir or (directory == self.paths.root and entry.name in _NOT_DATA):
                continue
            if entry.name.startswith("bucket-"):
                yield from self._files(entry.path)
            elif partition_depth > 0 and "=" in entry.name:
                yield from self._data_files(entry.path, partition_depth - 1)

    # ---- what is referenced -----------------------------------------------------------------

    def _used_names(self, progress: Progress = no_progress) -> set[str]:
        references = References(self.file_io, self.paths)
        used: set[str] = set()
        for read, (source, snapshot, reach) in enumerate(self._referencing_snapshots(), 1):
            progress("reading snapshots and tags", read, None)
            try:
                used |= references.names(snapshot, reach)
            except MissingFileError:
                if self.file_io.exists(source):
                    raise  # the snapshot is there but its metadata is not: never guess
                log.info("%s vanished while it was read (expired or rolled back); skipped", source)
        return used

    def _referencing_snapshots(self) -> Iterator[tuple[str, Snapshot, str]]:
        """Every snapshot, tag and long-lived changelog, with the file it was read from and what it
        reaches (:data:`SNAPSHOT`, :data:`TAG` or :data:`CHANGELOG`)."""
        store = self.table.snapshots
        for snapshot_id in store.snapshot_ids():
            try:
                yield self.paths.snapshot_file(snapshot_id), store.snapshot(snapshot_id), SNAPSHOT
            except SnapshotNotFoundError:
                continue  # expired or rolled back while listing
        for tag in self.table.tags.tags():
            yield self.paths.tag_file(tag.name), tag.snapshot, TAG
        changelogs = self.table.changelogs
        for changelog_id in changelogs.snapshot_ids():
            try:
                yield changelogs.file(changelog_id), changelogs.snapshot(changelog_id), CHANGELOG
            except SnapshotNotFoundError:
                continue  # expired while listing
