"""The code location ``paimon``: the demo's tables, declared in ``pipelines/demo/defs``.

Load it with ``dagster dev -w workspace.yaml``. The warehouse is ``$PAIMON_WAREHOUSE`` (a path
or fsspec URL), defaulting to ``warehouse/`` at the repository root; on S3 set
``$PAIMON_S3_ENDPOINT_URL`` (and the AWS keys) for an S3-compatible store
(``pipelines.code_location``).
"""

from pipelines.code_location import (
    ENDPOINT_ENV,
    REPO_ROOT,
    WAREHOUSE_ENV,
    default_storage_options,
    default_warehouse,
    load,
)

__all__ = ["ENDPOINT_ENV", "REPO_ROOT", "WAREHOUSE_ENV", "default_storage_options", "default_warehouse", "defs", "load"]

defs = load()
