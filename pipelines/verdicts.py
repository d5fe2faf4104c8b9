"""A check's verdict, as every check of the integration gives it: one value, two Dagster forms.

The same verdict is a check result when Dagster runs the check on the asset, and an evaluation
when a compaction or maintenance run records it after changing the table; the pure functions
that judge a table (LSM shape, retention, orphans) return this and nothing of Dagster's runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg

from resources.metadata import plottable


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One check's verdict, convertible to a check result (in a check) or evaluation (in an op)."""

    name: str
    passed: bool
    severity: dg.AssetCheckSeverity
    description: str
    metadata: dict[str, Any]
    # The numbers the check's page charts over its evaluations; the others (settings, ids) are
    # shown as text, so no plot draws a constant.
    charted: frozenset[str] = frozenset()

    def shown(self) -> dict[str, Any]:
        """The metadata as the UI shows it: charted numbers as numbers, other numbers as text."""
        return plottable(self.metadata, self.charted)

    def result(self, asset_key: dg.AssetKey) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(asset_key=asset_key, check_name=self.name, passed=self.passed,
                                   severity=self.severity, description=self.description, metadata=self.shown())

    def evaluation(self, asset_key: dg.AssetKey) -> dg.AssetCheckEvaluation:
        return dg.AssetCheckEvaluation(asset_key=asset_key, check_name=self.name, passed=self.passed,
                                       severity=self.severity, description=self.description,
                                       metadata=self.shown())
