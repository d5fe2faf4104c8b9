"""What a writer hands to the committer: the files it produced per (partition, bucket)."""

from __future__ import annotations

from dataclasses import dataclass

from paimon_core.manifest import DataFileMeta
from paimon_core.write.routing import Partition


@dataclass(frozen=True, slots=True)
class CommitMessage:
    """New data files of one (partition, bucket), not yet visible to readers."""

    partition: Partition
    bucket: int
    total_buckets: int
    new_files: tuple[DataFileMeta, ...]
