"""A catalogue of bad input and hostile names: one test id per case.

Every case fails with a typed :class:`paimon_core.errors.PaimonError` whose message names the
object (table, column, option, value or file path), and changes nothing on disk: the whole
directory tree (relative path -> size and SHA-256 of the bytes, see :func:`tree_digest`) is the
same before and after. Cases where the input is accepted on purpose say so and assert the result.

Cases already covered by other tests are counted here, named by that test, and not repeated.
In all: 108 test ids in this file (numbered below), plus about 25 cases covered elsewhere.

1. Schema mismatch on write
   - missing column, extra column, wrong type (string into BIGINT):
     ``test_bad_input.py::test_bad_rows_are_refused_before_any_file_is_written`` (3 of its ids)
   - a bad batch late in a stream: ``test_bad_input.py::test_a_bad_batch_late_in_a_stream_leaves_no_files``
   - 1.1 ``test_column_given_twice_is_refused``
   - 1.2 ``test_delete_without_the_key_column_is_refused``
2. Unsafe casts are refused, never truncated or rounded
   - integer out of range (300 into TINYINT, as int64 into INT), 1.5 into an integer:
     ``test_bad_input.py::test_bad_rows_are_refused_before_any_file_is_written`` (2 of its ids)
   - VARCHAR(n) overflow: ``test_bad_input.py::test_varchar_length_is_enforced``
   - 2.1-2.8 ``test_unsafe_cast_is_refused[nan-into-int|uint64-beyond-bigint|nanoseconds-into-micros|
     decimal-scale-loss|decimal-precision-overflow|float-rounded-by-decimal|double-beyond-float|
     date-with-time-of-day]``
3. Nulls in key and NOT NULL columns
   - NOT NULL column of an append table: ``test_bad_input.py::test_bad_rows_...`` (its null 'id' id)
   - 3.1-3.2 ``test_null_in_a_primary_key_column_is_refused[key|partition-key]``
   - 3.3 ``test_null_key_in_a_delete_is_refused``
4. Row kinds within one batch: decided, not refused (see each docstring). Our writer gives the
   rows of a batch increasing sequence numbers in input order, as Paimon does, so the outcome is
   deterministic and equals Paimon's: the last row of a key wins (after ``sequence.field``).
   - 4.1 ``test_duplicate_keys_in_one_delete_batch_delete_once``
   - 4.2 ``test_insert_and_delete_of_one_key_in_one_batch_follow_row_order``
   - 4.3 ``test_sequence_field_orders_a_batch_before_row_order``
   - -D/-U a merge engine refuses (partial-update or first-row without ignore-delete, aggregation
     without ignore-retract): ``test_primary_key_table.py::test_retractions_a_merge_engine_refuses_write_nothing``
5. Options: unknown keys and bad values
   - ``bucket`` = 'zero' (as 'abc'), ``write-buffer-size`` = '-5 mb' (as '-1'), bad ``metadata.stats-mode``:
     ``test_bad_input.py::test_bad_option_values_create_nothing`` (3 ids)
   - 5.1-5.3 ``test_near_miss_option_key_is_refused_at_create[buckets|Bucket|write_buffer_size]``
   - 5.4 ``test_near_miss_option_key_is_refused_at_alter``
   - 5.5 ``test_other_engines_option_keys_are_kept``: unknown keys that are no near miss of ours are
     kept, as Paimon keeps them (Flink's, Spark's, a user's own); refusing them would break tables
   - 5.6-5.7 ``test_bad_option_value_is_refused_at_create[boolean-maybe|duration-soon]``
   - 5.8-5.9 ``test_bad_option_value_is_refused_at_alter[write-buffer-size--1|write-only-maybe]``
6. Schemas and option combinations Java Paimon refuses (SchemaValidation, TableSchema's bucket
   keys, the merge-function factories); only those are refused here
   - 6.1-6.15 ``test_option_combination_paimon_refuses[first-row-with-input-changelog|
     changelog-producer-without-primary-key|sequence-field-not-a-column|sequence-field-repeated|
     sequence-field-aggregated|sequence-field-with-first-row|rowkind-field-not-a-column|
     bucket-key-without-bucket-number|bucket-key-outside-primary-key|deletion-vectors-with-first-row|
     ignore-delete-and-remove-on-delete|field-option-of-no-column|snapshot-retain-min-above-max|
     changelog-retain-min-above-max|full-compaction-on-unaware-append]``
   - 6.16-6.18 ``test_schema_paimon_refuses[nested-primary-key|system-column-name|key-prefixed-column-name]``
   - 6.19 ``test_alter_into_a_combination_paimon_refuses``
   - accepted, as in Java: ``merge-engine`` on an append table (ignored) and an aggregate function
     on a primary-key column (key columns are never aggregated)
   - 6.20-6.22 ``test_option_combination_paimon_refuses[first-row-with-full-compaction-changelog|
     deletion-vectors-with-full-compaction|delta-commits-with-lookup]``
7. Hostile partition values and partition key names
   - a value with '/': ``test_bad_input.py::test_bad_rows_...`` (its 'a/b' id)
   - 7.1-7.3 ``test_partition_value_with_a_separator_is_refused[dotdot-slash|backslash|absolute]``
   - 7.4-7.7 ``test_hostile_partition_value_is_stored_escaped_inside_the_table[dotdot|dot|nul|percent]``
   - 7.8 ``test_hostile_partition_key_name_is_stored_escaped_inside_the_table``
8. Hostile database and table names (create, get, drop, exists, list)
   - '', 'a/b', '..', '.hidden', tab, backslash at create:
     ``test_bad_input.py::test_invalid_table_and_database_names`` (6 ids)
   - 8.1-8.5 ``test_hostile_name_is_refused_by_every_catalog_call[dotdot-x|absolute|dot|nul|not-a-string]``
9. Corrupt metadata: a read raises CorruptMetadataError naming the file; expiry and orphan-file
   cleanup raise it too and delete nothing
   - 9.1-9.15 ``test_corrupt_metadata_stops_reads_and_maintenance[<file>-<damage>]`` for the files
     snapshot, schema, manifest-list, manifest, index-manifest and the damages truncated, garbage,
     missing-fields (valid JSON, or valid Avro of another metadata kind)
   - a delta manifest list, for expiry and orphan cleanup:
     ``test_maintenance.py::test_unreadable_metadata_stops_expiry_before_anything_is_deleted``,
     ``test_maintenance.py::test_orphan_cleanup_stops_on_unreadable_metadata``
10. Corrupt data files: CorruptDataFileError (a CorruptMetadataError) naming file and table
   - 10.1-10.8 ``test_corrupt_data_file_is_a_typed_error[<append|pk>-<truncated|garbage|empty|wrong-columns>]``
11. A warehouse without write permission, as user nobody: FileIOError naming the path
   - 11.1-11.8 ``test_no_write_permission_is_a_typed_error[create-database|create-table|write|
     compact-pk|compact-append|expire|remove-orphans|drop-table]``
12. The command line: exit 2 for usage errors, 1 for the rest; one line on stderr; no traceback
   - 12.1-12.8 ``test_cli_reports_bad_input_on_one_line[unknown-table|invalid-identifier|
     bad-tag-name|bad-retain-min|from-not-an-int|negative-from|from-after-to|corrupt-data-file]``
   - an unknown table through ``main()``: ``test_catalog_and_cli.py::test_cli_commands``
13. Wrong API arguments a user plausibly passes
   - ``read(columns=[unknown])``, a tuple filter on an unknown column, a static overwrite naming a
     non-partition column: ``test_bad_input.py::test_bad_filters_and_columns_name_the_problem``
   - ``retain_min=0``: ``test_maintenance.py::test_time_retention_consumers_and_limits_keep_snapshots``
   - 13.1-13.11 ``test_wrong_api_argument_is_refused[expire-older-than-string|expire-older-than-float|
     expire-older-than-bool|orphans-older-than-string|expire-retain-min-negative|
     read-expression-filter-unknown-column|read-columns-as-a-string|read-filter-unknown-operator|
     create-tag-with-slash|delete-tag-with-slash|rollback-to-tag-with-slash]``
   - 13.12 ``test_a_datetime_older_than_is_still_accepted`` (guard: the fix refuses only wrong types)

Production fixes this catalogue needed are listed in each test's docstring.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import io
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import paimon_core as paimon
from paimon_core.errors import (
    CorruptDataFileError,
    CorruptMetadataError,
    FileIOError,
    InvalidArgumentError,
    InvalidNameError,
    OptionError,
    PaimonError,
    SchemaError,
)
from paimon_core.manifest import read_manifest_list
from paimon_core.schema import SetOption
from tests.integration.conftest import reopened

Digest = dict[str, tuple[int, str]]
FUTURE_MS = int(time.time() * 1000) + 365 * 24 * 3600 * 1000
KV = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("dt", pa.string())])


def tree_digest(root: str | Path) -> Digest:
    """Every file below ``root``: relative path -> (size, SHA-256 of its bytes)."""
    out: Digest = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            data = Path(path).read_bytes()
            out[os.path.relpath(path, root)] = (len(data), hashlib.sha256(data).hexdigest())
    return out


def assert_refused(root: str | Path, action: Callable[[], Any], error: type[PaimonError],
                   *words: str) -> PaimonError:
    """``action`` raises ``error`` naming every one of ``words``, and no file below ``root`` changed."""
    before = tree_digest(root)
    with pytest.raises(error) as info:
        action()
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)
    assert tree_digest(root) == before
    return info.value


def kv_rows(ids: list[int], values: list[str | None] | None = None, dt_value: str = "d1") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": values or [f"v{i}" for i in ids],
                     "dt": [dt_value] * len(ids)}, schema=KV)


@pytest.fixture
def warehouse(catalog: paimon.Catalog) -> Path:
    """The directory holding the warehouse: a file written outside the warehouse shows up here."""
    return Path(catalog.warehouse_path).parent


@pytest.fixture
def pk(catalog: paimon.Catalog) -> paimon.Table:
    """A partitioned primary-key table with one snapshot."""
    table = catalog.create_table("db.pk", schema=KV, partition_keys=["dt"], primary_keys=["dt", "id"],
                                 options={"bucket": "1"})
    table.write(kv_rows([1, 2, 3]))
    return table


# ---- 1. schema mismatch ---------------------------------------------------------------------------


def test_column_given_twice_is_refused(pk: paimon.Table) -> None:
    """Fixed: the message said ``missing [], unexpected []`` and did not name the column."""
    data = pa.Table.from_arrays([pa.array([1], pa.int64()), pa.array(["a"]), pa.array(["d1"]), pa.array(["b"])],
                                names=["id", "v", "dt", "v"])
    assert_refused(pk.path, lambda: pk.write(data), SchemaError, "db.pk", "duplicated ['v']")


def test_delete_without_the_key_column_is_refused(pk: paimon.Table) -> None:
    assert_refused(pk.path, lambda: pk.delete(pa.table({"v": ["v1"], "dt": ["d1"]})), SchemaError,
                   "db.pk", "missing ['id']")


# ---- 2. unsafe casts --------------------------------------------------------------------------------

CASTS = pa.schema([("i", pa.int32()), ("big", pa.int64()), ("f", pa.float32()), ("ts", pa.timestamp("us")),
                   ("dec", pa.decimal128(5, 2)), ("day", pa.date32())])


@pytest.mark.parametrize(("column", "values", "words"), [
    pytest.param("i", pa.array([1.0, float("nan")]), ["nan"], id="nan-into-int"),
    pytest.param("big", pa.array([1, 2**63], pa.uint64()), ["9223372036854775808"], id="uint64-beyond-bigint"),
    pytest.param("ts", pa.array([1_000_000_001], pa.timestamp("ns")), ["would lose data"],
                 id="nanoseconds-into-micros"),
    pytest.param("dec", pa.array([decimal.Decimal("1.234")]), ["1.234"], id="decimal-scale-loss"),
    pytest.param("dec", pa.array([decimal.Decimal("12345.6")]), ["12345.6"], id="decimal-precision-overflow"),
    pytest.param("dec", pa.array([1.005]), ["1.005", "without rounding"], id="float-rounded-by-decimal"),
    pytest.param("f", pa.array([1.0, 1e300]), ["1e+300", "out of the range"], id="double-beyond-float"),
    pytest.param("day", pa.array([86_400_001], pa.date64()), ["would lose data"], id="date-with-time-of-day"),
])
def test_unsafe_cast_is_refused(catalog: paimon.Catalog, column: str, values: pa.Array, words: list[str]) -> None:
    """Values that do not survive the cast are refused, never truncated or rounded.

    Fixed: a float into DECIMAL was rounded to the scale (1.005 stored as 1.00) and a double
    beyond FLOAT's range was stored as infinity.
    """
    table = catalog.create_table("db.casts", schema=CASTS)
    table.write(pa.table({f.name: pa.nulls(1, f.type) for f in CASTS}))
    data = pa.table({f.name: values if f.name == column else pa.nulls(len(values), f.type) for f in CASTS})
    assert_refused(table.path, lambda: table.write(data), SchemaError, "db.casts", f"'{column}'", *words)
    assert table.read().num_rows == 1


# ---- 3. nulls in keys -------------------------------------------------------------------------------


@pytest.mark.parametrize("column", ["id", "dt"], ids=["key", "partition-key"])
def test_null_in_a_primary_key_column_is_refused(pk: paimon.Table, column: str) -> None:
    data = kv_rows([4, 5]).set_column(KV.get_field_index(column), column,
                                      pa.array(["x", None] if column == "dt" else [4, None], KV.field(column).type))
    assert_refused(pk.path, lambda: pk.write(data), SchemaError, "db.pk", f"'{column}'", "NOT NULL")


def test_null_key_in_a_delete_is_refused(pk: paimon.Table) -> None:
    keys = pa.table({"id": pa.array([1, None], pa.int64()), "dt": ["d1", "d1"]})
    assert_refused(pk.path, lambda: pk.delete(keys), SchemaError, "db.pk", "'id'", "NOT NULL")
    assert sorted(pk.read()["id"].to_pylist()) == [1, 2, 3]


# ---- 4. row kinds within one batch --------------------------------------------------------------------


def test_duplicate_keys_in_one_delete_batch_delete_once(pk: paimon.Table) -> None:
    """Accepted, as in Paimon: duplicate keys in one -D batch are several deletes of one key, and
    deleting a deleted key is a no-op. The result is the same as deleting each key once."""
    snapshot = pk.delete(pa.table({"id": pa.array([2, 2, 9, 2], pa.int64()), "dt": ["d1"] * 4}))
    assert snapshot is not None
    assert sorted(pk.read()["id"].to_pylist()) == [1, 3]


def test_insert_and_delete_of_one_key_in_one_batch_follow_row_order(catalog: paimon.Catalog) -> None:
    """Defined: rows of one batch get increasing sequence numbers in the order they are given,
    so for one key the last row of the batch wins, whatever its kind (+I after -D re-inserts,
    -D after +I deletes). This is Paimon's order too (each record gets the next sequence number)."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("rk", pa.string())])
    table = catalog.create_table("db.kinds", schema=schema, primary_keys=["id"],
                                 options={"bucket": "1", "rowkind.field": "rk"})
    table.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"], "rk": ["+I"] * 3}, schema=schema))
    batch = pa.table({"id": [1, 1, 2, 2, 3, 3], "v": ["a", "a", "b", "b2", "c", "c2"],
                      "rk": ["+I", "-D", "-D", "+I", "+U", "+U"]}, schema=schema)
    table.write(batch)
    assert sorted(table.read().select(["id", "v"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "v": "b2"}, {"id": 3, "v": "c2"}]
    reversed_batch = batch.take(pa.array([1, 0, 3, 2, 5, 4]))  # each key's rows swapped
    table.write(reversed_batch)
    assert sorted(table.read().select(["id", "v"]).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"}, {"id": 3, "v": "c"}]


def test_sequence_field_orders_a_batch_before_row_order(catalog: paimon.Catalog) -> None:
    """Defined: with ``sequence.field`` the column orders a key's rows first, and row order only
    breaks ties, so a -D with a larger sequence value wins over a later +I with a smaller one."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("seq", pa.int64()),
                        ("rk", pa.string())])
    table = catalog.create_table("db.seq", schema=schema, primary_keys=["id"],
                                 options={"bucket": "1", "rowkind.field": "rk", "sequence.field": "seq"})
    table.write(pa.table({"id": [1, 1, 2, 2], "v": ["gone", "stale", "x", "y"], "seq": [5, 3, 7, 7],
                          "rk": ["-D", "+I", "+I", "+I"]}, schema=schema))
    assert table.read().select(["id", "v"]).to_pylist() == [{"id": 2, "v": "y"}]


# ---- 5. options: unknown keys and bad values ------------------------------------------------------------


@pytest.mark.parametrize(("key", "meant"), [("buckets", "bucket"), ("Bucket", "bucket"),
                                            ("write_buffer_size", "write-buffer-size")],
                         ids=["buckets", "Bucket", "write_buffer_size"])
def test_near_miss_option_key_is_refused_at_create(catalog: paimon.Catalog, warehouse: Path, key: str,
                                                   meant: str) -> None:
    """Fixed: a misspelt key was stored and silently did nothing (``buckets`` = 4 left a table
    with dynamic buckets). Keys within an edit or two of an option we honour are refused."""
    assert_refused(warehouse, lambda: catalog.create_table("db.t", schema=KV, options={key: "4"}), OptionError,
                   "db.t", repr(key), f"did you mean {meant!r}")
    assert catalog.list_tables("db") == []


def test_near_miss_option_key_is_refused_at_alter(pk: paimon.Table) -> None:
    assert_refused(pk.path, lambda: pk.alter([SetOption("snapshot.num-retained.mni", "3")]), OptionError,
                   "db.pk", "'snapshot.num-retained.mni'", "'snapshot.num-retained.min'")
    assert pk.schema.id == 0


def test_other_engines_option_keys_are_kept(catalog: paimon.Catalog) -> None:
    """Unknown keys that are no near miss (Flink's, Spark's, a user's own) round-trip, as in Paimon."""
    table = catalog.create_table("db.t", schema=KV, options={"sink.parallelism": "4", "owner": "team-a"})
    table.alter([SetOption("scan.parallelism", "2")])
    assert {k: table.schema.options[k] for k in ("sink.parallelism", "owner", "scan.parallelism")} == {
        "sink.parallelism": "4", "owner": "team-a", "scan.parallelism": "2"}


@pytest.mark.parametrize(("key", "value"), [("write-only", "maybe"), ("snapshot.time-retained", "soon")],
                         ids=["boolean-maybe", "duration-soon"])
def test_bad_option_value_is_refused_at_create(catalog: paimon.Catalog, warehouse: Path, key: str,
                                               value: str) -> None:
    assert_refused(warehouse, lambda: catalog.create_table("db.t", schema=KV, options={key: value}), OptionError,
                   "db.t", repr(key), repr(value))


@pytest.mark.parametrize(("key", "value"), [("write-buffer-size", "-1"), ("write-only", "maybe")],
                         ids=["write-buffer-size--1", "write-only-maybe"])
def test_bad_option_value_is_refused_at_alter(pk: paimon.Table, key: str, value: str) -> None:
    assert_refused(pk.path, lambda: pk.alter([SetOption(key, value)]), OptionError, "db.pk", repr(key), repr(value))
    assert pk.schema.id == 0


# ---- 6. option combinations Paimon refuses ----------------------------------------------------------

PK = {"primary_keys": ["id"]}
APPEND: dict[str, Any] = {}


@pytest.mark.parametrize(("keys", "options", "error", "words"), [
    pytest.param(PK, {"merge-engine": "first-row", "changelog-producer": "input"}, OptionError,
                 ["first-row", "'input'"], id="first-row-with-input-changelog"),
    pytest.param(APPEND, {"changelog-producer": "lookup"}, OptionError, ["changelog-producer", "primary key"],
                 id="changelog-producer-without-primary-key"),
    pytest.param(PK, {"sequence.field": "nope"}, OptionError, ["sequence.field", "'nope'"],
                 id="sequence-field-not-a-column"),
    pytest.param(PK, {"sequence.field": "v,v"}, OptionError, ["sequence.field", "'v'", "more than once"],
                 id="sequence-field-repeated"),
    pytest.param(PK, {"merge-engine": "aggregation", "sequence.field": "v", "fields.v.aggregate-function": "max"},
                 OptionError, ["sequence.field", "'v'", "aggregate"], id="sequence-field-aggregated"),
    pytest.param(PK, {"merge-engine": "first-row", "sequence.field": "v"}, OptionError,
                 ["sequence.field", "first-row"], id="sequence-field-with-first-row"),
    pytest.param(PK, {"rowkind.field": "kind"}, OptionError, ["rowkind.field", "'kind'"],
                 id="rowkind-field-not-a-column"),
    pytest.param(APPEND, {"bucket-key": "id"}, OptionError, ["bucket-key", "bucket = -1"],
                 id="bucket-key-without-bucket-number"),
    pytest.param(PK, {"bucket": "2", "bucket-key": "v"}, OptionError, ["bucket-key", "['v']", "primary key"],
                 id="bucket-key-outside-primary-key"),
    pytest.param(PK, {"merge-engine": "first-row", "deletion-vectors.enabled": "true"}, OptionError,
                 ["deletion-vectors.enabled", "first-row"], id="deletion-vectors-with-first-row"),
    pytest.param(PK, {"merge-engine": "partial-update", "ignore-delete": "true",
                      "partial-update.remove-record-on-delete": "true"}, OptionError,
                 ["ignore-delete", "partial-update.remove-record-on-delete"], id="ignore-delete-and-remove-on-delete"),
    pytest.param(PK, {"merge-engine": "aggregation", "fields.amount.aggregate-function": "sum"}, OptionError,
                 ["'fields.amount.aggregate-function'", "'amount'"], id="field-option-of-no-column"),
    pytest.param(APPEND, {"snapshot.num-retained.min": "5", "snapshot.num-retained.max": "3"}, OptionError,
                 ["snapshot.num-retained.min = 5", "snapshot.num-retained.max = 3"],
                 id="snapshot-retain-min-above-max"),
    pytest.param(APPEND, {"changelog.num-retained.min": "20", "snapshot.num-retained.max": "10"}, OptionError,
                 ["changelog.num-retained.min = 20", "changelog.num-retained.max"],
                 id="changelog-retain-min-above-max"),
    pytest.param(APPEND, {"full-compaction.delta-commits": "2"}, OptionError,
                 ["full-compaction.delta-commits", "bucket"], id="full-compaction-on-unaware-append"),
    pytest.param(PK, {"merge-engine": "first-row", "changelog-producer": "full-compaction"}, OptionError,
                 ["first-row", "'full-compaction'"], id="first-row-with-full-compaction-changelog"),
    pytest.param(PK, {"deletion-vectors.enabled": "true", "changelog-producer": "full-compaction"}, OptionError,
                 ["deletion-vectors.enabled", "'full-compaction'"], id="deletion-vectors-with-full-compaction"),
    pytest.param(PK, {"changelog-producer": "lookup", "full-compaction.delta-commits": "3"}, OptionError,
                 ["full-compaction.delta-commits", "'lookup'"], id="delta-commits-with-lookup"),
])
def test_option_combination_paimon_refuses(catalog: paimon.Catalog, warehouse: Path, keys: dict[str, Any],
                                           options: dict[str, str], error: type[PaimonError],
                                           words: list[str]) -> None:
    """Only combinations Java Paimon refuses as well. Fixed: all were accepted except the
    bucket-key outside the primary key (first-row with sequence.field only for primary-key
    tables). ``changelog.num-retained.max`` defaults to ``snapshot.num-retained.max`` as in Java."""
    assert_refused(warehouse, lambda: catalog.create_table("db.t", schema=KV, options=options, **keys), error,
                   "db.t", *words)
    assert catalog.list_tables("db") == []


@pytest.mark.parametrize(("schema", "keys", "words"), [
    pytest.param(pa.schema([pa.field("id", pa.list_(pa.int64()), nullable=False), ("v", pa.string())]), PK,
                 ["primary key 'id'", "atomic"], id="nested-primary-key"),
    pytest.param(pa.schema([("_SEQUENCE_NUMBER", pa.int64()), ("v", pa.string())]), APPEND,
                 ["'_SEQUENCE_NUMBER'", "reserved"], id="system-column-name"),
    pytest.param(pa.schema([("_KEY_id", pa.int64()), ("v", pa.string())]), APPEND,
                 ["'_KEY_id'", "reserved"], id="key-prefixed-column-name"),
])
def test_schema_paimon_refuses(catalog: paimon.Catalog, warehouse: Path, schema: pa.Schema, keys: dict[str, Any],
                               words: list[str]) -> None:
    """Fixed: a nested primary key and Paimon's reserved column names were accepted (a key-value
    data file would hold two ``_SEQUENCE_NUMBER`` columns)."""
    assert_refused(warehouse, lambda: catalog.create_table("db.t", schema=schema, **keys), SchemaError,
                   "db.t", *words)


def test_alter_into_a_combination_paimon_refuses(catalog: paimon.Catalog) -> None:
    table = catalog.create_table("db.first", schema=KV, primary_keys=["id"],
                                 options={"bucket": "1", "merge-engine": "first-row"})
    table.write(kv_rows([1]))
    assert_refused(table.path, lambda: table.alter([SetOption("changelog-producer", "input")]), OptionError,
                   "db.first", "first-row", "'input'")
    assert table.schema.id == 0


# ---- 7. hostile partition values ----------------------------------------------------------------------


@pytest.mark.parametrize("value", ["../../outside", "a\\..\\b", "/etc/passwd"],
                         ids=["dotdot-slash", "backslash", "absolute"])
def test_partition_value_with_a_separator_is_refused(pk: paimon.Table, warehouse: Path, value: str) -> None:
    assert_refused(warehouse, lambda: pk.write(kv_rows([7], dt_value=value)), SchemaError,
                   "db.pk", "'dt'", repr(value), "path separator")


def _new_files(before: set[str], root: Path) -> set[Path]:
    return {root / p for p in set(tree_digest(root)) - before}


@pytest.mark.parametrize("value", ["..", ".", "a\x00b", "%2F.."], ids=["dotdot", "dot", "nul", "percent"])
def test_hostile_partition_value_is_stored_escaped_inside_the_table(pk: paimon.Table, warehouse: Path,
                                                                    value: str) -> None:
    """Accepted, as in Paimon: a partition directory is ``dt=<value>`` with '%XX' escapes (Hive's
    set, which includes control characters and '%'), so no value is ``.`` or ``..`` by itself
    and none leaves the table directory. The value reads back unchanged."""
    before = set(tree_digest(warehouse))
    pk.write(kv_rows([7, 8], dt_value=value))
    table_root = Path(pk.path).resolve()
    new = _new_files(before, warehouse)
    data_files = [p for p in new if p.suffix == ".parquet"]
    assert data_files
    for path in new:
        assert path.resolve().is_relative_to(table_root), path
    for path in data_files:
        partition_dir = path.resolve().relative_to(table_root).parts[0]
        assert partition_dir.startswith("dt=") and "\x00" not in partition_dir and "/" not in partition_dir
    assert sorted(pk.read(filter=[("dt", "=", value)])["id"].to_pylist()) == [7, 8]
    assert set(pk.read()["dt"].to_pylist()) == {"d1", value}


def test_hostile_partition_key_name_is_stored_escaped_inside_the_table(catalog: paimon.Catalog,
                                                                       warehouse: Path) -> None:
    """Accepted: column names only need to be printable, and a partition key's name is escaped
    like its value ('../p' becomes '..%2Fp=')."""
    schema = pa.schema([("id", pa.int64()), ("../p", pa.string())])
    table = catalog.create_table("db.keys", schema=schema, partition_keys=["../p"])
    before = set(tree_digest(warehouse))
    table.write(pa.table({"id": [1], "../p": ["x"]}, schema=schema))
    new = _new_files(before, warehouse)
    assert any(p.suffix == ".parquet" for p in new)
    for path in new:
        assert path.resolve().is_relative_to(Path(table.path).resolve()), path
    assert table.read().to_pylist() == [{"id": 1, "../p": "x"}]


# ---- 8. hostile database and table names ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "/etc", ".", "a\x00b", 7],
                         ids=["dotdot-x", "absolute", "dot", "nul", "not-a-string"])
def test_hostile_name_is_refused_by_every_catalog_call(catalog: paimon.Catalog, warehouse: Path, name: Any) -> None:
    """Fixed: a non-string name was reported as 'it is empty'; an identifier such as 'db.../x'
    now names what was typed, not only the part ('' or './x') that failed."""
    calls: list[tuple[Callable[[], Any], Any]] = [
        (lambda: catalog.create_database(name), name), (lambda: catalog.drop_database(name, cascade=True), name),
        (lambda: catalog.list_tables(name), name), (lambda: catalog.database_exists(name), name)]
    if isinstance(name, str):
        as_table, as_database = f"db.{name}", f"{name}.t"
        calls += [(lambda: catalog.create_table(as_table, schema=KV), as_table),
                  (lambda: catalog.get_table(as_table), as_table), (lambda: catalog.drop_table(as_table), as_table),
                  (lambda: catalog.table_exists(as_table), as_table),
                  (lambda: catalog.create_table(as_database, schema=KV), as_database),
                  (lambda: catalog.get_table(as_database), as_database)]
    else:
        calls.append((lambda: catalog.get_table(name), name))
    for call, named in calls:
        error = assert_refused(warehouse, call, InvalidNameError, repr(named))
        assert isinstance(named, str) or "not a string" in str(error)
    assert catalog.list_databases() == ["db"]


# ---- 9. corrupt metadata --------------------------------------------------------------------------------


@pytest.fixture
def maintained(catalog: paimon.Catalog) -> paimon.Table:
    """A dynamic-bucket primary-key table (so it has an index manifest) whose expiry and orphan
    cleanup would delete files: five snapshots kept by write-only, and an old orphan file."""
    table = catalog.create_table("db.m", schema=KV, partition_keys=["dt"], primary_keys=["dt", "id"],
                                 options={"bucket": "-1", "write-only": "true", "snapshot.num-retained.min": "1"})
    for i in range(5):
        table.write(kv_rows([i, i + 1], [f"r{i}", f"r{i}"]))
    orphan = Path(table.path) / "dt=d1" / "bucket-0" / "data-left-by-a-crash.parquet"
    orphan.write_bytes(b"junk")
    os.utime(orphan, (0, 0))
    assert table.expire_snapshots(older_than=FUTURE_MS, retain_min=1).snapshots
    assert table.remove_orphan_files(older_than=FUTURE_MS, force=True).orphans
    return table


def _metadata_file(table: paimon.Table, kind: str) -> Path:
    root = Path(table.path)
    latest = table.latest_snapshot()
    assert latest is not None and latest.index_manifest
    if kind == "manifest":
        metas = read_manifest_list(table.file_io, table.paths.manifest_file(latest.delta_manifest_list))
        return root / "manifest" / metas[0].file_name
    return {"snapshot": root / "snapshot" / f"snapshot-{latest.id}", "schema": root / "schema" / "schema-0",
            "manifest-list": root / "manifest" / latest.delta_manifest_list,
            "index-manifest": root / "manifest" / latest.index_manifest}[kind]


def _damage(path: Path, damage: str, table: paimon.Table) -> None:
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xffnot metadata\xfe" * 16)
    elif path.parent.name in ("snapshot", "schema"):  # valid JSON that lacks required fields
        doc = json.loads(data)
        for key in ("id", "schemaId", "fields"):
            doc.pop(key, None)
        path.write_bytes(json.dumps(doc).encode())
    else:  # valid Avro of another metadata kind: its records lack this kind's fields
        other = _metadata_file(table, "index-manifest" if "index" not in path.name else "manifest-list")
        path.write_bytes(other.read_bytes())


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing-fields"])
@pytest.mark.parametrize("kind", ["snapshot", "schema", "manifest-list", "manifest", "index-manifest"])
def test_corrupt_metadata_stops_reads_and_maintenance(catalog: paimon.Catalog, maintained: paimon.Table,
                                                      kind: str, damage: str) -> None:
    """A reader fails naming the file; expiry and orphan cleanup (which would otherwise delete
    snapshots, files and the orphan) fail the same way before deleting anything."""
    path = _metadata_file(maintained, kind)
    _damage(path, damage, maintained)
    table = reopened(maintained)
    for action in (table.read,
                   lambda: table.expire_snapshots(dry_run=False, older_than=FUTURE_MS, retain_min=1),
                   lambda: table.remove_orphan_files(dry_run=False, older_than=FUTURE_MS, force=True)):
        assert_refused(table.path, action, CorruptMetadataError, str(path))


# ---- 10. corrupt data files ----------------------------------------------------------------------------


def _parquet_of_other_columns() -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"zzz": [1, 2]}), buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "wrong-columns"])
@pytest.mark.parametrize("kind", ["append", "pk"])
def test_corrupt_data_file_is_a_typed_error(catalog: paimon.Catalog, kind: str, damage: str) -> None:
    """Fixed: readers raised pyarrow's ArrowInvalid (or a KeyError for a file without the
    table's columns) without naming the file. Now every read path, filtered or not, streamed or
    not, and compaction raise CorruptDataFileError (a CorruptMetadataError) naming file and table."""
    keys: dict[str, Any] = {"primary_keys": ["id"], "options": {"bucket": "1"}} if kind == "pk" else {}
    table = catalog.create_table("db.data", schema=pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())]),
                                 **keys)
    for i in range(3):
        table.write(pa.table({"id": pa.array([i, i + 10], pa.int64()), "v": [i, i]}))
    victim = sorted(Path(table.path).rglob("*.parquet"))[0]
    data = victim.read_bytes()
    victim.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"PAR1" + b"\x13" * 200 + b"PAR1",
                        "empty": b"", "wrong-columns": _parquet_of_other_columns()}[damage])
    actions: list[Callable[[], Any]] = [
        table.read, lambda: table.read(filter=[("v", ">=", 0)]), lambda: list(table.to_batches(batch_size=1)),
        lambda: table.compact(full=True)]
    for action in actions:
        assert_refused(table.path, action, CorruptDataFileError, str(victim), "db.data")


# ---- 11. no write permission --------------------------------------------------------------------------

NOBODY = 65534


def _run_as_nobody(action: Callable[[], Any]) -> dict[str, Any]:
    """Run ``action`` in a forked child that dropped root for user and group nobody.

    The brief's ``subprocess.run(..., user=nobody)`` cannot work here: the venv's interpreter
    lives under /root (mode 0700), which nobody cannot enter. A forked child keeps the loaded
    interpreter and modules (the fixture ran every operation once as root, importing all it
    needs), then loses root, so the kernel refuses its writes as it would any unprivileged user's.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                action()
                outcome: dict[str, Any] = {"raised": None}
            except BaseException as exc:
                outcome = {"raised": type(exc).__name__, "typed": isinstance(exc, PaimonError),
                           "file_io": isinstance(exc, FileIOError), "message": str(exc)}
            os.write(write_end, json.dumps(outcome).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + 120
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, 9)
                pytest.fail("the operation run as nobody did not finish within 120 s")
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return json.loads(b"".join(chunks) or b'{"raised": "nothing reported (child crashed)"}')


@pytest.fixture(scope="module")
def readonly_warehouse() -> Iterator[Path]:
    """A root-owned warehouse (dirs 0755) under a fresh /tmp directory nobody can traverse, with
    tables whose compaction, expiry and orphan cleanup have work to do."""
    if not hasattr(os, "fork") or os.geteuid() != 0:
        pytest.skip("needs root (to drop to user nobody) and os.fork")
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    base.chmod(0o755)
    catalog = paimon.Catalog(str(base / "warehouse"))
    catalog.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())])
    pk = catalog.create_table("db.pk", schema=schema, primary_keys=["id"],
                              options={"bucket": "1", "write-only": "true", "snapshot.num-retained.min": "1"})
    append = catalog.create_table("db.log", schema=schema, options={"write-only": "true"})
    for i in range(6):
        pk.write(pa.table({"id": pa.array([i, i + 1], pa.int64()), "v": [i, i]}))
        append.write(pa.table({"id": pa.array([i], pa.int64()), "v": [i]}))
    orphan = Path(pk.path) / "bucket-0" / "data-left-by-a-crash.parquet"
    orphan.write_bytes(b"junk")
    os.utime(orphan, (0, 0))
    # As root, everything below has work to do (and imports what the child will need).
    assert pk.expire_snapshots(older_than=FUTURE_MS, retain_min=1).snapshots
    assert pk.remove_orphan_files(older_than=FUTURE_MS, force=True).orphans
    scratch = catalog.create_table("db.scratch", schema=schema, primary_keys=["id"], options={"bucket": "1"})
    for i in range(2):
        scratch.write(pa.table({"id": pa.array([i], pa.int64()), "v": [i]}))
    assert scratch.compact(full=True).snapshot_id is not None
    list(scratch.to_batches())
    catalog.drop_table("db.scratch")
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(("operation", "where"), [pytest.param(operation, where, id=operation) for operation, where in [
    ("create-database", "warehouse/db2.db"), ("create-table", "warehouse/db.db/new"),
    ("write", "warehouse/db.db/pk/bucket-0/"), ("compact-pk", "warehouse/db.db/pk/bucket-0/"),
    ("compact-append", "warehouse/db.db/log/bucket-0/"), ("expire", "warehouse/db.db/pk/"),
    ("remove-orphans", "warehouse/db.db/pk/bucket-0/data-left-by-a-crash.parquet"),
    ("drop-table", "warehouse/db.db/log"),
]])
def test_no_write_permission_is_a_typed_error(readonly_warehouse: Path, operation: str, where: str) -> None:
    """Fixed: creating a database, writing a data file (write, compaction), expiry's and orphan
    cleanup's deletes and dropping a table raised a bare PermissionError."""
    uri = str(readonly_warehouse / "warehouse")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())])
    row = pa.table({"id": pa.array([100], pa.int64()), "v": [1]})
    operations: dict[str, Callable[[], Any]] = {
        "create-database": lambda: paimon.Catalog(uri).create_database("db2"),
        "create-table": lambda: paimon.Catalog(uri).create_table("db.new", schema=schema),
        "write": lambda: paimon.Catalog(uri).get_table("db.pk").write(row),
        "compact-pk": lambda: paimon.Catalog(uri).get_table("db.pk").compact(full=True),
        "compact-append": lambda: paimon.Catalog(uri).get_table("db.log").compact(full=True),
        "expire": lambda: paimon.Catalog(uri).get_table("db.pk").expire_snapshots(
            dry_run=False, older_than=FUTURE_MS, retain_min=1),
        "remove-orphans": lambda: paimon.Catalog(uri).get_table("db.pk").remove_orphan_files(
            dry_run=False, older_than=FUTURE_MS, force=True),
        "drop-table": lambda: paimon.Catalog(uri).drop_table("db.log"),
    }
    before = tree_digest(readonly_warehouse)
    outcome = _run_as_nobody(operations[operation])
    assert outcome["raised"] is not None, "the operation succeeded as nobody: the warehouse is writable"
    assert outcome["file_io"], outcome
    assert str(readonly_warehouse / where) in outcome["message"], outcome
    assert tree_digest(readonly_warehouse) == before


# ---- 12. the command line ------------------------------------------------------------------------------


@pytest.fixture
def cli_table(catalog: paimon.Catalog) -> paimon.Table:
    table = catalog.create_table("db.t", schema=KV, primary_keys=["id"], options={"bucket": "1"})
    for i in range(3):
        table.write(kv_rows([i]))
    return table


@pytest.mark.parametrize(("args", "code", "words"), [
    pytest.param(["read", "db.nope"], 1, ["db.nope", "does not exist"], id="unknown-table"),
    pytest.param(["snapshots", "../x"], 1, ["'../x'"], id="invalid-identifier"),
    pytest.param(["create-tag", "db.t", "a/b"], 1, ["'a/b'", "db.t"], id="bad-tag-name"),
    pytest.param(["expire-snapshots", "db.t", "--retain-min", "-2"], 2, ["--retain-min", "'-2'", "at least 1"],
                 id="bad-retain-min"),
    pytest.param(["changes", "db.t", "--from", "abc"], 2, ["--from", "'abc'"], id="from-not-an-int"),
    pytest.param(["changes", "db.t", "--from", "-1"], 2, ["--from", "'-1'", "negative"], id="negative-from"),
    pytest.param(["changes", "db.t", "--from", "3", "--to", "1"], 1, ["db.t", "--from 3", "--to 1"],
                 id="from-after-to"),
    pytest.param(["read", "db.t"], 1, ["db.t", "cannot be decoded", ".parquet"], id="corrupt-data-file"),
])
def test_cli_reports_bad_input_on_one_line(catalog: paimon.Catalog, cli_table: paimon.Table, args: list[str],
                                           code: int, words: list[str]) -> None:
    """Fixed: argparse errors printed the usage block over two or more lines, ``--from -1`` was
    taken for a snapshot, ``--from`` after ``--to`` printed an empty table, and a corrupt data
    file printed a pyarrow traceback."""
    if args == ["read", "db.t"]:
        victim = sorted(Path(cli_table.path).rglob("*.parquet"))[0]
        victim.write_bytes(victim.read_bytes()[:40])
        words = [*words, str(victim)]
    before = tree_digest(catalog.warehouse_path)
    script = Path(sys.executable).with_name("paimon")
    result = subprocess.run([str(script), "--warehouse", catalog.warehouse_path, *args],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == code, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert tree_digest(catalog.warehouse_path) == before


# ---- 13. wrong API arguments ----------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "error", "words"), [
    pytest.param(lambda t: t.expire_snapshots(dry_run=False, older_than="2024-01-01"), InvalidArgumentError,
                 ["older_than", "'2024-01-01'", "expiry of table db.pk"], id="expire-older-than-string"),
    pytest.param(lambda t: t.expire_snapshots(dry_run=False, older_than=1.7e12), InvalidArgumentError,
                 ["older_than", "float", "db.pk"], id="expire-older-than-float"),
    pytest.param(lambda t: t.expire_snapshots(dry_run=False, older_than=True), InvalidArgumentError,
                 ["older_than", "bool", "db.pk"], id="expire-older-than-bool"),
    pytest.param(lambda t: t.remove_orphan_files(dry_run=False, older_than="yesterday", force=True),
                 InvalidArgumentError,
                 ["older_than", "'yesterday'", "orphan-file cleanup of table db.pk"], id="orphans-older-than-string"),
    pytest.param(lambda t: t.expire_snapshots(dry_run=False, retain_min=-3), OptionError,
                 ["retain_min", "-3", "db.pk"], id="expire-retain-min-negative"),
    pytest.param(lambda t: t.read(filter=pc.field("nope") > 1), SchemaError,
                 ["nope", "db.pk"], id="read-expression-filter-unknown-column"),
    pytest.param(lambda t: t.read(columns="id"), SchemaError,
                 ["list of column names", "'id'", "db.pk"], id="read-columns-as-a-string"),
    pytest.param(lambda t: t.read(filter=[("dt", "=", "d1"), ("id", "~", 1)]), SchemaError,
                 ["'~'", "db.pk"], id="read-filter-unknown-operator"),
    pytest.param(lambda t: t.create_tag("release/1"), InvalidNameError,
                 ["'release/1'", "db.pk"], id="create-tag-with-slash"),
    pytest.param(lambda t: t.delete_tag("../snapshot/snapshot-1"), InvalidNameError,
                 ["'../snapshot/snapshot-1'", "db.pk"], id="delete-tag-with-slash"),
    pytest.param(lambda t: t.rollback_to("../x"), InvalidNameError, ["'../x'", "db.pk"],
                 id="rollback-to-tag-with-slash"),
])
def test_wrong_api_argument_is_refused(pk: paimon.Table, call: Callable[[paimon.Table], Any],
                                       error: type[PaimonError], words: list[str]) -> None:
    """Fixed: ``older_than`` as a string or float raised AttributeError (a bool was taken for
    1 ms), an expression filter on an unknown column raised ArrowInvalid, and ``columns="id"``
    read the columns 'i' and 'd' (one per character) or failed naming 'i'."""
    pk.write(kv_rows([4]))
    pk.create_tag("kept")
    assert_refused(pk.path, lambda: call(pk), error, *words)
    assert (Path(pk.path) / "snapshot" / "snapshot-1").exists()


def test_a_datetime_older_than_is_still_accepted(pk: paimon.Table) -> None:
    """Guard for the fix above: datetimes and epoch milliseconds keep working."""
    later = dt.datetime.now() + dt.timedelta(days=1)
    assert pk.expire_snapshots(older_than=later).dry_run
    assert pk.expire_snapshots(older_than=FUTURE_MS).dry_run
