"""The layers of docs/architecture.md ("Layering"): cluster_state at the bottom (kazoo kept out of
its pure code), executor above it, daemons on top; a layer never imports one above it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)

REPO = Path(__file__).resolve().parents[2]


def imported_after(code: str) -> set[str]:
    probe = code + "\nimport sys\nprint(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=20,
                         check=True)
    return set(out.stdout.split())


@pytest.mark.cluster  # starts a process
def test_package_import_pulls_in_neither_kazoo_nor_upper_layers():
    modules = imported_after(
        "import cluster_state, cluster_state.local_state, cluster_state.codec, cluster_state.watchbook,"
        " cluster_state.zkserver")
    assert not modules & {"kazoo", "executor", "daemons", "zmq"}


@pytest.mark.cluster  # starts a process
def test_zookeeper_client_imports_no_upper_layers():
    modules = imported_after("import cluster_state.zk")
    assert "kazoo" in modules
    assert not modules & {"executor", "daemons"}


def imported_names(path: Path, root: Path = REPO) -> set[str]:
    """Every module an import statement of `path` names, at module level or inside functions
    (relative imports resolved against the file's package)."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            names.add(".".join((*base, *(node.module.split(".") if node.module else ()))))
    return names


def upward_imports(layer: str, above: set[str], root: Path = REPO) -> list[str]:
    """`file imports module` for each import in `layer`'s files of a module in `above`."""
    return sorted(f"{path.relative_to(root).as_posix()} imports {name}"
                  for path in (root / layer).rglob("*.py")
                  for name in imported_names(path, root) if name.split(".")[0] in above)


def test_executor_never_imports_daemons():
    assert upward_imports("executor", {"daemons"}) == []


def test_cluster_state_never_imports_executor_or_daemons():
    assert upward_imports("cluster_state", {"executor", "daemons"}) == []


def test_the_scan_sees_imports_inside_functions_and_relative_ones(tmp_path):
    (tmp_path / "executor" / "sub").mkdir(parents=True)
    module = tmp_path / "executor" / "sub" / "m.py"
    module.write_text("import os\n\ndef f():\n    from daemons.supervisor import launcher\n"
                      "    from .. import worker\n    from .sibling import x\n")
    assert upward_imports("executor", {"daemons"}, tmp_path) == ["executor/sub/m.py imports daemons.supervisor"]
    assert imported_names(module, tmp_path) == {"os", "daemons.supervisor", "executor", "executor.sub.sibling"}


def package_imports(root: Path = REPO) -> dict[str, set[str]]:
    """For each package under daemons/, the other daemons/ packages its files import."""
    daemons = root / "daemons"
    packages = sorted(p.name for p in daemons.iterdir() if (p / "__init__.py").is_file())
    found: dict[str, set[str]] = {p: set() for p in packages}
    for package in packages:
        for path in (daemons / package).rglob("*.py"):
            for name in imported_names(path, root):
                parts = name.split(".")
                if len(parts) > 1 and parts[0] == "daemons" and parts[1] in found and parts[1] != package:
                    found[package].add(parts[1])
    return found


def test_nimbus_and_supervisor_never_import_each_other():
    # What both need (the chunked code transfer, the back-off) lives in daemons/rpc/ and daemons/backoff.py.
    imports = package_imports()
    assert "supervisor" not in imports["nimbus"] and "nimbus" not in imports["supervisor"], imports


def test_no_two_daemon_packages_import_each_other():
    imports = package_imports()
    mutual = sorted(f"{a} <-> {b}" for a in imports for b in imports[a] if a < b and a in imports.get(b, ()))
    assert mutual == [], imports


def test_only_the_commands_that_start_the_ui_import_it():
    importers = sorted(path.relative_to(REPO).as_posix()
                       for top in ("daemons", "executor", "cluster_state") for path in (REPO / top).rglob("*.py")
                       if not path.is_relative_to(REPO / "daemons" / "ui")
                       and any(n == "daemons.ui" or n.startswith("daemons.ui.") for n in imported_names(path)))
    # `storm-py ui` and `storm-py local --ui-port`; the views they share with `monitor` are daemons/reports/.
    assert importers == ["daemons/cli_daemons.py", "daemons/cli_local.py"]
