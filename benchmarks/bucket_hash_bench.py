"""Throughput of Paimon's bucket hash, columnar (ours) against per-row encoding and hashing.

    .venv/bin/python benchmarks/bucket_hash_bench.py [--rows 1000000]

The columnar path builds BinaryRow bytes as matrices and runs MurmurHash3 word-column by
word-column; the per-row path is the straightforward encode-one-row-then-hash loop. Both must
give identical hashes (checked on every key shape).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from paimon_core.binary_row import encode_row, hash_arrow_rows, hash_bytes
from paimon_core.types import MAX_LENGTH, AtomicType, atomic

BIGINT, INT, STRING = atomic("BIGINT"), atomic("INT"), atomic("VARCHAR", MAX_LENGTH)
PER_ROW_SAMPLE = 50_000


def key_shapes(rows: int) -> dict[str, tuple[list[pa.Array], list[AtomicType]]]:
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 2**40, rows)
    short = pa.array([f"u{i % 100000}" for i in ids])
    long = pa.array([f"user-{i}-{'x' * int(i % 24)}" for i in ids])
    return {
        "BIGINT": ([pa.array(ids)], [BIGINT]),
        "STRING <= 7 bytes": ([short], [STRING]),
        "STRING 8-40 bytes": ([long], [STRING]),
        "INT, STRING": ([pa.array((ids % 2**31).astype(np.int32)), long], [INT, STRING]),
    }


def per_row(columns: list[pa.Array], types: list[AtomicType], rows: int) -> list[int]:
    values = [c.slice(0, rows).to_pylist() for c in columns]
    return [hash_bytes(encode_row([v[i] for v in values], types)) for i in range(rows)]


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"| key | columnar rows/s ({args.rows:,} rows) | per-row rows/s ({PER_ROW_SAMPLE:,} rows) | speed-up |")
    print("| --- | --- | --- | --- |")
    for name, (columns, types) in key_shapes(args.rows).items():
        columnar_s, hashes = timed(lambda c=columns, t=types: hash_arrow_rows(c, t))
        sample = min(PER_ROW_SAMPLE, args.rows)
        row_s, expected = timed(lambda c=columns, t=types, n=sample: per_row(c, t, n))
        assert list(hashes[:sample]) == expected, f"columnar and per-row hashes differ for {name}"  # type: ignore[index]
        columnar_rate, row_rate = args.rows / columnar_s, sample / row_s
        print(f"| {name} | {columnar_rate / 1e6:.2f} M | {row_rate / 1e6:.3f} M | {columnar_rate / row_rate:.0f}x |")


if __name__ == "__main__":
    main()
