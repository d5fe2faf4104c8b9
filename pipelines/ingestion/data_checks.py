"""The data check a spec declares: each written partition has rows, and its columns the values they should.

``DataChecks`` in a table's spec (``checks:`` in YAML) says which columns may not be null, which
must be unique and which may hold only some values. The check reads the partition as readers
see it (merged, for primary-key tables), only the columns it needs, and counts violations with
Arrow kernels. Blocking by default, so downstream assets are not built from a partition that
fails it.
"""

# No `from __future__ import annotations`: Dagster reads the context and resource annotations
# of decorated functions as real types when the decorator runs.

import warnings
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pac

from pipelines.names import DATA_CHECK
from pipelines.spec.declaration import PaimonTableSpec
from pipelines.spec.parts import DataChecks
from pipelines.target import TableTarget

VALUES_SHOWN = 5


def violations(data: pa.Table, checks: DataChecks) -> tuple[dict[str, Any], list[str]]:
    """Counts per rule, and one line per failed rule (pure: the check's whole verdict)."""
    counts: dict[str, Any] = {"rows": data.num_rows}
    problems = [] if data.num_rows >= checks.min_rows else [f"{data.num_rows} row(s), fewer than {checks.min_rows}"]
    for column in checks.not_null:
        nulls = data[column].null_count
        counts[f"null_{column}"] = nulls
        if nulls:
            problems.append(f"{nulls} null {column}")
    for column in checks.unique:
        duplicates = data.num_rows - pac.count_distinct(data[column], mode="all").as_py()
        counts[f"duplicate_{column}"] = duplicates
        if duplicates:
            problems.append(f"{duplicates} duplicate {column}")
    for column, allowed in checks.accepted_values.items():
        ok = pac.fill_null(pac.is_in(data[column], value_set=pa.array(list(allowed), data[column].type)), False)
        bad = data.num_rows - pac.sum(ok).as_py() if data.num_rows else 0
        counts[f"unexpected_{column}"] = bad
        if bad:
            sample = pac.unique(data[column].filter(pac.invert(ok))).to_pylist()[:VALUES_SHOWN]
            problems.append(f"{bad} {column} not in {list(allowed)} (e.g. {sample})")
    return counts, problems


def data_check(spec: PaimonTableSpec, target: TableTarget) -> dg.AssetChecksDefinition:
    """``partition_valid`` of one table (partitioned like its asset)."""
    checks = spec.checks
    assert checks is not None
    columns = sorted({*checks.not_null, *checks.unique, *checks.accepted_values}) or list(spec.primary_key[:1]) or [
        spec.column_list[0].name]
    rules = ([f"not null: {', '.join(checks.not_null)}"] if checks.not_null else []) + (
        [f"unique: {', '.join(checks.unique)}"] if checks.unique else []) + [
        f"{column} in {list(values)}" for column, values in checks.accepted_values.items()]
    # Partitioned asset checks are a preview feature in Dagster 1.13; the check must know its
    # partition, so the dependency is deliberate and acknowledged here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)

        # A generator: in a run of several partitions it yields an evaluation per partition, which
        # Dagster's execution takes though the decorator's annotation names only AssetCheckResult.
        @dg.asset_check(asset=spec.key, name=DATA_CHECK, partitions_def=spec.partitions_def(),  # type: ignore[arg-type]
                        required_resource_keys={target.catalog_key},
                        blocking=checks.blocking,
                        description=f"The written partition of {spec.table} has at least {checks.min_rows} row(s)"
                        + (f"; {'; '.join(rules)}" if rules else "") + " (as readers see it).")
        def _check(context: dg.AssetCheckExecutionContext
                   ) -> Iterator[dg.AssetCheckResult | dg.AssetCheckEvaluation | dg.Output[None]]:
            table = target.catalog(context).table(spec.table)

            def evaluate(key: str | None) -> tuple[bool, dict[str, Any], str]:
                row_filter = target.mapping.filter([key]) if target.mapping is not None and key is not None else None
                data = table.read(columns, row_filter)
                counts, problems = violations(data, checks)
                return not problems, counts, "; ".join(problems) or f"{data.num_rows:,} rows, all rules hold"

            if context.has_partition_key or not context.has_partition_key_range:
                passed, counts, said = evaluate(context.partition_key if context.has_partition_key else None)
                yield dg.AssetCheckResult(passed=passed, metadata=counts, description=said)
                return
            # A run of several partitions: one evaluation per partition, each under its own key
            # (an AssetCheckResult would be recorded once, for no partition).
            for key in context.partition_keys:
                passed, counts, said = evaluate(key)
                yield dg.AssetCheckEvaluation(asset_key=spec.key, check_name=DATA_CHECK, passed=passed,
                                              metadata=counts, description=f"{key}: {said}", partition=key,
                                              blocking=checks.blocking)
            yield dg.Output(None)

    return _check
