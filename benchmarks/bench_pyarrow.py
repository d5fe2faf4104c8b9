"""One measured step of raw pyarrow Parquet, in a fresh process (run by append_bench.py).

    python bench_pyarrow.py STEP --input DATA.arrow --target DIR [--profile OUT]

A hive-partitioned Parquet dataset, the ceiling a table format on pyarrow is compared with.
"""

from __future__ import annotations

import argparse

import bench_common as bc
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

PARQUET = ds.ParquetFileFormat()
# zstd at Arrow's default level (1, like paimon_core's default), and row groups of at least 128k
# rows: without a minimum write_dataset writes one tiny row group per partition per 64k-row input
# batch, which makes its reads about 3x slower.
PARQUET_OPTIONS = PARQUET.make_write_options(compression="zstd")
MIN_ROWS_PER_GROUP = 1 << 17
# dt is read back as a plain string column, as the Paimon engines return it.
PARTITIONING = ds.partitioning(pa.schema([("dt", pa.string())]), flavor="hive")


def write(args: argparse.Namespace) -> None:
    data = bc.load_mapped(args.input)

    def write_dataset() -> None:
        ds.write_dataset(data, str(args.target), format=PARQUET, file_options=PARQUET_OPTIONS,
                         partitioning=["dt"], partitioning_flavor="hive",
                         min_rows_per_group=MIN_ROWS_PER_GROUP, existing_data_behavior="error")

    _, timing = bc.measure(write_dataset, args.profile)
    rows = ds.dataset(str(args.target), format=PARQUET, partitioning=PARTITIONING).count_rows()
    bc.report(timing, {"rows": rows})


def read(args: argparse.Namespace) -> None:
    bc.report_read(lambda: pq.read_table(str(args.target), partitioning=PARTITIONING), args.profile)


def filtered_read(args: argparse.Namespace) -> None:
    condition = (ds.field("dt") == bc.FILTER_DAY) & (ds.field("level") == bc.FILTER_LEVEL)
    bc.report_read(lambda: pq.read_table(str(args.target), partitioning=PARTITIONING,
                                         filters=condition), args.profile)


if __name__ == "__main__":
    bc.run_step(__doc__, {"write": write, "read": read, "filtered_read": filtered_read})
