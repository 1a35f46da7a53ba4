"""No import circle among the project's modules (daemons/, executor/, cluster_state/).

The graph is read from the sources (AST), imports inside functions included: a deferred import
hides a circle from Python's import machinery, not from the design (a base that imports its own
subclasses to choose one, say). Imports under `if TYPE_CHECKING:` are left out: they never run.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("daemons", "executor", "cluster_state")


def module_files(repo: Path, roots=ROOTS) -> dict[str, Path]:
    """Dotted module name -> source file, for every .py under the roots (a package by its name)."""
    mods = {}
    for root in roots:
        for path in sorted((repo / root).rglob("*.py")):
            parts = list(path.relative_to(repo).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes under `if TYPE_CHECKING:` (its body, not its else)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            if isinstance(test, ast.Attribute):  # typing.TYPE_CHECKING
                test = ast.Name(test.attr)
            if isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
                skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The project's modules `name` imports, wherever in it (a module's own packages left out:
    importing a submodule runs its package's __init__ first anyway)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            wanted += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            wanted += [base] + [f"{base}.{a.name}" for a in node.names]  # `from pkg import module` too
    found = set()
    for target in wanted:
        while target and target not in mods:  # `from m import a_function`: the module m
            target = target.rpartition(".")[0]
        if target and target != name and not name.startswith(target + "."):
            found.add(target)
    return found


def import_graph(repo: Path, roots=ROOTS) -> dict[str, set[str]]:
    mods = module_files(repo, roots)
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_project_has_no_import_circle():
    graph = import_graph(REPO)
    assert "executor.adapting" in graph["executor.worker"]  # the graph is read, not empty
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(f"  {len(c)}: {', '.join(c)}" for c in found)


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, set[str]]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return import_graph(tmp_path, roots=("pkg",))


def test_a_circle_through_an_import_inside_a_function_is_found(tmp_path):
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": """
            def choose():
                from pkg.sub import Sub  # the base picks among its subclasses
                return Sub
            """,
        "pkg/sub.py": "from .base import choose\n",
        "pkg/other.py": "import pkg.sub\n",
    })
    assert graph["pkg.sub"] == {"pkg.base"}  # the relative import, resolved
    assert circles(graph) == [["pkg.base", "pkg.sub"]]


def test_type_checking_imports_are_no_circle(tmp_path):
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pkg.b import B
            """,
        "pkg/b.py": "from pkg.a import A\n",
    })
    assert graph["pkg.a"] == set()
    assert circles(graph) == []


def test_the_else_of_type_checking_runs_and_counts(tmp_path):
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": """
            import typing
            if typing.TYPE_CHECKING:
                pass
            else:
                from pkg import b
            """,
        "pkg/b.py": "from pkg.a import A\n",
    })
    assert circles(graph) == [["pkg.a", "pkg.b"]]
