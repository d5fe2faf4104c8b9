"""Compaction changelog rows against a record-at-a-time statement of Paimon's rule."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.compaction.changelog import changelog_rows

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string()), ("tags", pa.list_(pa.int32())),
                    pa.field("_SEQUENCE_NUMBER", pa.int64(), False), pa.field("_VALUE_KIND", pa.int8(), False)])


def table(rows: dict[int, tuple[str | None, int, int]]) -> pa.Table:
    keys = sorted(rows)
    return pa.table({"k": keys, "v": [rows[k][0] for k in keys],
                     "tags": [[len(rows[k][0] or "")] for k in keys],
                     "_SEQUENCE_NUMBER": [rows[k][1] for k in keys],
                     "_VALUE_KIND": [rows[k][2] for k in keys]}, schema=SCHEMA)


def expected(before: dict[int, Any], after: dict[int, Any], dedupe: bool) -> list[tuple[int, str, Any, int]]:
    out = []
    for k in sorted(set(before) | set(after)):
        old, new = before.get(k), after.get(k)
        new_add = new is not None and new[2] in (0, 2)
        if old is None:
            if new_add:
                out.append((k, "+I", new[0], new[1]))
        elif new is None or (new[1] != old[1] and not new_add):
            out.append((k, "-D", old[0], old[1]))
        elif new[1] != old[1] and not (dedupe and new[0] == old[0]):
            out += [(k, "-U", old[0], old[1]), (k, "+U", new[0], new[1])]
    return out


values = st.one_of(st.none(), st.sampled_from(["a", "b", "cc"]))
rows = st.dictionaries(st.integers(0, 30), st.tuples(values, st.integers(0, 5), st.sampled_from([0, 2])),
                       max_size=20)


@settings(max_examples=200, deadline=None)
@given(before=rows, changes=st.dictionaries(st.integers(0, 30), st.tuples(values, st.sampled_from([0, 1, 2, 3])),
                                            max_size=20), dedupe=st.booleans())
def test_matches_the_rule(before: dict[int, Any], changes: dict[int, Any], dedupe: bool) -> None:
    after = {k: (v, 100 + k, kind) for k, (v, kind) in changes.items()}
    for k, row in before.items():  # keys not touched since: the merge passes the old row through
        after.setdefault(k, row)
    names = {0: "+I", 1: "-U", 2: "+U", 3: "-D"}
    result = pair(before, after, compare_columns=["v", "tags"] if dedupe else None)
    got = [(r["k"], names[r["_VALUE_KIND"]], r["v"], r["_SEQUENCE_NUMBER"]) for r in result.to_pylist()]
    assert got == expected(before, after, dedupe)


def pair(before: dict[int, Any], after: dict[int, Any], **kwargs: Any) -> pa.Table:
    """Candidate keys in order, each pointing at its row in the key-sorted tables (or -1)."""
    keys = sorted(set(before) | set(after))
    b_index = {k: i for i, k in enumerate(sorted(before))}
    a_index = {k: i for i, k in enumerate(sorted(after))}
    return changelog_rows(table(before), np.array([b_index.get(k, -1) for k in keys]),
                          table(after), np.array([a_index.get(k, -1) for k in keys]), **kwargs)


def test_first_full_compaction_inserts_everything() -> None:
    result = pair({}, {1: ("a", 4, 0), 2: ("b", 5, 2)})
    assert result.column("_VALUE_KIND").to_pylist() == [0, 0]
