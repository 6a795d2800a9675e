"""No import cycles in src/attnkit: every module's imports, read with ``ast``, form a DAG.

An edge A -> B means module A imports module B (``import B``, ``from B import x``, and
``from B import x`` where ``B.x`` is itself a module counts as A -> B.x). Imports inside functions
count too: a lazy import hides a cycle from Python, not from a reader. Edges to a parent package
(whose ``__init__`` runs first) do not count, or every package re-exporting its modules would be a
cycle. ``if TYPE_CHECKING:`` imports count as well: a reader (and the type checker) follows them.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "attnkit"


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str], src: Path = SRC) -> set[str]:
    """The modules among ``modules`` that ``path`` imports."""
    name = module_name(path, src)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y, from .. import z
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules and m != name and not name.startswith(m + ".")}


def import_graph() -> dict[str, set[str]]:
    paths = sorted((SRC / PACKAGE).rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) for p in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (depth-first search, colouring nodes)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_no_import_cycles_in_attnkit():
    graph = import_graph()
    assert len(graph) > 20 and graph["attnkit.data.corpus"] >= {
        "attnkit.data.readers",
        "attnkit.data.multi30k",
    }
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_data_readers_are_a_leaf_and_multi30k_builds_only_on_them():
    graph = import_graph()
    assert graph["attnkit.data.readers"] <= {"attnkit.errors"}
    assert graph["attnkit.data.multi30k"] <= {"attnkit.data.readers", "attnkit.errors"}


def test_the_cycle_finder_finds_and_names_a_cycle(tmp_path):
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    # The parser on a tiny package: a lazy (function-level) relative import closes a cycle.
    pkg = tmp_path / "src" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .x import f\n")
    (pkg / "x.py").write_text("from pkg import y\n\ndef f():\n    return y\n")
    (pkg / "y.py").write_text("def g():\n    from . import x\n    return x\n")
    paths = sorted(pkg.glob("*.py"))
    modules = {module_name(p, tmp_path / "src") for p in paths}
    graph = {module_name(p, tmp_path / "src"): imports_of(p, modules, tmp_path / "src") for p in paths}
    assert graph == {"pkg": {"pkg.x"}, "pkg.x": {"pkg.y"}, "pkg.y": {"pkg.x"}}
    assert find_cycle(graph) == ["pkg.x", "pkg.y", "pkg.x"]
