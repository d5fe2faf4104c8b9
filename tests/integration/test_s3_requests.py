"""S3 requests an operation issues, counted at a loopback proxy in front of SeaweedFS and moto.

On object stores every request costs latency (and money), and a LIST is among the dearest: a
table read must list the schema and snapshot directories a fixed number of times, whatever
the number of data files, and fetch each data file without a HEAD or LIST of its own (Arrow's
fsspec bridge alone would send two HEADs per file: 315 requests for this read instead of 109).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute
import pytest

import paimon_core as pc
from tests.support.s3.fault_proxy import Exchange, FaultProxy
from tests.support.s3.servers import S3Server
from tests.support.s3.store import Store

FILES = 100
SCHEMA = pa.schema([("p", pa.int32()), ("id", pa.int64()), ("v", pa.string())])


def kind(exchange: Exchange) -> str:
    """The S3 operation of a request, from its method and query."""
    query = exchange.query
    if exchange.method == "GET" and ("list-type" in query or "prefix=" in query or exchange.path.count("/") <= 1):
        return "LIST"
    return exchange.method


@pytest.fixture(params=["seaweed", "moto"])
def proxied(request: pytest.FixtureRequest, s3_servers: dict[str, S3Server]) -> Iterator[tuple[Store, FaultProxy]]:
    server = s3_servers[request.param]
    with FaultProxy(server.endpoint) as proxy:
        yield Store.on(server, proxy.endpoint), proxy


def counted(proxy: FaultProxy, since: int) -> Counter[str]:
    return Counter(kind(e) for e in proxy.requests()[since:])


def test_a_read_lists_a_fixed_number_of_times_whatever_the_files(proxied: tuple[Store, FaultProxy]) -> None:
    store, proxy = proxied
    catalog = store.catalog()
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=SCHEMA, partition_keys=["p"])
    rows = pa.table({"p": pa.array(range(FILES), pa.int32()), "id": range(FILES), "v": ["x"] * FILES}, schema=SCHEMA)
    table.write(rows)
    assert len(table.files()) == FILES

    fresh = store.catalog().get_table("db.t")  # a new process's view: no cached listings or schemas
    before = len(proxy.requests())
    data = fresh.read()
    requests = counted(proxy, before)
    print(f"read of {FILES} files: {dict(requests)}")
    assert data.num_rows == FILES
    assert requests["LIST"] <= 4, requests  # schema and snapshot directories, not one per data file
    # one ranged GET per (small) data file, sized from its manifest entry: no HEAD per file
    assert FILES <= requests["GET"] <= FILES + 10, requests
    assert requests["HEAD"] <= 4, requests  # the snapshot hint's checks

    before = len(proxy.requests())
    assert fresh.read(filter=[("p", "=", 7)]).num_rows == 1
    pruned = counted(proxy, before)
    assert pruned["LIST"] <= 4 and pruned["GET"] <= 10, pruned


PARTITIONS, BUCKETS, COMMITS = ("a", "b", "c"), 4, 10
PK_SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                       ("v", pa.string())])


def pk_rows(start: int, n: int) -> pa.Table:
    return pa.table({"dt": [PARTITIONS[i % len(PARTITIONS)] for i in range(n)], "id": range(start, start + n),
                     "v": ["x"] * n}, schema=PK_SCHEMA)


def metadata_files(table: pc.Table) -> int:
    """Files a reader of the latest snapshot fetches besides data files: schema, hint, snapshot,
    both manifest lists and every manifest."""
    return 5 + table.system("manifests").num_rows


def test_request_budgets_of_a_write_only_primary_key_table(proxied: tuple[Store, FaultProxy]) -> None:
    """Each operation of a fresh process (a new catalog: nothing cached) within its budget: no
    HeadObject per data file read or written, a HEAD only for the snapshot checks."""
    store, proxy = proxied
    catalog = store.catalog()
    catalog.create_database("db")
    table = catalog.create_table("db.t", schema=PK_SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                 options={"bucket": str(BUCKETS), "write-only": "true"})
    for i in range(COMMITS):
        table.write(pk_rows(i * 120, 120))
    files = len(table.files())
    assert files == len(PARTITIONS) * BUCKETS * COMMITS
    metadata = metadata_files(table)

    def run(operation: Callable[[pc.Table], object]) -> Counter[str]:
        fresh = store.catalog().get_table("db.t")
        before = len(proxy.requests())
        operation(fresh)
        return counted(proxy, before)

    read = run(lambda t: t.read())
    print(f"read of {files} files, {metadata} metadata files: {dict(read)}")
    assert read["GET"] <= 1.2 * files + metadata and read["LIST"] <= 2 and read["HEAD"] <= 1, read

    pruned = run(lambda t: t.read(filter=[("dt", "=", "a")]))
    assert pruned["GET"] <= 1.2 * files / len(PARTITIONS) + metadata and pruned["HEAD"] <= 1, pruned

    snapshots = run(lambda t: t.snapshots())
    assert sum(snapshots.values()) <= COMMITS + 2, snapshots

    one_partition = pk_rows(0, 30).filter(pa.compute.equal(pa.compute.field("dt"), "a"))
    commit = run(lambda t: t.write(one_partition))  # its 4 buckets, restored from the manifests
    print(f"commit of {BUCKETS} files: {dict(commit)}")
    # the HEADs: no snapshot after the latest (the writer's and the commit's), and the one
    # before the new snapshot still there (before and after creating it)
    assert commit["PUT"] == BUCKETS + 5 and commit["HEAD"] <= 4, commit
    assert commit["GET"] <= metadata + 2, commit

    compact = run(lambda t: t.compact(full=True))
    written = len(PARTITIONS) * BUCKETS
    print(f"full compaction of {files + BUCKETS} files into {written}: {dict(compact)}")
    assert compact["GET"] <= 1.2 * (files + BUCKETS) + metadata + 2 and compact["HEAD"] <= 4, compact
    assert compact["PUT"] <= written + 6, compact


def test_a_write_only_append_commit_costs_fifteen_requests(proxied: tuple[Store, FaultProxy]) -> None:
    """Write-only, bucket-unaware: the writer reads nothing; the commit reads the hint, the
    latest snapshot and its two lists, checks the snapshots around the one it creates, and
    writes the data file, a manifest, two lists, the snapshot and the hint."""
    store, proxy = proxied
    catalog = store.catalog()
    catalog.create_database("db")
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64())])
    table = catalog.create_table("db.a", schema=schema, partition_keys=["dt"], options={"write-only": "true"})
    for i in range(5):
        table.write(pa.table({"dt": ["a"], "id": [i]}, schema=schema))
    fresh = store.catalog().get_table("db.a")
    fresh.schema  # noqa: B018  (opening the table reads its schema: not the commit's cost)
    before = len(proxy.requests())
    fresh.write(pa.table({"dt": ["a"], "id": [9]}, schema=schema))
    requests = counted(proxy, before)
    print(f"write-only append commit: {dict(requests)}")
    assert sum(requests.values()) <= 15 and requests["LIST"] <= 1, requests  # the LIST: the latest schema
