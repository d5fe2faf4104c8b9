"""Loading a ``dg`` project's defs folder as a code location on a warehouse: the demo's
(``pipelines.definitions``), or another project's (the tests' fixture project).

The warehouse is ``$PAIMON_WAREHOUSE`` (a path or fsspec URL), defaulting to ``warehouse/`` at
the repository root; on S3 set ``$PAIMON_S3_ENDPOINT_URL`` (and the AWS keys) for an
S3-compatible store. Importing this module loads nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg

from pipelines.factory import catalog_for, paimon_resources_of

REPO_ROOT = Path(__file__).resolve().parents[1]
WAREHOUSE_ENV = "PAIMON_WAREHOUSE"
ENDPOINT_ENV = "PAIMON_S3_ENDPOINT_URL"


def default_warehouse() -> str:
    """``$PAIMON_WAREHOUSE`` (relative paths against the current directory) or ``<repo>/warehouse``.

    Made absolute here because the webserver, daemon and run workers may start in different
    directories and must all see the same tables.
    """
    configured = os.environ.get(WAREHOUSE_ENV, "").strip()
    if not configured:
        return str(REPO_ROOT / "warehouse")
    if "://" in configured:
        return configured
    return str(Path(configured).expanduser().resolve())


def default_storage_options() -> dict[str, Any]:
    """For an S3 warehouse: the endpoint of an S3-compatible store from ``$PAIMON_S3_ENDPOINT_URL``
    (AWS itself needs none) and, when they are set, the keys from ``$AWS_ACCESS_KEY_ID`` /
    ``$AWS_SECRET_ACCESS_KEY`` as ``dg.EnvVar`` (resolved per run, shown by name in the UI; without
    them botocore's own chain applies: environment, profile, instance role)."""
    options: dict[str, Any] = {}
    if os.environ.get(ENDPOINT_ENV):
        options["endpoint_url"] = dg.EnvVar(ENDPOINT_ENV)
    for option, variable in (("key", "AWS_ACCESS_KEY_ID"), ("secret", "AWS_SECRET_ACCESS_KEY")):
        if os.environ.get(variable):
            options[option] = dg.EnvVar(variable)
    return options


def load(warehouse: str | None = None, *, project_root: Path = REPO_ROOT, **resources: Any) -> dg.Definitions:
    """The demo's definitions (or those of another ``dg`` project, ``project_root``) on
    ``warehouse`` (default: ``default_warehouse``), with some of their resources (the demo's
    ``log_source``, ``order_source``) replaced.

    The component reads the warehouse from ``$PAIMON_WAREHOUSE`` when it loads, so it is set
    for the load (and put back after). On an object store the catalog also gets
    ``default_storage_options`` (endpoint and keys as ``dg.EnvVar``).
    """
    target = warehouse or default_warehouse()
    previous = os.environ.get(WAREHOUSE_ENV)
    os.environ[WAREHOUSE_ENV] = target
    try:
        loaded = dg.load_from_defs_folder(path_within_project=project_root)
    finally:
        if previous is None:
            del os.environ[WAREHOUSE_ENV]
        else:
            os.environ[WAREHOUSE_ENV] = previous
    options = default_storage_options() if "://" in target else {}
    if options:
        resources = {**paimon_resources_of(catalog_for(target, options)), **resources}
    if not resources:
        return loaded
    return dg.Definitions(assets=loaded.assets, asset_checks=loaded.asset_checks, jobs=loaded.jobs,
                          schedules=loaded.schedules, sensors=loaded.sensors, executor=loaded.executor,
                          loggers=loaded.loggers, resources={**(loaded.resources or {}), **resources})
