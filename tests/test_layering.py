"""The package's layering (DESIGN, Layout): imports inside ``dpsql/`` flow one way.

Every module's imports are read from its source with :mod:`ast`: absolute and relative
imports, at module level and inside functions or ``TYPE_CHECKING`` blocks alike, since a
deferred import hides a circle rather than removing it. ``from a import b`` counts as an
import of the submodule ``a.b`` when there is one, else of ``a``. Importing ``a.b`` also
runs ``a/__init__.py``, but that edge is left out: every module imports ``dpsql.errors``
and so ``dpsql/__init__.py``, which is what a package is for, not a circle between concepts.

The query side never loading the mechanisms, the RNG or the release builder's package is
checked by running it (tests/test_duck.py, tests/test_dbapi.py); here it is also checked on
the source graph, together with the report and the presentation helpers, which only read a
release.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dpsql

ROOT = Path(dpsql.__file__).parent


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of the package at ``root`` that its source imports (anywhere
    in the file)."""
    modules = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def find_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a -> ... -> a) per strongly connected component of more than one module,
    followed by the component's other modules, if any, after a ``"|"``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan; the graph is small, recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    circles = []
    for component in components:
        start = min(component)
        # shortest way back to start inside the component (breadth first)
        previous = {start: None}
        frontier = [start]
        found = None
        while frontier and found is None:
            following = []
            for v in frontier:
                for w in sorted(graph[v] & component):
                    if w == start:
                        found = v
                        break
                    if w not in previous:
                        previous[w] = v
                        following.append(w)
                if found is not None:
                    break
            frontier = following
        path = [found]
        while previous[path[-1]] is not None:
            path.append(previous[path[-1]])
        circle = list(reversed(path)) + [start]
        others = sorted(component - set(circle))
        circles.append(circle + (["|"] + others if others else []))
    return circles


def test_no_import_circle_inside_the_package():
    circles = find_circles(import_graph())
    assert not circles, "import circles: " + "; ".join(_say(c) for c in circles)


def _say(circle: list[str]) -> str:
    if "|" not in circle:
        return " -> ".join(circle)
    cut = circle.index("|")
    return " -> ".join(circle[:cut]) + " (with " + ", ".join(circle[cut + 1:]) + ")"


def test_import_graph_reads_relative_and_deferred_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .b import f\n")
    (pkg / "a.py").write_text("import os\nfrom pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n    return x\n")
    (pkg / "sub" / "c.py").write_text("from . import b, missing\nimport pkg.sub.b as bb\n")
    graph = import_graph(pkg)
    assert graph == {"pkg": set(), "pkg.a": {"pkg.sub.b"}, "pkg.sub": {"pkg.sub.b"},
                     "pkg.sub.b": {"pkg.a"}, "pkg.sub.c": {"pkg.sub", "pkg.sub.b"}}
    assert find_circles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


def test_find_circles_names_the_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert find_circles(graph) == [["a", "b", "c", "a"]]
    graph = {"a": {"b", "c"}, "b": {"a"}, "c": {"a"}, "d": {"d"}}
    assert find_circles(graph) == [["a", "b", "a", "|", "c"]]
    assert _say(find_circles(graph)[0]) == "a -> b -> a (with c)"
    assert find_circles({"a": {"b"}, "b": set()}) == []


# the query side (DESIGN), plus the report, which only reads a release
QUERY_SIDE = ("dpsql.planner", "dpsql.duck", "dpsql.dbapi", "dpsql._dbapi_types", "dpsql.server",
              "dpsql.sqlalchemy", "dpsql.report", "dpsql.present")
FORBIDDEN = ("dpsql.mechanisms", "dpsql.privacy.generator", "dpsql.privacy.samplers",
             "dpsql.release")


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_query_side_sources_import_no_mechanism_rng_nor_builder():
    # everything the query side reaches, following every import in the source (deferred
    # ones included), stays clear of the mechanisms, the RNG and the release builder's package
    graph = import_graph()
    reached = {m for m in graph if _within(m, QUERY_SIDE)}
    todo = list(reached)
    came_from: dict[str, str] = {}
    while todo:
        v = todo.pop()
        for w in graph[v]:
            if w not in reached:
                reached.add(w)
                came_from[w] = v
                todo.append(w)
    bad = []
    for m in sorted(reached):
        if _within(m, FORBIDDEN):
            chain = [m]
            while chain[-1] in came_from:
                chain.append(came_from[chain[-1]])
            bad.append(" <- ".join(chain))
    assert not bad, "query side reaches: " + "; ".join(bad)
