"""S3 requests an operation issues, counted at a loopback proxy in front of SeaweedFS and moto.

On object stores every request costs latency (and money), and a LIST is among the dearest: a
table read must list the schema and snapshot directories a fixed number of times, whatever
the number of data files, and fetch each data file without a HEAD or LIST of its own (Arrow's
fsspec bridge alone would send two HEADs per file: 315 requests for this read instead of 109).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pytest

from tests.s3.fault_proxy import Exchange, FaultProxy
from tests.s3.servers import S3Server
from tests.s3.store import Store

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
