"""What ``dg scaffold defs pipelines.component.PaimonTables <folder>`` writes: a commented
``defs.yaml`` whose example table loads as it is (no code of the user's needed: its rows come
from files landed in the project), for the user to change into theirs."""

from __future__ import annotations

import re

import dagster as dg

EXAMPLE = """\
# Paimon tables: each gets its asset, ingestion job, compaction sensor and jobs, maintenance
# schedules and checks. Every field, documented:
#   dg utils inspect-component {type} --defs-yaml-schema
type: {type}
attributes:
  # Where the tables live: a path (relative: the project's), a file:// URI or an fsspec URL such
  # as s3://bucket/warehouse; "{{{{ env.PAIMON_WAREHOUSE }}}}" reads it from the environment.
  warehouse: warehouse
  tables:
    # An append table of events landed as Parquet files, a folder per day. Drop files into
    # landing/events/dt=2024-01-01/ and its landing sensor ingests the day.
    - table: {database}.events
      description: Events landed as Parquet files, one folder per day.
      columns:
        - {{name: ts, type: TIMESTAMP(6), description: When the event happened}}
        - {{name: name, type: STRING}}
        - {{name: dt, type: STRING, description: The day (partition)}}
      partition_keys: [dt]
      partitions: {{kind: daily, start: "2024-01-01"}}
      ingestion:
        mode: overwrite  # re-running a day replaces it
        landing: {{path: "{{{{ context.project_root }}}}/landing/events/dt={{partition}}/*.parquet"}}
      checks: {{not_null: [ts]}}
    # A primary-key table fed by your function (module:function returning the day's rows):
    # - table: {database}.customers
    #   columns:
    #     - {{name: dt, type: STRING NOT NULL}}
    #     - {{name: id, type: BIGINT NOT NULL}}
    #     - {{name: name, type: STRING}}
    #   primary_key: [dt, id]
    #   partition_keys: [dt]
    #   partitions: {{kind: daily, start: "2024-01-01"}}
    #   ingestion: {{mode: upsert, function: "my_project.sources:customers"}}
"""


def database_name(folder: str) -> str:
    """The example's database: the folder's name as an identifier (``team-a`` -> ``team_a``)."""
    name = re.sub(r"\W", "_", folder).strip("_").lower() or "lake"
    return name if not name[0].isdigit() else f"db_{name}"


class PaimonTablesScaffolder(dg.Scaffolder):
    """Writes the example above (YAML), or Dagster's default Python stub for ``--format python``."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        if request.scaffold_format != "yaml":
            dg.scaffold_component(request)
            return
        text = EXAMPLE.format(type=request.type_name, database=database_name(request.target_path.name))
        if request.append:
            with request.target_path.open("a") as out:
                out.write("---\n" + text)
        else:
            (request.target_path / "defs.yaml").write_text(text)
