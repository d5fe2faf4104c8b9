"""Text and time values of system tables, spelled as Apache Paimon's Java implementation spells them.

System tables are read by people and compared across engines, so their string columns must read
the same whichever implementation produced them. Paimon builds those strings from Java objects:
``Arrays.toString`` of a row's internal values (``[2024-01-01, 3]``), ``TreeMap.toString`` of
per-column statistics (``{id=0, name=null}``), ``Duration.toString`` (``PT1H30M``), and its
TIMESTAMP(3) columns hold local wall-clock time (``ZoneId.systemDefault()``). Everything here is
pure: values in, strings or epoch-millisecond integers out.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from paimon_core.types import BINARY_ROOTS, AtomicType, DataType

_NANOS_PER_SECOND = 1_000_000_000
_NANOS_PER_MILLI = 1_000_000
_EPOCH = dt.datetime(1970, 1, 1)
# Double.toString / Float.toString switch to "computerized scientific notation" outside [1e-3, 1e7).
_PLAIN_LOW, _PLAIN_HIGH = 1e-3, 1e7


def local_wall_ms(epoch_ms: int) -> int:
    """An instant as the local wall-clock time it shows, encoded as if that were UTC.

    Paimon's system tables turn ``timeMillis`` into a ``LocalDateTime`` in the JVM's default zone
    and store it in a TIMESTAMP(3) column (no time zone): Arrow's zone-less ``timestamp("ms")``
    holding the wall clock is the same value.
    """
    return epoch_ms + time.localtime(epoch_ms / 1000).tm_gmtoff * 1000


def local_date_time_ms(value: Any) -> int | None:
    """A Jackson-written ``LocalDateTime`` (``[y, m, d, h, min, s, nanos]`` or an ISO string) as
    wall-clock milliseconds (truncated to the millisecond, as a TIMESTAMP(3) column holds it)."""
    if value is None:
        return None
    if isinstance(value, str):
        moment = dt.datetime.fromisoformat(value)
    else:
        parts = [int(p) for p in value] + [0] * (7 - len(value))
        year, month, day, hour, minute, second, nanos = parts[:7]
        moment = dt.datetime(year, month, day, hour, minute, second, nanos // 1000)
    return (moment.replace(tzinfo=None) - _EPOCH) // dt.timedelta(milliseconds=1)


def java_duration(seconds: float | int | str | decimal.Decimal | None) -> str | None:
    """``java.time.Duration.toString()`` of a duration given in (fractional) seconds, as Jackson
    stores a tag's ``tagTimeRetained``: ``PT0S``, ``PT1H``, ``PT1M30.5S``, ``PT-0.5S``."""
    if seconds is None:
        return None
    total_nanos = int((decimal.Decimal(str(seconds)) * _NANOS_PER_SECOND).to_integral_value(decimal.ROUND_FLOOR))
    secs, nanos = divmod(total_nanos, _NANOS_PER_SECOND)  # floor: nanos in [0, 1e9), as Duration keeps them
    if secs == 0 and nanos == 0:
        return "PT0S"
    effective = secs + 1 if secs < 0 < nanos else secs
    hours = _truncating_div(effective, 3600)  # Java's long division and % truncate toward zero
    minutes = _truncating_div(effective - hours * 3600, 60)
    rest = effective - hours * 3600 - minutes * 60
    out = "PT"
    if hours:
        out += f"{hours}H"
    if minutes:
        out += f"{minutes}M"
    if rest == 0 and nanos == 0 and len(out) > 2:
        return out
    out += ("-0" if rest == 0 else str(rest)) if secs < 0 < nanos else str(rest)
    if nanos > 0:
        fraction = str(2 * _NANOS_PER_SECOND - nanos if secs < 0 else nanos + _NANOS_PER_SECOND)
        out += "." + fraction[1:].rstrip("0")
    return out + "S"


def _truncating_div(numerator: int, denominator: int) -> int:
    quotient = abs(numerator) // denominator
    return -quotient if numerator < 0 else quotient


def java_floating(value: float, *, single: bool) -> str:
    """``Double.toString`` (or ``Float.toString`` with ``single``): the shortest digits that
    round-trip, plain inside [1e-3, 1e7), else ``d.dddE±n``; always a digit after the point."""
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    number = np.float32(value) if single else np.float64(value)
    if number == 0:
        return "-0.0" if np.signbit(number) else "0.0"
    if _PLAIN_LOW <= abs(float(number)) < _PLAIN_HIGH:
        text = np.format_float_positional(number, unique=True, trim="-")
        return text if "." in text else text + ".0"
    mantissa, exponent = np.format_float_scientific(number, unique=True, trim="-").split("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exponent)}"


def java_local_date_time(nanos: int) -> str:
    """``LocalDateTime.toString()`` of a timestamp in nanoseconds since the epoch (Paimon's
    ``Timestamp.toString()``): seconds only when not zero, the fraction in 3, 6 or 9 digits."""
    secs, rest = divmod(nanos, _NANOS_PER_SECOND)
    moment = _EPOCH + dt.timedelta(seconds=secs)
    text = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}"
    if moment.second or rest:
        text += f":{moment.second:02d}"
    if rest:
        if rest % _NANOS_PER_MILLI == 0:
            text += f".{rest // _NANOS_PER_MILLI:03d}"
        elif rest % 1000 == 0:
            text += f".{rest // 1000:06d}"
        else:
            text += f".{rest:09d}"
    return text


def java_text(value: Any, data_type: DataType) -> str:
    """``String.valueOf`` of Paimon's internal object for a decoded BinaryRow value.

    Internal objects print their storage form: DATE the day number, TIME milliseconds of the
    day, DECIMAL ``toPlainString``, TIMESTAMP its ``LocalDateTime``. Java prints ``byte[]`` as an
    identity hash (``[B@1b6d3586``), which no reader can use: we print the bytes as hex instead.
    Nested values (which Paimon does not keep statistics for) print as ``null``.
    """
    if value is None or not isinstance(data_type, AtomicType):
        return "null"
    root = data_type.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root in ("FLOAT", "DOUBLE"):
        return java_floating(float(value), single=root == "FLOAT")
    if root == "DECIMAL":
        return format(decimal.Decimal(value), "f")
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return java_local_date_time(int(value))
    if root in BINARY_ROOTS:
        return "0x" + bytes(value).hex()
    return str(value)


def java_array(values: Sequence[Any], types: Sequence[DataType]) -> str:
    """``Arrays.toString(Object[])`` of a row's internal values: ``[a, b]``, ``[]`` when empty."""
    return "[" + ", ".join(java_text(v, t) for v, t in zip(values, types)) + "]"


def java_tree_map(entries: Mapping[str, str]) -> str:
    """``TreeMap<String, ?>.toString()`` of already rendered values: keys sorted, ``{k=v, ...}``."""
    return "{" + ", ".join(f"{k}={entries[k]}" for k in sorted(entries)) + "}"
