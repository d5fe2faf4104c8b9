"""Workloads of the read-shape matrix: a table shape and the operations run on it, as hypothesis
strategies (so a failure shrinks to the fewest operations, rows and options that still fail).

Operations: a commit of rows of any kinds (several ``write`` calls, one snapshot), deletes by key,
a compaction (what the picker asks, or full), a schema change (add ``e``, widen, rename or
drop ``n``), a tag, and an expiry that keeps only the newest snapshots. Keys come from a small
domain so that versions pile up per key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from hypothesis import assume
from hypothesis import strategies as st

import paimon_core as pc
from paimon_core.errors import OptionError
from tests.read_shapes.shape import ENGINES, FUNCTIONS, PRODUCERS, RETRACTABLE, Shape

KEYS = range(6)
PARTS = ("x", "y")
EVOLUTIONS = ("add_e", "widen_n", "rename_n", "drop_n")


@dataclass(frozen=True)
class Write:
    """One commit: rows as ``(kind, p, k, values)``, written in order (consecutive rows of one kind
    in one ``write`` call)."""

    rows: tuple[tuple[int, str, int, tuple[tuple[str, Any], ...]], ...]


@dataclass(frozen=True)
class Delete:
    """``Table.delete`` of these keys (-D rows whose values are null)."""

    keys: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Compact:
    full: bool


@dataclass(frozen=True)
class Evolve:
    change: str  # one of EVOLUTIONS


@dataclass(frozen=True)
class Tag:
    pass


@dataclass(frozen=True)
class Expire:
    retain: int  # snapshots kept (the newest)


Op = Write | Delete | Compact | Evolve | Tag | Expire


def valid(shape: Shape) -> bool:
    """Whether the table can be created (else the strategy draws again)."""
    try:
        pc.validate_table("m.t", schema=shape.arrow_schema(), partition_keys=shape.partition_keys,
                          primary_keys=shape.keys, options=shape.options())
    except OptionError:
        return False
    return True


@st.composite
def shapes(draw: st.DrawFn, engines: tuple[str, ...] = ENGINES) -> Shape:
    """Any valid shape of the given engines."""
    engine = draw(st.sampled_from(engines))
    producer = draw(st.sampled_from(("none", "lookup") if engine == "first-row" else PRODUCERS))
    deletion_vectors = engine != "first-row" and producer != "full-compaction" and draw(st.booleans())
    retractions = draw(st.booleans())
    ignore_delete = draw(st.sampled_from((False, False, True))) if retractions else False
    sequence_group = engine == "partial-update" and draw(st.booleans())
    remove_on_delete = (engine in ("partial-update", "aggregation") and not ignore_delete and not sequence_group
                        and draw(st.booleans()))
    functions: tuple[tuple[str, str], ...] = ()
    ignore_retract: frozenset[str] = frozenset()
    if engine == "aggregation":
        functions = tuple((column, draw(st.sampled_from(choices))) for column, choices in FUNCTIONS.items())
        not_retractable = {column for column, function in functions if function not in RETRACTABLE}
        ignore_retract = frozenset(draw(st.sets(st.sampled_from(sorted(not_retractable))))
                                   if not_retractable else ())
    shape = Shape(engine=engine, producer=producer, write_only=draw(st.booleans()),
                  deletion_vectors=deletion_vectors, bucket=draw(st.sampled_from((1, 2, -1))),
                  partitioned=draw(st.booleans()), retractions=retractions, ignore_delete=ignore_delete,
                  remove_on_delete=remove_on_delete,
                  sequence_field=engine in ("deduplicate", "partial-update") and not sequence_group
                  and draw(st.booleans()),
                  sequence_group=sequence_group, functions=functions, ignore_retract=ignore_retract)
    assume(valid(shape))
    return shape


def values(shape: Shape, *, blank_strings: bool = True) -> st.SearchStrategy[tuple[tuple[str, Any], ...]]:
    """A row's values by label (``e`` only matters once added; ``s`` is never null when it orders).
    ``blank_strings``: ``b`` may be the empty string (which ``listagg`` skips as Paimon 1.x does and
    0.9 does not)."""
    sequence = st.integers(0, 4) if shape.sequence_field else st.one_of(st.none(), st.integers(0, 4))
    texts = ["", "x", "y", "zz"] if blank_strings else ["x", "y", "zz"]
    return st.tuples(
        st.tuples(st.just("a"), st.one_of(st.none(), st.integers(-3, 3))),
        st.tuples(st.just("b"), st.one_of(st.none(), st.sampled_from(texts))),
        st.tuples(st.just("c"), st.one_of(st.none(), st.integers(-3, 3).map(float))),
        st.tuples(st.just("s"), sequence),
        st.tuples(st.just("g"), st.one_of(st.none(), st.integers(0, 3))),
        st.tuples(st.just("n"), st.one_of(st.none(), st.integers(-99, 99))),
        st.tuples(st.just("e"), st.one_of(st.none(), st.sampled_from(["u", "v"]))),
    )


def key_parts(shape: Shape) -> st.SearchStrategy[tuple[str, int]]:
    return st.tuples(st.sampled_from(PARTS) if shape.partitioned else st.just(""), st.sampled_from(KEYS))


def ops(shape: Shape, *, max_ops: int, blank_strings: bool = True) -> st.SearchStrategy[list[Op]]:
    """A first commit, then any operations."""
    kinds = st.sampled_from((0, 0, 2, 1, 3)) if shape.retractions else st.sampled_from((0, 0, 2))
    row = st.builds(lambda kind, key, vals: (kind, key[0], key[1], vals), kinds, key_parts(shape),
                    values(shape, blank_strings=blank_strings))
    write = st.builds(Write, st.lists(row, min_size=1, max_size=8).map(tuple))
    delete = st.builds(Delete, st.lists(key_parts(shape), min_size=1, max_size=3).map(tuple))
    others = [write, write, write, st.builds(Compact, st.booleans()), st.builds(Evolve, st.sampled_from(EVOLUTIONS)),
              st.just(Tag()), st.builds(Expire, st.integers(1, 3))]
    if shape.retractions and not shape.sequence_field:  # -D rows with a null sequence field sort first
        others.append(delete)
    return st.builds(lambda first, rest: [first, *rest], write, st.lists(st.one_of(others), max_size=max_ops - 1))


def batch(rows: list[tuple[int, str, int, tuple[tuple[str, Any], ...]]], schema: pa.Schema,
          names: dict[str, str]) -> pa.Table:
    """Rows as a table of ``schema`` (the table's schema now); ``names`` maps labels to names."""
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for _, p, k, vals in rows:
        if "p" in columns:
            columns["p"].append(p)
        columns["k"].append(k)
        given = dict(vals)
        for label, name in names.items():
            columns[name].append(given.get(label))
    return pa.table(columns, schema=schema)
