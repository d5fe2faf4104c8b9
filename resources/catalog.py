"""The Paimon warehouse as a Dagster resource: one place that knows where the tables live."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg
import fsspec
import pyarrow as pa
from pydantic import Field, field_validator

import paimon_core as pc
from paimon_core.errors import CommitConflictError

log = logging.getLogger(__name__)

# Options ensure_table brings an existing table in line with: they only say who maintains the
# table and when it writes its changelog, never how its data is laid out, so changing them on a
# live table is safe (changes are produced from the next full compaction on). A warehouse
# created before the pipelines made their tables write-only, or gave shop.orders a changelog,
# thus converts on the next run.
RECONCILED_OPTIONS = ("write-only", "changelog-producer", "full-compaction.delta-commits",
                      "changelog-producer.row-deduplicate")


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
        "endpoint_url, client_kwargs.region_name ...: dotted keys nest, 'true'/'false' are booleans). "
        "Pass secrets as dg.EnvVar values: the UI and the run's config show the "
        "variable's name, and the values stay out of the resource's repr.",
        repr=False,
    )

    @field_validator("warehouse")
    @classmethod
    def _check_warehouse(cls, value: str) -> str:
        # An EnvVar holds the variable's name here; Dagster validates the value it resolves to
        # when it initializes the resource.
        return value if isinstance(value, dg.EnvVar) else checked_warehouse(value)

    def catalog(self) -> pc.Catalog:
        """A fresh catalog; it holds no state, so creating one per call is cheap and thread-safe."""
        unresolved = ["warehouse"] if isinstance(self.warehouse, dg.EnvVar) else []
        unresolved += [f"storage_options[{key!r}]" for key, value in self.storage_options.items()
                       if isinstance(value, dg.EnvVar)]
        if unresolved:  # outside a run: the fields still hold the variables' names, not their values
            raise dg.DagsterInvariantViolationError(
                f"PaimonCatalogResource {', '.join(unresolved)}: dg.EnvVar values are resolved only when "
                "Dagster initializes the resource; outside a run use resource.process_config_and_initialize()")
        return pc.Catalog(self.warehouse, storage_options=fsspec_options(self.storage_options) or None)

    def table(self, identifier: str) -> pc.Table:
        """The table ``db.table``; raises ``TableNotFoundError`` when it does not exist."""
        return self.catalog().get_table(identifier)

    def ensure_table(self, identifier: str, *, schema: pa.Schema, partition_keys: Sequence[str] = (),
                     primary_keys: Sequence[str] = (), options: dict[str, str] | None = None,
                     report: Callable[[str], None] | None = None) -> pc.Table:
        """Create ``identifier`` (and its database) unless it exists.

        Creation is atomic in paimon_core, so two runs racing to create the table both end up
        with the same one; an existing table with other columns, partition keys or primary
        keys raises ``TableExistsError`` instead of being written into. ``report`` is told, in
        a line each, the options set on an existing table and those it keeps (a run's log).
        """
        catalog = self.catalog()
        catalog.create_database(identifier.split(".", 1)[0], exist_ok=True)
        table = catalog.create_table(identifier, schema=schema, partition_keys=partition_keys,
                                     primary_keys=primary_keys, options=options, exist_ok=True)
        return reconcile_options(table, options or {}, report=report)


def fsspec_options(options: dict[str, str]) -> dict[str, Any]:
    """Dagster config values are strings; fsspec wants some booleans and nested dicts.

    ``"true"``/``"false"`` become booleans, and a dotted key sets a nested option:
    ``{"endpoint_url": "http://127.0.0.1:8333", "client_kwargs.region_name": "eu-west-1",
    "config_kwargs.retries.max_attempts": "10"}`` (digits stay strings unless nested under
    ``config_kwargs``, which botocore wants as numbers).
    """
    out: dict[str, Any] = {}
    for key, text in options.items():
        *parents, leaf = key.split(".")
        value: Any = {"true": True, "false": False}.get(text.lower(), text)
        if parents and parents[0] == "config_kwargs" and text.isdigit():
            value = int(text)
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return out


def checked_warehouse(warehouse: str) -> str:
    """``warehouse`` if it can name a warehouse, else a ``ValueError`` saying why.

    Refused before anything is written: an empty value (it would silently be the current
    directory of whichever process runs), a path with ``..`` segments (relative to a directory
    that differs between webserver, daemon and run workers; on object stores a literal key
    part), and a URL whose protocol fsspec does not know or cannot load.
    """
    text = warehouse.strip()
    if not text:
        raise ValueError("warehouse is empty; give an absolute path, a file:// URI or an fsspec URL such as "
                         "s3://bucket/warehouse")
    parts = text.split("::")  # fsspec URL chaining: simplecache::s3://bucket/path
    path = parts[-1].split("://", 1)[-1]
    if ".." in path.replace("\\", "/").split("/"):
        raise ValueError(f"warehouse {warehouse!r} has a '..' segment; give the resolved absolute path or URL")
    protocols = [part.split("://", 1)[0] for part in parts[:-1]]
    if "://" in parts[-1]:
        protocols.append(parts[-1].split("://", 1)[0])
    for protocol in protocols:
        try:
            fsspec.get_filesystem_class(protocol)
        except (ValueError, ImportError) as exc:
            raise ValueError(f"warehouse {warehouse!r}: fsspec cannot open protocol {protocol!r} ({exc})") from None
    return warehouse


def reconcile_options(table: pc.Table, wanted: dict[str, str], *,
                      report: Callable[[str], None] | None = None) -> pc.Table:
    """Set the ``RECONCILED_OPTIONS`` of an existing table to ``wanted``; warn about other differences.

    Other options (bucket, merge engine, ...) decide how existing files are laid out or merged,
    so a table created with other values keeps them: the warning names them, nothing changes.
    """
    for attempt in range(3):
        current = dict(table.schema.options)
        changes = [pc.SetOption(key, wanted[key]) for key in RECONCILED_OPTIONS
                   if key in wanted and current.get(key) != wanted[key]]
        if not changes:
            break
        try:
            table.alter(changes)
        except CommitConflictError:  # another run evolved the schema at the same time: look again
            if attempt == 2:
                raise
            continue
        said = (f"table {table.name}: options changed by its declaration: "
                + ", ".join(f"{c.key} {current.get(c.key, '(unset)')} -> {c.value}" for c in changes))
        log.warning(said)
        if report is not None:
            report(said)
        break
    current = dict(table.schema.options)
    differing = {key: (current.get(key), value) for key, value in wanted.items()
                 if key not in RECONCILED_OPTIONS and current.get(key) != value}
    if differing:
        said = (f"table {table.name} exists with other options than its declaration asks for, which decide "
                "how its files are laid out or merged; keeping them: "
                + ", ".join(f"{k}={have!r} (wanted {want!r})" for k, (have, want) in differing.items()))
        log.warning(said)
        if report is not None:
            report(said)
    return table
