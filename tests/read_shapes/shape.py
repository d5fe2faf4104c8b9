"""The table shapes of the read-shape matrix: merge engine (with its options), changelog producer,
write-only, deletion vectors, bucket mode and partitioning, as one frozen value.

Every shape has the same columns, so workloads and reads are written once:

* ``p`` (STRING, the partition key, only when partitioned) and ``k`` (BIGINT NOT NULL): the
  primary key;
* ``a`` INT, ``b`` STRING, ``c`` DOUBLE: the values the merge engines combine (aggregation gives
  each a function);
* ``s`` BIGINT: ``sequence.field`` when the shape orders by it, else a plain value;
* ``g`` INT: the ordering field of partial-update's sequence group ``g -> b, c`` when the shape
  has one, else a plain value;
* ``n`` INT: free of every option, so schema evolution widens, renames and drops it; ``e``
  STRING is added by evolution.

The record-at-a-time merge functions of :mod:`tests.unit.merge_reference` fold the versions of
a key; they are independent of ``paimon_core.merge``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tests.unit import merge_reference as ref

ENGINES = ("deduplicate", "first-row", "partial-update", "aggregation")
PRODUCERS = ("none", "input", "lookup", "full-compaction")
VALUE_LABELS = ("a", "b", "c", "s", "g", "n")
# Aggregate functions per value column, and which of them can retract -U/-D (tests.unit.merge_reference.Agg).
FUNCTIONS = {"a": ("sum", "max", "min", "last_value", "first_value"),
             "b": ("listagg", "last_value", "last_non_null_value", "first_non_null_value"),
             "c": ("sum", "product", "max", "min", "last_non_null_value")}
RETRACTABLE = frozenset({"sum", "product", "last_value", "last_non_null_value", "primary_key"})
DEFAULT_FUNCTION = "last_non_null_value"
TRIGGER = 3  # num-sorted-run.compaction-trigger: minor compactions happen after a few commits
NUM_LEVELS = TRIGGER + 1

Record = ref.Record  # (kind 0..3, sequence, {label: value})


@dataclass(frozen=True)
class Shape:
    """One table configuration of the matrix."""

    engine: str = "deduplicate"
    producer: str = "none"
    write_only: bool = True
    deletion_vectors: bool = False
    bucket: int = 1  # a fixed number, or -1 for dynamic buckets
    partitioned: bool = False
    retractions: bool = False  # whether workloads write -U/-D rows
    ignore_delete: bool = False
    remove_on_delete: bool = False  # partial-update's / aggregation's remove-record-on-delete
    sequence_field: bool = False  # ``sequence.field = s``
    sequence_group: bool = False  # partial-update: ``fields.g.sequence-group = b,c``
    functions: tuple[tuple[str, str], ...] = ()  # aggregation: (column, function)
    ignore_retract: frozenset[str] = field(default_factory=frozenset)

    # ---- the table ---------------------------------------------------------------------------

    def arrow_schema(self) -> pa.Schema:
        fields = [pa.field("p", pa.string(), False)] if self.partitioned else []
        fields += [pa.field("k", pa.int64(), False), pa.field("a", pa.int32()), pa.field("b", pa.string()),
                   pa.field("c", pa.float64()), pa.field("s", pa.int64()), pa.field("g", pa.int32()),
                   pa.field("n", pa.int32())]
        return pa.schema(fields)

    @property
    def keys(self) -> list[str]:
        return ["p", "k"] if self.partitioned else ["k"]

    @property
    def partition_keys(self) -> list[str]:
        return ["p"] if self.partitioned else []

    def options(self) -> dict[str, str]:
        options = {"bucket": str(self.bucket), "merge-engine": self.engine,
                   "changelog-producer": self.producer, "write-only": str(self.write_only).lower(),
                   "num-sorted-run.compaction-trigger": str(TRIGGER),
                   "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1000",
                   "snapshot.time-retained": "1 h"}
        if self.deletion_vectors:
            options["deletion-vectors.enabled"] = "true"
        if self.ignore_delete:
            options["ignore-delete"] = "true"
        if self.remove_on_delete:
            options[f"{self.engine}.remove-record-on-delete"] = "true"
        if self.sequence_field:
            options["sequence.field"] = "s"
        if self.sequence_group:
            options["fields.g.sequence-group"] = "b,c"
        for column, function in self.functions:
            options[f"fields.{column}.aggregate-function"] = function
        for column in sorted(self.ignore_retract):
            options[f"fields.{column}.ignore-retract"] = "true"
        return options

    # ---- what the engine does ----------------------------------------------------------------

    def refuses(self, kinds: set[int]) -> bool:
        """Whether a write holding rows of these kinds is refused (nothing written): retractions
        the engine cannot take. With ``ignore-delete`` the writer drops them instead."""
        if self.ignore_delete or not kinds & set(ref.RETRACT) or self.engine == "deduplicate":
            return False
        if self.engine == "first-row":
            return True
        if self.engine == "partial-update":
            return not (self.remove_on_delete or self.sequence_group)
        retracting = 1 in kinds or (3 in kinds and not self.remove_on_delete)
        return retracting and any(self.function(label) not in RETRACTABLE and label not in self.ignore_retract
                                  for label in VALUE_LABELS)

    def function(self, label: str) -> str:
        return dict(self.functions).get(label, DEFAULT_FUNCTION)

    def level0_visible(self) -> bool:
        """Batch reads see level 0 (Java's ``batchScanSkipLevel0`` is false)."""
        return self.engine != "first-row" and not self.deletion_vectors

    def drop_sensitive(self) -> bool:
        """Whether dropping retractions when a compaction writes the lowest run changes what later
        merges give: an engine that starts a key's row from a retraction (partial-update and
        aggregation) with retractions written. Which minor compactions drop them is the picker's
        choice, so the model is exact for such tables only until one happens."""
        return self.retractions and self.engine in ("partial-update", "aggregation")

    def order_sensitive(self) -> bool:
        """Whether what a compaction folded changes later merges: with ``sequence.field`` an
        engine combining fields gives a folded row the sequence field of its newest-ordered
        version, so a later row with a smaller one sorts before all of it (before versions it
        would have followed unfolded). Exact in the model where it knows what was folded: full
        compactions, and lookup compactions (each key's level-0 rows with its newest deeper row)."""
        return self.sequence_field and self.engine in ("partial-update", "aggregation")

    def merge_function(self, labels: Sequence[str]) -> Callable[[Sequence[Record]], Record | None]:
        """The reference fold of one key's records (oldest first) over the value ``labels``."""
        if self.engine == "deduplicate":
            return lambda records: ref.deduplicate(records, ignore_delete=self.ignore_delete)
        if self.engine == "first-row":
            return lambda records: ref.first_row(records, ignore_delete=self.ignore_delete)
        if self.engine == "partial-update":
            partial = ref.PartialUpdateRef(list(labels), ignore_delete=self.ignore_delete,
                                           remove_on_delete=self.remove_on_delete,
                                           groups=[(("g",), ("b", "c"))] if self.sequence_group else [])
            return partial

        def aggregate(records: Sequence[Record]) -> Record | None:
            functions = {label: ref.Agg(self.function(label), ignore_retract=label in self.ignore_retract)
                         for label in labels}
            return ref.AggregationRef(functions, remove_on_delete=self.remove_on_delete)(records)

        return aggregate

    def fold(self, records: Sequence[Record], labels: Sequence[str]) -> Record | None:
        """One key's merged record (Paimon's reducer: a single record passes untouched)."""
        if not records:
            return None
        # A column added later is null in older records.
        filled = [(kind, seq, {label: values.get(label) for label in labels}) for kind, seq, values in records]
        ordered = sorted(filled, key=self.order_key) if self.sequence_field else filled
        return ref.reduce(ordered, self.merge_function(labels))

    @staticmethod
    def order_key(record: Record) -> tuple[Any, ...]:
        sequence = record[2].get("s")
        return (sequence is not None, sequence if sequence is not None else 0, record[1])

    def describe(self) -> str:
        extras = [name for name, on in (("write-only", self.write_only), ("dv", self.deletion_vectors),
                                        ("partitioned", self.partitioned), ("retractions", self.retractions),
                                        ("ignore-delete", self.ignore_delete),
                                        ("remove-on-delete", self.remove_on_delete),
                                        ("seq-field", self.sequence_field), ("seq-group", self.sequence_group))
                  if on]
        functions = ",".join(f"{c}:{f}" for c, f in self.functions)
        return (f"{self.engine}/{self.producer}/bucket={self.bucket}" + (f"/{functions}" if functions else "")
                + (f"/ignore-retract={sorted(self.ignore_retract)}" if self.ignore_retract else "")
                + ("/" + "/".join(extras) if extras else ""))
