"""Snapshots (``snapshot/snapshot-N`` JSON) and the store that finds and publishes them.

``LATEST``/``EARLIEST`` are hints only: they are trusted after a cheap existence check and the
directory is listed whenever they are missing or stale.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import numbers
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from paimon_core.errors import CorruptMetadataError, InvalidArgumentError, SnapshotExpiredError, SnapshotNotFoundError
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths

log = logging.getLogger(__name__)

SNAPSHOT_VERSION = 3
BATCH_COMMIT_IDENTIFIER = 2**63 - 1
# How far a stale LATEST hint is followed by existence checks before listing the directory.
LATEST_PROBES = 8



def utc_text(millis: int) -> str:
    """Epoch milliseconds as ``2024-01-01 12:00:00 UTC`` for messages and reprs; a time beyond the
    calendar (a cut-off far in the future) as its milliseconds."""
    try:
        return dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError, OSError):
        return f"{millis} ms"


@overload
def epoch_ms(moment: None, *, what: str, name: str) -> None: ...


@overload
def epoch_ms(moment: dt.datetime | int, *, what: str, name: str) -> int: ...


@overload
def epoch_ms(moment: dt.datetime | int | None, *, what: str, name: str) -> int | None: ...


def epoch_ms(moment: dt.datetime | int | None, *, what: str, name: str) -> int | None:
    """Epoch milliseconds of a datetime (naive: local time, as ``datetime.now()`` gives) or of
    an int already in milliseconds.

    Anything else (a date string, a float, a bool) is refused rather than guessed at: a wrong
    cut-off decides which snapshots and files are deleted.
    """
    if moment is None or isinstance(moment, dt.datetime):
        return None if moment is None else int(moment.timestamp() * 1000)
    if isinstance(moment, numbers.Integral) and not isinstance(moment, bool):  # int, numpy integers
        return int(moment)
    raise InvalidArgumentError(f"{what}: {name} must be a datetime or epoch milliseconds (int), "
                               f"not {type(moment).__name__} {moment!r}")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One committed version of a table."""

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    total_record_count: int
    delta_record_count: int
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: Mapping[str, str] | None = None
    next_row_id: int | None = None
    uuid: str | None = None
    writer_version: str | None = None
    version: int = SNAPSHOT_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    _JSON_FIELDS = (
        ("version", "version"), ("id", "id"), ("schemaId", "schema_id"),
        ("baseManifestList", "base_manifest_list"),
        ("baseManifestListSize", "base_manifest_list_size"),
        ("deltaManifestList", "delta_manifest_list"),
        ("deltaManifestListSize", "delta_manifest_list_size"),
        ("changelogManifestList", "changelog_manifest_list"),
        ("changelogManifestListSize", "changelog_manifest_list_size"),
        ("indexManifest", "index_manifest"), ("commitUser", "commit_user"),
        ("commitIdentifier", "commit_identifier"), ("commitKind", "commit_kind"),
        ("timeMillis", "time_millis"), ("totalRecordCount", "total_record_count"),
        ("deltaRecordCount", "delta_record_count"), ("changelogRecordCount", "changelog_record_count"),
        ("watermark", "watermark"), ("statistics", "statistics"), ("properties", "properties"),
        ("nextRowId", "next_row_id"), ("uuid", "uuid"), ("writerVersion", "writer_version"),
    )
    _REQUIRED = ("id", "schemaId", "baseManifestList", "deltaManifestList", "commitUser",
                 "commitIdentifier", "commitKind", "timeMillis")

    def __repr__(self) -> str:
        committed = utc_text(self.time_millis)
        return (f"Snapshot(id={self.id}, commit_kind={self.commit_kind!r}, committed={committed!r}, "
                f"schema_id={self.schema_id}, total_record_count={self.total_record_count})")

    def to_json(self) -> str:
        doc: dict[str, Any] = {}
        for json_name, attr in self._JSON_FIELDS:
            value = getattr(self, attr)
            if value is not None:
                doc[json_name] = dict(value) if isinstance(value, Mapping) else value
        doc.update(self.extra)
        return json.dumps(doc, indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "snapshot") -> Snapshot:
        try:
            doc = json.loads(text)
            missing = [k for k in cls._REQUIRED if k not in doc]
            if missing:
                raise KeyError(", ".join(missing))
            known = {json_name for json_name, _ in cls._JSON_FIELDS}
            values = {attr: doc.get(json_name) for json_name, attr in cls._JSON_FIELDS}
            values["version"] = int(doc.get("version", 1))
            values["total_record_count"] = int(doc.get("totalRecordCount") or 0)
            values["delta_record_count"] = int(doc.get("deltaRecordCount") or 0)
            extra = {k: v for k, v in doc.items() if k not in known}
            return cls(**values, extra=extra)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadataError(f"cannot parse {source}: {exc}") from exc


class SnapshotStore:
    """Reads, lists and atomically publishes the snapshots of one table."""

    kind = "snapshot"

    def __init__(self, file_io: FileIO, paths: TablePaths, table: str) -> None:
        self.file_io = file_io
        self.paths = paths
        self.table = table
        self._dir = f"{paths.root}/{self.kind}"
        self._latest_hint = f"{self._dir}/LATEST"
        self._earliest_hint = f"{self._dir}/EARLIEST"
        self._names = re.compile(rf"^{self.kind}-(\d+)$")

    def file(self, snapshot_id: int) -> str:
        return f"{self._dir}/{self.kind}-{snapshot_id}"

    def snapshot(self, snapshot_id: int) -> Snapshot:
        path = self.file(snapshot_id)
        try:
            text = self.file_io.read_bytes(path)
        except FileNotFoundError:
            earliest, latest = self.earliest_id(), self.latest_id()
            if earliest is not None and snapshot_id < earliest:
                raise SnapshotExpiredError(
                    f"{self.kind} {snapshot_id} of table {self.table} has expired: the earliest retained is "
                    f"{earliest}; keep snapshots you need with a tag or a consumer id, or a longer "
                    "snapshot.time-retained") from None
            raise SnapshotNotFoundError(f"{self.kind} {snapshot_id} of table {self.table} does not exist (the "
                                        f"latest is {latest}, the earliest {earliest})") from None
        return Snapshot.from_json(text, source=path)

    def exists(self, snapshot_id: int) -> bool:
        return self.file_io.file_exists(self.file(snapshot_id))

    def snapshot_ids(self) -> list[int]:
        """Every snapshot id present on storage, ascending (a directory listing)."""
        ids = []
        for status in self.file_io.list_dir(self._dir):
            match = self._names.match(status.name)
            if match:
                ids.append(int(match.group(1)))
        return sorted(ids)

    def _hint(self, path: str) -> int | None:
        try:
            return int(self.file_io.read_text(path).strip())
        except (FileNotFoundError, ValueError):
            return None

    def latest_id(self) -> int | None:
        """The hint, probed forward (a writer may have died between its commit and the hint
        update, or lost the hint race): existence checks are cheap, listings are not on S3."""
        hint = self._hint(self._latest_hint)
        if hint is not None and self.exists(hint):
            for _ in range(LATEST_PROBES):
                if not self.exists(hint + 1):
                    return hint
                hint += 1
        ids = self.snapshot_ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        hint = self._hint(self._earliest_hint)
        if hint is not None and self.exists(hint) and not self.exists(hint - 1):
            return hint
        ids = self.snapshot_ids()
        return ids[0] if ids else None

    def latest(self) -> Snapshot | None:
        """The latest snapshot. The hinted one is read at once (a missing file answers like an
        existence check would), so a current hint costs three requests: the hint, the snapshot
        and the check that no newer one exists."""
        hint = self._hint(self._latest_hint)
        if hint is not None:
            current = self._read_if_present(hint)
            if current is not None:
                probed = hint
                for _ in range(LATEST_PROBES):
                    if not self.exists(probed + 1):
                        return current if probed == hint else self.snapshot(probed)
                    probed += 1
        ids = self.snapshot_ids()
        return self.snapshot(ids[-1]) if ids else None

    def _read_if_present(self, snapshot_id: int) -> Snapshot | None:
        path = self.file(snapshot_id)
        try:
            text = self.file_io.read_bytes(path)
        except FileNotFoundError:
            return None
        return Snapshot.from_json(text, source=path)

    def snapshots(self) -> Iterator[Snapshot]:
        """Every snapshot, oldest first."""
        for snapshot_id in self.snapshot_ids():
            try:
                yield self.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                continue  # expired while listing

    def at_or_before(self, timestamp_ms: int) -> Snapshot:
        """The newest snapshot committed at or before ``timestamp_ms``."""
        found = self._newest_before(timestamp_ms, inclusive=True)
        if found is None:
            raise SnapshotNotFoundError(
                f"table {self.table} has no snapshot at or before {timestamp_ms} "
                f"({utc_text(timestamp_ms)}) "
                f"(the earliest retained snapshot is {self.earliest_id()})")
        return found

    def older_than(self, timestamp_ms: int) -> int | None:
        """Id of the newest snapshot committed strictly before ``timestamp_ms``, if any."""
        found = self._newest_before(timestamp_ms, inclusive=False)
        return found.id if found is not None else None

    def _newest_before(self, timestamp_ms: int, *, inclusive: bool) -> Snapshot | None:
        """Binary search over commit times (they grow with snapshot ids)."""
        earliest, latest = self.earliest_id(), self.latest_id()
        if earliest is None or latest is None:
            raise SnapshotNotFoundError(f"table {self.table} has no snapshots")
        found: Snapshot | None = None
        low, high = earliest, latest
        while low <= high:
            middle = (low + high) // 2
            candidate = self.snapshot(middle)
            if candidate.time_millis < timestamp_ms or (inclusive and candidate.time_millis == timestamp_ms):
                found, low = candidate, middle + 1
            else:
                high = middle - 1
        return found

    def try_publish(self, snapshot: Snapshot) -> bool:
        """Create ``snapshot-N`` if absent; True when this call created it. The caller updates
        the ``LATEST`` hint once it has checked the id was really free (see commit)."""
        return self.file_io.create_if_absent(self.file(snapshot.id), snapshot.to_json().encode("utf-8"))

    def write_latest_hint(self, snapshot_id: int) -> None:
        """Best effort: a stale or missing hint only costs a directory listing."""
        self._write_hint(self._latest_hint, snapshot_id)
        if snapshot_id == 1:
            self.write_earliest_hint(1)

    def write_earliest_hint(self, snapshot_id: int) -> None:
        """Best effort, like LATEST; expiry moves it forward."""
        self._write_hint(self._earliest_hint, snapshot_id)

    def _write_hint(self, path: str, snapshot_id: int) -> None:
        try:
            self.file_io.write_bytes(path, str(snapshot_id).encode())
        except OSError as exc:
            log.warning("could not update hint %s of %s: %s", path, self.table, exc)


class ChangelogStore(SnapshotStore):
    """Long-lived changelogs (``changelog/changelog-N``): snapshots expired while their changelog
    is kept longer (``changelog.num-retained.*`` / ``changelog.time-retained`` above the
    snapshot values). Same JSON as a snapshot; only its changelog manifest list stays valid."""

    kind = "changelog"

    def publish(self, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` as a long-lived changelog (idempotent)."""
        self.file_io.create_if_absent(self.file(snapshot.id), snapshot.to_json().encode("utf-8"))
        self._write_hint(self._latest_hint, max(snapshot.id, self._hint(self._latest_hint) or 0))


class ChangeHistory:
    """Snapshots and long-lived changelogs as one sequence of ids, for change reads and streams."""

    def __init__(self, snapshots: SnapshotStore, changelogs: ChangelogStore) -> None:
        self.snapshots = snapshots
        self.changelogs = changelogs

    def latest_id(self) -> int | None:
        return self.snapshots.latest_id()

    def earliest_id(self) -> int | None:
        earliest = self.snapshots.earliest_id()
        kept = self.changelogs.earliest_id()
        if kept is None:
            return earliest
        return kept if earliest is None else min(kept, earliest)

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """The snapshot, or the long-lived changelog of an expired one."""
        try:
            return self.snapshots.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            if self.changelogs.exists(snapshot_id):
                return self.changelogs.snapshot(snapshot_id)
            raise
