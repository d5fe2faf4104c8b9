"""The changelog suite's workload and checks: the dataset, the expected changelogs, the variants
(tables) it compares, and which checks of a step failed. Step processes of both engines import it
(in .venv and .venv-bench), so it imports nothing but the standard library, numpy, pyarrow and the
harness.

The data is the keyed rows of :mod:`benchmarks.data` (``id`` key, ``v_int``, ``v_float``, ``v_str``,
``v_ts``, ``v_i32``):

* a base of ``rows`` rows with the keys ``0 .. rows - 1`` in shuffled order;
* ``batches`` batches of ``batch_rows`` rows each. A batch updates live keys (new values in every
  column), inserts new keys (the next ones) and deletes other live keys, so it implies exactly
  ``updates`` ``-U`` and ``+U`` rows, ``inserts`` ``+I`` rows and ``deletes`` ``-D`` rows of changelog.

Stored once as uncompressed Arrow IPC: ``base.arrow``, ``upserts.arrow`` (one record batch of
updates and inserts per batch) and ``deletes.arrow`` (one record batch of keys per batch).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks import data
from benchmarks.harness.runner import Outcome

SEED = 20241105
TABLE = "bench.pk"
KEY = data.KEY
BUCKETS = "4"  # four fixed buckets, as in the pk suite
SCHEMA = data.KEYED_SCHEMA
KEY_SCHEMA = pa.schema([SCHEMA.field(KEY)])
BASE_FILE, UPSERTS_FILE, DELETES_FILE = "base.arrow", "upserts.arrow", "deletes.arrow"
KINDS = ("+I", "-U", "+U", "-D")
DELTA_BATCH = 1  # the batch delta-rs MERGEs, onto the base


# ---- dataset -------------------------------------------------------------------------------------

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

    ``tables[n]``: :func:`data.keyed_fingerprint` of the table after ``n`` batches; ``changes[n]``:
    the changelog batch ``n`` implies, per row kind (:func:`change_counts`).
    """

    plan: Plan
    tables: dict[int, dict[str, int]]
    changes: dict[int, dict[str, dict[str, int]]]

    def to_json(self) -> str:
        return json.dumps({"plan": asdict(self.plan), "tables": self.tables, "changes": self.changes})

    @staticmethod
    def from_json(text: str) -> Facts:
        known = json.loads(text)
        return Facts(Plan(**known["plan"]), {int(n): fp for n, fp in known["tables"].items()},
                     {int(n): kinds for n, kinds in known["changes"].items()})


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
        """What :func:`data.keyed_fingerprint` of the table must return."""
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
    return data.keyed_rows(rng, keys), np.sort(chosen[plan.updates:])


def generate(directory: Path, plan: Plan) -> Facts:
    """Write the base and the batches as Arrow IPC files; record the expected tables and changelogs."""
    plan.validate()
    rng = np.random.default_rng(SEED)
    directory.mkdir(parents=True, exist_ok=True)
    state = _State(plan.rows + plan.batches * plan.inserts)
    base = data.keyed_rows(rng, rng.permutation(plan.rows))
    state.upsert(base)
    data.write_table(directory / BASE_FILE, base)
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
    data.write_batches(directory / UPSERTS_FILE, SCHEMA, upserts)
    data.write_batches(directory / DELETES_FILE, KEY_SCHEMA, deletes)
    return Facts(plan, tables, changes)


def dataset(work: Path, plan: Plan) -> tuple[Path, Facts]:
    """The input files and expected results, generated unless a kept copy exists."""
    directory = work / "data" / (f"cl_{plan.rows}_{plan.batch_rows}x{plan.batches}"
                                 f"_i{plan.insert_share:g}_d{plan.delete_share:g}")
    return directory, data.kept_or_generated(
        directory, plan, load=Facts.from_json, generate=generate,
        what=f"{plan.rows:,} rows + {plan.batches} batches of {plan.batch_rows:,} ({plan.updates:,} updates, "
             f"{plan.inserts:,} inserts, {plan.deletes:,} deletes)")


def load_base(directory: Path) -> pa.Table:
    return data.load_mapped(directory / BASE_FILE)


def load_batch(directory: Path, index: int) -> tuple[pa.Table, pa.Table]:
    """Batch ``index`` (1-based): (its updates and inserts, the keys it deletes)."""
    return (data.load_mapped_batch(directory / UPSERTS_FILE, index - 1),
            data.load_mapped_batch(directory / DELETES_FILE, index - 1))


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


def delta_expected(facts: Facts, batch: int) -> dict[str, int]:
    """Rows a Delta MERGE of ``batch`` must update, insert and delete (its CDF rows follow from them)."""
    kinds = facts.changes[batch]
    return {"updated": kinds["+U"]["rows"], "inserted": kinds["+I"]["rows"], "deleted": kinds["-D"]["rows"]}


# ---- checks --------------------------------------------------------------------------------------

StepOutcome = Outcome[Any]  # an Outcome of the suite's Step


def describe_changes(counts: dict[str, dict[str, int]]) -> str:
    """``+I 10,000 / -U 85,000 / +U 85,000 / -D 5,000``."""
    return " / ".join(f"{kind} {counts.get(kind, {}).get('rows', 0):,}" for kind in KINDS)


def _changes_problem(got: dict[str, dict[str, int]], want: dict[str, dict[str, int]]) -> str | None:
    if got == want:
        return None
    if describe_changes(got) == describe_changes(want):
        return (f"changelog {describe_changes(got)} as expected, but with other key or v_int sums: "
                f"{got}, expected {want}")
    return f"changelog {describe_changes(got)}, expected {describe_changes(want)}"


def failures(o: StepOutcome, facts: Facts) -> list[str]:
    """The checks of one step that failed, one line each."""
    step, check = o.step, o.check
    found = []
    if check["table"] != facts.tables[step.batch]:
        found.append(f"the table reads {check['table']}, expected {facts.tables[step.batch]}")
    if step.engine == "ours":
        variant = VARIANTS[step.variant]
        want = facts.changes[step.batch] if variant.produces_changelog else no_changes()
        problem = _changes_problem(check["changes"], want)
        if "changes_error" in check:
            found.append(f"reading the changelog failed: {check['changes_error']}")
        elif problem:
            found.append(problem)
        if variant.empties_level0 and check["level0_files"]:
            found.append(f"{check['level0_files']} level-0 files left in a bucket")
    else:
        want_rows = delta_expected(facts, step.batch)
        got_rows = {k: check[k] for k in want_rows}
        if got_rows != want_rows:
            found.append(f"MERGE changed {got_rows}, expected {want_rows}")
        if "cdf" in check:
            want_cdf = {kind: facts.changes[step.batch][kind]["rows"] for kind in KINDS}
            if check["cdf"] != want_cdf:
                found.append(f"change data feed {check['cdf']}, expected {want_cdf}")
    return found


def all_failures(outcomes: list[StepOutcome], facts: Facts) -> list[str]:
    """Every failed check as ``step: problem``, including tables that differ between variants."""
    found = [f"{o.step.name}: {problem}" for o in outcomes for problem in failures(o, facts)]
    for batch in sorted({o.step.batch for o in outcomes}):
        tables = {o.step.variant: o.check["table"] for o in outcomes if o.step.batch == batch}
        if len({str(sorted(t.items())) for t in tables.values()}) > 1:
            found.append(f"batch {batch}: the tables differ between variants: {tables}")
    return found
