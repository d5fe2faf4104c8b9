"""The changelog benchmark's dataset, expected changelogs and variants (see changelog_bench.py).

Shared by the driver and the step scripts, so like bench_common it imports nothing but the
standard library, numpy and pyarrow (it runs in .venv and in .venv-bench).

The data is pk_bench's schema (``id`` key, ``v_int``, ``v_float``, ``v_str``, ``v_ts``, ``v_i32``):

* a base of ``rows`` rows with the keys ``0 .. rows - 1`` in shuffled order;
* ``batches`` batches of ``batch_rows`` rows each. A batch updates live keys (new values in every
  column), inserts new keys (the next ones) and deletes other live keys, so it implies exactly
  ``updates`` ``-U`` and ``+U`` rows, ``inserts`` ``+I`` rows and ``deletes`` ``-D`` rows of changelog.

Stored once as uncompressed Arrow IPC: ``base.arrow`` (as pk_bench's), ``upserts.arrow`` (one record batch of
updates and inserts per batch) and ``deletes.arrow`` (one record batch of keys per batch).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import bench_common as bc
import bench_pk_common as pk
import numpy as np
import pyarrow as pa

SEED = 20241105
TABLE = pk.TABLE
KEY = pk.KEY
BUCKETS = pk.BUCKETS  # "4": four fixed buckets, as in pk_bench
SCHEMA = pk.SCHEMA
KEY_SCHEMA = pa.schema([SCHEMA.field(KEY)])
BASE_FILE = pk.BASE_FILE  # read with pk.load_base
UPSERTS_FILE, DELETES_FILE, FACTS_FILE = "upserts.arrow", "deletes.arrow", "facts.json"
KINDS = ("+I", "-U", "+U", "-D")


@dataclass(frozen=True, slots=True)
class Plan:
    """Dataset shape: ``rows`` base rows, then ``batches`` batches of ``batch_rows`` rows."""

    rows: int
    batch_rows: int
    batches: int
    insert_share: float  # of a batch's rows: new keys
    delete_share: float  # of a batch's rows: deletes of live keys (the rest updates live keys)

    @property
    def inserts(self) -> int:
        return round(self.batch_rows * self.insert_share)

    @property
    def deletes(self) -> int:
        return round(self.batch_rows * self.delete_share)

    @property
    def updates(self) -> int:
        return self.batch_rows - self.inserts - self.deletes

    def validate(self) -> None:
        """Raises ValueError when a batch cannot be drawn from the live keys."""
        if min(self.updates, self.inserts, self.deletes) < 0:
            raise ValueError(f"insert share {self.insert_share} and delete share {self.delete_share} "
                             "must not exceed the batch")
        live = self.rows + self.batches * (self.inserts - self.deletes)
        if self.updates + self.deletes > min(self.rows, live):
            raise ValueError(f"{self.updates + self.deletes:,} updates and deletes per batch need more than "
                             f"the {min(self.rows, live):,} live keys")


@dataclass(frozen=True, slots=True)
class Facts:
    """The plan and what reads must return.

    ``tables[n]``: :func:`pk.fingerprint` of the table after ``n`` batches; ``changes[n]``: the
    changelog batch ``n`` implies, per row kind (:func:`change_counts`).
    """

    plan: Plan
    tables: dict[int, dict[str, int]]
    changes: dict[int, dict[str, dict[str, int]]]

    def to_json(self) -> str:
        return json.dumps({"plan": asdict(self.plan), "tables": self.tables, "changes": self.changes})

    @staticmethod
    def from_json(text: str) -> Facts:
        data = json.loads(text)
        return Facts(Plan(**data["plan"]), {int(n): fp for n, fp in data["tables"].items()},
                     {int(n): kinds for n, kinds in data["changes"].items()})


def no_changes() -> dict[str, dict[str, int]]:
    """What :func:`change_counts` returns for an empty changelog."""
    return {kind: {"rows": 0, "sum_id": 0, "sum_v_int": 0} for kind in KINDS}


def change_counts(changes: pa.Table) -> dict[str, dict[str, int]]:
    """Per row kind of a changelog (``_row_kind`` column): rows, key sum and ``v_int`` sum.

    ``-U`` and ``-D`` rows carry the old values, so their ``v_int`` sums tell old from new.
    """
    out = no_changes()
    if changes.num_rows == 0:
        return out
    grouped = changes.group_by("_row_kind").aggregate([(KEY, "count"), (KEY, "sum"), ("v_int", "sum")])
    for row in grouped.to_pylist():
        out[row["_row_kind"]] = {"rows": row[f"{KEY}_count"], "sum_id": row[f"{KEY}_sum"] or 0,
                                 "sum_v_int": row["v_int_sum"] or 0}
    return out


def describe_changes(counts: dict[str, dict[str, int]]) -> str:
    """``+I 10,000 / -U 85,000 / +U 85,000 / -D 5,000``."""
    return " / ".join(f"{kind} {counts.get(kind, {}).get('rows', 0):,}" for kind in KINDS)


# ---- dataset -------------------------------------------------------------------------------------

class _State:
    """Live keys and their newest ``v_int`` and ``v_i32``, kept by key index (no sort or merge)."""

    def __init__(self, keys: int) -> None:
        self.live = np.zeros(keys, dtype=bool)
        self.v_int = np.zeros(keys, dtype=np.int64)
        self.v_i32 = np.zeros(keys, dtype=np.int64)

    def upsert(self, rows: pa.Table) -> None:
        ids = rows[KEY].to_numpy()
        self.live[ids] = True
        self.v_int[ids] = rows["v_int"].to_numpy()
        self.v_i32[ids] = rows["v_i32"].to_numpy()

    def fingerprint(self) -> dict[str, int]:
        """What :func:`pk.fingerprint` of the table must return."""
        ids = np.flatnonzero(self.live)
        return {"rows": len(ids), "sum_id": int(ids.sum()), "sum_v_int": int(self.v_int[ids].sum()),
                "sum_v_i32": int(self.v_i32[ids].sum())}


def _kind(ids: np.ndarray, v_int: np.ndarray) -> dict[str, int]:
    """One row kind of an expected changelog: the rows of keys ``ids`` carrying ``v_int``."""
    return {"rows": len(ids), "sum_id": int(ids.sum()), "sum_v_int": int(v_int.sum())}


def _batch(rng: np.random.Generator, plan: Plan, state: _State, first_new: int) -> tuple[pa.Table, np.ndarray]:
    """One batch: (updates and inserts, shuffled; the keys it deletes)."""
    chosen = rng.choice(np.flatnonzero(state.live), plan.updates + plan.deletes, replace=False)
    keys = np.concatenate([chosen[:plan.updates], np.arange(first_new, first_new + plan.inserts)])
    rng.shuffle(keys)
    return pk._rows(rng, keys), np.sort(chosen[plan.updates:])


def _write(path: Path, schema: pa.Schema, tables: list[pa.Table]) -> None:
    """One record batch per table."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for table in tables:
            writer.write_batch(table.combine_chunks().to_batches()[0])


def generate(directory: Path, plan: Plan) -> Facts:
    """Write the base and the batches as Arrow IPC files; record the expected tables and changelogs."""
    plan.validate()
    rng = np.random.default_rng(SEED)
    directory.mkdir(parents=True, exist_ok=True)
    state = _State(plan.rows + plan.batches * plan.inserts)
    base = pk._rows(rng, rng.permutation(plan.rows))
    state.upsert(base)
    with pa.OSFile(str(directory / BASE_FILE), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        writer.write_table(base, max_chunksize=bc.BATCH_ROWS)
    tables, changes = {0: state.fingerprint()}, {}
    upserts, deletes = [], []
    for index in range(1, plan.batches + 1):
        rows, deleted = _batch(rng, plan, state, plan.rows + (index - 1) * plan.inserts)
        ids, v_int = rows[KEY].to_numpy(), rows["v_int"].to_numpy()
        updated = state.live[ids]
        changes[index] = {
            "+I": _kind(ids[~updated], v_int[~updated]),
            "-U": _kind(ids[updated], state.v_int[ids[updated]]),
            "+U": _kind(ids[updated], v_int[updated]),
            "-D": _kind(deleted, state.v_int[deleted]),
        }
        state.upsert(rows)
        state.live[deleted] = False
        tables[index] = state.fingerprint()
        upserts.append(rows)
        deletes.append(pa.table({KEY: pa.array(deleted, pa.int64())}, schema=KEY_SCHEMA))
    _write(directory / UPSERTS_FILE, SCHEMA, upserts)
    _write(directory / DELETES_FILE, KEY_SCHEMA, deletes)
    facts = Facts(plan, tables, changes)
    (directory / FACTS_FILE).write_text(facts.to_json())
    return facts


def load_facts(directory: Path) -> Facts:
    return Facts.from_json((directory / FACTS_FILE).read_text())


def load_batch(directory: Path, index: int) -> tuple[pa.Table, pa.Table]:
    """Batch ``index`` (1-based): (its updates and inserts, the keys it deletes)."""
    return (bc.load_mapped_batch(directory / UPSERTS_FILE, index - 1),
            bc.load_mapped_batch(directory / DELETES_FILE, index - 1))


def state_dir(root: Path, batch: int) -> Path:
    """A built table with batch ``batch`` written and not yet compacted."""
    return root / f"before_compaction_{batch}"


# ---- what runs -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Variant:
    """One table of ours: its changelog producer and the compaction run after every batch."""

    producer: str  # changelog-producer: none | full-compaction | lookup
    full: bool  # compact(full=True), else compact()
    force_level0: bool = False  # plain table whose compact() pushes level 0 up like a lookup table's
    baseline: str | None = None  # the plain variant doing the same kind of compaction

    @property
    def compaction(self) -> str:
        if self.full:
            return "compact(full=True)"
        return "compact(), level 0 forced up" if self.force_level0 else "compact()"

    @property
    def produces_changelog(self) -> bool:
        return self.producer != "none"

    @property
    def empties_level0(self) -> bool:
        """Whether every compaction must leave level 0 empty (a plain table's compact() may do nothing)."""
        return self.full or self.force_level0 or self.producer == "lookup"

    def options(self) -> dict[str, str]:
        """Identical for every variant but ``changelog-producer``; write-only, so only our
        explicit compactions compact."""
        return {"bucket": BUCKETS, "write-only": "true", "changelog-producer": self.producer}


PLAIN_FULL = "none-full"
VARIANTS = {
    PLAIN_FULL: Variant("none", full=True),
    "full-compaction": Variant("full-compaction", full=True, baseline=PLAIN_FULL),
    "none-minor": Variant("none", full=False),
    "none-level0-up": Variant("none", full=False, force_level0=True),
    "lookup": Variant("lookup", full=False, baseline="none-level0-up"),
}
DELTA_VARIANTS = ("plain", "cdf")  # delta.enableChangeDataFeed false / true


def delta_source(upserts: pa.Table, deletes: pa.Table) -> pa.Table:
    """One batch as a MERGE source: every row with an ``op_kind`` of ``U`` (upsert) or ``D`` (delete)."""
    deleted = pa.table({name: deletes[KEY] if name == KEY else pa.nulls(deletes.num_rows, SCHEMA.field(name).type)
                        for name in SCHEMA.names}, schema=SCHEMA)
    rows = pa.concat_tables([upserts, deleted])
    kinds = ["U"] * upserts.num_rows + ["D"] * deletes.num_rows
    return rows.append_column("op_kind", pa.array(kinds, pa.string()))


def configure_step(parser: argparse.ArgumentParser) -> None:
    """The options the changelog steps add to bench_common's step command line."""
    parser.add_argument("--variant", required=True,
                        help=f"the table: one of ours' {', '.join(VARIANTS)}, or delta's {' or '.join(DELTA_VARIANTS)}")
    parser.add_argument("--batch", type=int, default=1, help="compact or merge: the batch (1-based)")
    parser.add_argument("--batches", type=int, default=1, help="build: batches to write and compact")


def delta_expected(facts: Facts, batch: int) -> dict[str, int]:
    """Rows a Delta MERGE of ``batch`` must update, insert and delete (its CDF rows follow from them)."""
    kinds = facts.changes[batch]
    return {"updated": kinds["+U"]["rows"], "inserted": kinds["+I"]["rows"], "deleted": kinds["-D"]["rows"]}

