"""Deletion vectors: the bitmaps of ``DELETION_VECTORS`` index files, read and written.

An index file starts with version byte 1; each vector, at the offset its index entry gives, is
``int32 BE size | int32 BE magic | RoaringBitmap (portable format) | int32 BE CRC32``. A set
bit is the 0-based position of a deleted row in its data file.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from paimon_core.errors import CorruptMetadataError, UnsupportedFeatureError

BITMAP32_MAGIC = 1581511376
BITMAP64_MAGIC = 1681511377
_SERIAL_COOKIE = 12347
_SERIAL_COOKIE_NO_RUN = 12346
_NO_OFFSET_THRESHOLD = 4


def read_deletion_vector(blob: bytes, *, source: str = "deletion vector") -> np.ndarray:
    """Deleted row positions (sorted uint32) of one vector: ``blob`` starts at its size field."""
    if len(blob) < 8:
        raise CorruptMetadataError(f"{source} is truncated")
    size, magic = struct.unpack(">ii", blob[:8])
    if magic == BITMAP64_MAGIC or struct.unpack("<i", blob[4:8])[0] == BITMAP64_MAGIC:
        raise UnsupportedFeatureError(f"{source} uses 64-bit deletion vectors, not supported")
    if magic != BITMAP32_MAGIC:
        raise CorruptMetadataError(f"{source} has unknown magic number {magic}")
    body = blob[8:4 + size]
    if len(blob) >= 8 + size:
        expected = struct.unpack(">I", blob[4 + size:8 + size])[0]
        if zlib.crc32(blob[4:4 + size]) & 0xFFFFFFFF != expected:
            raise CorruptMetadataError(f"{source} fails its checksum")
    return decode_roaring(body, source=source)


def decode_roaring(data: bytes, *, source: str = "bitmap") -> np.ndarray:
    """Values of a RoaringBitmap in the portable serialization format, as sorted uint32."""
    try:
        return _decode(memoryview(data))
    except (struct.error, ValueError, IndexError) as exc:
        raise CorruptMetadataError(f"cannot decode {source}: {exc}") from exc


def _decode(data: memoryview) -> np.ndarray:
    cookie = struct.unpack_from("<I", data, 0)[0]
    position = 4
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        count = (cookie >> 16) + 1
        run_flags = bytes(data[position:position + (count + 7) // 8])
        position += (count + 7) // 8
        has_offsets = count >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        count = struct.unpack_from("<I", data, position)[0]
        position += 4
        run_flags = b""
        has_offsets = True
    else:
        raise ValueError(f"unknown cookie {cookie}")
    header = np.frombuffer(data, dtype="<u2", count=2 * count, offset=position).reshape(count, 2)
    position += 4 * count
    if has_offsets:
        position += 4 * count
    parts = []
    for i in range(count):
        key = int(header[i, 0]) << 16
        cardinality = int(header[i, 1]) + 1
        is_run = bool(run_flags) and bool(run_flags[i // 8] & (1 << (i % 8)))
        if is_run:
            runs = struct.unpack_from("<H", data, position)[0]
            pairs = np.frombuffer(data, dtype="<u2", count=2 * runs, offset=position + 2)
            position += 2 + 4 * runs
            starts = pairs[0::2].astype(np.uint32)
            lengths = pairs[1::2].astype(np.uint32) + 1
            low = np.concatenate([np.arange(s, s + n, dtype=np.uint32) for s, n in zip(starts, lengths)]) \
                if runs else np.zeros(0, dtype=np.uint32)
        elif cardinality <= 4096:
            low = np.frombuffer(data, dtype="<u2", count=cardinality, offset=position).astype(np.uint32)
            position += 2 * cardinality
        else:
            words = np.frombuffer(data, dtype="<u8", count=1024, offset=position)
            position += 8192
            bits = np.unpackbits(words.view(np.uint8), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
        parts.append(low + np.uint32(key))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


def encode_roaring(positions: np.ndarray) -> bytes:
    """A RoaringBitmap of ``positions`` in the portable format (array and bitmap containers)."""
    values = np.unique(np.asarray(positions, dtype=np.uint32))
    highs = (values >> 16).astype(np.uint16)
    keys, starts, counts = np.unique(highs, return_index=True, return_counts=True)
    header = np.empty((len(keys), 2), dtype="<u2")
    header[:, 0] = keys
    header[:, 1] = counts - 1
    bodies = []
    for start, count in zip(starts, counts):
        low = (values[start:start + count] & 0xFFFF).astype(np.uint16)
        if count <= 4096:
            bodies.append(low.astype("<u2").tobytes())
        else:
            bits = np.zeros(65536, dtype=np.uint8)
            bits[low] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
    prefix = 8 + 4 * len(keys) + 4 * len(keys)
    offsets = np.cumsum([prefix] + [len(b) for b in bodies[:-1]]).astype("<u4") if bodies else np.zeros(0, "<u4")
    return b"".join([struct.pack("<II", _SERIAL_COOKIE_NO_RUN, len(keys)), header.tobytes(), offsets.tobytes(),
                     *bodies])


def encode_deletion_vector(positions: np.ndarray) -> bytes:
    """One vector as stored in an index file: size, magic, bitmap and checksum."""
    body = struct.pack(">i", BITMAP32_MAGIC) + encode_roaring(positions)
    return struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def encode_index_file(vectors: dict[str, np.ndarray]) -> tuple[bytes, list[tuple[str, int, int, int]]]:
    """An index file holding ``vectors`` (data file name -> deleted positions).

    Returns the bytes and, per data file, (name, offset, length, cardinality) for its index entry.
    """
    parts = [bytes([1])]
    ranges = []
    offset = 1
    for name in sorted(vectors):
        positions = np.unique(np.asarray(vectors[name], dtype=np.uint32))
        blob = encode_deletion_vector(positions)
        ranges.append((name, offset, len(blob) - 8, len(positions)))
        parts.append(blob)
        offset += len(blob)
    return b"".join(parts), ranges
