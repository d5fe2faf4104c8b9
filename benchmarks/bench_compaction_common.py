"""The compaction benchmark's datasets, fingerprints and step command line (see compaction_bench.py).

Shared by the driver and the step scripts of every engine, so like bench_common it imports nothing
but the standard library, numpy and pyarrow (it runs in .venv and in .venv-bench).

Two scenarios, each generated once into an Arrow IPC file with one record batch per commit:

* ``pk``: a primary-key table built from ``pk_commits`` commits of ``pk_rows`` rows. Every commit
  draws its keys without repetition from ``0 .. pk_keys - 1``, so later commits update keys of
  earlier ones and a full compaction folds real duplicates.
* ``append``: an append table built from ``append_commits`` commits of ``append_rows`` log events
  (bench_common's generator) with a unique, increasing ``event_id``.

A step script wraps its engine in a :class:`CompactionEngine` and calls :func:`run_compaction_step`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import bench_common as bc
import bench_pk_common as pk
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEED = 20240815
SCENARIOS = ("pk", "append")
PK_TABLE, APPEND_TABLE = "bench.pk", "bench.logs"
PK_KEY, APPEND_KEY = pk.KEY, "event_id"
PK_BUCKETS = pk.BUCKETS  # "4": four fixed buckets, as in pk_bench
PK_SCHEMA = pk.SCHEMA  # id (NOT NULL), v_int, v_float, v_str (20 chars), v_ts, v_i32
APPEND_SCHEMA = pa.schema([pa.field(APPEND_KEY, pa.int64(), nullable=False), *bc.SCHEMA])
FILES = {"pk": "pk_commits.arrow", "append": "append_commits.arrow"}
FACTS_FILE = "facts.json"
STATES = ("before", "after")  # a read of the table before or after its full compaction


@dataclass(frozen=True, slots=True)
class Plan:
    """Dataset shape of both scenarios."""

    pk_commits: int
    pk_rows: int  # per commit
    pk_keys: int  # keyspace the commits draw from
    append_commits: int
    append_rows: int  # per commit

    def commits(self, scenario: str) -> int:
        return self.pk_commits if scenario == "pk" else self.append_commits

    def rows(self, scenario: str) -> int:
        """Rows stored before compaction: every version of every key (pk), every event (append)."""
        if scenario == "pk":
            return self.pk_commits * self.pk_rows
        return self.append_commits * self.append_rows


@dataclass(frozen=True, slots=True)
class Facts:
    """The plan and the expected fingerprints.

    ``pk_newest``: the newest row of every key (what a compacted pk table must read back),
    ``pk_all``: row count and key sum of every stored version (a Delta table keeps them all),
    ``append_all``: every event.
    """

    plan: Plan
    pk_newest: dict[str, int]
    pk_all: dict[str, int]
    append_all: dict[str, int]

    def to_json(self) -> str:
        return json.dumps({"plan": asdict(self.plan), "pk_newest": self.pk_newest, "pk_all": self.pk_all,
                           "append_all": self.append_all})

    @staticmethod
    def from_json(text: str) -> Facts:
        data = json.loads(text)
        return Facts(Plan(**data["plan"]), data["pk_newest"], data["pk_all"], data["append_all"])


def schema_of(scenario: str) -> pa.Schema:
    return PK_SCHEMA if scenario == "pk" else APPEND_SCHEMA


def key_of(scenario: str) -> str:
    return PK_KEY if scenario == "pk" else APPEND_KEY


# ---- fingerprints --------------------------------------------------------------------------------

def _digest(array: pa.Array) -> int:
    """48-bit digest of an array's values (and nulls), independent of its buffers' layout."""
    digest = hashlib.blake2b(digest_size=6)
    digest.update(str(array.null_count).encode())
    if array.null_count:
        digest.update(np.packbits(array.is_null().to_numpy(zero_copy_only=False)).tobytes())
    if pa.types.is_string(array.type):
        offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset:array.offset + len(array) + 1]
        digest.update((offsets - offsets[0]).tobytes())
        data = array.buffers()[2]
        if data is not None:
            digest.update(memoryview(data)[int(offsets[0]):int(offsets[-1])])
    else:
        if pa.types.is_timestamp(array.type):
            array = array.cast(pa.int64())
        digest.update(np.ascontiguousarray(array.to_numpy(zero_copy_only=False)).tobytes())
    return int(digest.hexdigest(), 16)


def fingerprint(table: pa.Table, scenario: str) -> dict[str, int]:
    """Row count, key sum and a content digest of every column, taken in key order.

    The key must be unique (a compacted pk table, or the append table's event ids). Columns are
    cast to the benchmark's schema first, so string, large_string and string_view results match.
    """
    schema = schema_of(scenario)
    key = key_of(scenario)
    keys = table.column(key).combine_chunks()
    order: pa.Array | None = None
    ids = keys.to_numpy(zero_copy_only=False)
    if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        order = pc.sort_indices(keys)
    out = {"rows": table.num_rows, f"sum_{key}": int(ids.sum())}
    for field in schema:
        column = table.column(field.name).cast(field.type)
        if order is not None:
            column = column.take(order)
        out[f"digest_{field.name}"] = _digest(column.combine_chunks())
    return out


def light_fingerprint(table: pa.Table, scenario: str) -> dict[str, int]:
    """Row count and key sum only: for a table that keeps several versions of a key (Delta, pk)."""
    key = key_of(scenario)
    return {"rows": table.num_rows, f"sum_{key}": int(pc.sum(table.column(key)).as_py() or 0)}


# ---- dataset -------------------------------------------------------------------------------------

def _pk_commit(rng: np.random.Generator, plan: Plan) -> pa.Table:
    ids = rng.choice(plan.pk_keys, plan.pk_rows, replace=False)
    return pk._rows(rng, ids)  # random values in every column, as pk_bench's upserts


def _append_commit(rng: np.random.Generator, plan: Plan, first_id: int) -> pa.Table:
    events = bc._chunk(rng, plan.append_rows)  # log events, as append_bench's
    ids = pa.array(np.arange(first_id, first_id + plan.append_rows, dtype=np.int64))
    return events.add_column(0, APPEND_SCHEMA.field(APPEND_KEY), ids)


def _write_commits(path: Path, schema: pa.Schema, commits: Iterator[pa.Table]) -> pa.Table:
    """Write one record batch per commit; return all of them as one table."""
    tables = []
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for table in commits:
            batch = table.combine_chunks().to_batches()[0]
            writer.write_batch(batch)
            tables.append(pa.Table.from_batches([batch]))
    return pa.concat_tables(tables)


def _newest(rows: pa.Table, keys: int) -> pa.Table:
    """The newest version of every key, by position (later commits win), with no sort or dedupe."""
    last = np.full(keys, -1, dtype=np.int64)
    last[rows.column(PK_KEY).to_numpy()] = np.arange(rows.num_rows)  # later positions overwrite
    return rows.take(pa.array(last[last >= 0]))  # in key order


def generate(directory: Path, plan: Plan) -> Facts:
    """Write both scenarios' commits as Arrow IPC files and record the expected fingerprints."""
    rng = np.random.default_rng(SEED)
    directory.mkdir(parents=True, exist_ok=True)
    pk_rows = _write_commits(directory / FILES["pk"], PK_SCHEMA,
                             (_pk_commit(rng, plan) for _ in range(plan.pk_commits)))
    append_rows = _write_commits(
        directory / FILES["append"], APPEND_SCHEMA,
        (_append_commit(rng, plan, index * plan.append_rows) for index in range(plan.append_commits)))
    facts = Facts(plan, fingerprint(_newest(pk_rows, plan.pk_keys), "pk"), light_fingerprint(pk_rows, "pk"),
                  fingerprint(append_rows, "append"))
    (directory / FACTS_FILE).write_text(facts.to_json())
    return facts


def load_facts(directory: Path) -> Facts:
    return Facts.from_json((directory / FACTS_FILE).read_text())


def commits(directory: Path, scenario: str) -> Iterator[pa.Table]:
    """The scenario's commits in order, each zero-copy over a memory map."""
    reader = pa.ipc.open_file(pa.memory_map(str(directory / FILES[scenario]), "r"))
    for index in range(reader.num_record_batches):
        yield pa.Table.from_batches([reader.get_batch(index)])


# ---- steps ---------------------------------------------------------------------------------------

class CompactionEngine(Protocol):
    """One engine under test. Only ``compact`` and ``read`` run inside the timer."""

    def build(self, target: Path, scenario: str, commits: Iterator[pa.Table]) -> dict[str, int]:
        """Create the table at ``target`` from one commit per batch; describe it (files, level 0)."""

    def open(self, target: Path, scenario: str) -> Any:
        """A handle on an existing table (catalog and table objects, not its snapshot)."""

    def compact(self, handle: Any, scenario: str) -> Any:
        """Rewrite the whole table (Paimon: full compaction, one COMPACT snapshot)."""

    def compacted(self, handle: Any, scenario: str, result: Any) -> dict[str, int]:
        """What the compaction did (checked after the timer): rows, files and bytes in and out."""

    def read(self, handle: Any, scenario: str, state: str) -> pa.Table:
        """The table's rows; includes planning the scan (Paimon) or replaying the log (Delta)."""

    def full_read_check(self, scenario: str) -> bool:
        """Whether a read returns every column of one version per key (else only rows are comparable)."""


def _build(engine: CompactionEngine, args: argparse.Namespace) -> None:
    """Not a measured step: it prepares the state that every compaction repetition copies."""
    shutil.rmtree(args.target, ignore_errors=True)
    facts = {}

    def build() -> None:
        facts.update(engine.build(args.target, args.scenario, commits(args.input, args.scenario)))

    _, timing = bc.measure(build)
    bc.report(timing, facts)


def _compact(engine: CompactionEngine, args: argparse.Namespace) -> None:
    handle = engine.open(args.target, args.scenario)
    result, timing = bc.measure(lambda: engine.compact(handle, args.scenario), args.profile)
    bc.report(timing, engine.compacted(handle, args.scenario, result))


def _read(engine: CompactionEngine, args: argparse.Namespace) -> None:
    handle = engine.open(args.target, args.scenario)
    check = fingerprint if engine.full_read_check(args.scenario) else light_fingerprint
    bc.report_read(lambda: engine.read(handle, args.scenario, args.state), args.profile,
                   lambda table: check(table, args.scenario))


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--state", choices=STATES, default="after",
                        help="read: the table before or after compaction (only raw pyarrow reads differ)")


def run_compaction_step(doc: str | None, engine: CompactionEngine) -> None:
    """``STEP --scenario pk|append --input DATA_DIR --target DIR [--state before|after] [--profile OUT]``."""
    bc.run_step(doc, {
        "build": lambda args: _build(engine, args),
        "compact": lambda args: _compact(engine, args),
        "read": lambda args: _read(engine, args),
    }, _configure)
