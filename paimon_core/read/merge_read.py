"""Merge-on-read of primary-key tables, one key-range section at a time.

A bucket's files are split into sections of overlapping key ranges (by their min/max keys);
only files of one section are merged together, so memory and time follow the overlap, not
the bucket size. A section of one file is read as is (a file never holds a key twice);
otherwise its rows are put in merge order, folded by the merge engine, and keys whose merged
row is a retraction (-U/-D) are dropped. Value filters are applied after the merge, never
before (that would resurrect older versions of a key).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimon_core.binary_row import deserialize_with_arity
from paimon_core.compaction.intervals import sections
from paimon_core.keyvalue import DELETE, SEQUENCE_NUMBER, UPDATE_BEFORE, VALUE_KIND
from paimon_core.manifest import DataFileMeta
from paimon_core.merge.deduplicate import Deduplicate, newest_per_key
from paimon_core.merge.engine import MergeEngine
from paimon_core.merge.lookup import LEVEL, LookupMerge, with_level
from paimon_core.merge.sort import merge_permutation
from paimon_core.options import TableOptions
from paimon_core.prefetch import mapped_in_order
from paimon_core.read.predicate import Junction, Predicate
from paimon_core.read.scan import DataSplit
from paimon_core.read.split_read import READ_THREADS, PartitionRead, SplitReader, physical_schema
from paimon_core.schema import TableSchema
from paimon_core.types import DataField


def key_bounds(key_types: Sequence[Any]) -> Callable[[DataFileMeta], tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """Decoded (min key, max key) of a file, from its metadata."""
    def bounds(meta: DataFileMeta) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        return (deserialize_with_arity(meta.min_key, key_types), deserialize_with_arity(meta.max_key, key_types))

    return bounds


class MergeSplitReader(SplitReader):
    """Reads splits of a primary-key table through its merge engine."""

    def __init__(self, *args: Any, engine: MergeEngine, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.engine = engine
        schema: TableSchema = self.schema
        options = TableOptions.from_map(schema.effective_options(), table=self.table)
        self.keys = schema.trimmed_primary_keys
        self.key_types = [schema.field(k).type for k in self.keys]
        self.bounds = key_bounds(self.key_types)
        self.sequence_fields = list(options.sequence_field)
        self.descending = options.sequence_descending
        needed = {f.name for f in self.read_fields} | set(self.keys) | set(self.sequence_fields)
        self.read_fields = [f for f in schema.fields if engine.combines_fields or f.name in needed]
        self.key_filter = key_conjuncts(self.predicate, set(self.keys) | set(schema.partition_keys))
        self._key_filters: dict[bytes, pc.Expression | None] = {}  # per partition, of what its values leave

    def read_splits(self, splits: Sequence[DataSplit]) -> Iterator[pa.Table]:
        """Merged sections in order; a few are read and merged at a time in parallel.

        Each split's partition settles the filter's partition conditions (see
        :meth:`SplitReader.partition_read`): a partition the filter rules out opens no file.
        """
        work = [(split, section, plan) for split in splits if not (plan := self.partition_read(split)).empty
                for section in sections(split.files, self.bounds)]
        for merged, plan in mapped_in_order(lambda item: (self.read_section(*item), item[2]), work, READ_THREADS):
            yield self._finish(merged, plan=plan)

    def _plan_partition(self, split: DataSplit) -> PartitionRead:
        plan = super()._plan_partition(split)
        if self.engine.combines_fields or set(self.sequence_fields) & set(self.schema.partition_keys):
            # the engine merges every column, or orders by a partition column: read them, not fill them
            plan = replace(plan, read_fields=[] if plan.empty else self.read_fields, fill={})
        self._key_filters[split.partition] = key_conjuncts(plan.predicate,
                                                           set(self.keys) | set(self.schema.partition_keys))
        return plan

    def iter_batches(self, splits: Sequence[DataSplit], batch_size: int = 65536) -> Iterator[pa.RecordBatch]:
        for table in self.read_splits(splits):
            yield from table.to_batches(max_chunksize=batch_size)

    def read_section(self, split: DataSplit, section: Sequence[DataFileMeta],
                     plan: PartitionRead | None = None) -> pa.Table:
        """Merged rows of one section (memory layout without system columns), retractions dropped;
        the columns ``plan`` reads (default: the reader's read fields)."""
        if len(section) == 1 and section[0].level > 0 and section[0].delete_row_count == 0:
            return self.read_values(split, section[0], plan)  # compacted, no retractions: nothing to merge
        ordered = by_sequence(section)
        if self._newest_wins_by_file_order(ordered):
            return self.newest_values(split, ordered, plan)
        return drop_retractions(self.merge_records([(self.read_key_values(split, m, plan=plan), m) for m in section]))

    def _newest_wins_by_file_order(self, ordered: Sequence[DataFileMeta]) -> bool:
        """Whether a key's newest version is its row in the newest of the ``ordered`` files that has
        it: a deduplicating table without ``sequence.field`` whose files follow one another in
        sequence. The merge then needs no ``_SEQUENCE_NUMBER`` (only the kinds, since not every
        writer counts its retractions in the file's metadata)."""
        engine = self.engine.inner if isinstance(self.engine, LookupMerge) else self.engine
        if not isinstance(engine, Deduplicate) or engine.ignore_delete or self.sequence_fields:
            return False
        return follow_in_sequence(ordered)

    def newest_values(self, split: DataSplit, ordered: Sequence[DataFileMeta],
                      plan: PartitionRead | None = None) -> pa.Table:
        """Each key's row from the newest of the ``ordered`` files (oldest first) holding it,
        unless that row is a retraction (see :meth:`_newest_wins_by_file_order`)."""
        combined = pa.concat_tables([self.read_key_values(split, meta, system=(VALUE_KIND,), plan=plan)
                                     for meta in ordered])
        if len(ordered) > 1:  # one file never holds a key twice
            combined = newest_per_key(combined, merge_permutation(combined, self.keys, in_sequence=True), self.keys)
        return drop_retractions(combined)

    def merge_records(self, parts: Sequence[tuple[pa.Table, DataFileMeta]]) -> pa.Table:
        """Records of files (with system columns) folded per key by the merge engine, each
        key's merged record keeping its kind (retractions included)."""
        ordered = sorted(parts, key=lambda p: (p[1].min_sequence_number, p[1].max_sequence_number))
        metas = [meta for _, meta in ordered]
        # Files whose sequence ranges do not overlap, concatenated oldest first, hold every key's
        # versions in sequence order: a stable sort on the key alone then gives merge order.
        in_sequence = follow_in_sequence(metas)
        tables = [table for table, _ in ordered]
        if isinstance(self.engine, LookupMerge):
            tables = [with_level(table, meta.level) for table, meta in ordered]
        if len(tables) == 1:  # one file never holds a key twice
            return tables[0]
        combined = pa.concat_tables(tables)
        order = merge_permutation(combined, self.keys, self.sequence_fields, descending_sequence=self.descending,
                                  in_sequence=in_sequence)
        return self.engine.merge_unsorted(combined, order, self.keys)

    def read_values(self, split: DataSplit, meta: DataFileMeta, plan: PartitionRead | None = None) -> pa.Table:
        """A file's rows without system columns (for files that need no merge)."""
        path = self.file_path(split, meta)
        fields = None if plan is None else plan.read_fields
        file_fields = self._file_fields(meta, fields)
        deletion = split.deletion_files.get(meta.file_name)
        pushed = self._key_filter(split, plan) if deletion is None and path.endswith(".parquet") else None
        data, rows = self._read_physical(path, [f.name for f in file_fields.values()], pushed,
                                         physical_schema(file_fields), size=meta.file_size)
        values = self._to_read_schema(data, file_fields, rows, fields)
        if deletion is not None:
            values = values.filter(self._keep_mask(deletion, 0, values.num_rows))
        return values

    def read_key_values(self, split: DataSplit, meta: DataFileMeta, *,
                        system: Sequence[str] = (SEQUENCE_NUMBER, VALUE_KIND),
                        plan: PartitionRead | None = None) -> pa.Table:
        """One file's rows in the read schema (or the columns ``plan`` reads) plus its ``system``
        columns, deletion vector applied."""
        path = self.file_path(split, meta)
        fields = None if plan is None else plan.read_fields
        file_fields = self._file_fields(meta, fields)
        deletion = split.deletion_files.get(meta.file_name)
        # Conditions on key columns may be applied while reading: they keep or drop all
        # versions of a key alike, so the merge of the keys that remain is unchanged.
        pushed = self._key_filter(split, plan) if deletion is None and path.endswith(".parquet") else None
        extra = [f for f in _SYSTEM_FIELDS if f.name in system]
        data, rows = self._read_physical(path, _physical(file_fields, system), pushed,
                                         physical_schema(file_fields, extra), size=meta.file_size)
        table = self._with_system_columns(data, file_fields, rows, system, fields)
        if deletion is not None:
            table = table.filter(self._keep_mask(deletion, 0, table.num_rows))
        return table

    def iter_key_values(self, split: DataSplit, meta: DataFileMeta, *, batch_size: int = 262144,
                        batch_bytes: int | None = None) -> Iterator[pa.Table]:
        """:meth:`read_key_values` in chunks of ``batch_size`` rows or about ``batch_bytes`` (compaction)."""
        path = self.file_path(split, meta)
        file_fields = self._file_fields(meta)
        deletion = split.deletion_files.get(meta.file_name)
        offset = 0
        for batch in self._stream_physical(path, _physical(file_fields), batch_size, batch_bytes,
                                           size=meta.file_size):
            table = self._with_system_columns(pa.Table.from_batches([batch]), file_fields, batch.num_rows)
            if deletion is not None:
                table = table.filter(self._keep_mask(deletion, offset, batch.num_rows))
            offset += batch.num_rows
            yield table

    def holds_retractions(self, split: DataSplit, meta: DataFileMeta) -> bool:
        """Whether a file stores -U/-D rows (read from its kind column: writers may not count them)."""
        data, _ = self._read_physical(self.file_path(split, meta), [VALUE_KIND], None, size=meta.file_size)
        kinds = data.column(VALUE_KIND)
        return bool(pc.any(pc.or_(pc.equal(kinds, UPDATE_BEFORE), pc.equal(kinds, DELETE))).as_py())

    def read_keys(self, split: DataSplit, meta: DataFileMeta) -> pa.Table:
        """Only the primary-key columns of a file (for lookups against deeper levels)."""
        file_fields = self._file_fields(meta)
        fields = [self.schema.field(k) for k in self.keys]
        data, _ = self._read_physical(self.file_path(split, meta), [file_fields[f.id].name for f in fields], None,
                                      size=meta.file_size)
        return pa.Table.from_arrays([data.column(i) for i in range(len(fields))], names=self.keys)

    def _key_filter(self, split: DataSplit, plan: PartitionRead | None) -> pc.Expression | None:
        """The key conditions a file scan may apply: the reader's, or what the split's partition left."""
        return self.key_filter if plan is None else self._key_filters[split.partition]

    def _with_system_columns(self, data: pa.Table, file_fields: dict[int, Any], rows: int,
                             system: Sequence[str] = (SEQUENCE_NUMBER, VALUE_KIND),
                             fields: Sequence[DataField] | None = None) -> pa.Table:
        values = self._to_read_schema(data, file_fields, rows, fields)
        for field in _SYSTEM_FIELDS:
            if field.name in system:
                values = values.append_column(pa.field(field.name, field.type, False),
                                              data.column(field.name).cast(field.type))
        return values


_SYSTEM_FIELDS = (pa.field(SEQUENCE_NUMBER, pa.int64()), pa.field(VALUE_KIND, pa.int8()))


def _physical(file_fields: dict[int, Any], system: Sequence[str] = (SEQUENCE_NUMBER, VALUE_KIND)) -> list[str]:
    return [f.name for f in file_fields.values()] + [f.name for f in _SYSTEM_FIELDS if f.name in system]


def by_sequence(files: Sequence[DataFileMeta]) -> list[DataFileMeta]:
    """Files oldest first: by their sequence ranges."""
    return sorted(files, key=lambda m: (m.min_sequence_number, m.max_sequence_number))


def follow_in_sequence(ordered: Sequence[DataFileMeta]) -> bool:
    """Whether the sequence ranges of ``ordered`` files follow one another without overlap: each
    key's versions are then in sequence order when the files are concatenated in that order."""
    return all(a.max_sequence_number < b.min_sequence_number for a, b in itertools.pairwise(ordered))


def key_conjuncts(predicate: Predicate | None, key_columns: set[str]) -> pc.Expression | None:
    """The AND-ed conditions of ``predicate`` that only involve key columns, as an expression."""
    if predicate is None:
        return None
    terms = predicate.children if isinstance(predicate, Junction) and predicate.all_of else (predicate,)
    kept = [t.to_expression() for t in terms if t.columns() <= key_columns]
    if not kept:
        return None
    expression = kept[0]
    for term in kept[1:]:
        expression = expression & term
    return expression


def drop_retractions(merged: pa.Table) -> pa.Table:
    """Merged records as rows: keys whose merged record is a retraction (-U, -D) are gone, and
    so are the system columns."""
    kinds = merged.column(VALUE_KIND)
    alive = pc.invert(pc.or_(pc.equal(kinds, UPDATE_BEFORE), pc.equal(kinds, DELETE)))
    if not pc.all(alive).as_py():
        merged = merged.filter(alive)
    return merged.drop_columns([c for c in (SEQUENCE_NUMBER, VALUE_KIND, LEVEL) if c in merged.column_names])
