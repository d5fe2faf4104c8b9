"""The ``acyclic_modules`` import contract of ``make lint`` finds cycles, and only cycles."""

from __future__ import annotations

import grimp

from tests.support.import_contracts import cycles


def graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    built = grimp.ImportGraph()
    for importer, imported in imports:
        built.add_import(importer=importer, imported=imported)
    return built


def test_a_chain_back_to_its_start_is_a_cycle_and_a_tree_is_not() -> None:
    tree = graph(("p.a", "p.b"), ("p.b", "p.c"), ("p.a", "p.c"))
    assert cycles(tree, "p", set()) == []
    looped = graph(("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"))
    assert cycles(looped, "p", set()) == [["p.a", "p.b", "p.c"]]


def test_a_facade_may_import_what_imports_it() -> None:
    through_facade = graph(("p.table", "p.read"), ("p.read", "p.table"), ("p.read", "p.scan"))
    assert cycles(through_facade, "p", {"p.table"}) == []
    assert cycles(through_facade, "p", set()) == [["p.read", "p.table"]]


def test_modules_outside_the_container_are_not_judged() -> None:
    assert cycles(graph(("q.a", "q.b"), ("q.b", "q.a"), ("p.a", "q.a")), "p", set()) == []
