"""The Paimon warehouse as a Dagster resource: one place that knows where the tables live."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import dagster as dg
import pyarrow as pa
from pydantic import Field

import paimon_core as pc

log = logging.getLogger(__name__)


class PaimonCatalogResource(dg.ConfigurableResource):
    """A filesystem Paimon catalog (local path or any fsspec URL).

    Assets and ops receive it as a typed parameter; the IO manager nests it, so both see the
    same warehouse. Secrets belong in ``storage_options`` as ``dg.EnvVar`` values, which are
    resolved when the resource is initialized, not when the definitions load.
    """

    warehouse: str = Field(
        description="Warehouse root: a local path (made absolute), file:// URI or fsspec URL such as "
        "s3://bucket/warehouse.",
    )
    storage_options: dict[str, str] = Field(
        default={},
        description="fsspec storage options for the warehouse filesystem (for S3: key, secret, "
        "endpoint_url ...).",
    )

    def catalog(self) -> pc.Catalog:
        """A fresh catalog; it holds no state, so creating one per call is cheap and thread-safe."""
        return pc.Catalog(self.warehouse, storage_options=self.storage_options or None)

    def table(self, identifier: str) -> pc.Table:
        """The table ``db.table``; raises ``TableNotFoundError`` when it does not exist."""
        return self.catalog().get_table(identifier)

    def ensure_table(self, identifier: str, *, schema: pa.Schema, partition_keys: Sequence[str] = (),
                     primary_keys: Sequence[str] = (), options: dict[str, str] | None = None) -> pc.Table:
        """Create ``identifier`` (and its database) unless it exists.

        Creation is atomic in paimon_core, so two runs racing to create the table both end up
        with the same one; an existing table with other columns, partition keys or primary
        keys raises ``TableExistsError`` instead of being written into.
        """
        catalog = self.catalog()
        catalog.create_database(identifier.split(".", 1)[0], exist_ok=True)
        return catalog.create_table(identifier, schema=schema, partition_keys=partition_keys,
                                    primary_keys=primary_keys, options=options, exist_ok=True)
