"""``Table.write_dask``: a Dask DataFrame written by a task per partition on a real
``distributed.LocalCluster`` (two worker processes on loopback), committed once.

The reference is one writer given the frame's partitions one after the other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import paimon_core as pc
from paimon_core.errors import UnsupportedFeatureError
from tests.support.dask_cluster import loopback_cluster

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.slow

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64()), ("op", pa.string())])
KEYS = [("dt", "ascending"), ("id", "ascending")]


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with loopback_cluster(2) as cluster, distributed.Client(cluster) as connected:
        yield connected


def changes(n: int, seed: int) -> pa.Table:
    """Changes whose keys repeat all over the frame, with deletes: the order decides the result."""
    rng = np.random.default_rng(seed)
    return pa.table({"dt": pa.array([f"2024-01-0{1 + d}" for d in rng.integers(0, 2, n)]),
                     "id": pa.array(rng.integers(0, 500, n)), "v": pa.array(rng.integers(0, 1 << 30, n)),
                     "op": pa.array(rng.choice(["+I", "+U", "-D"], n, p=[.5, .35, .15]))}, schema=SCHEMA)


def pk_table(catalog: pc.Catalog, name: str, **options: str) -> pc.Table:
    return catalog.create_table(f"db.{name}", schema=SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
                                options={"bucket": "3", "write-only": "true", "rowkind.field": "op", **options})


def test_a_frame_lands_as_one_writer_wrote_it_in_partition_order(catalog: pc.Catalog, client: Any) -> None:
    data = changes(20_000, seed=1)
    frame = dd.from_pandas(data.to_pandas(), npartitions=5, sort=False)
    single, fanned = pk_table(catalog, "single"), pk_table(catalog, "fanned")
    single.write(data)
    outcome = fanned.write_dask(frame, commit_user="pipeline", commit_identifier=1)
    assert outcome.data_snapshot == 1 and len(fanned.snapshots()) == 1
    assert fanned.read().sort_by(KEYS).equals(single.read().sort_by(KEYS))
    # A second call with the same identifier (a retried pipeline) finds the commit and writes nothing.
    files = {f for s in fanned.plan() for f in s.files}
    again = fanned.write_dask(frame, commit_user="pipeline", commit_identifier=1)
    assert again.data_snapshot == 1 and len(fanned.snapshots()) == 1
    assert {f for s in fanned.plan() for f in s.files} == files
    assert fanned.remove_orphan_files(older_than=2**62, force=True, dry_run=True).orphans == ()
    # The frame read back through to_dask, on the same cluster.
    back = client.compute(fanned.to_dask(columns=["id", "v"])).result()
    assert len(back) == fanned.read(columns=["id"]).num_rows


def test_an_overwrite_and_an_append_table_from_frames(catalog: pc.Catalog, client: Any) -> None:
    table = pk_table(catalog, "over")
    table.write(changes(3_000, seed=2))
    fresh = changes(4_000, seed=3).filter(pa.compute.equal(pa.compute.field("dt"), "2024-01-01"))
    frame = dd.from_pandas(fresh.to_pandas(), npartitions=3, sort=False)
    table.write_dask(frame, commit_user="p", commit_identifier=1, overwrite={"dt": "2024-01-01"})
    reference = pk_table(catalog, "over_ref")
    reference.write(changes(3_000, seed=2))
    reference.write(fresh, overwrite={"dt": "2024-01-01"})
    assert table.read().sort_by(KEYS).equals(reference.read().sort_by(KEYS))

    logs = catalog.create_table("db.logs", schema=SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
    data = changes(10_000, seed=4)
    logs.write_dask(dd.from_pandas(data.to_pandas(), npartitions=4, sort=False), commit_user="p",
                    commit_identifier=1)
    order = [*KEYS, ("v", "ascending")]
    assert logs.read().sort_by(order).equals(data.sort_by(order))


def test_a_dynamic_bucket_table_is_refused_and_left_unchanged(catalog: pc.Catalog, client: Any) -> None:
    table = pk_table(catalog, "dynamic", bucket="-1")
    frame = dd.from_pandas(changes(100, seed=5).to_pandas(), npartitions=2, sort=False)
    with pytest.raises(UnsupportedFeatureError, match="dynamic-bucket table"):
        table.write_dask(frame, commit_user="p", commit_identifier=1)
    assert table.latest_snapshot() is None
