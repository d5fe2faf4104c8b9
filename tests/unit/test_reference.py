"""``pipelines/REFERENCE.md``: its field tables are what the code declares, and each of its example
tables loads as written (all of them together too, as one code location's)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from pipelines import reference
from pipelines.component import table_spec
from pipelines.demo.order_source import OrderEventSource
from pipelines.factory import paimon_definitions

EXAMPLE = re.compile(r"<!-- reference-example -->\n```yaml\n(?P<body>.*?)```", re.DOTALL)


def examples() -> list[dict[str, object]]:
    found = [yaml.safe_load(m["body"])[0] for m in EXAMPLE.finditer(reference.REFERENCE.read_text())]
    assert len(found) >= 6
    return found


def test_the_field_tables_are_generated_from_the_code() -> None:
    assert reference.current() == reference.generated(), "run: python -m pipelines.reference"


def test_every_field_is_documented() -> None:
    undocumented = [(kind.__name__, name) for kind in reference.schema_classes()
                    for name, _, _, doc in reference.rows(kind) if not doc]
    assert undocumented == []


def test_every_example_loads_as_written_and_all_together(tmp_path: Path) -> None:
    specs = [table_spec(entry) for entry in examples()]

    # The examples' functions are the demo's; one asks for its order source by parameter.
    definitions = paimon_definitions(specs, warehouse=str(tmp_path / "warehouse"),
                                     resources={"order_source": OrderEventSource()})

    assert {spec.key for spec in definitions.resolve_all_asset_specs()} == {spec.key for spec in specs}
    kinds = {spec.partitions.kind for spec in specs}
    sources = {("landing" if s.ingestion.landing else "changes" if s.ingestion.changes_of else "function")
               for s in specs if s.ingestion is not None}
    assert {"daily", "hourly", "static", "none"} <= kinds and sources == {"landing", "changes", "function"}
    formats = {s.ingestion.landing.format or "parquet" for s in specs if s.ingestion and s.ingestion.landing}
    assert formats == {"parquet", "csv", "jsonl"}
