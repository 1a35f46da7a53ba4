"""PyPI has unrelated packages named `executor` and `daemons`: ours must win."""

from pathlib import Path

import cluster_state
import daemons
import executor

REPO = Path(__file__).resolve().parents[1]


def test_top_level_packages_come_from_this_repository():
    for mod in (executor, daemons, cluster_state):
        assert Path(mod.__file__).resolve().parent.parent == REPO, mod.__file__


def test_conf_defaults_is_the_packaged_defaults():
    packaged = (REPO / "cluster_state" / "defaults.yaml").read_text()
    assert (REPO / "conf" / "defaults.yaml").read_text() == packaged
