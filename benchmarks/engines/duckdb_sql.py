"""DuckDB over Paimon's data files: the lookup suite's anchor, run in ``.venv`` (``duckdb``).

It reads the live data files of the table's latest snapshot with the same merge-on-read semantics
as Paimon: the newest ``_SEQUENCE_NUMBER`` of each key, ``-U``/``-D`` rows dropped.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from benchmarks.suites import lookup

VALUE_COLUMNS = ", ".join(lookup.SCHEMA.names)
NEWEST = ("SELECT {cols} FROM (SELECT *, row_number() OVER (PARTITION BY id ORDER BY _SEQUENCE_NUMBER DESC) AS rn "
          "FROM t WHERE {where}) WHERE rn = 1 AND _VALUE_KIND IN (0, 2)")


class Lookup:
    def engine(self, files: list[str], calls: int, reps: int) -> lookup.LookupEngine:
        """Single keys by a parameterised query, batches by a join with a registered key table."""
        con = duckdb.connect()
        con.execute("SET parquet_metadata_cache = true")
        listed = ", ".join(f"'{f}'" for f in files)
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
        one = NEWEST.format(cols=VALUE_COLUMNS, where="id = $1")
        many = NEWEST.format(cols=VALUE_COLUMNS, where="id IN (SELECT id FROM keys)")

        def batch(keys: np.ndarray) -> pa.Table:
            con.register("keys", pa.table({"id": keys}))
            try:
                return con.sql(many).to_arrow_table()
            finally:
                con.unregister("keys")

        def extra() -> dict[str, Any]:
            threads = con.execute("SELECT current_setting('threads')").fetchone()
            return {"duckdb": duckdb.__version__, "threads": threads[0] if threads else None}

        return lookup.LookupEngine("duckdb", lambda k: con.sql(one, params=[k]).to_arrow_table(), batch, calls, 10**9,
                                   reps, extra)


SUITES: dict[str, Any] = {"lookup": Lookup()}
