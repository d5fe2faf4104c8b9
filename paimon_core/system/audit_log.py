"""``$audit_log``: a snapshot's rows with the kind of the record that made each one.

Paimon's AuditLogTable is a batch read of the snapshot with ``forceKeepDelete``: the bucket's
files are merged key by key as for an ordinary read, but a key whose merged record is a
retraction is kept (``-D``, or ``-U`` when that was the newest record) instead of dropped, and
every row carries the kind of its merged record in a leading ``rowkind`` column (``+I``,
``-U``, ``+U``, ``-D``). Append tables hold inserts only. This is a snapshot's state with
kinds, not its history: for what snapshots changed, see :meth:`paimon_core.Table.read_changes`
(whose kind column is pypaimon's ``_row_kind``; Paimon names this one ``rowkind``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.compaction.intervals import sections
from paimon_core.keyvalue import VALUE_KIND
from paimon_core.manifest import DataFileMeta
from paimon_core.prefetch import mapped_in_order
from paimon_core.read.changes import KIND_NAMES
from paimon_core.read.merge_read import MergeSplitReader
from paimon_core.read.scan import DataSplit
from paimon_core.read.split_read import READ_THREADS

ROWKIND = "rowkind"
ROWKIND_FIELD = pa.field(ROWKIND, pa.string())  # Paimon declares it a nullable STRING (it is never null)
_KINDS = pa.array(KIND_NAMES, pa.string())


def audit_schema(data_schema: pa.Schema) -> pa.Schema:
    """``rowkind`` first, then the table's columns."""
    return pa.schema([ROWKIND_FIELD, *data_schema])


def with_inserts(data: pa.Table) -> pa.Table:
    """Rows of an append table: every one an insert."""
    return data.add_column(0, ROWKIND_FIELD, pa.repeat(pa.scalar("+I"), data.num_rows).cast(pa.string()))


class AuditLogReader(MergeSplitReader):
    """Merge-on-read of a primary-key table that keeps retractions and reports each row's kind.

    :meth:`MergeSplitReader.read_section` drops retractions and the kind column as it merges,
    and reads single compacted files without their kinds; this reader reads every file with
    its system columns and keeps the merged kind, so ``+U`` rows and surviving deletes show.
    """

    def iter_audit(self, splits: Sequence[DataSplit]) -> Iterator[pa.Table]:
        """Merged sections with their kinds, in split and key order (a few read at a time)."""
        work = [(split, section) for split in splits for section in sections(split.files, self.bounds)]
        return mapped_in_order(lambda item: self.audit_section(*item), work, READ_THREADS)

    def audit_section(self, split: DataSplit, section: Sequence[DataFileMeta]) -> pa.Table:
        """One section merged key by key, every key kept with the kind of its merged record."""
        merged = self.merge_records([(self.read_key_values(split, meta), meta) for meta in section])
        kinds = pc.take(_KINDS, merged.column(VALUE_KIND))
        values = merged.select([f.name for f in self.output_fields]).cast(self.output_schema)
        return values.add_column(0, ROWKIND_FIELD, kinds)
