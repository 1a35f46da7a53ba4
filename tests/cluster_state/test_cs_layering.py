"""cluster_state stays at the bottom of the dependency chain and keeps kazoo out of pure code."""

from __future__ import annotations

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


def test_package_import_pulls_in_neither_kazoo_nor_upper_layers():
    modules = imported_after(
        "import cluster_state, cluster_state.local_state, cluster_state.codec, cluster_state.watchbook,"
        " cluster_state.zkserver")
    assert not modules & {"kazoo", "executor", "daemons", "zmq"}


def test_zookeeper_client_imports_no_upper_layers():
    modules = imported_after("import cluster_state.zk")
    assert "kazoo" in modules
    assert not modules & {"executor", "daemons"}
