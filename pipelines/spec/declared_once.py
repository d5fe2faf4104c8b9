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
                        where: Path | str) -> None:
    """Refuse a table or asset key that another declaration of the code location has already."""
    tree = context.component_tree
    if id(tree) not in _DECLARED or _DECLARED[id(tree)][0] is not tree:
        _DECLARED[id(tree)] = (tree, {})
        while len(_DECLARED) > LOADS_KEPT:
            _DECLARED.popitem(last=False)
    seen = _DECLARED[id(tree)][1]
    for spec in tables:
        for name, what in ((spec.table, "table"), (spec.key.to_user_string(), "asset key")):
            first = seen.setdefault(f"{what} {name}", str(where))
            if first != str(where):
                raise TableDefinitionError(f"{what} {name} is declared twice: in {first} and in {where}; declare "
                                           "each table once", field="tables")
