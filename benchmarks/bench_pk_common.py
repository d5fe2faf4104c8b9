"""The primary-key benchmark's dataset, expected results and step command line (see pk_bench.py).

Shared by the driver and the step scripts of every engine, so like bench_common it imports nothing
but the standard library, numpy and pyarrow (it runs under pyarrow 19 and 26).

A step script wraps its engine in a :class:`PkEngine` and calls :func:`run_pk_step`; the steps
(write, upsert, read, range_read, build) are the same code for every engine.
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import bench_common as bc
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEED = 20240607
TABLE = "bench.pk"
KEY = "id"
BUCKETS = "4"
STR_PREFIX = "cust-"
STR_HEX = 15  # v_str is "cust-" + 15 hex characters: 20 characters
YEAR_US = 365 * bc.DAY_US
SCHEMA = pa.schema([
    pa.field(KEY, pa.int64(), nullable=False),  # primary keys are NOT NULL in Paimon
    ("v_int", pa.int64()),
    ("v_float", pa.float64()),
    ("v_str", pa.string()),
    ("v_ts", pa.timestamp("us")),
    ("v_i32", pa.int32()),
])
BASE_FILE, UPSERTS_FILE, FACTS_FILE = "base.arrow", "upserts.arrow", "facts.json"
RANGE_START, RANGE_SHARE = 0.45, 0.01  # the range read covers 1% of the keys, from 45% of them on


@dataclass(frozen=True, slots=True)
class Plan:
    """Dataset shape: ``rows`` base rows, then ``batches`` upsert batches of ``batch_rows`` rows.

    Half of every batch updates existing keys (new values), the other half inserts new keys, so
    after ``n`` batches the table holds ``rows + n * batch_rows / 2`` keys, ``0 .. keys - 1``.
    """

    rows: int
    batch_rows: int
    batches: int

    @property
    def half(self) -> int:
        return self.batch_rows // 2

    def keys_after(self, upserts: int) -> int:
        return self.rows + upserts * self.half

    def stored_rows(self, upserts: int) -> int:
        """Rows stored (every version) after ``upserts`` batches: what a merge-on-read merges."""
        return self.rows + upserts * self.batch_rows

    def key_range(self) -> tuple[int, int]:
        """``[low, high)`` of the range read, after all batches."""
        keys = self.keys_after(self.batches)
        low = int(keys * RANGE_START)
        return low, low + max(1, int(keys * RANGE_SHARE))


@dataclass(frozen=True, slots=True)
class Facts:
    """The plan and the expected fingerprints: the full table after n upserts, and the range read."""

    plan: Plan
    states: dict[int, dict[str, int]]
    key_range: dict[str, int]

    def to_json(self) -> str:
        return json.dumps({"plan": asdict(self.plan), "states": self.states, "range": self.key_range})

    @staticmethod
    def from_json(text: str) -> Facts:
        data = json.loads(text)
        return Facts(Plan(**data["plan"]), {int(n): fp for n, fp in data["states"].items()}, data["range"])


def fingerprint(table: pa.Table) -> dict[str, int]:
    """Row count and integer sums: stale or duplicated versions of a key change them."""
    def total(name: str) -> int:
        return int(pc.sum(table[name]).as_py() or 0)
    return {"rows": table.num_rows, "sum_id": total(KEY), "sum_v_int": total("v_int"),
            "sum_v_i32": total("v_i32")}


# ---- dataset -----------------------------------------------------------------------------------

def _rows(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    """Rows with the given keys and fresh random values."""
    n = len(ids)
    return pa.Table.from_arrays([
        pa.array(ids, pa.int64()),
        pa.array(rng.integers(0, 1_000_000_000, n, dtype=np.int64)),
        pa.array(np.round(rng.random(n) * 1000, 3)),
        pc.binary_join_element_wise(STR_PREFIX, bc.random_hex(rng, n, STR_HEX), ""),
        pa.array(bc.T0_US + rng.integers(0, YEAR_US, n), pa.timestamp("us")),
        pa.array(rng.integers(0, 2**31 - 1, n, dtype=np.int32)),
    ], schema=SCHEMA)


def _batch_keys(rng: np.random.Generator, plan: Plan, index: int) -> np.ndarray:
    """Keys of upsert batch ``index`` (1-based): half existing keys, half new ones, shuffled."""
    existing = plan.keys_after(index - 1)
    keys = np.concatenate([rng.choice(existing, plan.half, replace=False),
                           np.arange(existing, existing + plan.half)])
    rng.shuffle(keys)
    return keys


class _Newest:
    """The newest value of every key, kept independently of any sort/dedupe code."""

    def __init__(self, keys: int) -> None:
        self.v_int = np.zeros(keys, dtype=np.int64)
        self.v_i32 = np.zeros(keys, dtype=np.int64)

    def apply(self, rows: pa.Table) -> None:
        ids = rows[KEY].to_numpy()
        self.v_int[ids] = rows["v_int"].to_numpy()
        self.v_i32[ids] = rows["v_i32"].to_numpy()

    def fingerprint(self, low: int, high: int) -> dict[str, int]:
        """Expected fingerprint of keys ``low .. high - 1``."""
        return {"rows": high - low, "sum_id": (low + high - 1) * (high - low) // 2,
                "sum_v_int": int(self.v_int[low:high].sum()), "sum_v_i32": int(self.v_i32[low:high].sum())}


def generate(directory: Path, plan: Plan) -> Facts:
    """Write the base rows and the upsert batches (one record batch each) as Arrow IPC files."""
    if plan.batch_rows % 2:
        raise ValueError("the upsert batch size must be even (half updates, half inserts)")
    rng = np.random.default_rng(SEED)
    directory.mkdir(parents=True, exist_ok=True)
    newest = _Newest(plan.keys_after(plan.batches))
    base = _rows(rng, rng.permutation(plan.rows))
    newest.apply(base)
    with pa.OSFile(str(directory / BASE_FILE), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        writer.write_table(base, max_chunksize=bc.BATCH_ROWS)
    states = {0: newest.fingerprint(0, plan.keys_after(0))}
    with pa.OSFile(str(directory / UPSERTS_FILE), "wb") as sink, pa.ipc.new_file(sink, SCHEMA) as writer:
        for index in range(1, plan.batches + 1):
            batch = _rows(rng, _batch_keys(rng, plan, index)).combine_chunks()
            writer.write_batch(batch.to_batches()[0])
            newest.apply(batch)
            states[index] = newest.fingerprint(0, plan.keys_after(index))
    facts = Facts(plan, states, newest.fingerprint(*plan.key_range()))
    (directory / FACTS_FILE).write_text(facts.to_json())
    return facts


def load_facts(directory: Path) -> Facts:
    return Facts.from_json((directory / FACTS_FILE).read_text())


def load_base(directory: Path) -> pa.Table:
    return bc.load_mapped(directory / BASE_FILE)


def load_upsert(directory: Path, index: int) -> pa.Table:
    """Upsert batch ``index`` (1-based)."""
    return bc.load_mapped_batch(directory / UPSERTS_FILE, index - 1)


# ---- steps -------------------------------------------------------------------------------------

class PkEngine(Protocol):
    """One engine under test. Only ``write``, ``upsert`` and ``read`` run inside the timer."""

    def create(self, target: Path) -> Any:
        """Create the empty table (Paimon: bucket 4, key ``id``) and return its handle."""

    def open(self, target: Path) -> Any:
        """A handle on an existing table (catalog and table objects, not its snapshot)."""

    def write(self, handle: Any, data: pa.Table) -> None:
        """The initial write of the base rows, one commit."""

    def upsert(self, handle: Any, data: pa.Table) -> None:
        """Upsert one batch, one commit."""

    def read(self, handle: Any, key_range: tuple[int, int] | None) -> pa.Table:
        """The merged table, or its rows with ``low <= id < high``; includes planning the scan."""

    def committed_rows(self, handle: Any) -> int:
        """Rows the latest commit wrote (checked after the timer)."""


def _write(engine: PkEngine, args: argparse.Namespace) -> None:
    data = load_base(args.input)
    handle = engine.create(args.target)
    _, timing = bc.measure(lambda: engine.write(handle, data), args.profile)
    bc.report(timing, {"rows": engine.committed_rows(handle)})


def _upsert(engine: PkEngine, args: argparse.Namespace) -> None:
    batch = load_upsert(args.input, args.upserts)
    handle = engine.open(args.target)
    _, timing = bc.measure(lambda: engine.upsert(handle, batch), args.profile)
    bc.report(timing, {"rows": engine.committed_rows(handle)})


def _read(engine: PkEngine, args: argparse.Namespace, ranged: bool) -> None:
    key_range = load_facts(args.input).plan.key_range() if ranged else None
    handle = engine.open(args.target)
    bc.report_read(lambda: engine.read(handle, key_range), args.profile, fingerprint)


def state_dir(root: Path, upserts: int) -> Path:
    return root / f"state_{upserts}"


def _build(engine: PkEngine, args: argparse.Namespace) -> None:
    """Write the base, apply upserts 1..max(states) and copy the table after each state wanted.

    Not a measured step: it prepares the table states that the upsert and read steps start from.
    """
    states = set(args.states)
    work = args.target / "building"
    shutil.rmtree(work, ignore_errors=True)

    def build() -> None:
        handle = engine.create(work)
        engine.write(handle, load_base(args.input))
        for index in range(max(states) + 1):
            if index:
                engine.upsert(handle, load_upsert(args.input, index))
            if index in states:
                shutil.copytree(work, state_dir(args.target, index), dirs_exist_ok=False)
        shutil.rmtree(work)

    _, timing = bc.measure(build)
    bc.report(timing, {"states": len(states)})


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--upserts", type=int, default=1,
                        help="upsert: the batch to apply (1-based); reads: informational")
    parser.add_argument("--states", type=int, nargs="+", default=[0, 1, 5, 20],
                        help="build: upsert counts after which to keep a copy of the table")


def run_pk_step(doc: str | None, engine: PkEngine) -> None:
    """``STEP --input DATA_DIR --target DIR [--upserts N] [--states N ...] [--profile OUT]``."""
    bc.run_step(doc, {
        "write": lambda args: _write(engine, args),
        "upsert": lambda args: _upsert(engine, args),
        "read": lambda args: _read(engine, args, ranged=False),
        "range_read": lambda args: _read(engine, args, ranged=True),
        "build": lambda args: _build(engine, args),
    }, _configure)
