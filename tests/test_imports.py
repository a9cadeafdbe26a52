"""No import cycles between the modules of ``tuplemesh``.

A cycle makes import order matter: whichever module a caller imports first decides which of the
two sees the other half-initialised, and two modules that need each other are one concept split
in two. Every ``import`` statement counts: at module level, inside a function (a deferred import
hides a cycle, it does not remove it) and under ``if TYPE_CHECKING:`` (an annotation that names a
module's user is the same dependency, only unchecked at run time). Importing ``pkg.mod`` from
outside ``pkg`` first runs ``pkg/__init__.py``, so that counts as importing ``pkg`` too.

Packages are checked as wholes as well: ``a.x -> b.y`` and ``b.z -> a.w`` is no module cycle, but
it makes packages ``a`` and ``b`` one layer. ``LAYERS`` states the order: ``core`` (the emit path
and the snapshot types) below the features, the features below ``worker`` (the runtime), and
``worker`` imported only by what builds worker processes (``server``, the CLI, the launcher).
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "tuplemesh"
SOURCE_ROOT = Path(__file__).resolve().parents[1] / "services"

Edge = tuple[str, str]
Graph = dict[str, dict[str, int]]  # importer -> {imported module: line of the first such import}


def module_files(root: Path = SOURCE_ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name; a package is named by its ``__init__``."""
    modules = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements anywhere under ``node``."""
    for child in ast.walk(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child


def _absolute_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    anchor = module.split(".")
    if not is_package:
        anchor.pop()
    if node.level > 1:
        anchor = anchor[: -(node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _deepest_module(name: str, modules: dict[str, Path]) -> str | None:
    """The module a dotted name lands in: ``tuplemesh.a.b.attr`` imports module ``tuplemesh.a.b``."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imported_modules(module: str, source: str, modules: dict[str, Path], is_package: bool) -> dict[str, int]:
    """The package's own modules that ``source`` (the text of ``module``) imports, with line numbers."""
    found: dict[str, int] = {}
    for node in _imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = _absolute_base(module, is_package, node)
            # ``from pkg import name`` imports submodule pkg.name when there is one, else pkg itself
            names = [f"{base}.{alias.name}" if alias.name != "*" else base for alias in node.names]
        for name in names:
            target = _deepest_module(name, modules)
            if target is None:
                continue
            for imported in (target, *_packages_run_first(target, module)):
                if imported != module:
                    found.setdefault(imported, node.lineno)
    return found


def _packages_run_first(target: str, importer: str) -> list[str]:
    """The packages whose ``__init__`` importing ``target`` runs: each enclosing package of
    ``target`` that does not also enclose ``importer`` (a module's own packages have already run)."""
    parts = target.split(".")
    enclosing = [".".join(parts[:n]) for n in range(1, len(parts))]
    return [package for package in enclosing if not importer.startswith(package + ".")]


def import_graph(root: Path = SOURCE_ROOT) -> Graph:
    modules = module_files(root)
    return {
        name: imported_modules(name, path.read_text(), modules, path.name == "__init__.py")
        for name, path in modules.items()
    }


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's components with more than one module: each holds at least one cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_path(graph: Graph, start: str, goal: str, within: set[str]) -> list[str]:
    previous: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            path = [node]
            while (back := previous[path[-1]]) is not None:
                path.append(back)
            return path[::-1]
        for nxt in sorted(graph[node]):
            if nxt in within and nxt not in previous:
                previous[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{goal} is not reachable from {start}")  # cannot happen inside a component


def cycles(graph: Graph) -> list[list[str]]:
    """One shortest cycle through every import edge that lies on a cycle, each listed once.

    Covers every edge that takes part in a cycle without enumerating all (exponentially many)
    elementary cycles. A cycle is written starting at its alphabetically first module.
    """
    found: dict[tuple[str, ...], list[str]] = {}
    for component in strongly_connected(graph):
        members = set(component)
        for importer in component:
            for imported in sorted(graph[importer]):
                if imported not in members:
                    continue
                loop = [importer, *_shortest_path(graph, imported, importer, members)[:-1]]
                first = loop.index(min(loop))
                loop = loop[first:] + loop[:first]
                found.setdefault(tuple(loop), loop)
    return sorted(found.values(), key=lambda loop: (len(loop), loop))


def describe(loop: list[str], graph: Graph, modules: dict[str, Path]) -> str:
    steps = []
    for importer, imported in zip(loop, loop[1:] + loop[:1], strict=True):
        where = modules[importer].relative_to(SOURCE_ROOT.parent)
        steps.append(f"    {importer} -> {imported}  ({where}:{graph[importer][imported]})")
    return "\n".join(steps)


def test_no_import_cycles_between_modules() -> None:
    graph = import_graph()
    modules = module_files()
    loops = cycles(graph)
    report = "\n".join(
        f"cycle {n} ({len(loop)} modules):\n{describe(loop, graph, modules)}"
        for n, loop in enumerate(loops, 1)
    )
    assert not loops, f"{len(loops)} import cycle(s) between tuplemesh modules:\n{report}"


def test_graph_sees_every_import_statement_type_checking_ones_too() -> None:
    modules = {
        name: Path(name) for name in ("tuplemesh", "tuplemesh.a", "tuplemesh.b", "tuplemesh.c", "tuplemesh.d")
    }
    source = (
        "from typing import TYPE_CHECKING\n"
        "import tuplemesh.a\n"
        "from . import b\n"
        "if TYPE_CHECKING:\n"
        "    from tuplemesh import c\n"
        "else:\n"
        "    pass\n"
        "def later():\n"
        "    from .d import thing\n"
    )
    assert imported_modules("tuplemesh.x", source, modules, is_package=False) == {
        "tuplemesh.a": 2,
        "tuplemesh.b": 3,
        "tuplemesh.c": 5,
        "tuplemesh.d": 9,
    }


def test_importing_a_module_from_outside_its_package_runs_the_package_first() -> None:
    modules = {
        name: Path(name) for name in ("tuplemesh", "tuplemesh.sub", "tuplemesh.sub.m", "tuplemesh.sub.y")
    }
    source = "import tuplemesh.sub.m\n"
    assert imported_modules("tuplemesh.x", source, modules, is_package=False) == {
        "tuplemesh.sub.m": 1,
        "tuplemesh.sub": 1,
    }
    assert imported_modules("tuplemesh.sub.y", source, modules, is_package=False) == {"tuplemesh.sub.m": 1}


def test_cycles_lists_each_loop_once_from_its_first_module() -> None:
    graph: Graph = {
        "m.a": {"m.b": 1},
        "m.b": {"m.c": 1, "m.a": 2},
        "m.c": {"m.a": 1},
        "m.d": {"m.a": 1},
    }
    assert strongly_connected(graph) == [["m.a", "m.b", "m.c"]]
    assert cycles(graph) == [["m.a", "m.b"], ["m.a", "m.b", "m.c"]]


def test_real_package_graph_has_the_imports_the_sources_show() -> None:
    graph = import_graph()
    assert "tuplemesh.netutil" in graph["tuplemesh.launcher"]
    assert "tuplemesh.netutil" in graph["tuplemesh.worker.local_cluster"]
    assert graph["tuplemesh.netutil"] == {}  # imports only the standard library


#: The packages and modules that build and run a worker: the only importers of ``tuplemesh.worker``.
COMPOSITION_ROOTS = ("tuplemesh.server", "tuplemesh.cli", "tuplemesh.launcher")

#: The packages from the highest layer to the lowest, as docs/concepts.md draws them: a package
#: imports only packages of lower layers. A top-level module (``tuplemesh.config``) is in no layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("tuplemesh.cli",),
    ("tuplemesh.launcher",),
    ("tuplemesh.server", "tuplemesh.spark"),
    ("tuplemesh.ui",),
    ("tuplemesh.worker",),
    (
        "tuplemesh.ticks",
        "tuplemesh.hotkeys",
        "tuplemesh.sampling",
        "tuplemesh.batchtrace",
        "tuplemesh.gateway",
    ),
    ("tuplemesh.windowing", "tuplemesh.metrics"),
    ("tuplemesh.acking", "tuplemesh.state"),
    ("tuplemesh.core",),
    ("tuplemesh.topology", "tuplemesh.transport"),
    ("tuplemesh.disruptor", "tuplemesh.discovery", "tuplemesh.client"),
    ("tuplemesh.v1",),
)


def package_of(module: str) -> str:
    """The unit a package-level check sees: a subpackage (``tuplemesh.worker``) or a top-level
    module (``tuplemesh.config``); the root package ``tuplemesh`` itself stays on its own."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Graph) -> tuple[Graph, dict[Edge, Edge]]:
    """The import graph between packages, and for every package edge one module edge behind it.

    Importing ``tuplemesh.x.y`` runs the root package's ``__init__`` too; that edge is left out:
    the root imports only ``_compiled`` and is run before any of its modules anyway."""
    packages: Graph = {}
    witness: dict[Edge, Edge] = {}
    for importer in sorted(graph):
        source = package_of(importer)
        packages.setdefault(source, {})
        for imported, line in sorted(graph[importer].items()):
            target = package_of(imported)
            if target in (source, PACKAGE):
                continue
            packages[source].setdefault(target, line)
            # name a module inside the imported package rather than its __init__ where one exists
            if witness.get((source, target), ("", target))[1] == target:
                witness[(source, target)] = (importer, imported)
    return packages, witness


def importers_of(graph: Graph, package: str) -> dict[str, list[str]]:
    """Module -> the modules of ``package`` it imports, for every module outside ``package``."""
    found: dict[str, list[str]] = {}
    for importer, imported in sorted(graph.items()):
        if package_of(importer) == package:
            continue
        hits = sorted(name for name in imported if package_of(name) == package)
        if hits:
            found[importer] = hits
    return found


def describe_packages(loop: list[str], graph: Graph, witness: dict[Edge, Edge]) -> str:
    steps = []
    for importer, imported in zip(loop, loop[1:] + loop[:1], strict=True):
        module, target = witness[(importer, imported)]
        steps.append(
            f"    {importer} -> {imported}  (e.g. {module} -> {target}, line {graph[module][target]})"
        )
    return "\n".join(steps)


def test_no_import_cycles_between_packages() -> None:
    graph = import_graph()
    packages, witness = package_graph(graph)
    loops = cycles(packages)
    report = "\n".join(
        f"cycle {n} ({len(loop)} packages):\n{describe_packages(loop, graph, witness)}"
        for n, loop in enumerate(loops, 1)
    )
    assert not loops, f"{len(loops)} import cycle(s) between tuplemesh packages:\n{report}"


def test_every_package_imports_only_lower_layers() -> None:
    layer = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}
    packages, witness = package_graph(import_graph())
    subpackages = {package_of(name) for name in module_files() if name.count(".") >= 2}
    assert sorted(subpackages - set(layer)) == [], "place every package in LAYERS (and docs/concepts.md)"
    upward = [
        f"{importer} -> {imported} (e.g. {' -> '.join(witness[(importer, imported)])})"
        for importer in sorted(packages)
        for imported in sorted(packages[importer])
        if importer in layer and imported in layer and layer[imported] <= layer[importer]
    ]
    assert upward == [], "packages importing their own layer or one above it:\n" + "\n".join(upward)
    assert layer["tuplemesh.core"] > layer["tuplemesh.worker"]


def test_only_the_composition_roots_import_the_worker() -> None:
    importers = importers_of(import_graph(), "tuplemesh.worker")
    others = {
        module: names for module, names in importers.items() if package_of(module) not in COMPOSITION_ROOTS
    }
    assert others == {}, (
        f"only {', '.join(COMPOSITION_ROOTS)} may import tuplemesh.worker; move what these need "
        f"into tuplemesh.core: {others}"
    )
    assert "tuplemesh.server.process" in importers  # the check sees the roots' own imports
    # in a worker process, only its composition root builds on the worker: Admin and /metrics
    # take what they read of it as Protocols (AdminWorker, ObservedWorker)
    assert sorted(m for m in importers if package_of(m) == "tuplemesh.server") == ["tuplemesh.server.process"]


def test_only_the_assembly_builds_a_worker_and_only_feature_spec_reads_the_registry() -> None:
    # one composition root: a worker process and a LocalCluster both build their workers in
    # tuplemesh.worker.assembly, so neither can run a worker with other features than the other;
    # the registry's list is read in one place, which loads it as FeatureSpecs
    builders, namers = [], []
    for name, path in module_files().items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Worker":
                builders.append(name)
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "tuplemesh.registry"
                and any(alias.name == "FEATURES" for alias in node.names)
            ):
                namers.append(name)
    assert builders == ["tuplemesh.worker.assembly"]
    assert namers == ["tuplemesh.core.feature_spec"]


#: What plugs into the worker (through tuplemesh.core.feature, tuplemesh.core.acking and the
#: registry's names), which the worker's own modules therefore never import.
PLUGGED_IN = (
    "tuplemesh.acking",
    "tuplemesh.state",
    "tuplemesh.ticks",
    "tuplemesh.hotkeys",
    "tuplemesh.sampling",
    "tuplemesh.batchtrace",
    "tuplemesh.gateway",
)


def test_the_worker_imports_no_feature_nor_acking_nor_state() -> None:
    graph = import_graph()
    found = {
        module: hits
        for module, imported in sorted(graph.items())
        if package_of(module) == "tuplemesh.worker"
        and (hits := sorted(name for name in imported if package_of(name) in PLUGGED_IN))
    }
    assert found == {}, f"worker modules importing what plugs into them: {found}"
    # nor OpenTelemetry's helpers: its hops' spans come from the tracing feature (HopTracer)
    tracing = sorted(
        m
        for m, imported in graph.items()
        if package_of(m) == "tuplemesh.worker" and "tuplemesh.tracing" in imported
    )
    assert tracing == [], f"worker modules making spans themselves: {tracing}"
    assert any(package_of(m) == "tuplemesh.worker" for m in graph)  # the check sees the worker


def test_package_graph_sees_a_cycle_no_module_cycle_shows() -> None:
    graph: Graph = {
        "tuplemesh.a.x": {"tuplemesh.b.y": 3},
        "tuplemesh.b.y": {},
        "tuplemesh.b.z": {"tuplemesh.a.w": 7},
        "tuplemesh.a.w": {"tuplemesh": 1},
        "tuplemesh.cli": {"tuplemesh.a.x": 2},
    }
    assert cycles(graph) == []
    packages, witness = package_graph(graph)
    assert packages == {
        "tuplemesh.a": {"tuplemesh.b": 3},
        "tuplemesh.b": {"tuplemesh.a": 7},
        "tuplemesh.cli": {"tuplemesh.a": 2},
    }
    assert witness[("tuplemesh.b", "tuplemesh.a")] == ("tuplemesh.b.z", "tuplemesh.a.w")
    assert cycles(packages) == [["tuplemesh.a", "tuplemesh.b"]]
    assert importers_of(graph, "tuplemesh.a") == {
        "tuplemesh.b.z": ["tuplemesh.a.w"],
        "tuplemesh.cli": ["tuplemesh.a.x"],
    }


#: Packages that plug into the worker through tuplemesh.core.feature, named only by the registry.
FEATURE_PACKAGES = (
    "tuplemesh.ticks",
    "tuplemesh.hotkeys",
    "tuplemesh.sampling",
    "tuplemesh.batchtrace",
    "tuplemesh.gateway",
    # checkpointing: the state package is the runtime's too (alignment), its feature module is not
    "tuplemesh.state.feature",
)


def test_features_are_imported_by_nothing_but_named_once_in_the_registry() -> None:
    graph = import_graph()
    files = module_files()
    for package in FEATURE_PACKAGES:
        # (the ticks package's own tests import it: they are outside the package source tree)
        if files[package].name == "__init__.py":
            importers = importers_of(graph, package)
        else:  # a feature module in a package of the runtime's: nothing else imports it
            importers = {
                m: [package] for m, imported in graph.items() if m != package and package in imported
            }
        assert importers == {}, f"{package} is imported outside itself"
    registry = (SOURCE_ROOT / PACKAGE / "registry.py").read_text()
    for package in FEATURE_PACKAGES:
        lines = [
            line
            for line in registry.splitlines()
            if line.strip().startswith((f'FeatureLine("{package}:', f'FeatureLine("{package}.'))
        ]
        assert len(lines) == 1, f"{package} is not registered exactly once"
    for package in FEATURE_PACKAGES:
        own = package.rpartition(".")[2]
        mentions = [
            path.relative_to(SOURCE_ROOT).as_posix()
            for path in sorted((SOURCE_ROOT / PACKAGE).rglob("*.py"))
            if package in path.read_text() and own not in path.relative_to(SOURCE_ROOT).parts
        ]
        assert mentions == ["tuplemesh/registry.py"], f"{package} is named in {mentions}"


def test_hot_keys_plug_in_through_their_package_and_one_registry_line_alone() -> None:
    # the feature interface's proof: per-key observability is written only against it. Its
    # settings, running part, gRPC service (its own proto package), web UI panel (script and
    # style) and metrics all live in tuplemesh/hotkeys (and protos/tuplemesh/hotkeys); no other
    # file of the package (code, page, style, proto) names it but the registry's one line
    root = SOURCE_ROOT.parent
    named = re.compile(r"hot.?keys?", re.IGNORECASE)
    found = []
    for base in (SOURCE_ROOT / PACKAGE, root / "protos"):
        for path in sorted(base.rglob("*")):
            relative = path.relative_to(root).as_posix()
            if (
                not path.is_file()
                or path.suffix not in {".py", ".pyi", ".js", ".css", ".html", ".proto", ".tmpl"}
                or "/hotkeys/" in relative
                or relative.startswith("services/tuplemesh/protos/")  # the link to protos/
            ):
                continue
            found += [
                (relative, line.strip()) for line in path.read_text().splitlines() if named.search(line)
            ]
    assert found == [
        (
            "services/tuplemesh/registry.py",
            'FeatureLine("tuplemesh.hotkeys.feature:FEATURE", '
            'settings="tuplemesh.hotkeys.settings:SETTINGS"),',
        )
    ]
