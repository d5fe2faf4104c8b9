"""Paimon's BinaryRow: byte-exact encoding of partitions, keys and stats, and the bucket hash.

Layout (all integers little-endian): a null-bit region of ``null_bits_width(arity)`` bytes whose
first byte is the row kind and where field ``i`` is null iff bit ``i + 8`` is set, one 8-byte
slot per field, then a variable part of 8-byte-aligned out-of-line values. Manifests prefix a
row with its arity as a big-endian int32.

Values are in *internal* form, the form Paimon itself stores: DATE as days since epoch, TIME as
milliseconds of the day, TIMESTAMP as nanoseconds since epoch (split into millis and
nano-of-milli on disk), DECIMAL as :class:`decimal.Decimal`, strings as ``str``, binary as
``bytes``.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from paimon_core.columnar import validity
from paimon_core.errors import CorruptMetadataError, UnsupportedFeatureError
from paimon_core.threads import worker_threads
from paimon_core.types import BINARY_ROOTS, STRING_ROOTS, AtomicType, DataType

HASH_SEED = 42
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_NANOS_PER_MILLI = 1_000_000
_FIXED_8 = {"BIGINT", "DOUBLE"}


def null_bits_width(arity: int) -> int:
    """Bytes of the header + null-bit region for a row of ``arity`` fields."""
    return ((arity + 63 + 8) // 64) * 8


def _is_compact(data_type: AtomicType) -> bool:
    if data_type.root == "DECIMAL":
        return data_type.precision <= 18
    if data_type.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return data_type.precision <= 3
    return True


# ------------------------------------------------------------------------------------------
# per-row encode / decode (metadata paths: partitions, min/max keys, stats)
# ------------------------------------------------------------------------------------------


def encode_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """Encode one row of internal values; nested types may only be null (stats of them are)."""
    arity = len(types)
    width = null_bits_width(arity)
    fixed = bytearray(width + 8 * arity)
    var = bytearray()
    for i, (value, data_type) in enumerate(zip(values, types)):
        if value is None:
            fixed[(i + 8) // 8] |= 1 << ((i + 8) % 8)
            reserved = _null_reservation(data_type)
            if reserved:  # Java keeps a null wide decimal's or timestamp's out-of-line bytes
                slot = width + 8 * i
                fixed[slot:slot + 8] = struct.pack("<Q", (len(fixed) + len(var)) << 32)
                var += bytes(reserved)
            continue
        if not isinstance(data_type, AtomicType):
            raise UnsupportedFeatureError(f"cannot encode a non-null {data_type} in a BinaryRow")
        slot = width + 8 * i
        fixed[slot:slot + 8], out_of_line = _encode_slot(value, data_type, len(fixed) + len(var))
        var += out_of_line
    return bytes(fixed + var)


def _encode_slot(value: Any, data_type: AtomicType, var_offset: int) -> tuple[bytes, bytes]:
    root = data_type.root
    if root == "BOOLEAN":
        return struct.pack("<?7x", bool(value)), b""
    if root in ("TINYINT", "SMALLINT", "INT", "DATE", "TIME"):
        return struct.pack("<q", int(value)) if int(value) >= 0 else _low_bytes(int(value), root), b""
    if root == "BIGINT":
        return struct.pack("<q", int(value)), b""
    if root == "FLOAT":
        return struct.pack("<f4x", float(value)), b""
    if root == "DOUBLE":
        return struct.pack("<d", float(value)), b""
    if root == "DECIMAL":
        unscaled = _unscaled(value, data_type.scale)
        if _is_compact(data_type):
            return struct.pack("<q", unscaled), b""
        raw = unscaled.to_bytes(_java_byte_length(unscaled), "big", signed=True)
        return struct.pack("<Q", (var_offset << 32) | len(raw)), raw.ljust(16, b"\0")
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        millis, nano_of_milli = divmod(int(value), _NANOS_PER_MILLI)
        if _is_compact(data_type):
            return struct.pack("<q", millis), b""
        return struct.pack("<Q", (var_offset << 32) | nano_of_milli), struct.pack("<q", millis)
    if root in STRING_ROOTS or root in BINARY_ROOTS:
        raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if len(raw) <= 7:
            return raw.ljust(7, b"\0") + bytes([0x80 | len(raw)]), b""
        padded = raw + b"\0" * (-len(raw) % 8)
        return struct.pack("<Q", (var_offset << 32) | len(raw)), padded
    raise UnsupportedFeatureError(f"cannot encode type {data_type} in a BinaryRow")


def _java_byte_length(value: int) -> int:
    """Length of Java's ``BigInteger.toByteArray()``: the shortest two's complement."""
    return (value if value >= 0 else ~value).bit_length() // 8 + 1


def _null_reservation(data_type: DataType) -> int:
    """Out-of-line bytes Java's writer reserves for a null of this type (``writeDecimal`` and
    ``writeTimestamp`` with a null value keep their space for a later update)."""
    if not isinstance(data_type, AtomicType) or _is_compact(data_type):
        return 0
    return 16 if data_type.root == "DECIMAL" else 8 if data_type.root in ("TIMESTAMP", "TIMESTAMP_LTZ") else 0


def _low_bytes(value: int, root: str) -> bytes:
    """Two's complement of a narrow negative int in its low bytes, the rest of the slot zero."""
    size = {"TINYINT": 1, "SMALLINT": 2}.get(root, 4)
    return value.to_bytes(size, "little", signed=True).ljust(8, b"\0")


_WIDE = decimal.Context(prec=80)


def _unscaled(value: Any, scale: int) -> int:
    dec = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    return int(dec.scaleb(scale, _WIDE).to_integral_value(rounding=decimal.ROUND_HALF_UP, context=_WIDE))


def decode_row(data: bytes, types: Sequence[DataType]) -> tuple[Any, ...]:
    """Decode a row (without the arity prefix) into internal values; nested fields read as None."""
    width = null_bits_width(len(types))
    out: list[Any] = []
    for i, data_type in enumerate(types):
        if data[(i + 8) // 8] & (1 << ((i + 8) % 8)) or not isinstance(data_type, AtomicType):
            out.append(None)
            continue
        slot = width + 8 * i
        out.append(_decode_slot(data, data[slot:slot + 8], data_type))
    return tuple(out)


def _decode_slot(row: bytes, slot: bytes, data_type: AtomicType) -> Any:
    root = data_type.root
    if root == "BOOLEAN":
        return slot[0] != 0
    if root in ("TINYINT", "SMALLINT", "INT", "DATE", "TIME"):
        size = {"TINYINT": 1, "SMALLINT": 2}.get(root, 4)
        return int.from_bytes(slot[:size], "little", signed=True)
    if root == "BIGINT":
        return struct.unpack("<q", slot)[0]
    if root == "FLOAT":
        return struct.unpack("<f", slot[:4])[0]
    if root == "DOUBLE":
        return struct.unpack("<d", slot)[0]
    word = struct.unpack("<Q", slot)[0]
    if root == "DECIMAL":
        if _is_compact(data_type):
            unscaled = struct.unpack("<q", slot)[0]
        else:
            offset, size = word >> 32, word & 0xFFFFFFFF
            unscaled = int.from_bytes(row[offset:offset + size], "big", signed=True)
        return decimal.Decimal(unscaled).scaleb(-data_type.scale, _WIDE)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        if _is_compact(data_type):
            return struct.unpack("<q", slot)[0] * _NANOS_PER_MILLI
        offset = word >> 32
        millis = struct.unpack("<q", row[offset:offset + 8])[0]
        return millis * _NANOS_PER_MILLI + (word & 0xFFFFFFFF)
    if root in STRING_ROOTS or root in BINARY_ROOTS:
        if slot[7] & 0x80:
            raw = slot[: slot[7] & 0x7F]
        else:
            offset, size = word >> 32, word & 0xFFFFFFFF
            raw = row[offset:offset + size]
        return raw.decode("utf-8") if root in STRING_ROOTS else bytes(raw)
    raise UnsupportedFeatureError(f"cannot decode type {data_type} from a BinaryRow")


def serialize_with_arity(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """The manifest form of a row: big-endian arity, then the BinaryRow."""
    return struct.pack(">i", len(types)) + encode_row(values, types)


def deserialize_with_arity(data: bytes, types: Sequence[DataType]) -> tuple[Any, ...]:
    """Decode a manifest row; a row whose arity differs from ``types`` is reported as corrupt."""
    if len(data) < 4:
        raise CorruptMetadataError(f"BinaryRow of {len(data)} bytes is too short")
    arity = struct.unpack(">i", data[:4])[0]
    if arity != len(types):
        raise CorruptMetadataError(f"BinaryRow has {arity} fields, expected {len(types)}")
    return decode_row(data[4:], types)


EMPTY_ROW = serialize_with_arity((), ())


# ------------------------------------------------------------------------------------------
# internal form of Arrow values
# ------------------------------------------------------------------------------------------

#: Nanoseconds in one tick of each Arrow timestamp unit (internal TIMESTAMPs are nanoseconds).
_NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def internal_to_arrow_scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar:
    """The Arrow scalar of ``arrow_type`` holding an internal value (DATE days, TIME millis,
    TIMESTAMP nanos, ...): the inverse of :func:`arrow_scalar_to_internal`."""
    if value is None:
        return pa.scalar(None, arrow_type)
    if pa.types.is_date(arrow_type):
        return pa.scalar(value, pa.int32()).cast(arrow_type)
    if pa.types.is_timestamp(arrow_type):
        factor = _NANOS_PER_UNIT[arrow_type.unit]
        return pa.scalar(value // factor, pa.int64()).cast(arrow_type)
    if pa.types.is_time(arrow_type):
        return pa.scalar(value, pa.int32()).cast(pa.time32("ms")).cast(arrow_type)
    return pa.scalar(value, arrow_type)


def arrow_scalar_to_internal(scalar: pa.Scalar, data_type: DataType) -> Any:
    """Internal form of one Arrow scalar of the column's storage type."""
    if not scalar.is_valid:
        return None
    if not isinstance(data_type, AtomicType):
        return None
    root = data_type.root
    if root in ("DATE", "TIME"):
        return int(scalar.cast(pa.int32()).as_py()) if root == "DATE" else int(
            scalar.cast(pa.time32("ms")).cast(pa.int32()).as_py())
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        unit = scalar.type.unit
        factor = _NANOS_PER_UNIT[unit]
        return int(scalar.value) * factor
    return scalar.as_py()


# ------------------------------------------------------------------------------------------
# vectorized bucket hash
# ------------------------------------------------------------------------------------------


def murmur3_words(words: np.ndarray, byte_length: int, seed: int = HASH_SEED) -> np.ndarray:
    """MurmurHash3 x86-32 of each row of ``words`` (uint32, shape rows × n), no tail bytes.

    This is Paimon's ``hashBytesByWords``: rows of a BinaryRow are always a multiple of 8 bytes.
    Leading columns of ``words`` that are zero in every row (the null bits of rows without
    nulls) leave the same state in every row: they are mixed once, as a scalar.
    """
    rows, count = words.shape
    state = seed
    first = 0
    while first < count and not words[:, first].any():
        state = _mix_scalar(state, 0)
        first += 1
    h = np.full(rows, state, dtype=np.uint32)
    k = np.empty(rows, dtype=np.uint32)
    spare = np.empty(rows, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for j in range(first, count):
            np.multiply(words[:, j], np.uint32(_C1), out=k)
            _rotl_into(k, 15, spare)
            k *= np.uint32(_C2)
            h ^= k
            _rotl_into(h, 13, spare)
            h *= np.uint32(5)
            h += np.uint32(0xE6546B64)
        h ^= np.uint32(byte_length)
        for shift, factor in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
            np.right_shift(h, np.uint32(shift), out=spare)
            h ^= spare
            h *= np.uint32(factor)
        np.right_shift(h, np.uint32(16), out=spare)
        h ^= spare
    return h.view(np.int32)


def _rotl_into(x: np.ndarray, r: int, spare: np.ndarray) -> None:
    """``x = rotl(x, r)`` in place (``spare`` is scratch of the same shape)."""
    np.right_shift(x, np.uint32(32 - r), out=spare)
    x <<= np.uint32(r)
    x |= spare


def _mix_scalar(h: int, word: int) -> int:
    """One word of MurmurHash3 x86-32 on a plain int state."""
    mask = 0xFFFFFFFF
    k = (word * _C1) & mask
    k = ((k << 15) | (k >> 17)) & mask
    k = (k * _C2) & mask
    h ^= k
    h = ((h << 13) | (h >> 19)) & mask
    return (h * 5 + 0xE6546B64) & mask


def hash_bytes(row: bytes) -> int:
    """Paimon hash of one encoded BinaryRow (no arity prefix)."""
    words = np.frombuffer(row, dtype="<u4").reshape(1, -1)
    return int(murmur3_words(words, len(row))[0])


# Hashes of at least this many rows are computed in row ranges on worker threads (numpy
# releases the GIL in its loops).
PARALLEL_HASH_ROWS = 262_144


def hash_arrow_rows(columns: Sequence[pa.Array], types: Sequence[AtomicType]) -> np.ndarray:
    """Paimon's BinaryRow hash of every row of ``columns``, as int32, computed columnar.

    Rows are grouped by the sizes of their out-of-line values; within a group every row has
    the same layout, so its bytes are assembled as a matrix and hashed word-column by
    word-column. Memory stays proportional to the rows times the group's row length.
    """
    n = len(columns[0]) if columns else 0
    threads = worker_threads()
    if n < PARALLEL_HASH_ROWS or threads < 2:
        return _hash_rows(columns, types)
    step = -(-n // threads)
    with ThreadPoolExecutor(threads, thread_name_prefix="paimon-hash") as pool:
        parts = list(pool.map(lambda start: _hash_rows([c.slice(start, step) for c in columns], types),
                              range(0, n, step)))
    return np.concatenate(parts)


def _hash_rows(columns: Sequence[pa.Array], types: Sequence[AtomicType]) -> np.ndarray:
    n = len(columns[0]) if columns else 0
    arity = len(types)
    width = null_bits_width(arity)
    # header (null bits) and fixed-length slots side by side: the row bytes when nothing is
    # stored out of line
    block = np.zeros((n, width + 8 * arity), dtype=np.uint8)
    header, slots = block[:, :width], block[:, width:]
    var_sizes: np.ndarray | None = None
    builders: list[_VarBuilder | None] = []
    for i, (column, data_type) in enumerate(zip(columns, types)):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        valid = validity(array)
        if array.null_count:
            bit = i + 8
            header[~valid, bit // 8] |= np.uint8(1 << (bit % 8))
        slot, sizes, builder = _column_layout(array, data_type, valid)
        slots[:, 8 * i:8 * i + 8] = slot
        if sizes is not None:
            if var_sizes is None:
                var_sizes = np.zeros((n, arity), dtype=np.int64)
            var_sizes[:, i] = sizes
        builders.append(builder)
    out = np.empty(n, dtype=np.int32)
    if n == 0:
        return out
    if var_sizes is None or not var_sizes.any():
        return murmur3_words(block.view("<u4"), block.shape[1])
    for rows in _layout_groups(var_sizes):
        group = _layout_block(rows, var_sizes[rows[0]], header, slots, builders, width + 8 * arity)
        out[rows] = murmur3_words(group.view("<u4"), group.shape[1])
    return out


def _layout_groups(var_sizes: np.ndarray) -> list[np.ndarray]:
    """Row indexes grouped by identical out-of-line sizes (few distinct layouts in practice)."""
    words = var_sizes // 8
    radix = int(words.max()) + 1
    if radix ** words.shape[1] < 2**62:
        codes = np.zeros(len(words), dtype=np.int64)
        for column in words.T:
            codes = codes * radix + column
    else:
        codes = np.unique(words, axis=0, return_inverse=True)[1].reshape(-1)
    distinct = np.flatnonzero(np.bincount(codes)) if codes.max() < 4 * len(codes) + 1024 else np.unique(codes)
    if len(distinct) <= 64:
        return [np.flatnonzero(codes == code) for code in distinct]
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    return np.split(order, bounds)


class _VarBuilder:
    """Produces the padded out-of-line bytes of chosen rows of one column."""

    def __init__(self, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.data, self.starts, self.lengths = data, starts, lengths

    def bytes_for(self, rows: np.ndarray, size: int) -> np.ndarray:
        return _gather(self.data, self.starts[rows], self.lengths[rows], size)


def _layout_block(rows: np.ndarray, layout: np.ndarray, header: np.ndarray, slots: np.ndarray,
                  builders: Sequence[_VarBuilder | None], fixed_len: int) -> np.ndarray:
    slot_block = slots[rows]
    pieces = [header[rows], slot_block]
    offset = fixed_len
    for i, size in enumerate(int(s) for s in layout):
        builder = builders[i]
        if size == 0 or builder is None:
            continue
        pieces.append(builder.bytes_for(rows, size))
        slot_block[:, 8 * i + 4:8 * i + 8] = np.frombuffer(struct.pack("<I", offset), dtype=np.uint8)
        offset += size
    return np.ascontiguousarray(np.concatenate(pieces, axis=1))


def _gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, size: int) -> np.ndarray:
    """Rows of ``size`` bytes: each row's bytes ``data[start:start+length]`` then zeros.

    Requires: ``data`` padded with at least ``size`` zero bytes past the last value.
    """
    cols = np.arange(size, dtype=np.int64)
    gathered = data[starts[:, None] + cols[None, :]]
    gathered[cols[None, :] >= lengths[:, None]] = 0
    return gathered


def _column_layout(column: pa.Array, data_type: AtomicType, valid: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray | None, _VarBuilder | None]:
    """(slots n×8, out-of-line sizes or None, builder of out-of-line bytes or None)."""
    n = len(column)
    root = data_type.root
    if root in STRING_ROOTS or root in BINARY_ROOTS:
        return _string_layout(column, valid)
    if root == "DECIMAL" and not _is_compact(data_type):
        return _wide_decimal_layout(column, data_type, valid)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        nanos = _timestamp_nanos(column)
        millis = np.floor_divide(nanos, _NANOS_PER_MILLI).astype("<i8")
        if _is_compact(data_type):
            return _zero_invalid(millis.view(np.uint8).reshape(n, 8), valid), None, None
        nano_of_milli = (nanos - millis * _NANOS_PER_MILLI).astype("<u8")
        slot = _zero_invalid(nano_of_milli.view(np.uint8).reshape(n, 8), valid)
        millis_bytes = np.ascontiguousarray(np.where(valid, millis, 0).astype("<i8")).view(np.uint8)
        builder = _VarBuilder(millis_bytes, np.arange(n, dtype=np.int64) * 8,
                              np.full(n, 8, dtype=np.int64))
        return slot, np.full(n, 8, dtype=np.int64), builder  # nulls keep their 8 bytes, zeroed
    values = _fixed_values(column, data_type)
    raw = np.zeros((n, 8), dtype=np.uint8)
    as_bytes = values.view(np.uint8).reshape(n, -1)
    raw[:, :as_bytes.shape[1]] = as_bytes
    return _zero_invalid(raw, valid), None, None


def _wide_decimal_layout(column: pa.Array, data_type: AtomicType, valid: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, _VarBuilder]:
    """DECIMAL(19..38): Java's ``toUnscaledBytes`` (shortest big-endian two's complement) in a
    zeroed 16-byte out-of-line block, its length in the slot; nulls keep the block (length 0)."""
    n = len(column)
    target = pa.decimal128(data_type.precision, data_type.scale)
    array = column.cast(target) if column.type != target else column
    little = np.frombuffer(array.buffers()[1], dtype=np.uint8)[16 * array.offset:16 * (array.offset + n)]
    big = np.ascontiguousarray(little.reshape(n, 16)[:, ::-1])
    big[~valid] = 0
    sign = big[:, 0] >> 7
    extension = np.where(sign == 1, 0xFF, 0x00).astype(np.uint8)
    redundant = (big[:, :15] == extension[:, None]) & ((big[:, 1:] >> 7) == sign[:, None])
    skipped = np.cumprod(redundant, axis=1).sum(axis=1)
    lengths = np.where(valid, 16 - skipped, 0).astype(np.int64)
    slot = np.zeros((n, 8), dtype=np.uint8)
    slot[:, :4] = lengths.astype("<u4").view(np.uint8).reshape(n, 4)
    data = np.concatenate([big.reshape(-1), np.zeros(16, dtype=np.uint8)])
    builder = _VarBuilder(data, np.arange(n, dtype=np.int64) * 16 + skipped, lengths)
    return slot, np.full(n, 16, dtype=np.int64), builder


def _zero_invalid(matrix: np.ndarray, valid: np.ndarray) -> np.ndarray:
    if not valid.all():
        matrix = matrix.copy()
        matrix[~valid] = 0
    return matrix


def _fixed_values(column: pa.Array, data_type: AtomicType) -> np.ndarray:
    root = data_type.root
    if root == "DECIMAL":
        unscaled = _decimal_unscaled(column, data_type.scale)
        return np.asarray(unscaled, dtype="<i8")
    dtype = {"BOOLEAN": "<u1", "TINYINT": "<i1", "SMALLINT": "<i2", "INT": "<i4", "DATE": "<i4",
             "TIME": "<i4", "BIGINT": "<i8", "FLOAT": "<f4", "DOUBLE": "<f8"}[root]
    if root == "DATE":
        column = column.cast(pa.int32())
    elif root == "TIME":
        column = column.cast(pa.time32("ms")).cast(pa.int32())
    elif root == "BOOLEAN":
        column = column.cast(pa.uint8())
    filled = column.fill_null(0) if column.null_count else column
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=dtype)


def _decimal_unscaled(column: pa.Array, scale: int) -> np.ndarray:
    """Unscaled int64 values of a compact decimal column (decimal128 storage is little-endian)."""
    array = column.cast(pa.decimal128(18, scale)) if column.type != pa.decimal128(18, scale) else column
    if array.null_count:
        array = array.fill_null(decimal.Decimal(0))
    words = np.frombuffer(array.buffers()[1], dtype="<i8")[2 * array.offset:2 * (array.offset + len(array))]
    return words[0::2].copy()


def _timestamp_nanos(column: pa.Array) -> np.ndarray:
    factor = _NANOS_PER_UNIT[column.type.unit]
    ints = column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return np.asarray(ints, dtype=np.int64) * factor


def _string_layout(column: pa.Array, valid: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, _VarBuilder]:
    """Strings/binary: inline when ≤ 7 bytes (byte 7 = 0x80 | len), else the length in the slot."""
    column = column.cast(pa.large_binary())
    n = len(column)
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64)[column.offset:column.offset + n + 1]
    data_buffer = column.buffers()[2]
    raw = (np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None
           else np.zeros(0, dtype=np.uint8))
    starts = offsets[:-1]
    longest = int((offsets[1:] - starts).max()) if n else 0
    data = np.concatenate([raw[:int(offsets[-1]) if n else 0], np.zeros(longest + 8, dtype=np.uint8)])
    lengths = np.where(valid, offsets[1:] - starts, 0)
    inline = lengths <= 7
    slot = np.zeros((n, 8), dtype=np.uint8)
    slot[:, :7] = _gather(data, starts, np.where(inline, lengths, 0), 7)
    slot[inline, 7] = (0x80 | lengths[inline]).astype(np.uint8)
    long_rows = ~inline
    if long_rows.any():
        slot[long_rows, :4] = lengths[long_rows].astype("<u4").view(np.uint8).reshape(-1, 4)
    slot[~valid] = 0
    var_sizes = np.where(long_rows, lengths + (-lengths % 8), 0)
    return slot, var_sizes, _VarBuilder(data, starts, lengths)
