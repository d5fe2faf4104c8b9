"""Keeping a bucket's deletion vectors in step with a compaction (deletion-vector tables).

Files a compaction rewrote lose their vectors (their deleted rows are gone); rows it superseded
in deeper files are added to those files' vectors. The bucket's vectors are then written as one
new ``DELETION_VECTORS`` index file that replaces the old ones in the index manifest.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from paimon_core.deletion_vectors import encode_index_file
from paimon_core.fileio import FileIO
from paimon_core.layout import TablePaths
from paimon_core.manifest import ADD, DeletionVectorRange, IndexManifestEntry
from paimon_core.read.scan import DELETION_VECTORS, DeletionFile
from paimon_core.read.split_read import load_deletion_vector
from paimon_core.write.message import CompactIncrement


def with_deletion_vectors(file_io: FileIO, paths: TablePaths, increment: CompactIncrement,
                          current: Mapping[str, DeletionFile], entries: Sequence[IndexManifestEntry],
                          new: Mapping[str, Sequence[np.ndarray]]) -> CompactIncrement:
    """``increment`` plus the index change for the bucket's vectors (unchanged if there is none).

    ``current`` and ``entries``: the bucket's vectors and DV index entries the compaction read.
    """
    rewritten = {f.file_name for f in increment.before} - {f.file_name for f in increment.after}
    if not new and not rewritten & set(current):
        return increment
    vectors: dict[str, np.ndarray] = {name: load_deletion_vector(file_io, where)
                                      for name, where in current.items() if name not in rewritten}
    for name, parts in new.items():
        vectors[name] = np.unique(np.concatenate([vectors.get(name, np.zeros(0, np.uint32)), *parts]))
    after: tuple[IndexManifestEntry, ...] = ()
    if vectors:
        data, ranges = encode_index_file(vectors)
        name = f"index-{uuid.uuid4()}-0"
        file_io.write_bytes(paths.index_file(name), data)
        after = (IndexManifestEntry(ADD, increment.partition.row, increment.bucket, DELETION_VECTORS, name,
                                    len(data), len(ranges), tuple(DeletionVectorRange(*r) for r in ranges)),)
    return replace(increment, index_before=tuple(entries), index_after=after)
