"""Streaming consumers' progress: ``consumer/consumer-<id>`` holding ``{"nextSnapshot": N}``.

The file is Paimon's own, so Java and pypaimon readers resume from it too, and snapshot expiry
(which must not pass the smallest ``nextSnapshot``) reads the same files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from paimon_core.errors import CorruptMetadataError, InvalidNameError
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths

_VALID_ID = re.compile(r"^[A-Za-z0-9_.\-]+$")
_PREFIX = "consumer-"


@dataclass(frozen=True, slots=True)
class Consumer:
    """A consumer id and the first snapshot it has not read yet."""

    consumer_id: str
    next_snapshot: int
    modified_ms: int | None = None


class ConsumerStore:
    """Reads and writes one table's consumer files."""

    def __init__(self, file_io: FileIO, paths: TablePaths, table: str) -> None:
        self.file_io = file_io
        self.paths = paths
        self.table = table

    def check_id(self, consumer_id: str) -> str:
        if not _VALID_ID.match(consumer_id):
            raise InvalidNameError(f"consumer id {consumer_id!r} of table {self.table} may hold only letters, "
                                   "digits, '_', '.' and '-'")
        return consumer_id

    def next_snapshot(self, consumer_id: str) -> int | None:
        """Where ``consumer_id`` resumes, or None if it never committed progress."""
        path = self.paths.consumer_file(self.check_id(consumer_id))
        try:
            text = self.file_io.read_text(path)
        except FileNotFoundError:
            return None
        return self._parse(path, text)

    def _parse(self, path: str, text: str) -> int:
        try:
            value = json.loads(text)["nextSnapshot"]
        except (ValueError, KeyError, TypeError):
            raise CorruptMetadataError(f"consumer file {path} of table {self.table} is not "
                                       f'{{"nextSnapshot": N}}: {text[:80]!r}') from None
        if not isinstance(value, int) or value < 0:
            raise CorruptMetadataError(f"consumer file {path} of table {self.table} has nextSnapshot {value!r}")
        return value

    def record(self, consumer_id: str, next_snapshot: int) -> None:
        """Save progress: the consumer has read every snapshot before ``next_snapshot``."""
        path = self.paths.consumer_file(self.check_id(consumer_id))
        self.file_io.write_bytes(path, json.dumps({"nextSnapshot": next_snapshot}).encode())

    def consumers(self) -> list[Consumer]:
        """Every consumer of the table (for expiry, which must keep what they still need)."""
        found = []
        for status in self.file_io.list_dir(self.paths.consumer_dir):
            name = status.name
            if status.is_dir or not name.startswith(_PREFIX):
                continue
            try:
                text = self.file_io.read_text(status.path)
            except FileNotFoundError:
                continue  # removed meanwhile
            found.append(Consumer(name[len(_PREFIX):], self._parse(status.path, text), status.mtime_ms))
        return sorted(found, key=lambda c: c.consumer_id)

    def remove(self, consumer_id: str) -> None:
        self.file_io.delete_quietly(self.paths.consumer_file(self.check_id(consumer_id)))
