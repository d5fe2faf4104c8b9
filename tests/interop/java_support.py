"""What the Java-oracle tests share: multiset comparison of rows and reads at every snapshot and tag."""

from __future__ import annotations

import datetime
import decimal
import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import paimon_core as pc
from tests.interop.conftest import JavaOracle, StepOracle


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def multiset(table: pa.Table) -> Counter[Any]:
    """The rows of a table as a multiset of hashable tuples (column order as in the table)."""
    return Counter(_hashable(list(row.values())) for row in table.to_pylist())


def assert_same_rows(ours: pa.Table, theirs: pa.Table, what: str) -> None:
    """Equal as multisets, column by column in our column order; the difference is shown."""
    theirs = theirs.select(ours.column_names) if theirs.num_columns else theirs
    mine, other = multiset(ours), multiset(theirs)
    if mine != other:
        only_ours = [repr(r)[:400] for r in list((mine - other).elements())[:3]]
        only_theirs = [repr(r)[:400] for r in list((other - mine).elements())[:3]]
        raise AssertionError(f"{what}: {ours.num_rows} rows here, {theirs.num_rows} in the oracle; "
                             f"only here {only_ours}; only in the oracle {only_theirs}")


def assert_filtered_like(ours: pa.Table, theirs: pa.Table, filters: list[Any], what: str) -> None:
    """Java's filtered reads only prune (files, row groups): what it returns holds every row we
    return, and exactly those once the filter is applied to it."""
    assert_same_rows(ours, theirs.filter(pq.filters_to_expression(filters)), what)


@dataclass(frozen=True)
class Matched:
    """What :func:`match_reads` compared: the oracle's table per snapshot, results of extra steps."""

    compared: int
    snapshots: dict[int, pa.Table]
    extra: list[Any]


def match_reads(table: pc.Table, oracle: StepOracle, warehouse: Path | str, *,
                options: dict[str, str] | None = None, tags: bool = True,
                extra: Sequence[dict[str, Any]] = ()) -> Matched:
    """The oracle reads what we read at every snapshot (and every tag), in one run of the oracle
    together with ``extra`` steps."""
    snapshots = [s.id for s in table.snapshots()]
    assert snapshots, f"table {table.name} has no snapshots"
    tag_names = [t.name for t in table.list_tags()] if tags else []
    outs = {key: str(oracle.workdir / f"read-{next(_READS)}.arrow") for key in [*snapshots, *tag_names]}
    steps = [{"op": "read", "table": table.name, ("tag" if isinstance(key, str) else "snapshot_id"): key,
              "out": out, "options": options or {}} for key, out in outs.items()]
    results = oracle.run(warehouse, [*steps, *extra])
    theirs = {key: oracle.load(out) for key, out in outs.items()}
    for sid in snapshots:
        assert_same_rows(table.read(snapshot_id=sid), theirs[sid], f"{table.name} snapshot {sid}")
    for tag in tag_names:
        assert_same_rows(table.read(tag=tag), theirs[tag], f"{table.name} tag {tag}")
    return Matched(len(outs), {sid: theirs[sid] for sid in snapshots}, results[len(steps):])


def assert_reads_match(table: pc.Table, oracle: StepOracle, warehouse: Path | str, *,
                       options: dict[str, str] | None = None, tags: bool = True) -> int:
    """The oracle reads what we read at every snapshot (and every tag); returns the reads compared."""
    return match_reads(table, oracle, warehouse, options=options, tags=tags).compared


def assert_keys_unique(data: pa.Table, keys: list[str], what: str) -> None:
    counts = Counter(tuple(r[k] for k in keys) for r in data.select(keys).to_pylist())
    repeated = [k for k, n in counts.items() if n > 1]
    assert not repeated, f"{what}: keys read more than once: {repeated[:5]}"


BUCKET_CHECK = "bucket_check"


def assert_java_buckets(check: dict[str, Any], table: str) -> int:
    """Every row sits in the bucket Java's bucket function gives it (a ``bucket_check`` step's
    result); returns the rows checked."""
    assert check["misplaced"] == 0, f"{table}: {check['misplaced']} of {check['checked']} rows in a wrong bucket"
    return int(check["checked"])


def java_files(java: JavaOracle, warehouse: Path | str, table: str,
               snapshot_id: int | None = None) -> list[dict[str, Any]]:
    [files] = java.run(warehouse, [{"op": "files", "table": table, "snapshot_id": snapshot_id}])
    return list(files)


_READS = itertools.count()
BASE_TIME = datetime.datetime(2024, 3, 1, 12, 30, 15, 123456)


def decimal_values(precision: int, scale: int, count: int) -> list[decimal.Decimal | None]:
    """Values using every digit of DECIMAL(precision, scale), both signs, a null every fifth."""
    top = 10**precision - 1
    out: list[decimal.Decimal | None] = []
    for i in range(count):
        if i % 5 == 4:
            out.append(None)
            continue
        unscaled = (top * (i + 1)) // (count + 1) if i % 3 else top - i % (top + 1)
        out.append(decimal.Decimal((1 if i % 2 else 0, tuple(int(d) for d in str(unscaled)), -scale)))
    return out
