"""A lookup join in a Dagster asset: a batch of orders enriched against a primary-key table.

The asset gets the warehouse through ``PaimonCatalogResource``, looks the batch's customer ids up
in ``crm.customers`` (``table(...).lookup``), joins the rows found and writes the result to a lake
table. Real materializations, no mocks; the expected enrichment is computed from a full read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pyarrow as pa
import pytest

from resources import PaimonCatalogResource

CUSTOMERS = "crm.customers"
ENRICHED = "crm.enriched_orders"
CUSTOMER_SCHEMA = pa.schema([pa.field("customer_id", pa.int64(), False), ("name", pa.string()),
                             ("tier", pa.string())])
ENRICHED_SCHEMA = pa.schema([("order_id", pa.int64()), ("customer_id", pa.int64()), ("amount", pa.float64()),
                             ("name", pa.string()), ("tier", pa.string())])


def make_batch() -> pa.Table:
    """A batch of orders: repeated customers, and customers the CRM does not know."""
    rng = np.random.default_rng(42)
    n = 400
    return pa.table({"order_id": np.arange(n, dtype=np.int64), "customer_id": rng.integers(0, 260, n),
                     "amount": rng.random(n).round(2)})


@dg.asset
def order_batch() -> pa.Table:
    return make_batch()


@dg.asset
def enriched_orders(order_batch: pa.Table, paimon_catalog: PaimonCatalogResource) -> dg.MaterializeResult:
    """Each order with its customer's current name and tier (null when the customer is unknown)."""
    customers = paimon_catalog.table(CUSTOMERS)
    found = customers.lookup(order_batch.select(["customer_id"]), columns=["customer_id", "name", "tier"])
    enriched = order_batch.join(found, keys="customer_id", join_type="left outer").select(ENRICHED_SCHEMA.names)
    target = paimon_catalog.ensure_table(ENRICHED, schema=ENRICHED_SCHEMA)
    snapshot_id = target.write(enriched.cast(ENRICHED_SCHEMA), overwrite=True)
    matched = int(enriched.column("name").is_valid().to_numpy(zero_copy_only=False).sum())
    return dg.MaterializeResult(metadata={"orders": enriched.num_rows, "matched": matched,
                                          "customers_found": found.num_rows, "snapshot_id": snapshot_id})


@pytest.fixture
def catalog(tmp_path: Path) -> PaimonCatalogResource:
    resource = PaimonCatalogResource(warehouse=str(tmp_path / "warehouse"))
    table = resource.ensure_table(CUSTOMERS, schema=CUSTOMER_SCHEMA, primary_keys=["customer_id"],
                                  options={"bucket": "2"})
    ids = np.arange(200, dtype=np.int64)
    table.write(pa.table({"customer_id": ids, "name": [f"c{i}" for i in ids], "tier": ["basic"] * 200},
                         schema=CUSTOMER_SCHEMA))
    table.write(pa.table({"customer_id": ids[::3], "name": [f"c{i}" for i in ids[::3]], "tier": ["gold"] * 67},
                         schema=CUSTOMER_SCHEMA))
    table.delete(pa.table({"customer_id": ids[::10]}))
    return resource


def expected(resource: PaimonCatalogResource) -> list[dict[str, Any]]:
    current = {r["customer_id"]: r for r in resource.table(CUSTOMERS).read().to_pylist()}
    out = []
    for order in make_batch().to_pylist():  # the asset's batch, built again
        customer = current.get(order["customer_id"], {})
        out.append({**order, "name": customer.get("name"), "tier": customer.get("tier")})
    return sorted(out, key=lambda r: r["order_id"])


def materialize(resource: PaimonCatalogResource, instance: dg.DagsterInstance) -> dict[str, Any]:
    result = dg.materialize([order_batch, enriched_orders], resources={"paimon_catalog": resource},
                            instance=instance)
    assert result.success
    [materialization] = result.asset_materializations_for_node("enriched_orders")
    return {k: v.value for k, v in materialization.metadata.items()}


def test_an_asset_enriches_a_batch_by_primary_key_lookup(catalog: PaimonCatalogResource) -> None:
    with dg.instance_for_test() as instance:
        metadata = materialize(catalog, instance)
        rows = sorted(catalog.table(ENRICHED).read().to_pylist(), key=lambda r: r["order_id"])
        want = expected(catalog)
        assert rows == want
        assert metadata["orders"] == 400 and metadata["matched"] == sum(r["name"] is not None for r in want)
        assert 0 < metadata["matched"] < 400  # some customers are unknown or deleted
        assert metadata["customers_found"] == len({r["customer_id"] for r in want if r["name"] is not None})

        # a new commit to the dimension table is seen by the next run
        catalog.table(CUSTOMERS).write(pa.table({"customer_id": [1, 2, 3], "name": ["x", "y", "z"],
                                                 "tier": ["platinum"] * 3}, schema=CUSTOMER_SCHEMA))
        materialize(catalog, instance)
        rows = sorted(catalog.table(ENRICHED).read().to_pylist(), key=lambda r: r["order_id"])
        assert rows == expected(catalog)
        assert any(r["tier"] == "platinum" for r in rows)
