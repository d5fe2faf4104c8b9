"""Runs inside .venv-oracle with pypaimon-rust 0.4.0 (Apache Paimon's Rust reader): batch reads.

Usage: ``python rust_driver.py SPEC.json RESULT.json`` (or ``--serve``) with the step format of the other drivers;
only ``read`` (at ``snapshot_id`` or ``tag``) is offered. This file must not import paimon_core.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pyarrow import ipc
from pypaimon_rust.datafusion import PaimonCatalog
from spec_server import main


def save(table: pa.Table, path: str) -> None:
    with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def read(catalog: Any, step: dict[str, Any]) -> dict[str, Any]:
    options = dict(step.get("options") or {})
    if step.get("snapshot_id") is not None:
        options["scan.snapshot-id"] = str(step["snapshot_id"])
    if step.get("tag") is not None:
        options["scan.tag-name"] = step["tag"]
    builder = catalog.get_table(step["table"]).new_read_builder(options or None)
    splits = builder.new_scan().plan().splits()
    batches = builder.new_read().read(splits)
    result = pa.Table.from_batches(batches) if batches else pa.table({})
    if step.get("out"):
        save(result, step["out"])
    return {"rows": result.num_rows, "splits": len(splits)}


def run_spec(spec_path: str, result_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    catalog = PaimonCatalog({"warehouse": spec["warehouse"], **spec.get("catalog_options", {})})
    results = []
    for step in spec["steps"]:
        if step["op"] != "read":
            raise ValueError(f"the Rust driver only reads, not {step['op']!r}")
        results.append(read(catalog, step))
    with open(result_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(run_spec)
