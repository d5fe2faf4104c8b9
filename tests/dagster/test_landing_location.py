"""LandingLocation on real files: templates, listing, fingerprints, and reading Parquet, CSV and
JSON lines (plain and gzip) into a table schema with checked casts and bounded memory."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_core.errors import SchemaError
from resources.landing_location import LandedFile, LandingError, LandingLocation
from tests.support.s3.servers import S3Server
from tests.support.s3.store import Store

SCHEMA = pa.schema([
    pa.field("id", pa.int32(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("amount", pa.decimal128(12, 2)),
    pa.field("at", pa.timestamp("us")),
    pa.field("at_utc", pa.timestamp("us", tz="UTC")),
    pa.field("day", pa.date32()),
    pa.field("note", pa.string()),  # nullable and absent from every file below
    pa.field("dt", pa.string(), nullable=False),  # the Paimon partition column
])
DAY = "2024-01-01"
UTC = dt.UTC
EXPECTED = [
    {"id": 1, "name": "a", "amount": Decimal("12.50"), "at": dt.datetime(2024, 1, 1, 10),
     "at_utc": dt.datetime(2024, 1, 1, 10, tzinfo=UTC), "day": dt.date(2024, 1, 1), "note": None, "dt": DAY},
    {"id": 2, "name": None, "amount": Decimal("-3.00"), "at": dt.datetime(2024, 1, 1, 11, 30, 0, 250000),
     "at_utc": dt.datetime(2024, 1, 1, 8, tzinfo=UTC), "day": dt.date(2024, 1, 2), "note": None, "dt": DAY},
]


def read_rows(location: LandingLocation, partition: str | None = DAY, *, schema: pa.Schema = SCHEMA,
              fill: dict[str, str] | None = None, values: dict[str, str] | None = None,
              extra_columns: str = "refuse") -> list[dict[str, object]]:
    batches = list(location.read(partition, schema, table="db.events", fill={"dt": DAY} if fill is None else fill,
                                 values=values or {}, extra_columns=extra_columns))
    assert all(b.schema == schema for b in batches)
    return pa.Table.from_batches(batches, schema=schema).to_pylist()


def write_parquet(path: Path, table: pa.Table, **kwargs: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


def parquet_rows() -> pa.Table:
    """The EXPECTED rows as an upstream writer has them: wider ints, a stray column, a wrong dt."""
    return pa.table({
        "id": pa.array([1, 2], pa.int64()),
        "name": ["a", None],
        "amount": pa.array([Decimal("12.5"), Decimal("-3")], pa.decimal128(10, 1)),
        "at": pa.array([dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 11, 30, 0, 250000)], pa.timestamp("ms")),
        "at_utc": pa.array([dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 8)], pa.timestamp("us")),
        "day": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)]),
        "unknown": ["x", "y"],
        "dt": ["1999-12-31", "1999-12-31"],
    })


CSV_TEXT = ("unknown,id,name,amount,at,at_utc,day,dt\n"
            "x,1,a,12.5,2024-01-01T10:00:00,2024-01-01T10:00:00,2024-01-01,1999-12-31\n"
            "y,2,,-3,2024-01-01 11:30:00.25,2024-01-01T10:00:00+02:00,2024-01-02,1999-12-31\n")
JSON_TEXT = "".join(json.dumps(row) + "\n" for row in [
    {"id": 1, "name": "a", "amount": 12.5, "at": "2024-01-01T10:00:00", "at_utc": "2024-01-01T10:00:00",
     "day": "2024-01-01", "unknown": [1, 2], "dt": "1999-12-31"},
    {"id": 2, "name": None, "amount": "-3", "at": "2024-01-01 11:30:00.25", "at_utc": "2024-01-01T10:00:00+02:00",
     "day": "2024-01-02"},
])


@pytest.mark.parametrize("name", ["part-0.parquet", "part-0.csv", "part-0.csv.gz", "part-0.jsonl",
                                  "part-0.ndjson.gz", "part-0.json"])
def test_each_format_reads_into_the_schema(tmp_path: Path, name: str) -> None:
    target = tmp_path / f"events/dt={DAY}" / name
    if name.endswith(".parquet"):
        write_parquet(target, parquet_rows())
    else:
        write_text(target, CSV_TEXT if ".csv" in name else JSON_TEXT)
    location = LandingLocation(f"{tmp_path}/events/dt={{partition}}/*")
    with pytest.raises(LandingError, match=rf"{name}: has column\(s\) \['unknown'\] that table db.events does "
                                           "not have .*extra_columns: ignore"):
        read_rows(location)
    assert read_rows(location, extra_columns="ignore") == EXPECTED, \
        "cast, ordered, extra columns dropped, dt filled, note null"


def test_explicit_format_and_delimiter(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "export.txt", CSV_TEXT.replace(",", ";"))
    location = LandingLocation(f"{tmp_path}/{{partition}}/*.txt", format="csv", csv_delimiter=";")
    assert read_rows(location, extra_columns="ignore") == EXPECTED


def test_csv_empty_fields_are_null_and_quoted_empty_strings_are_not(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.csv", 'id,name,at_utc\n1,,\n2,"",2024-01-01T00:00:00Z\n3,NA,\n')
    rows = read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*.csv"))
    assert [(r["name"], r["at_utc"]) for r in rows] == [
        (None, None), ("", dt.datetime(2024, 1, 1, tzinfo=UTC)), ("NA", None)]
    write_text(tmp_path / DAY / "a.csv", "id,amount\n1,NULL\n")
    with pytest.raises(LandingError, match=r"a\.csv.*'amount'.*NULL"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*.csv"))


def test_time_columns_from_text(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.jsonl", '{"t": "10:00:00.5"}\n{"t": null}\n')
    write_text(tmp_path / DAY / "b.csv", "t\n23:59:59\n")
    schema = pa.schema([pa.field("t", pa.time64("us"))])
    rows = read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"), schema=schema, fill={})
    assert [r["t"] for r in rows] == [dt.time(10, 0, 0, 500000), None, dt.time(23, 59, 59)]


@pytest.mark.parametrize("name", ["a.parquet", "a.csv", "a.jsonl"])
def test_missing_nullable_column_is_null_and_missing_not_null_column_fails(tmp_path: Path, name: str) -> None:
    target = tmp_path / DAY / name
    if name.endswith(".parquet"):
        write_parquet(target, pa.table({"name": ["a", "b"]}))
    elif name.endswith(".csv"):
        write_text(target, "name\na\nb\n")
    else:
        write_text(target, '{"name": "a"}\n{"name": "b"}\n')
    location = LandingLocation(f"{tmp_path}/{{partition}}/*")
    nullable = pa.schema([f for f in SCHEMA if f.name != "id"])
    rows = read_rows(location, schema=nullable)
    assert [r["name"] for r in rows] == ["a", "b"]
    assert all(r["amount"] is None and r["at_utc"] is None for r in rows)
    with pytest.raises(LandingError, match=rf"{name}.*'id'.*NOT NULL"):
        read_rows(location)


def test_a_null_in_a_not_null_column_names_the_row(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.jsonl", '{"id": 1}\n{"id": null}\n')
    with pytest.raises(LandingError, match=r"a\.jsonl: column 'id' is null or missing in row 2"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))


@pytest.mark.parametrize(("name", "content", "column", "value"), [
    ("a.parquet", pa.table({"id": pa.array([1, 2, 2**40, 3], pa.int64())}), "id", str(2**40)),
    ("a.parquet", pa.table({"id": [1], "amount": pa.array([Decimal("1.234")], pa.decimal128(5, 3))}),
     "amount", "1.234"),
    ("a.parquet", pa.table({"id": [1, 2], "day": ["2024-01-01", "yesterday"]}), "day", "yesterday"),
    ("a.csv", "id,amount\n1,1.5\n2,abc\n", "amount", "abc"),
    ("a.csv", "id,at_utc\n1,2024-01-01T00:00:00\n2,noon\n", "at_utc", "noon"),
    ("a.csv", "id\n1\n99999999999\n", "id", "99999999999"),
    ("a.jsonl", '{"id": 1, "amount": 1.5}\n{"id": 2, "amount": "1.234"}\n', "amount", "1.234"),
    ("a.jsonl", '{"id": 1}\n{"id": 99999999999}\n', "id", "99999999999"),
    ("a.jsonl", '{"id": 1, "day": "2024-13-01"}\n', "day", "2024-13-01"),
])
def test_a_value_that_does_not_convert_names_file_column_and_value(tmp_path: Path, name: str, content: object,
                                                                    column: str, value: str) -> None:
    target = tmp_path / DAY / name
    if isinstance(content, pa.Table):
        write_parquet(target, content)
    else:
        write_text(target, str(content))
    with pytest.raises(LandingError, match=rf"{name}.*'{column}'.*{value}") as failure:
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))
    assert isinstance(failure.value, SchemaError)


def test_a_json_type_clash_names_file_and_column(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.jsonl", '{"id": 1}\n{"id": "two"}\n')
    with pytest.raises(LandingError, match=r"a\.jsonl: JSON lines cannot be parsed \(column 'id'\)"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))


def test_a_csv_parse_error_names_the_file(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.csv", "id,name\n1,a\n2\n")
    with pytest.raises(LandingError, match=r"a\.csv: CSV cannot be parsed.*Expected 2 columns"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))


def test_the_first_bad_value_is_the_one_named(tmp_path: Path) -> None:
    """The halving search agrees with a scan of the values, wherever the bad values are."""
    rng = random.Random(7)
    for case in range(20):
        values = [str(i) for i in range(rng.randint(1, 3000))]
        bad = sorted(rng.sample(range(len(values)), rng.randint(1, min(4, len(values)))))
        for i in bad:
            values[i] = f"bad{i}"
        write_parquet(tmp_path / str(case) / "a.parquet", pa.table({"id": values}))
        location = LandingLocation(f"{tmp_path}/{{partition}}/*")
        with pytest.raises(LandingError, match=rf"value 'bad{bad[0]}' in row {bad[0] + 1} "):
            read_rows(location, str(case))


def test_fill_overrides_and_is_checked(tmp_path: Path) -> None:
    write_parquet(tmp_path / DAY / "a.parquet", parquet_rows())
    location = LandingLocation(f"{tmp_path}/{{partition}}/*")
    schema = pa.schema([*[f for f in SCHEMA if f.name != "dt"], pa.field("dt", pa.date32(), nullable=False)])
    assert {r["dt"] for r in read_rows(location, schema=schema, extra_columns="ignore")} == {dt.date(2024, 1, 1)}
    with pytest.raises(LandingError, match=r"partition value 'Monday' of column 'dt'"):
        location.read(DAY, schema, table="db.events", fill={"dt": "Monday"})
    with pytest.raises(LandingError, match=r"fill column 'region' is not a column"):
        location.read(DAY, SCHEMA, table="db.events", fill={"region": "eu"})


def test_template_with_partition_and_column_placeholders(tmp_path: Path) -> None:
    for region in ("eu", "us"):
        for part in ("b", "a"):
            write_parquet(tmp_path / f"in/{region}/dt={DAY}/{part}.parquet", pa.table({"id": [1]}))
    location = LandingLocation(f"{tmp_path}/in/{{region}}/dt={{partition}}/*.parquet")
    files = location.files(DAY, {"region": "eu"})
    assert [Path(f.path).relative_to(tmp_path).as_posix() for f in files] == [
        f"in/eu/dt={DAY}/a.parquet", f"in/eu/dt={DAY}/b.parquet"]
    assert all(isinstance(f, LandedFile) and f.size > 0 for f in files)
    assert len(read_rows(location, values={"region": "us"})) == 2
    with pytest.raises(LandingError, match=r"needs a value for \{region\}"):
        location.files(DAY)
    with pytest.raises(LandingError, match="glob characters"):
        location.files("*", {"region": "eu"})
    with pytest.raises(LandingError, match=r"'\.\.' segment"):
        location.files("../x", {"region": "eu"})


def test_hidden_and_marker_files_and_folders_are_not_part_of_a_delivery(tmp_path: Path) -> None:
    base = tmp_path / DAY
    write_parquet(base / "a.parquet", pa.table({"id": [1]}))
    write_parquet(base / "sub" / "b.parquet", pa.table({"id": [2]}))
    (base / "_SUCCESS").write_bytes(b"")
    (base / ".c.parquet.part").write_bytes(b"half a file")
    (base / "_temporary" / "0").mkdir(parents=True)
    (base / "_temporary" / "0" / "d.parquet").write_bytes(b"in progress")
    (base / "folder.parquet").mkdir()
    location = LandingLocation(f"{tmp_path}/{{partition}}/**")
    assert [Path(f.path).name for f in location.files(DAY)] == ["a.parquet", "b.parquet"]
    assert [r["id"] for r in read_rows(location)] == [1, 2]


def test_no_files(tmp_path: Path) -> None:
    location = LandingLocation(f"{tmp_path}/{{partition}}/*.parquet")
    assert location.files(DAY) == []
    with pytest.raises(LandingError, match=rf"no files match {tmp_path}/{DAY}/\*\.parquet for partition {DAY} "
                                           "of table db.events"):
        location.read(DAY, SCHEMA, table="db.events")
    (tmp_path / DAY).mkdir()
    with pytest.raises(LandingError, match=r"it is a folder: add /\*"):
        LandingLocation(f"{tmp_path}/{{partition}}").read(DAY, SCHEMA, table="db.events")


def test_a_file_of_unknown_format_fails_before_any_row(tmp_path: Path) -> None:
    write_parquet(tmp_path / DAY / "a.parquet", pa.table({"id": [1]}))
    (tmp_path / DAY / "README").write_text("hello")
    with pytest.raises(LandingError, match="cannot tell the format of .*README.*set landing.format"):
        LandingLocation(f"{tmp_path}/{{partition}}/*").read(DAY, SCHEMA, table="db.events")


def test_files_without_rows_have_no_rows(tmp_path: Path) -> None:
    write_parquet(tmp_path / DAY / "a.parquet", pa.table({"id": [1]}))
    write_parquet(tmp_path / DAY / "b.parquet", pa.table({"id": pa.array([], pa.int64())}))
    write_text(tmp_path / DAY / "e.csv", "id,name\n")
    write_text(tmp_path / DAY / "f.csv.gz", "id,name\n")
    assert [r["id"] for r in read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))] == [1]


@pytest.mark.parametrize("name", ["b.csv", "c.jsonl", "d.csv.gz", "e.parquet", "f.ndjson.gz"])
def test_an_empty_file_is_not_a_file_of_the_table(tmp_path: Path, name: str) -> None:
    """0 bytes (an upload that died): not even a CSV header, so refused naming the file."""
    write_parquet(tmp_path / DAY / "a.parquet", pa.table({"id": [1]}))
    path = tmp_path / DAY / name
    path.write_bytes(gzip.compress(b"") if name.endswith(".gz") else b"")
    with pytest.raises(LandingError, match=rf"{name}: the file is empty \(0 bytes\), so it is not a .* file of "
                                           "this table .*replace it with the complete file, or remove it"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))


def test_a_csv_file_without_a_header_row_is_refused(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.csv", "7,seven,1.5\n8,eight,2\n")
    with pytest.raises(LandingError, match=r"a.csv: its first row \['7', 'seven', '1.5'\] names none of the "
                                           "table's columns .*a file without a header row"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))
    with pytest.raises(LandingError, match="names none of the table's columns"):  # whatever the policy
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"), extra_columns="ignore")
    write_text(tmp_path / DAY / "a.csv", "id,name,id\n1,a,2\n")
    with pytest.raises(LandingError, match=r"the header names column\(s\) \['id'\] more than once"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))


@pytest.mark.parametrize("name", ["a.csv", "a.jsonl", "a.parquet"])
def test_a_truncated_file_is_refused(tmp_path: Path, name: str) -> None:
    """An upload cut mid-row (or, for Parquet, before its footer) does not parse."""
    path = tmp_path / DAY / name
    if name.endswith(".parquet"):
        write_parquet(path, pa.table({"id": list(range(1000)), "name": [str(i) for i in range(1000)]}))
    else:
        write_text(path, "id,name\n1,one\n2,two\n" if name.endswith(".csv") else
                   '{"id": 1, "name": "one"}\n{"id": 2, "name": "two"}\n')
    data = path.read_bytes()
    path.write_bytes(data[:len(data) * 2 // 3])
    with pytest.raises(LandingError, match=rf"{name}: (.*cannot be parsed|not a readable Parquet file|the file "
                                           "does not end with a line break)"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))


def test_extra_json_fields_are_named_even_when_they_do_not_parse(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.jsonl", '{"id": 1, "t": 1}\n{"id": 2, "t": 3}\n')
    with pytest.raises(LandingError, match=r"a.jsonl: has column\(s\) \['t'\] that table db.events does not have"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))
    write_text(tmp_path / DAY / "a.jsonl", '{"id": 1, "t": 1}\n{"id": 2, "t": "warm"}\n')
    with pytest.raises(LandingError, match=r"a.jsonl: has field 't', which table db.events does not have \(and "
                                           "whose values do not parse"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))
    assert [r["id"] for r in read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"), extra_columns="ignore")] \
        == [1, 2]


def test_fingerprint_changes_with_the_files_only(tmp_path: Path) -> None:
    location = LandingLocation(f"{tmp_path}/{{partition}}/*.csv")
    empty = location.fingerprint(DAY)
    assert empty == location.fingerprint(DAY), "stable while nothing landed"
    write_text(tmp_path / DAY / "a.csv", "id\n1\n")
    first = location.fingerprint(DAY)
    assert first != empty
    assert first == location.fingerprint(DAY)
    write_text(tmp_path / DAY / "_SUCCESS", "")
    assert location.fingerprint(DAY) == first, "marker files do not count"
    write_text(tmp_path / DAY / "b.csv", "id\n2\n")
    second = location.fingerprint(DAY)
    assert second not in (empty, first)
    stat = os.stat(tmp_path / DAY / "a.csv")
    write_text(tmp_path / DAY / "a.csv", "id\n3\n")  # same size: only the mtime tells
    os.utime(tmp_path / DAY / "a.csv", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    third = location.fingerprint(DAY)
    assert third not in (empty, first, second)
    assert location.fingerprint("2024-01-02") == empty, "another partition"


def test_reading_is_batched_and_lazy(tmp_path: Path) -> None:
    rows = 200_000
    write_parquet(tmp_path / DAY / "a.parquet", pa.table({"id": pa.array(range(rows), pa.int64())}),
                  row_group_size=7_000)
    (tmp_path / DAY / "b.parquet").write_bytes(b"PAR1 not a parquet file at all")
    location = LandingLocation(f"{tmp_path}/{{partition}}/*.parquet", batch_size=10_000)
    batches = location.read(DAY, SCHEMA, table="db.events", fill={"dt": DAY})
    first = next(batches)  # the corrupt second file is not opened yet
    assert first.num_rows <= 10_000
    sizes = [first.num_rows]
    with pytest.raises(LandingError, match=r"b\.parquet: not a readable Parquet file"):
        for batch in batches:
            sizes.append(batch.num_rows)
    assert sum(sizes) == rows, "every batch of the first file came out before the error"
    assert len(sizes) >= rows // 10_000 and max(sizes) <= 10_000


def test_text_blocks_are_sliced_to_the_batch_size(tmp_path: Path) -> None:
    write_text(tmp_path / DAY / "a.jsonl", "".join(f'{{"id": {i}}}\n' for i in range(5_000)))
    location = LandingLocation(f"{tmp_path}/{{partition}}/*", batch_size=700)
    sizes = [b.num_rows for b in location.read(DAY, SCHEMA, table="db.events", fill={"dt": DAY})]
    assert sum(sizes) == 5_000 and max(sizes) <= 700


@pytest.mark.parametrize(("location", "partitioned", "message"), [
    (LandingLocation(""), True, r"landing\.path is empty"),
    (LandingLocation("in/{partition}/*", format="xlsx"), True, r"landing\.format 'xlsx' is not one of"),
    (LandingLocation("in/*.parquet"), True, r"no \{partition\} placeholder"),
    (LandingLocation("in/{partition}/*"), False, r"asset is not partitioned"),
    (LandingLocation("in/{partition}/{region}/*"), True, r"unknown placeholder\(s\) \{region\}; only "
                                                           r"\{partition\}, \{dt\} can be substituted"),
    (LandingLocation("in/{partition}/{*.csv"), True, r"unbalanced"),
    (LandingLocation("in/{partition}/*", csv_delimiter="::"), True, r"landing\.csv_delimiter"),
    (LandingLocation("in/{partition}/*", batch_size=0), True, r"landing\.batch_size"),
])
def test_validate_names_table_field_and_fix(location: LandingLocation, partitioned: bool, message: str) -> None:
    with pytest.raises(LandingError, match=rf"table db\.events: .*{message}"):
        location.validate(table="db.events", partitioned=partitioned, columns=["dt"])


def test_validate_accepts_good_declarations() -> None:
    LandingLocation("s3://raw/events/dt={partition}/{dt}/**/*.parquet").validate(
        table="db.events", partitioned=True, columns=["dt"])
    LandingLocation("landing/events/*.jsonl.gz", format="jsonl").validate(table="db.events", partitioned=False)


def test_s3_listing_fingerprint_and_read(s3_servers: dict[str, S3Server]) -> None:
    store = Store.on(s3_servers["seaweed"])
    store.write(f"landing/dt={DAY}/a.csv.gz", gzip.compress(CSV_TEXT.encode()))
    store.write(f"landing/dt={DAY}/_SUCCESS", b"")
    location = LandingLocation(f"{store.warehouse}/landing/dt={{partition}}/*",
                               storage_options=store.storage_options or {})
    files = location.files(DAY)
    assert [f.path for f in files] == [f"{store.warehouse}/landing/dt={DAY}/a.csv.gz"]
    assert files[0].modified, "the object's ETag"
    before = location.fingerprint(DAY)
    assert read_rows(location, extra_columns="ignore") == EXPECTED
    store.write(f"landing/dt={DAY}/b.jsonl", JSON_TEXT.encode())
    assert location.fingerprint(DAY) != before, "a new object is seen (no cached listing)"
    assert read_rows(location, extra_columns="ignore") == EXPECTED * 2


@pytest.mark.parametrize("name", ["a.csv", "a.jsonl", "a.csv.gz"])
def test_a_text_file_cut_inside_its_last_row_is_refused(tmp_path: Path, name: str) -> None:
    """A CSV cut inside a value parses; only its missing final line break tells it was cut."""
    text = "id,name\n1,one\n2,tw" if ".csv" in name else '{"id": 1, "name": "one"}\n{"id": 2, "name": "tw"}'
    write_text(tmp_path / DAY / name, text)
    with pytest.raises(LandingError, match=rf"{name}: the file does not end with a line break"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))
    write_text(tmp_path / DAY / name, text + "\n")
    assert [r["id"] for r in read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))] == [1, 2]


def test_a_cut_compressed_file_is_refused(tmp_path: Path) -> None:
    data = gzip.compress(("id,name\n" + "".join(f"{i},name {i}\n" for i in range(2000))).encode())
    (tmp_path / DAY).mkdir()
    (tmp_path / DAY / "a.csv.gz").write_bytes(data[:len(data) // 2])
    with pytest.raises(LandingError, match="a.csv.gz: the compressed stream is cut short or damaged"):
        read_rows(LandingLocation(f"{tmp_path}/{{partition}}/*"))
