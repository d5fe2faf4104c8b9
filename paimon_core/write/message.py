"""What a writer hands to the committer: the files it produced per (partition, bucket)."""

from __future__ import annotations

from dataclasses import dataclass

from paimon_core.manifest import DataFileMeta, IndexManifestEntry
from paimon_core.write.routing import Partition


@dataclass(frozen=True, slots=True)
class CommitMessage:
    """New data files of one (partition, bucket), not yet visible to readers."""

    partition: Partition
    bucket: int
    total_buckets: int
    new_files: tuple[DataFileMeta, ...]
    # changelog-producer=input: the commit's input rows with their kinds (changelog manifest list)
    changelog_files: tuple[DataFileMeta, ...] = ()


@dataclass(frozen=True, slots=True)
class CompactIncrement:
    """A compaction of one (partition, bucket): files it removes and files that replace them.

    A file moved to another level appears in both, under the same name (only its level differs).
    """

    partition: Partition
    bucket: int
    total_buckets: int
    before: tuple[DataFileMeta, ...]
    after: tuple[DataFileMeta, ...]
    # deletion-vector index files the compaction replaces, and their replacements
    index_before: tuple[IndexManifestEntry, ...] = ()
    index_after: tuple[IndexManifestEntry, ...] = ()
    # changelog-producer=full-compaction / lookup: the changes this compaction made visible
    changelog_files: tuple[DataFileMeta, ...] = ()

    @property
    def new_files(self) -> tuple[DataFileMeta, ...]:
        """Files this compaction wrote (not the ones it only moved)."""
        moved = {f.file_name for f in self.before}
        return tuple(f for f in self.after if f.file_name not in moved)
