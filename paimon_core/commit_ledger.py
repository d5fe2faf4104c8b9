"""The commit ledger: which commit each writer landed last, kept when its snapshots expire.

Exactly-once writes rest on Paimon's commit identity: a writer that retries (or a job re-run
after a crash) asks whether its commit ``(commit user, identifier)`` landed, and Paimon answers
from the snapshots, newest first, up to the user's newest one. Once expiry has deleted those
snapshots the answer is "no", and the commit is written twice. So before expiry deletes
snapshots, it records each commit user's newest expired commit here (with the snapshot that
holds its data when the newest one is its compaction), and the question falls back to this
record when no retained snapshot of the user is left.

Layout: ``commit-ledger/<sha-256 of the user, 32 hex digits>/commit-<snapshot id>``, a small
JSON file per user and expiry; the newest id is the user's record. Files are written before any
snapshot is deleted and never changed after, so an expiry killed half-way leaves a record of
snapshots that still exist (harmless: retained snapshots are asked first). Apache Paimon does
not know the directory (its readers and orphan cleanup leave it alone); only this package's
expiry writes it, so expiries run by other engines leave their users without a record. A
rollback to a tag older than the earliest snapshot forgets the records it makes untrue.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from paimon_core.errors import CorruptMetadataError
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot

log = logging.getLogger(__name__)

_PREFIX = "commit-"
_VERSION = 1


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """One landed commit: its snapshot (maybe expired since), identity, kind and properties."""

    snapshot_id: int
    commit_user: str
    commit_identifier: int
    commit_kind: str
    properties: Mapping[str, str] = field(default_factory=dict)
    expired: bool = False  # known from the ledger: the snapshot itself is gone

    @classmethod
    def of(cls, snapshot: Snapshot) -> CommitRecord:
        return cls(snapshot.id, snapshot.commit_user, snapshot.commit_identifier, snapshot.commit_kind,
                   dict(snapshot.properties or {}))


def user_digest(commit_user: str) -> str:
    return hashlib.sha256(commit_user.encode("utf-8")).hexdigest()[:32]


class CommitLedger:
    """Reads and writes one table's ledger."""

    def __init__(self, file_io: FileIO, paths: TablePaths, *, table: str = "") -> None:
        self.file_io = file_io
        self.paths = paths
        self.table = table

    def record_expiring(self, snapshots: Iterable[Snapshot]) -> int:
        """Record each commit user's newest commit among ``snapshots`` (those about to expire);
        batch commits (no identifier to retry with) are left out. Returns the users recorded."""
        newest: dict[str, Snapshot] = {}
        by_user: dict[str, list[Snapshot]] = {}
        for snapshot in snapshots:
            if snapshot.commit_identifier == BATCH_COMMIT_IDENTIFIER:
                continue
            by_user.setdefault(snapshot.commit_user, []).append(snapshot)
            if snapshot.commit_user not in newest or snapshot.id > newest[snapshot.commit_user].id:
                newest[snapshot.commit_user] = snapshot
        for user, last in newest.items():
            same = [s for s in by_user[user] if s.commit_identifier == last.commit_identifier]
            body = {"version": _VERSION, "commitUser": user,
                    "commits": [_to_json(CommitRecord.of(s)) for s in sorted(same, key=lambda s: -s.id)]}
            self.file_io.write_bytes(self._file(user, last.id), json.dumps(body, sort_keys=True).encode("utf-8"))
        if newest:
            log.info("table %s: recorded the newest expiring commit of %d commit user(s) in the commit ledger",
                     self.table, len(newest))
        return len(newest)

    def newest(self, commit_user: str) -> list[CommitRecord]:
        """The user's newest recorded commit (its snapshots, newest first), or [] if none."""
        directory = f"{self.paths.commit_ledger_dir}/{user_digest(commit_user)}"
        ids = [_snapshot_id(f.name) for f in self.file_io.list_dir(directory) if f.name.startswith(_PREFIX)]
        known = [i for i in ids if i is not None]
        if not known:
            return []
        path = self._file(commit_user, max(known))
        try:
            body = json.loads(self.file_io.read_bytes(path))
            records = [_from_json(entry) for entry in body["commits"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptMetadataError(f"commit ledger file {path} of table {self.table} cannot be read: "
                                       f"{exc}") from exc
        return [r for r in records if r.commit_user == commit_user]

    def forget_after(self, snapshot_id: int) -> int:
        """Remove records of snapshots newer than ``snapshot_id`` (a rollback undid them)."""
        doomed = []
        for user_dir in self.file_io.list_dir(self.paths.commit_ledger_dir):
            if not user_dir.is_dir:
                continue
            doomed += [f.path for f in self.file_io.list_dir(user_dir.path)
                       if (_snapshot_id(f.name) or 0) > snapshot_id]
        if doomed:
            self.file_io.delete_many(doomed)
            log.info("table %s: forgot %d commit ledger record(s) newer than snapshot %d", self.table, len(doomed),
                     snapshot_id)
        return len(doomed)

    def _file(self, commit_user: str, snapshot_id: int) -> str:
        return f"{self.paths.commit_ledger_dir}/{user_digest(commit_user)}/{_PREFIX}{snapshot_id}"


def matching(records: Iterable[CommitRecord], commit_identifier: int,
             kinds: Collection[str] | None = None) -> CommitRecord | None:
    """Paimon's rule over one user's commits, newest first: the commit with ``commit_identifier``
    (of one of ``kinds``), or the newest one when it has a larger identifier (identifiers of a
    user only grow), else None."""
    for record in records:
        if commit_identifier != BATCH_COMMIT_IDENTIFIER and record.commit_identifier == BATCH_COMMIT_IDENTIFIER:
            continue
        if record.commit_identifier == commit_identifier:
            if kinds is None or record.commit_kind in kinds:
                return record
            continue
        if commit_identifier != BATCH_COMMIT_IDENTIFIER and record.commit_identifier > commit_identifier:
            return record
        if commit_identifier != BATCH_COMMIT_IDENTIFIER:
            return None
    return None


def _snapshot_id(name: str) -> int | None:
    digits = name[len(_PREFIX):]
    return int(digits) if name.startswith(_PREFIX) and digits.isdigit() else None


def _to_json(record: CommitRecord) -> dict[str, object]:
    return {"snapshotId": record.snapshot_id, "commitUser": record.commit_user,
            "commitIdentifier": record.commit_identifier, "commitKind": record.commit_kind,
            "properties": dict(record.properties)}


def _from_json(entry: Mapping[str, object]) -> CommitRecord:
    properties = entry.get("properties") or {}
    assert isinstance(properties, dict)
    return CommitRecord(int(str(entry["snapshotId"])), str(entry["commitUser"]), int(str(entry["commitIdentifier"])),
                        str(entry["commitKind"]), {str(k): str(v) for k, v in properties.items()}, expired=True)
