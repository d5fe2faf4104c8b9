"""An import-linter contract its built-in ones lack: modules that import each other in no cycle.

import-linter's ``acyclic_siblings`` judges packages as wholes; ``paimon_core``'s read, write
and compaction packages each use parts of the others, as Java Paimon's do, so that contract
would call them cyclic although no module imports itself. This contract asks the question that
matters when reading or moving code: is there a chain of imports from a module back to itself?
``facades`` (here ``paimon_core.table``, the public ``Table``, and the package root that
re-exports it) may import anything and are left out of the graph.
"""

from __future__ import annotations

import grimp
from importlinter import Contract, ContractCheck, fields, output


def cycles(graph: grimp.ImportGraph, container: str, facades: set[str]) -> list[list[str]]:
    """The strongly connected groups of more than one module under ``container`` (Tarjan)."""
    modules = sorted(m for m in graph.modules if (m == container or m.startswith(container + ".")) and m not in facades)
    members = set(modules)
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in members) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(root: str) -> None:
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(edges[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for module in modules:
        if module not in index:
            visit(module)
    return found


class AcyclicModulesContract(Contract):
    """``container``'s modules, ``facades`` left out, import each other in no cycle."""

    type_name = "acyclic_modules"

    container = fields.StringField()
    facades = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        facades = set(self.facades or [])  # type: ignore[arg-type]
        found = cycles(graph, str(self.container), facades)
        details = [[(m, sorted(i for i in graph.find_modules_directly_imported_by(m) if i in group))
                    for m in group] for group in found]
        return ContractCheck(kept=not found, warnings=[], metadata={"cycles": details})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for group in check.metadata["cycles"]:
            output.print_error("These modules import each other in a cycle:")
            for module, imported in group:
                output.print_error(f"-   {module} -> {', '.join(imported)}", bold=False)
            output.new_line()
