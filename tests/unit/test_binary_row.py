"""BinaryRow encoding and Paimon's bucket hash: known vectors and columnar == per-row."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.binary_row import (
    EMPTY_ROW,
    decode_row,
    deserialize_with_arity,
    encode_row,
    hash_arrow_rows,
    hash_bytes,
    serialize_with_arity,
)
from paimon_core.errors import CorruptMetadataError
from paimon_core.types import MAX_LENGTH, atomic

BIGINT, INT, STRING = atomic("BIGINT"), atomic("INT"), atomic("VARCHAR", MAX_LENGTH)

# (values, types, hex of the BinaryRow, murmur3 seed 42) verified against pypaimon placement.
KNOWN = [
    ((1,), (BIGINT,), "0000000000000000" "0100000000000000", 1465514398),
    ((3,), (BIGINT,), "0000000000000000" "0300000000000000", -771300025),
    (("abc",), (STRING,), "0000000000000000" "6162630000000083", -101922419),
    (("hello-paimon",), (STRING,),
     "0000000000000000" "0c00000010000000" "68656c6c6f2d7061696d6f6e00000000", -18942213),
    ((7, "x"), (INT, STRING), "0000000000000000" "0700000000000000" "7800000000000081", -1252423430),
]


@pytest.mark.parametrize(("values", "types", "hex_row", "expected"), KNOWN)
def test_known_rows_and_hashes(values: tuple, types: tuple, hex_row: str, expected: int) -> None:
    row = encode_row(values, types)
    assert row.hex() == hex_row
    assert hash_bytes(row) == expected
    columns = [pa.array([v]) for v in values]
    assert hash_arrow_rows(columns, list(types)).tolist() == [expected]


def test_partition_row_of_pypaimon_golden_table() -> None:
    expected = "00000001" "0000000000000000" "0a00000010000000" "323032342d30312d3031000000000000"
    assert serialize_with_arity(["2024-01-01"], [STRING]).hex() == expected
    assert deserialize_with_arity(bytes.fromhex(expected), [STRING]) == ("2024-01-01",)


def test_empty_row_is_twelve_zero_bytes() -> None:
    assert bytes(12) == EMPTY_ROW
    assert deserialize_with_arity(EMPTY_ROW, []) == ()


def test_multi_type_stats_row_matches_pypaimon_bytes() -> None:
    # value-stats minimum of a pypaimon file: id, name, qty, price DECIMAL(10,2), ok, d, ts(6)
    types = [BIGINT, STRING, INT, atomic("DECIMAL", 10, 2), atomic("BOOLEAN"), atomic("DATE"),
             atomic("TIMESTAMP", 6)]
    millis = 1704110400000
    values = (0, "i11", 0, decimal.Decimal("0.00"), False, 19723, millis * 1_000_000)
    hex_row = ("00000007" "0000000000000000" "0000000000000000" "6931310000000083" "0000000000000000"
               "0000000000000000" "0000000000000000" "0b4d000000000000" "0000000040000000"
               "0022e5c48c010000")
    assert serialize_with_arity(values, types).hex() == hex_row
    assert deserialize_with_arity(bytes.fromhex(hex_row), types) == values


def test_arity_mismatch_is_reported_as_corrupt() -> None:
    with pytest.raises(CorruptMetadataError, match="2 fields, expected 1"):
        deserialize_with_arity(serialize_with_arity([1, 2], [BIGINT, BIGINT]), [BIGINT])


def test_nulls_set_bits_and_zero_slots() -> None:
    row = encode_row([None, 5], [BIGINT, INT])
    assert row[1] == 0b1  # field 0 -> bit 8
    assert row[8:16] == bytes(8)
    assert decode_row(row, [BIGINT, INT]) == (None, 5)


ATOMIC_CASES = [
    (atomic("BOOLEAN"), st.booleans()),
    (atomic("TINYINT"), st.integers(-128, 127)),
    (atomic("SMALLINT"), st.integers(-(2**15), 2**15 - 1)),
    (INT, st.integers(-(2**31), 2**31 - 1)),
    (BIGINT, st.integers(-(2**63), 2**63 - 1)),
    (atomic("DOUBLE"), st.floats(allow_nan=False)),
    (atomic("DATE"), st.integers(-100_000, 100_000)),
    (atomic("DECIMAL", 10, 2), st.decimals(-(10**7), 10**7, places=2, allow_nan=False,
                                           allow_infinity=False)),
    (atomic("DECIMAL", 38, 4), st.decimals(-(10**30), 10**30, places=4, allow_nan=False,
                                           allow_infinity=False)),
    (atomic("TIMESTAMP", 3), st.integers(-(10**15), 10**15).map(lambda ms: ms * 1_000_000)),
    (atomic("TIMESTAMP", 9), st.integers(-(10**18), 10**18)),
    (STRING, st.text(max_size=40)),
    (atomic("VARBINARY", MAX_LENGTH), st.binary(max_size=40)),
]


@pytest.mark.parametrize(("data_type", "strategy"), ATOMIC_CASES, ids=str)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_encode_decode_round_trip(data_type: object, strategy: st.SearchStrategy, data: st.DataObject) -> None:
    values = data.draw(st.lists(st.one_of(st.none(), strategy), min_size=1, max_size=4))
    types = [data_type] * len(values)
    assert decode_row(encode_row(values, types), types) == tuple(values)


def _arrow_and_internal(kind: str, values: list) -> tuple[pa.Array, list, object]:
    if kind == "string":
        return pa.array(values, pa.string()), values, STRING
    if kind == "bigint":
        return pa.array(values, pa.int64()), values, BIGINT
    if kind == "int":
        return pa.array(values, pa.int32()), values, INT
    if kind == "decimal":
        decimals = [None if v is None else decimal.Decimal(v).scaleb(-2) for v in values]
        return pa.array(decimals, pa.decimal128(12, 2)), decimals, atomic("DECIMAL", 12, 2)
    if kind == "decimal38":  # out-of-line: Java's shortest two's complement, nulls keep 16 bytes
        wide = decimal.Context(prec=60)
        decimals = [None if v is None else decimal.Decimal(v).scaleb(-10, wide) for v in values]
        return pa.array(decimals, pa.decimal128(38, 10)), decimals, atomic("DECIMAL", 38, 10)
    if kind == "ts6":
        epoch = datetime.datetime(1970, 1, 1)
        stamps = [None if v is None else epoch + datetime.timedelta(microseconds=v) for v in values]
        return (pa.array(stamps, pa.timestamp("us")),
                [None if v is None else v * 1000 for v in values], atomic("TIMESTAMP", 6))
    raise AssertionError(kind)


_VALUES = {
    "string": st.text(max_size=30),
    "bigint": st.integers(-(2**63), 2**63 - 1),
    "int": st.integers(-(2**31), 2**31 - 1),
    "decimal": st.integers(-(10**11), 10**11),
    "decimal38": st.one_of(st.integers(-(10**38) + 1, 10**38 - 1), st.sampled_from([-128, 128, -1, 0, 255, -256])),
    "ts6": st.integers(-(10**15), 10**15),
}


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_columnar_hash_equals_per_row_hash(data: st.DataObject) -> None:
    kinds = data.draw(st.lists(st.sampled_from(sorted(_VALUES)), min_size=1, max_size=3))
    n = data.draw(st.integers(1, 25))
    columns, internals, types = [], [], []
    for kind in kinds:
        raw = data.draw(st.lists(st.one_of(st.none(), _VALUES[kind]), min_size=n, max_size=n))
        array, internal, data_type = _arrow_and_internal(kind, raw)
        columns.append(array)
        internals.append(internal)
        types.append(data_type)
    expected = [hash_bytes(encode_row([col[i] for col in internals], types)) for i in range(n)]
    assert hash_arrow_rows(columns, types).tolist() == expected


def test_columnar_hash_of_sliced_and_chunked_strings() -> None:
    values = ["a" * i for i in range(30)] + [None]
    chunked = pa.chunked_array([values[:10], values[10:]])
    sliced = pa.array(values).slice(5, 20)
    expected = [hash_bytes(encode_row([v], [STRING])) for v in values]
    assert hash_arrow_rows([chunked], [STRING]).tolist() == expected
    assert hash_arrow_rows([sliced], [STRING]).tolist() == expected[5:25]


def test_large_inputs_hash_in_row_ranges_as_one() -> None:
    """Above the threshold rows are hashed in ranges on threads: the same hashes, nulls,
    out-of-line strings and chunk boundaries included."""
    from paimon_core import binary_row

    n = binary_row.PARALLEL_HASH_ROWS + 1001
    ids = pa.chunked_array([pa.array(range(0, 1000)), pa.array(range(1000, n))], pa.int64())
    names = pa.array([None if i % 97 == 0 else "k" * (i % 11) + str(i) for i in range(n)])
    columns, types = [ids, names], [BIGINT, STRING]
    whole = binary_row._hash_rows(columns, types)
    assert hash_arrow_rows(columns, types).tolist() == whole.tolist()
    assert whole[5000].item() == hash_bytes(encode_row([5000, names[5000].as_py()], types))
