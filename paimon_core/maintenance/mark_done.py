"""Marking partitions done (Paimon's ``mark_partition_done`` action, ``success-file`` kind).

A downstream job (Hive, Spark, a Dagster sensor) waits for ``<partition>/_SUCCESS`` before it
reads a partition. The file is Java Paimon's ``SuccessFile`` JSON: ``creationTime`` stays from the
first mark, ``modificationTime`` moves with every later one. It sits beside the bucket
directories, so reads and orphan cleanup (which look only inside ``bucket-N``) never touch it.

Paimon's other actions (``done-partition``, ``mark-event``) record the mark in a Hive metastore
and ``http-report`` posts it to a server; a filesystem catalog has neither, so a table asking for
them is refused before anything is written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from paimon_core.errors import OptionError, SchemaError
from paimon_core.layout import partition_path, partition_value_string
from paimon_core.write.conform import internal_partition_spec

if TYPE_CHECKING:
    from paimon_core.table_context import TableContext

SUCCESS_FILE_NAME = "_SUCCESS"
SUPPORTED_ACTIONS = ("success-file",)


@dataclass(frozen=True, slots=True)
class SuccessFile:
    """Contents of a ``_SUCCESS`` file (epoch milliseconds)."""

    creation_time: int
    modification_time: int

    def to_json(self) -> str:
        return json.dumps({"creationTime": self.creation_time, "modificationTime": self.modification_time},
                          indent=2)

    @classmethod
    def from_json(cls, text: str) -> SuccessFile:
        doc = json.loads(text)
        return cls(int(doc["creationTime"]), int(doc["modificationTime"]))


@dataclass(frozen=True, slots=True)
class MarkedDone:
    """Partitions a mark reached, as ``k=v/k2=v2`` paths, each with its success file."""

    table: str
    partitions: tuple[str, ...]
    files: tuple[SuccessFile, ...]

    def summary(self) -> str:
        noun = "partition" if len(self.partitions) == 1 else "partitions"
        return f"{self.table}: marked {len(self.partitions)} {noun} done ({', '.join(self.partitions)})"


def partition_dir(table: TableContext, spec: Mapping[str, Any] | str) -> str:
    """``k=v[/k2=v2]`` directory of a partition spec: a leading run of the partition keys, the
    values formatted as data directories are (``partition.legacy-name``, default name for null).

    Raises:
        SchemaError: the table is not partitioned, the spec names a column that is not a
            partition key, skips a key before one it names, or holds a value that does not fit.
    """
    schema = table.schema
    keys = list(schema.partition_keys)
    if not keys:
        raise SchemaError(f"table {table.name} is not partitioned: there is no partition to mark done")
    given = table.partition_of(spec) if isinstance(spec, str) else dict(spec)
    internal = internal_partition_spec(given, schema, table=table.name)
    named = keys[:len(internal)]
    if set(named) != set(internal):
        raise SchemaError(f"partition spec {given} of table {table.name} must name a leading run of the "
                          f"partition keys {keys} (e.g. {{{keys[0]!r}: ...}}): a directory exists only for those")
    options = table.options
    types = schema.partition_types
    texts = [partition_value_string(internal[k], types[i], legacy=options.partition_legacy_name)
             for i, k in enumerate(named)]
    return partition_path(named, texts, options.partition_default_name)


def mark_partitions_done(table: TableContext, partitions: Sequence[Mapping[str, Any] | str], *,
                         now_ms: int | None = None) -> MarkedDone:
    """Write (or refresh) the success file of every partition in ``partitions``.

    Every spec is resolved before anything is written, so a bad one changes nothing.

    Raises:
        OptionError: ``partition.mark-done-action`` asks for an action other than ``success-file``.
        SchemaError: see :func:`partition_dir`; or no partition is given.
    """
    actions = table.options.partition_mark_done_action
    unsupported = [a for a in actions if a not in SUPPORTED_ACTIONS]
    if unsupported:
        raise OptionError(f"table {table.name}: partition.mark-done-action {','.join(actions)} asks for "
                          f"{unsupported}, which need a metastore or a report server; this catalog writes "
                          "only 'success-file' (set partition.mark-done-action=success-file)")
    if not partitions:
        raise SchemaError(f"mark done of partitions of table {table.name}: no partition given")
    paths = list(dict.fromkeys(partition_dir(table, spec) for spec in partitions))
    now = int(time.time() * 1000) if now_ms is None else now_ms
    written = []
    for path in paths:
        previous = _read(table, path)
        success = SuccessFile(previous.creation_time if previous else now, now)
        table.file_io.write_bytes(_success_path(table, path), success.to_json().encode())
        written.append(success)
    return MarkedDone(table.name, tuple(paths), tuple(written))


def read_success_file(table: TableContext, partition: Mapping[str, Any] | str) -> SuccessFile | None:
    """The success file of a partition (a spec, or a ``k=v`` path), None if it was never marked."""
    return _read(table, partition_dir(table, partition))


def _read(table: TableContext, path: str) -> SuccessFile | None:
    target = _success_path(table, path)
    if not table.file_io.file_exists(target):
        return None
    return SuccessFile.from_json(table.file_io.read_text(target))


def _success_path(table: TableContext, partition_path: str) -> str:
    return f"{table.paths.root}/{partition_path}/{SUCCESS_FILE_NAME}"
