"""The topology and worker packages import without cycles (module- and function-level imports;
imports under ``if TYPE_CHECKING`` are for annotations only and do not count)."""

from __future__ import annotations

import ast
from pathlib import Path

import tuplemesh

ROOT = Path(tuplemesh.__file__).parent
#: Packages checked, and modules left out (the worker process entry point moves out of worker/).
PACKAGES = ("topology", "worker", "acking")
EXCLUDED = {"tuplemesh.worker.process"}


def _module_name(path: Path) -> str:
    parts = ["tuplemesh", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, known: set[str], importer: str = "") -> set[str]:
    """Modules in ``known`` that ``tree`` (module ``importer``) imports outside ``if TYPE_CHECKING``
    blocks. Importing ``pkg.mod`` from outside ``pkg`` also runs ``pkg/__init__``: that counts too."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in known else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    for name in list(found):
        package = name.rpartition(".")[0]
        while package and not (importer + ".").startswith(package + "."):
            found.add(package)
            package = package.rpartition(".")[0]
    return found & known


def import_graph() -> dict[str, set[str]]:
    paths = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    modules = {_module_name(p): p for p in paths}
    modules = {m: p for m, p in modules.items() if m not in EXCLUDED}
    known = set(modules)
    return {m: _imports(ast.parse(p.read_text()), known, m) - {m} for m, p in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = walk(target)
                if cycle:
                    return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = walk(module)
            if cycle:
                return cycle
    return None


def test_topology_worker_and_acking_have_no_import_cycle() -> None:
    graph = import_graph()
    assert "tuplemesh.topology.builder" in graph and "tuplemesh.worker.executor" in graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_walk_reports_a_cycle_and_ignores_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg import b\n"
        "def f():\n    from pkg import c\n"
    )
    known = {"pkg.b", "pkg.c"}
    assert _imports(ast.parse(source), known) == {"pkg.c"}
    assert _imports(ast.parse("import pkg.sub.m\n"), {"pkg.sub", "pkg.sub.m"}, "other.x") == {
        "pkg.sub",
        "pkg.sub.m",
    }
    assert _imports(ast.parse("import pkg.sub.m\n"), {"pkg.sub", "pkg.sub.m"}, "pkg.sub.y") == {"pkg.sub.m"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_executor_does_not_know_the_worker() -> None:
    source = (ROOT / "worker" / "executor.py").read_text()
    assert "tuplemesh.worker.worker" not in source
    assert "Worker" not in {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}
