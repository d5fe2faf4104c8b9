"""Each table and asset key declared once per code location, whichever way it was declared.

The component tree of a loading code location is where its ``PaimonTables`` components and its
``@dg.definitions`` functions meet; each declaration is noted there with its file, so a second
one is refused naming both files instead of Dagster's "Duplicate asset key", which names neither.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from pipelines.errors import TableDefinitionError
from pipelines.spec.declaration import PaimonTableSpec

# Per component tree being loaded: where each table and asset key was declared. Component trees
# are not weakly referable: the last few loads are kept (a reload is a new tree).
_DECLARED: OrderedDict[int, tuple[Any, dict[str, str]]] = OrderedDict()
LOADS_KEPT = 8


def check_declared_once(tables: Sequence[PaimonTableSpec], context: dg.ComponentLoadContext,
                        where: Path | str, *, catalog_key: str, warehouse: str) -> None:
    """Refuse a table or asset key that another declaration of the code location has already, and
    a second warehouse under resource keys another declaration binds to its own."""
    tree = context.component_tree
    if id(tree) not in _DECLARED or _DECLARED[id(tree)][0] is not tree:
        _DECLARED[id(tree)] = (tree, {})
        while len(_DECLARED) > LOADS_KEPT:
            _DECLARED.popitem(last=False)
    seen = _DECLARED[id(tree)][1]
    bound = f"catalog {catalog_key}"
    first_warehouse, first_where = seen.setdefault(bound, f"{warehouse}\n{where}").split("\n", 1)
    if first_warehouse != warehouse:
        raise TableDefinitionError(
            f"{where} binds warehouse {warehouse} to {catalog_key}, which {first_where} binds to warehouse "
            f"{first_warehouse}: give one of them a catalog_name of its own (its resources are then "
            f"{catalog_key}_<name>)", field="catalog_name")
    for spec in tables:
        for name, what in ((spec.table, "table"), (spec.key.to_user_string(), "asset key")):
            first = seen.setdefault(f"{what} {name}", str(where))
            if first != str(where):
                raise TableDefinitionError(f"{what} {name} is declared twice: in {first} and in {where}; declare "
                                           "each table once", field="tables")
