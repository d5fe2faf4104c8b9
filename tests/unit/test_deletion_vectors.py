"""Deletion vectors: decoding the bytes pypaimon writes and every Roaring container kind; encoding."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimon_core.deletion_vectors import (
    BITMAP32_MAGIC,
    decode_roaring,
    encode_deletion_vector,
    encode_index_file,
    read_deletion_vector,
)
from paimon_core.errors import CorruptMetadataError


def test_pypaimon_vector_of_rows_1_and_4() -> None:
    blob = bytes.fromhex("00000018" "5e43f2d0" "3a300000" "01000000" "00000100" "10000000" "0100" "0400"
                         "956ccf14")
    assert read_deletion_vector(blob).tolist() == [1, 4]


def _roaring(containers: list[tuple[int, str, np.ndarray]]) -> bytes:
    """A portable-format RoaringBitmap (independent test encoder, per the format spec)."""
    runs = any(kind == "run" for _, kind, _ in containers)
    n = len(containers)
    out = bytearray()
    if runs:
        out += struct.pack("<I", 12347 | ((n - 1) << 16))
        flags = bytearray((n + 7) // 8)
        for i, (_, kind, _) in enumerate(containers):
            if kind == "run":
                flags[i // 8] |= 1 << (i % 8)
        out += flags
    else:
        out += struct.pack("<II", 12346, n)
    for key, _, values in containers:
        out += struct.pack("<HH", key, len(values) - 1)
    bodies = []
    for _, kind, values in containers:
        if kind == "array":
            bodies.append(values.astype("<u2").tobytes())
        elif kind == "bitmap":
            bits = np.zeros(65536, dtype=np.uint8)
            bits[values] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
        else:
            starts = [int(values[0])]
            lengths = [0]
            for v in values[1:]:
                if v == starts[-1] + lengths[-1] + 1:
                    lengths[-1] += 1
                else:
                    starts.append(int(v))
                    lengths.append(0)
            body = struct.pack("<H", len(starts))
            for s, length in zip(starts, lengths):
                body += struct.pack("<HH", s, length)
            bodies.append(body)
    if not runs or n >= 4:
        offset = len(out) + 4 * n
        for body in bodies:
            out += struct.pack("<I", offset)
            offset += len(body)
    for body in bodies:
        out += body
    return bytes(out)


@pytest.mark.parametrize("with_runs", [False, True])
def test_all_container_kinds(with_runs: bool) -> None:
    array_values = np.array([0, 7, 65535], dtype=np.uint32)
    bitmap_values = np.arange(0, 65536, 3, dtype=np.uint32)[:5000]
    run_values = np.concatenate([np.arange(10, 400), np.arange(1000, 1003)]).astype(np.uint32)
    containers = [(0, "array", array_values), (1, "bitmap", bitmap_values),
                  (3, "run" if with_runs else "array", run_values)]
    expected = np.concatenate([array_values, bitmap_values + 65536, run_values + 3 * 65536])
    assert decode_roaring(_roaring(containers)).tolist() == expected.tolist()


def test_vector_checksum_and_magic_are_checked() -> None:
    body = _roaring([(0, "array", np.array([2, 3], dtype=np.uint32))])
    payload = struct.pack(">i", BITMAP32_MAGIC) + body
    blob = struct.pack(">i", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    assert read_deletion_vector(blob).tolist() == [2, 3]
    with pytest.raises(CorruptMetadataError, match="checksum"):
        read_deletion_vector(blob[:-1] + bytes([blob[-1] ^ 1]))
    with pytest.raises(CorruptMetadataError, match="magic"):
        read_deletion_vector(blob[:4] + b"\0\0\0\1" + blob[8:])


def test_encoding_matches_the_bytes_java_wrote_for_rows_1_and_4() -> None:
    data, ranges = encode_index_file({"data-0.parquet": np.array([4, 1])})
    assert data.hex() == "01000000185e43f2d03a30000001000000000001001000000001000400956ccf14"
    assert ranges == [("data-0.parquet", 1, 24, 2)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=50), st.integers(0, 3))
def test_roaring_round_trip_with_array_and_bitmap_containers(values: list[int], dense_blocks: int) -> None:
    dense = [np.arange(k * 65536, k * 65536 + 5000, dtype=np.uint32) for k in range(dense_blocks)]
    positions = np.concatenate([np.array(values, dtype=np.uint32), *dense])
    decoded = read_deletion_vector(encode_deletion_vector(positions))
    assert np.array_equal(decoded, np.unique(positions))
