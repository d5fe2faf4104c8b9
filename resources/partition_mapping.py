"""How a Dagster partition key maps onto the values of a Paimon table's partition columns.

Kept as plain data (it travels as definition metadata and in run config) and pure: the IO
manager uses it to write and read one partition, the compaction and maintenance ops to put
their observations on the partition they describe, the factory to refuse a mapping that cannot
work before anything runs.

Two kinds:

- ``time``: time-window partitions (daily, hourly, weekly ...). The key is parsed with the
  partitions' own key format and every mapped column gets the window start formatted with its
  ``strftime`` pattern: ``{"dt": "%Y-%m-%d"}`` for days, ``{"dt": "%Y-%m-%d", "hh": "%H"}`` for
  hours in two columns.
- ``static``: the key itself is the value of the one mapped column (``{"region": "{key}"}``).
"""

from __future__ import annotations

import datetime as dt_
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from resources.keys import PARTITION_MAPPING_METADATA_KEY

# The placeholder of a static mapping: the column's value is the partition key.
KEY_PLACEHOLDER = "{key}"
KINDS = ("time", "static")
# Keys checked when a time mapping is validated: enough to catch a pattern coarser than the
# partitions (two keys landing in one Paimon partition) without walking years of windows.
SAMPLE_KEYS = 48


class PartitionMappingError(ValueError):
    """A mapping that cannot work for its partitions (raised when definitions load)."""


@dataclass(frozen=True, slots=True)
class PartitionMapping:
    """``columns``: (Paimon column, strftime pattern or ``{key}``) pairs; ``key_format``: the
    Dagster key's format for time partitions (``%Y-%m-%d``, ``%Y-%m-%d-%H:%M`` ...)."""

    kind: str
    columns: tuple[tuple[str, str], ...]
    key_format: str = ""

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def values(self, partition_key: str) -> dict[str, str]:
        """The Paimon partition values of one Dagster partition key."""
        if self.kind == "static":
            return {name: partition_key for name, _ in self.columns}
        try:
            start = dt_.datetime.strptime(partition_key, self.key_format)
        except ValueError:
            raise PartitionMappingError(f"partition key {partition_key!r} does not have the format "
                                        f"{self.key_format!r} of its partitions") from None
        return {name: start.strftime(pattern) for name, pattern in self.columns}

    def key_of(self, values: Mapping[str, Any]) -> str | None:
        """The Dagster partition key of a Paimon partition, or None when it maps to none (other
        columns, a null value, a value the patterns do not parse)."""
        if set(values) != set(self.column_names) or any(values[name] is None for name in values):
            return None
        if self.kind == "static":
            return str(values[self.columns[0][0]])
        text = "\x1f".join(str(values[name]) for name, _ in self.columns)
        pattern = "\x1f".join(p for _, p in self.columns)
        try:
            return dt_.datetime.strptime(text, pattern).strftime(self.key_format)
        except ValueError:
            return None

    def filter(self, partition_keys: Sequence[str]) -> list[Any]:
        """A DNF filter selecting exactly these partitions (equality for one, membership or a
        disjunction for several)."""
        specs = [self.values(key) for key in partition_keys]
        if len(self.columns) == 1:
            name = self.columns[0][0]
            wanted = sorted({spec[name] for spec in specs})
            return [(name, "=", wanted[0])] if len(wanted) == 1 else [(name, "in", wanted)]
        if len(specs) == 1:
            return [(name, "=", value) for name, value in specs[0].items()]
        return [[(name, "=", value) for name, value in spec.items()] for spec in specs]

    def to_metadata(self) -> str:
        """A JSON string: definition metadata and run config carry it as it is."""
        return json.dumps({"kind": self.kind, "columns": dict(self.columns), "key_format": self.key_format},
                          sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PartitionMapping:
        data = json.loads(text)
        return cls(str(data["kind"]), tuple((str(k), str(v)) for k, v in data["columns"].items()),
                   str(data.get("key_format", "")))

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None) -> PartitionMapping | None:
        """The mapping in an asset's definition metadata; the older ``partition_expr`` key (one
        column holding the key itself) is read as a static mapping."""
        metadata = metadata or {}
        raw = metadata.get(PARTITION_MAPPING_METADATA_KEY)
        text = getattr(raw, "value", raw)  # a MetadataValue once Dagster normalised it
        if text:
            return cls.from_json(str(text))
        column = metadata.get("partition_expr")
        column = getattr(column, "value", column)
        return cls("static", ((str(column), KEY_PLACEHOLDER),)) if column else None


def time_mapping(columns: Mapping[str, str], key_format: str, sample_keys: Sequence[str], *,
                 table: str) -> PartitionMapping:
    """A checked time mapping: every pattern a valid ``strftime`` pattern, distinct keys of the
    sample giving distinct Paimon partitions, and each key recovered from its values (so an
    observation of a Paimon partition lands on the Dagster partition it came from)."""
    if not columns:
        raise PartitionMappingError(f"table {table}: partition_mapping is empty; map each Paimon partition "
                                    "column to a strftime pattern, e.g. {dt: '%Y-%m-%d'}")
    mapping = PartitionMapping("time", tuple((str(k), str(v)) for k, v in columns.items()), key_format)
    seen: dict[tuple[tuple[str, str], ...], str] = {}
    for key in sample_keys[:SAMPLE_KEYS]:
        values = mapping.values(key)
        for name, value in values.items():
            if "%" in value:
                raise PartitionMappingError(f"table {table}: partition_mapping of {name!r} ({dict(columns)[name]!r}) "
                                            f"is not a strftime pattern Python understands (gives {value!r})")
        spec = tuple(sorted(values.items()))
        if spec in seen:
            raise PartitionMappingError(
                f"table {table}: partition_mapping {dict(columns)} puts Dagster partitions {seen[spec]!r} and "
                f"{key!r} into the same Paimon partition {dict(spec)}; use patterns as fine as the partitions "
                f"(their keys look like {key_format!r})")
        seen[spec] = key
        if mapping.key_of(values) != key:
            raise PartitionMappingError(
                f"table {table}: partition_mapping {dict(columns)} does not give back Dagster partition {key!r} "
                f"from {values}; include every field of {key_format!r} in the patterns")
    return mapping


def static_mapping(column: str) -> PartitionMapping:
    """The key is the value of ``column``."""
    return PartitionMapping("static", ((column, KEY_PLACEHOLDER),))
