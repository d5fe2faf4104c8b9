"""The key-value layout of primary-key tables: system columns, row kinds and file columns.

In memory a key-value table is the table's own columns followed by ``_SEQUENCE_NUMBER`` and
``_VALUE_KIND``; the trimmed primary key is read from the value columns, which hold the same
values. On disk Paimon stores ``_KEY_<k>`` copies of the key first:
``_KEY_<k>..., _SEQUENCE_NUMBER, _VALUE_KIND, <every table column>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from paimon_core.columnar import int8_array, int64_array
from paimon_core.errors import SchemaError
from paimon_core.schema import TableSchema
from paimon_core.types import DataField, arrow_schema, to_arrow_type, with_nullable

SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
KEY_PREFIX = "_KEY_"
KEY_FIELD_ID_OFFSET = 1073741823  # Integer.MAX_VALUE / 2, added to the key column's field id
SEQUENCE_FIELD_ID = 2147483646
VALUE_KIND_FIELD_ID = 2147483645

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
ROW_KINDS = {"+I": INSERT, "-U": UPDATE_BEFORE, "+U": UPDATE_AFTER, "-D": DELETE}


def is_retract(kinds: np.ndarray) -> np.ndarray:
    """-U and -D retract a row; +I and +U add one."""
    return (kinds == UPDATE_BEFORE) | (kinds == DELETE)


def parse_row_kind(text: str, *, table: str) -> int:
    try:
        return ROW_KINDS[text]
    except KeyError:
        raise SchemaError(f"row kind {text!r} for table {table} is not one of "
                          f"{', '.join(ROW_KINDS)}") from None


@dataclass(frozen=True, slots=True)
class KeyValueLayout:
    """Columns of a primary-key table's data files for one schema version."""

    schema: TableSchema

    @property
    def key_names(self) -> list[str]:
        """The trimmed primary key: primary key minus partition columns."""
        return self.schema.trimmed_primary_keys

    @property
    def value_fields(self) -> list[DataField]:
        return list(self.schema.fields)

    def key_fields(self) -> list[DataField]:
        """The ``_KEY_`` columns as stored: NOT NULL copies with ids offset by 2^30 - 1."""
        return [DataField(KEY_FIELD_ID_OFFSET + f.id, KEY_PREFIX + f.name, with_nullable(f.type, False))
                for f in (self.schema.field(k) for k in self.key_names)]

    def file_schema(self) -> pa.Schema:
        """Arrow schema of a data file, with the Parquet field ids Java writes."""
        system = [
            pa.field(SEQUENCE_NUMBER, pa.int64(), False,
                     metadata={b"PARQUET:field_id": str(SEQUENCE_FIELD_ID).encode()}),
            pa.field(VALUE_KIND, pa.int8(), False,
                     metadata={b"PARQUET:field_id": str(VALUE_KIND_FIELD_ID).encode()}),
        ]
        keys = list(arrow_schema(self.key_fields(), with_ids=True))
        values = list(arrow_schema(self.value_fields, with_ids=True))
        return pa.schema(keys + system + values)

    def memory_schema(self) -> pa.Schema:
        """Arrow schema of an in-memory key-value table (values, then the system columns)."""
        return pa.schema(list(arrow_schema(self.value_fields))
                         + [pa.field(SEQUENCE_NUMBER, pa.int64(), False),
                            pa.field(VALUE_KIND, pa.int8(), False)])

    def to_file(self, table: pa.Table) -> pa.Table:
        """File columns of an in-memory key-value table (key copies share the value buffers)."""
        keys = [table.column(k) for k in self.key_names]
        values = [table.column(f.name) for f in self.value_fields]
        columns = keys + [table.column(SEQUENCE_NUMBER), table.column(VALUE_KIND)] + values
        return pa.Table.from_arrays(columns, schema=self.file_schema())


def with_system_columns(values: pa.Table, sequence: np.ndarray, kinds: np.ndarray | int) -> pa.Table:
    """Append ``_SEQUENCE_NUMBER`` and ``_VALUE_KIND`` to a table of value columns."""
    n = values.num_rows
    kind_array = np.full(n, kinds, dtype=np.int8) if isinstance(kinds, int) else kinds
    return values.append_column(pa.field(SEQUENCE_NUMBER, pa.int64(), False),
                                int64_array(sequence)).append_column(
        pa.field(VALUE_KIND, pa.int8(), False), int8_array(kind_array))


def value_table(kv: pa.Table) -> pa.Table:
    """The value columns of an in-memory key-value table."""
    return kv.drop_columns([SEQUENCE_NUMBER, VALUE_KIND])


def storage_types(fields: Sequence[DataField]) -> list[pa.DataType]:
    return [to_arrow_type(f.type) for f in fields]
