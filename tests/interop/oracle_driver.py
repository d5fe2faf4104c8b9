"""Runs inside .venv-oracle (pypaimon 2.1.0): performs the steps of a JSON spec with pypaimon.

Usage: ``python oracle_driver.py SPEC.json RESULT.json``, or ``--serve`` (see spec_server.py).
Tables travel as Arrow IPC files, which every pyarrow version reads. This file must not import paimon_core.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pyarrow import ipc
from pypaimon import CatalogFactory, Schema
from pypaimon.schema.data_types import AtomicType
from pypaimon.schema.schema_change import SchemaChange
from spec_server import main


def load(path: str) -> pa.Table:
    with pa.memory_map(path) as source:
        return ipc.open_file(source).read_all()


def save(table: pa.Table, path: str) -> None:
    with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def predicate(builder: Any, terms: list[list[Any]]) -> Any:
    made = []
    for column, op, value in terms:
        make = {"=": builder.equal, "!=": builder.not_equal, "<": builder.less_than,
                "<=": builder.less_or_equal, ">": builder.greater_than,
                ">=": builder.greater_or_equal, "in": builder.is_in}[op]
        made.append(make(column, value))
    return made[0] if len(made) == 1 else builder.and_predicates(made)


def read(table: Any, step: dict[str, Any]) -> dict[str, Any]:
    options = dict(step.get("options") or {})
    if step.get("snapshot_id") is not None:
        options["scan.snapshot-id"] = str(step["snapshot_id"])
    if step.get("tag") is not None:
        options["scan.tag-name"] = step["tag"]
    if options:
        table = table.copy(options)
    builder = table.new_read_builder()
    if step.get("filter"):
        builder = builder.with_filter(predicate(builder.new_predicate_builder(), step["filter"]))
    if step.get("columns"):
        builder = builder.with_projection(step["columns"])
    splits = builder.new_scan().plan().splits()
    result = builder.new_read().to_arrow(splits)
    if result is None:
        result = pa.table({})
    if step.get("out"):
        save(result, step["out"])
    files = sum(len(s.files) for s in splits)
    return {"rows": result.num_rows, "files": files, "splits": len(splits)}


def placement(table: Any, step: dict[str, Any]) -> list[dict[str, Any]]:
    builder = table.new_read_builder().with_projection([step["column"]])
    out = []
    for split in builder.new_scan().plan().splits():
        data = builder.new_read().to_arrow([split])
        out.append({"partition": [str(v) for v in split.partition.values], "bucket": split.bucket,
                    "values": sorted(data.column(0).to_pylist())})
    return out


def alter(catalog: Any, step: dict[str, Any]) -> None:
    changes = []
    for change in step["changes"]:
        op = change["op"]
        if op == "add_column":
            changes.append(SchemaChange.add_column(change["name"], AtomicType(change["type"])))
        elif op == "rename_column":
            changes.append(SchemaChange.rename_column(change["name"], change["new_name"]))
        elif op == "update_column_type":
            changes.append(SchemaChange.update_column_type(change["name"], AtomicType(change["type"])))
        elif op == "drop_column":
            changes.append(SchemaChange.drop_column(change["name"]))
        elif op == "set_option":
            changes.append(SchemaChange.set_option(change["key"], change["value"]))
        else:
            raise ValueError(f"unknown change {op}")
    catalog.alter_table(step["table"], changes, False)


def changes(table: Any, step: dict[str, Any]) -> list[int]:
    """pypaimon's streaming read from snapshot ``start`` through ``end`` (both having changes):
    one Arrow file per plan (with ``_row_kind``); returns the snapshot id of each."""
    builder = table.new_stream_read_builder().with_include_row_kind(True).with_poll_interval_ms(50)
    scan = builder.new_streaming_scan()
    scan._prefetch_enabled = False
    scan._diff_threshold = 1 << 30  # a plan per snapshot, never a merged catch-up
    scan.next_snapshot_id = step["start"]
    read = builder.new_read()
    ids = []
    plans = scan.stream_sync()
    while scan.next_snapshot_id <= step["end"]:
        plan = next(plans)
        result = read.to_arrow(plan.splits())
        save(result if result is not None else pa.table({}), f"{step['out']}-{len(ids)}")
        ids.append(scan.next_snapshot_id - 1)
    return ids


def write(catalog: Any, step: dict[str, Any]) -> None:
    table = catalog.get_table(step["table"])
    builder = table.new_batch_write_builder()
    if step.get("overwrite") is not None:
        builder = builder.overwrite(step["overwrite"])
    writer, commit = builder.new_write(), builder.new_commit()
    writer.write_arrow(load(step["data"]))
    commit.commit(writer.prepare_commit())
    writer.close()
    commit.close()


def delete(catalog: Any, step: dict[str, Any]) -> None:
    table = catalog.get_table(step["table"])
    builder = table.new_batch_write_builder()
    pred = predicate(table.new_read_builder().new_predicate_builder(), step["filter"])
    messages = builder.new_update().delete_by_predicate(pred)
    commit = builder.new_commit()
    commit.commit(messages)
    commit.close()


def run_step(catalog: Any, step: dict[str, Any]) -> Any:
    op = step["op"]
    if op == "create_database":
        catalog.create_database(step["name"], True)
    elif op == "create_table":
        schema = load(step["schema"]).schema
        catalog.create_table(step["table"], Schema.from_pyarrow_schema(
            schema, partition_keys=step.get("partition_keys") or None,
            primary_keys=step.get("primary_keys") or None, options=step.get("options") or {}), False)
    elif op == "write":
        write(catalog, step)
    elif op == "alter":
        alter(catalog, step)
    elif op == "delete":
        delete(catalog, step)
    elif op == "create_tag":
        catalog.get_table(step["table"]).create_tag(step["name"], step.get("snapshot_id"))
    elif op == "read":
        return read(catalog.get_table(step["table"]), step)
    elif op == "changes":
        return changes(catalog.get_table(step["table"]), step)
    elif op == "placement":
        return placement(catalog.get_table(step["table"]), step)
    elif op == "snapshot_ids":
        table = catalog.get_table(step["table"])
        latest = table.snapshot_manager().get_latest_snapshot()
        return list(range(1, latest.id + 1)) if latest else []
    else:
        raise ValueError(f"unknown step {op}")
    return None


def run_spec(spec_path: str, result_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    catalog = CatalogFactory.create({"warehouse": spec["warehouse"], **spec.get("catalog_options", {})})
    results = [run_step(catalog, step) for step in spec["steps"]]
    with open(result_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(run_spec)
