"""PyPI has unrelated packages named `executor` and `daemons`: ours must win."""

import os
from pathlib import Path

import cluster_state
import daemons
import executor

REPO = Path(__file__).resolve().parents[1]


def test_top_level_packages_come_from_this_repository():
    for mod in (executor, daemons, cluster_state):
        assert Path(mod.__file__).resolve().parent.parent == REPO, mod.__file__


def test_conf_defaults_is_a_symlink_to_the_packaged_defaults():
    # One file, two places: operators read conf/defaults.yaml, the package ships
    # cluster_state/defaults.yaml. A copy could drift; a symlink cannot. (Comments on every
    # key: tests/unit/test_unit_config.py.)
    link = REPO / "conf" / "defaults.yaml"
    packaged = REPO / "cluster_state" / "defaults.yaml"
    assert link.is_symlink(), f"{link} must be a symlink to {packaged}, not a copy"
    assert not Path(os.readlink(link)).is_absolute(), f"{link} must link relatively (the checkout can move)"
    assert link.resolve() == packaged.resolve(), f"{link} points to {os.readlink(link)}, not to {packaged}"
