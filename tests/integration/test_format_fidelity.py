"""Regressions for the differences the Java Paimon oracle found, checked without Java: what our files
store, what batch reads see, how literals and codecs are taken. The Java interop suite
(tests/interop/test_java_*.py) checks the same cases against Paimon 0.9 itself."""

from __future__ import annotations

import decimal
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import paimon_core as pc
from paimon_core.cli import main
from paimon_core.errors import OptionError
from paimon_core.types import atomic
from paimon_core.write.routing import fixed_buckets
from tests.integration.conftest import merged_view

D = decimal.Decimal
KV = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def data_files(table: pc.Table) -> list[str]:
    return [f"{table.uri}/{'/'.join(p for p in (f.partition,) if p)}/bucket-{f.bucket}/{f.file_name}".replace(
        "//", "/").replace("file:/", "/") for f in table.files()]


# ---- batch reads of deletion-vector and first-row tables leave level 0 out (Java's rule) -------


@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"}, {"merge-engine": "first-row"}])
def test_rows_in_level0_become_visible_once_compacted(catalog: pc.Catalog, options: dict[str, str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    table = catalog.create_table("db.t", schema=KV, primary_keys=["id"],
                                 options={"bucket": "1", "write-only": "true", **options})
    table.write(pa.table({"id": [1], "v": ["a"]}, schema=KV))
    assert {f.level for f in table.files()} == {0}
    assert table.read().num_rows == 0  # Java reads 0 rows of this snapshot too
    assert table.plan() == [] and table.to_batches().read_all().num_rows == 0
    assert main(["--warehouse", catalog.warehouse, "read", "db.t"]) == 0
    assert capsys.readouterr().out.split() == ["id", "v", "--", "-"]  # the header, no row
    assert merged_view(table).num_rows == 1  # streams still start from everything
    table.compact()
    assert table.read().to_pylist() == [{"id": 1, "v": "a"}]


def test_deletion_vectors_merge_on_read_shows_level0(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.mor", schema=KV, primary_keys=["id"], options={
        "bucket": "1", "write-only": "true", "deletion-vectors.enabled": "true",
        "deletion-vectors.merge-on-read": "true"})
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=KV))
    table.write(pa.table({"id": [2], "v": ["c"]}, schema=KV))
    assert sorted(table.read().to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "v": "a"}, {"id": 2, "v": "c"}]
    table.alter([pc.SetOption("deletion-vectors.merge-on-read", "false")])
    assert table.read().num_rows == 0


def test_compacting_writers_make_deletion_vector_rows_visible_at_once(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.dv", schema=KV, primary_keys=["id"],
                                 options={"bucket": "1", "deletion-vectors.enabled": "true"})
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=KV))
    table.write(pa.table({"id": [2], "v": ["c"]}, schema=KV))
    assert sorted(table.read()["v"].to_pylist()) == ["a", "c"]


# ---- decimals --------------------------------------------------------------------------------


def test_decimals_up_to_18_digits_are_stored_as_integers(catalog: pc.Catalog) -> None:
    schema = pa.schema([("d9", pa.decimal128(9, 2)), ("d18", pa.decimal128(18, 4)), ("d19", pa.decimal128(19, 0))])
    table = catalog.create_table("db.dec", schema=schema)
    data = pa.table({"d9": [D("1234567.89"), None, D("-0.01")], "d18": [D("12345678901234.5678"), D("0"), None],
                     "d19": [D("9999999999999999999"), None, D("-1")]}, schema=schema)
    table.write(data)
    [path] = data_files(table)
    physical = {c.name: c.physical_type for c in pq.ParquetFile(path).schema}
    assert physical == {"d9": "INT32", "d18": "INT64", "d19": "FIXED_LEN_BYTE_ARRAY"}  # as Java writes
    assert table.read().equals(data)


def test_older_files_with_fixed_length_decimals_stay_readable(catalog: pc.Catalog) -> None:
    schema = pa.schema([("id", pa.int64()), ("d", pa.decimal128(12, 2))])
    table = catalog.create_table("db.old", schema=schema)
    data = pa.table({"id": [1, 2, 3], "d": [D("1.50"), None, D("-9999999999.99")]}, schema=schema)
    table.write(data)
    [path] = data_files(table)
    written = pq.read_table(path)
    pq.write_table(written, path, store_decimal_as_integer=False)  # the layout of earlier versions
    assert {c.name: c.physical_type for c in pq.ParquetFile(path).schema}["d"] == "FIXED_LEN_BYTE_ARRAY"
    assert table.read().equals(data)
    assert table.read(filter=[("d", "<", D(0))])["id"].to_pylist() == [3]


# Java Paimon 0.9's buckets (FixedBucketRowKeyExtractor, bucket = 7) of these keys, from its driver.
WIDE = [D("0"), D("-1").scaleb(-10), D("1").scaleb(-10), D("-128").scaleb(-10), D("128").scaleb(-10),
        D("9999999999999999999999999999.9999999999"), D("-9999999999999999999999999999.9999999999"), None,
        D("12345678901234567890.0123456789")]
WIDE20 = [D(0), D(-1), D(1), D(-128), D(128), D("99999999999999999999"), D("-99999999999999999999"), None,
          D("12345678901234567890")]
NANOS = pa.array([0, -1, 1, -1_000_000, 1_700_000_000_123_456_789, 999, -999_999_999, None, 7], pa.timestamp("ns"))
JAVA_BUCKETS = {"k": [0, 5, 0, 1, 5, 5, 4, 5, 6], "k20": [0, 5, 0, 1, 5, 6, 3, 5, 6],
                "ts9": [5, 0, 2, 3, 3, 6, 2, 0, 0], "k,ts9": [1, 0, 3, 5, 0, 2, 0, 6, 0]}


@pytest.mark.parametrize("key", list(JAVA_BUCKETS))
def test_wide_decimal_and_nanosecond_bucket_keys_hash_as_java(key: str) -> None:
    columns = {"k": (pa.array(WIDE, pa.decimal128(38, 10)), atomic("DECIMAL", 38, 10)),
               "k20": (pa.array(WIDE20, pa.decimal128(20, 0)), atomic("DECIMAL", 20, 0)),
               "ts9": (NANOS, atomic("TIMESTAMP", 9))}
    chosen = [columns[k] for k in key.split(",")]
    buckets = fixed_buckets([c for c, _ in chosen], [t for _, t in chosen], 7)
    assert buckets.tolist() == JAVA_BUCKETS[key]


def test_tables_bucketed_by_a_wide_decimal_are_written(catalog: pc.Catalog) -> None:
    schema = pa.schema([("amount", pa.decimal128(38, 10)), ("v", pa.string())])
    table = catalog.create_table("db.wide", schema=schema, options={"bucket": "7", "bucket-key": "amount"})
    table.write(pa.table({"amount": WIDE, "v": [str(i) for i in range(len(WIDE))]}, schema=schema))
    placed = {int(r["v"]): s.bucket for s in table.plan() for r in table.read_split(s).to_pylist()}
    assert [placed[i] for i in range(len(WIDE))] == JAVA_BUCKETS["k"]


# ---- nanosecond timestamps -------------------------------------------------------------------


def test_nanosecond_timestamps_are_int96_where_a_file_has_no_coarser_ones(catalog: pc.Catalog) -> None:
    only = pa.schema([("id", pa.int64()), ("ts9", pa.timestamp("ns")), ("ltz9", pa.timestamp("ns", tz="UTC"))])
    mixed = pa.schema([*only, ("ts6", pa.timestamp("us"))])
    values = pa.array([1_700_000_000_123_456_789, None, -1], pa.timestamp("ns"))
    for name, schema in (("only", only), ("mixed", mixed)):
        table = catalog.create_table(f"db.{name}", schema=schema)
        columns = {"id": [1, 2, 3], "ts9": values, "ltz9": values.cast(pa.timestamp("ns", tz="UTC")),
                   "ts6": pa.array([1, 2, 3], pa.timestamp("us"))}
        data = pa.table({n: columns[n] for n in schema.names}, schema=schema)
        table.write(data)
        [path] = data_files(table)
        physical = {c.name: c.physical_type for c in pq.ParquetFile(path).schema}
        assert physical["ts9"] == physical["ltz9"] == ("INT96" if name == "only" else "INT64")
        assert table.read().equals(data)


@pytest.mark.parametrize("unit_tz", [("ns", None), ("ns", "UTC")])
@pytest.mark.parametrize("pk", [False, True])
def test_filters_keep_the_nanoseconds_of_their_literals(catalog: pc.Catalog, unit_tz: tuple[str, str | None],
                                                        pk: bool) -> None:
    ts_type = pa.timestamp(*unit_tz)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", ts_type)])
    table = catalog.create_table("db.f", schema=schema, primary_keys=["id"] if pk else [],
                                 options={"bucket": "1"} if pk else {})
    base = 1_700_000_000_000_000_000
    table.write(pa.table({"id": [1, 2, 3], "ts": pa.array([base + 1, base + 2, base + 3], pa.timestamp("ns"))
                          .cast(ts_type)}, schema=schema))
    value = table.to_pandas()["ts"][1]  # a pandas Timestamp, nanoseconds included
    assert value.nanosecond == 2
    for literal in (value, value.to_datetime64() if unit_tz[1] is None else value,
                    pa.scalar(base + 2, pa.timestamp("ns")).cast(ts_type)):
        assert table.read(filter=[("ts", "=", literal)])["id"].to_pylist() == [2]
        assert sorted(table.read(filter=[("ts", ">", literal)])["id"].to_pylist()) == [3]
        assert sorted(table.read(filter=[("ts", "<=", literal)])["id"].to_pylist()) == [1, 2]
    assert table.read(filter=[("ts", "in", [value])])["id"].to_pylist() == [2]


def test_a_nanosecond_literal_on_a_microsecond_column_is_refused(catalog: pc.Catalog) -> None:
    schema = pa.schema([("ts", pa.timestamp("us"))])
    table = catalog.create_table("db.us", schema=schema)
    table.write(pa.table({"ts": pa.array([1], pa.timestamp("us"))}, schema=schema))
    literal = pa.scalar(1_001, pa.timestamp("ns"))
    with pytest.raises(pc.errors.SchemaError, match="does not fit column 'ts'"):
        table.read(filter=[("ts", "=", literal)])


# ---- codecs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("file_format", "codec", "hint"), [
    ("orc", "gzip", "'zlib'"), ("parquet", "zlib", "'gzip'"), ("parquet", "lzo", "one of zstd"),
    ("orc", "lzo", "one of zstd")])
def test_codecs_a_format_cannot_write_are_refused_at_create_and_alter(
        catalog: pc.Catalog, file_format: str, codec: str, hint: str) -> None:
    with pytest.raises(OptionError, match=f"file.compression '{codec}' cannot be written in {file_format}.*{hint}"):
        catalog.create_table("db.c", schema=KV, options={"file.format": file_format, "file.compression": codec})
    assert not catalog.table_exists("db.c")
    table = catalog.create_table("db.ok", schema=KV, options={"file.format": file_format})
    with pytest.raises(OptionError, match="cannot be written"):
        table.alter([pc.SetOption("file.compression", codec)])
    assert table.options.file_compression == "zstd"


def test_orc_with_zlib_writes_and_reads(catalog: pc.Catalog) -> None:
    table = catalog.create_table("db.z", schema=KV, options={"file.format": "orc", "file.compression": "zlib"})
    data = pa.table({"id": np.arange(100), "v": [f"v{i}" for i in range(100)]}, schema=KV)
    table.write(data)
    assert table.read().sort_by("id").equals(data)


# ---- change reads without a changelog producer ------------------------------------------------


def test_change_reads_of_merging_engines_warn_once_per_read(catalog: pc.Catalog,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    table = catalog.create_table("db.agg", schema=pa.schema([pa.field("id", pa.int64(), False), ("n", pa.int64())]),
                                 primary_keys=["id"], options={"bucket": "1", "merge-engine": "aggregation",
                                                               "fields.n.aggregate-function": "sum"})
    for n in (1, 2):
        table.write(pa.table({"id": [1], "n": [n]}))
    with caplog.at_level(logging.WARNING, logger="paimon_core"):
        changes = table.read_changes()
    assert changes["n"].to_pylist() == [1, 2] and table.read()["n"].to_pylist() == [3]
    assert len([r for r in caplog.records if "the addends as written" in r.getMessage()]) == 1


def test_nothing_is_written_for_refused_codecs(tmp_path: Path) -> None:
    catalog = pc.Catalog(str(tmp_path))
    catalog.create_database("db")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(OptionError):
        catalog.create_table("db.t", schema=KV, options={"file.format": "orc", "file.compression": "gzip"})
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
