"""One measured step of paimon_core (ours), in a fresh process (run by append_bench.py).

    python bench_ours.py STEP --input DATA.arrow --target WAREHOUSE [--buffer "64 mb"] [--profile OUT]
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import bench_common as bc
import pyarrow as pa

import paimon_core

OPTIONS = {"bucket": "-1"}
# pyarrow imports pandas on its first pa.array() call, and pyarrow.dataset (which brings pandas too)
# on the first Table.filter(Expression). paimon_core makes both calls inside the step, which adds
# about 0.25 s to the first write or filtered read of a process. Import them here so that imports
# stay outside the timer, as they do for the other engines (pypaimon imports both at import time).
importlib.import_module("pyarrow.dataset")


def _create_table(target: Path, options: dict[str, str]) -> paimon_core.Table:
    catalog = paimon_core.Catalog(str(target))
    catalog.create_database("bench", exist_ok=True)
    return catalog.create_table(bc.TABLE, schema=bc.SCHEMA, partition_keys=["dt"], options=options)


def _committed_rows(table: paimon_core.Table) -> dict[str, int]:
    return {"rows": sum(f.row_count for f in table.files())}


def write(args: argparse.Namespace) -> None:
    data = bc.load_mapped(args.input)
    table = _create_table(args.target, OPTIONS)
    _, timing = bc.measure(lambda: table.write(data), args.profile)
    bc.report(timing, _committed_rows(table))


def stream(args: argparse.Namespace) -> None:
    """Ingest batch by batch through one writer and commit once.

    The batches are read with plain file reads, not through the memory map: a batch is then
    resident only while it is written, so peak RSS shows the writer's own memory.
    """
    table = _create_table(args.target, {**OPTIONS, "write-buffer-size": args.buffer})
    reader = pa.ipc.open_file(pa.OSFile(str(args.input)))

    def ingest() -> None:
        with table.new_write() as writer:
            for index in range(reader.num_record_batches):
                writer.write(reader.get_batch(index))
            writer.commit()

    _, timing = bc.measure(ingest, args.profile)
    bc.report(timing, _committed_rows(table))


def read(args: argparse.Namespace) -> None:
    table = paimon_core.Catalog(str(args.target)).get_table(bc.TABLE)
    bc.report_read(table.read, args.profile)


def filtered_read(args: argparse.Namespace) -> None:
    table = paimon_core.Catalog(str(args.target)).get_table(bc.TABLE)
    condition = [("dt", "=", bc.FILTER_DAY), ("level", "=", bc.FILTER_LEVEL)]
    bc.report_read(lambda: table.read(filter=condition), args.profile)


if __name__ == "__main__":
    bc.run_step(__doc__, {"write": write, "stream": stream, "read": read, "filtered_read": filtered_read})
