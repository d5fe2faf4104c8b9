"""Tags: named snapshots kept past expiry (Paimon's ``tag/tag-<name>``).

A tag file holds the tagged snapshot's JSON plus ``tagCreateTime`` (a local date-time as
Jackson writes it, an array) and, when given, ``tagTimeRetained`` (seconds). Reading a tag reads
that JSON, so time travel to it works after the snapshot itself has expired, and everything the
snapshot references is kept by expiry and orphan cleanup for as long as the tag exists.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass, replace

from paimon_core.errors import InvalidNameError, SnapshotNotFoundError, TagExistsError
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.snapshot import Snapshot

log = logging.getLogger(__name__)

_PREFIX = "tag-"
_VALID_NAME = re.compile(r"^[A-Za-z0-9_.\-]+( [A-Za-z0-9_.\-]+)*$")  # hourly tags: "2024-01-31 10"


@dataclass(frozen=True, slots=True)
class Tag:
    """A tag's name and the snapshot it keeps."""

    name: str
    snapshot: Snapshot

    @property
    def snapshot_id(self) -> int:
        return self.snapshot.id

    @property
    def time_retained_s(self) -> float | None:
        value = self.snapshot.extra.get("tagTimeRetained")
        return float(value) if value is not None else None

    def __repr__(self) -> str:
        return f"Tag({self.name!r}, snapshot_id={self.snapshot.id}, commit_kind={self.snapshot.commit_kind!r})"


def _create_time(now: dt.datetime) -> list[int]:
    """``LocalDateTime`` as Jackson's JavaTimeModule writes it: [y, m, d, h, min, s, nanos]."""
    return [now.year, now.month, now.day, now.hour, now.minute, now.second, now.microsecond * 1000]


class TagStore:
    """Creates, lists and deletes one table's tags."""

    def __init__(self, file_io: FileIO, paths: TablePaths, table: str) -> None:
        self.file_io = file_io
        self.paths = paths
        self.table = table

    def check_name(self, name: str) -> str:
        """Paimon refuses blank and all-digit names (they read as snapshot ids); we also keep
        names to what a file name can safely hold."""
        if not name or name.isdigit() or not _VALID_NAME.match(name):
            raise InvalidNameError(f"tag name {name!r} of table {self.table} must be letters, digits, '_', '.', "
                                   "'-' or single inner spaces, and not only digits")
        return name

    def get(self, name: str) -> Tag:
        path = self.paths.tag_file(self.check_name(name))
        try:
            text = self.file_io.read_bytes(path)
        except FileNotFoundError:
            raise SnapshotNotFoundError(f"tag {name!r} of table {self.table} does not exist") from None
        return Tag(name, Snapshot.from_json(text, source=path))

    def create(self, name: str, snapshot: Snapshot, *, time_retained_s: float | None = None) -> Tag:
        """Write the tag (never replacing one); raises :class:`TagExistsError` if it exists."""
        extra = {key: value for key, value in snapshot.extra.items()
                 if key not in ("tagCreateTime", "tagTimeRetained")}
        extra["tagCreateTime"] = _create_time(dt.datetime.now())
        if time_retained_s is not None:
            extra["tagTimeRetained"] = time_retained_s
        tagged = replace(snapshot, extra=extra)
        if not self.file_io.create_if_absent(self.paths.tag_file(self.check_name(name)),
                                             tagged.to_json().encode("utf-8")):
            raise TagExistsError(f"tag {name!r} of table {self.table} already exists")
        log.info("tagged snapshot %d of %s as %r", snapshot.id, self.table, name)
        return Tag(name, tagged)

    def delete(self, name: str) -> bool:
        """Remove the tag file; what only the tag kept is left to orphan-file cleanup."""
        path = self.paths.tag_file(self.check_name(name))
        if not self.file_io.exists(path):
            return False
        self.file_io.delete(path)
        log.info("deleted tag %r of %s", name, self.table)
        return True

    def tags(self) -> list[Tag]:
        """Every tag, by snapshot id then name; a tag deleted while listing is skipped."""
        found = []
        for status in self.file_io.list_dir(self.paths.tag_dir):
            if status.is_dir or not status.name.startswith(_PREFIX):
                continue
            try:
                text = self.file_io.read_bytes(status.path)
            except FileNotFoundError:
                continue
            found.append(Tag(status.name[len(_PREFIX):], Snapshot.from_json(text, source=status.path)))
        return sorted(found, key=lambda t: (t.snapshot_id, t.name))
