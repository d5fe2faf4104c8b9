"""Bad input raises a typed error naming table, field and value, and changes nothing on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.errors import (
    DatabaseNotFoundError,
    InvalidNameError,
    OptionError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
)
from paimon_core.schema import TableSchema
from paimon_core.types import DataField, atomic
from tests.integration.conftest import EVENTS, files_under

STRICT = pa.schema([pa.field("id", pa.int64(), nullable=False), ("small", pa.int8()),
                    ("code", pa.string()), ("dt", pa.string())])


def strict_rows(**overrides: Any) -> pa.Table:
    columns = {"id": [1, 2], "small": [1, 2], "code": ["a", "b"], "dt": ["d1", "d1"]}
    columns.update(overrides)
    return pa.table(columns)


@pytest.fixture
def table(catalog: pc.Catalog) -> pc.Table:
    created = catalog.create_table("db.strict", schema=STRICT, partition_keys=["dt"])
    created.write(strict_rows())
    return created


@pytest.mark.parametrize(("data", "words"), [
    (strict_rows().drop_columns(["id"]), ["db.strict", "missing ['id']", "NOT NULL columns must be given"]),
    (strict_rows().append_column("extra", pa.array([1, 2])), ["db.strict", "unexpected ['extra']"]),
    (strict_rows(small=[1, 300]), ["db.strict", "'small'", "300"]),
    (strict_rows(id=["x", "y"]), ["db.strict", "'id'", "string"]),
    (strict_rows(small=[1.5, 2.0]), ["db.strict", "'small'", "1.5"]),
    (pa.table({"id": pa.array([1, None], pa.int64()), "small": [1, 2], "code": ["a", "b"],
               "dt": ["d1", "d1"]}), ["db.strict", "'id'", "NOT NULL", "1 written value"]),
    (strict_rows(dt=["ok", "a/b"]), ["db.strict", "'dt'", "'a/b'", "path separator"]),
])
def test_bad_rows_are_refused_before_any_file_is_written(table: pc.Table, data: pa.Table,
                                                          words: list[str]) -> None:
    before = files_under(Path(table.path))
    with pytest.raises(SchemaError) as info:
        table.write(data)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert files_under(Path(table.path)) == before
    assert [s.id for s in table.snapshots()] == [1]


def test_a_bad_batch_late_in_a_stream_leaves_no_files(table: pc.Table) -> None:
    before = files_under(Path(table.path))
    good = strict_rows().to_batches()[0]
    stream = [good] * 3 + [strict_rows(small=[1, 999]).to_batches()[0]]
    with pytest.raises(SchemaError, match="999"), table.new_write() as writer:
        for batch in stream:
            writer.write(batch)
        writer.commit()
    assert files_under(Path(table.path)) == before


def test_varchar_length_is_enforced(catalog: pc.Catalog) -> None:
    """Tables created by Java or pypaimon can declare VARCHAR(n); longer values are refused."""
    created = catalog.create_table("db.codes", schema=pa.schema([("code", pa.string())]))
    narrow = TableSchema(id=1, fields=(DataField(0, "code", atomic("VARCHAR", 3)),), highest_field_id=0)
    created.schemas.commit(narrow)
    with pytest.raises(SchemaError, match="'code'.*VARCHAR\\(3\\).*'abcd'"):
        created.write(pa.table({"code": ["abc", "abcd"]}))


@pytest.mark.parametrize("name", ["", "a/b", "..", ".hidden", "tab\tname", "x\\y"])
def test_invalid_table_and_database_names(catalog: pc.Catalog, name: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        catalog.create_table(f"db.{name}", schema=EVENTS)
    assert repr(name) in str(info.value) or name == ""
    with pytest.raises(InvalidNameError):
        catalog.create_database(name)


def test_unknown_database_and_table(catalog: pc.Catalog) -> None:
    with pytest.raises(DatabaseNotFoundError, match="'nope'"):
        catalog.get_table("nope.t")
    with pytest.raises(TableNotFoundError, match="db.missing"):
        catalog.get_table("db.missing")
    with pytest.raises(DatabaseNotFoundError):
        catalog.create_table("nope.t", schema=EVENTS)


def test_table_already_exists(catalog: pc.Catalog) -> None:
    catalog.create_table("db.t", schema=EVENTS)
    with pytest.raises(TableExistsError, match="db.t"):
        catalog.create_table("db.t", schema=EVENTS)
    assert catalog.create_table("db.t", schema=EVENTS, exist_ok=True).name == "db.t"


@pytest.mark.parametrize(("options", "words"), [
    ({"bucket": "zero"}, ["'bucket'", "'zero'", "db.t"]),
    ({"write-buffer-size": "-5 mb"}, ["'write-buffer-size'", "'-5 mb'"]),
    ({"metadata.stats-mode": "sometimes"}, ["'metadata.stats-mode'", "'sometimes'"]),
])
def test_bad_option_values_create_nothing(catalog: pc.Catalog, options: dict[str, str],
                                          words: list[str]) -> None:
    with pytest.raises(OptionError) as info:
        catalog.create_table("db.t", schema=EVENTS, options=options)
    for word in words:
        assert word in str(info.value)
    assert catalog.list_tables("db") == []
    assert not (Path(catalog.warehouse_path) / "db.db" / "t").exists()


def test_bad_filters_and_columns_name_the_problem(table: pc.Table) -> None:
    with pytest.raises(SchemaError, match="'nope'.*db.strict"):
        table.read(columns=["nope"])
    with pytest.raises(SchemaError, match="'zzz'"):
        table.read(filter=[("zzz", "=", 1)])
    with pytest.raises(SchemaError, match="'small'.*db.strict"):
        table.write(strict_rows(small=[1, 2]), overwrite={"small": 3})


def test_unknown_overwrite_partition_value_type(table: pc.Table) -> None:
    before = files_under(Path(table.path))
    with pytest.raises(SchemaError, match="does not belong"):
        table.write(strict_rows(dt=["d2", "d2"]), overwrite={"dt": "d1"})
    assert files_under(Path(table.path)) == before


def test_exist_ok_refuses_a_table_with_other_columns(catalog: pc.Catalog) -> None:
    catalog.create_table("db.t", schema=EVENTS, partition_keys=["dt"])
    with pytest.raises(TableExistsError, match="columns"):
        catalog.create_table("db.t", schema=pa.schema([("x", pa.float32())]), exist_ok=True)
    with pytest.raises(TableExistsError, match="partition keys"):
        catalog.create_table("db.t", schema=EVENTS, exist_ok=True)
