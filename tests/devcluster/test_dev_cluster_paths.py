"""Paths the dev cluster shows a user (pure, no cluster): the example its banner suggests
submitting, and where the client commands can find a dev cluster's conf."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from testutil import ROOT

from daemons.devcluster import (
    EXAMPLE_TOPOLOGY,
    dev_cluster_pid_file,
    example_topology,
    find_dev_clusters,
    submit_suggestion,
)

pytestmark = [pytest.mark.timeout(30)]


def _checkout(root):
    """A directory holding the exclamation example as a source checkout does."""
    shutil.copytree(ROOT / "examples" / "exclamation", root / "examples" / "exclamation")
    return root


def test_the_banners_example_is_the_checkouts_when_storm_py_runs_from_one(tmp_path):
    # an editable install (or PYTHONPATH): the code root is the checkout
    assert example_topology(ROOT, tmp_path) == (ROOT / EXAMPLE_TOPOLOGY).resolve()
    assert example_topology(ROOT, tmp_path).is_file()


def test_an_installed_storm_py_suggests_the_example_of_the_checkout_it_runs_in(tmp_path):
    # `pip install .`: the code root is site-packages, which has no examples/
    site_packages = tmp_path / "site-packages"
    (site_packages / "daemons").mkdir(parents=True)
    cwd = _checkout(tmp_path / "checkout")
    assert example_topology(site_packages, cwd) == (cwd / EXAMPLE_TOPOLOGY).resolve()


def test_without_any_checkout_the_banner_names_no_missing_path_and_says_where_to_get_it(tmp_path):
    site_packages = tmp_path / "site-packages"
    (site_packages / "daemons").mkdir(parents=True)
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    assert example_topology(site_packages, elsewhere) is None
    lines = submit_suggestion(None, tmp_path / "dev" / "conf")
    text = "\n".join(lines)
    assert "site-packages" not in text and str(site_packages) not in text
    assert lines[0] == f"  storm-py jar submit TOPOLOGY.py --name demo --conf-dir {tmp_path / 'dev' / 'conf'}"
    assert "examples/exclamation/topology.py of a storm-py source checkout" in text
    assert "`pip install .` does not install examples/" in text
    # a stray examples/exclamation/topology.py without its components is not the example
    (site_packages / EXAMPLE_TOPOLOGY).parent.mkdir(parents=True)
    (site_packages / EXAMPLE_TOPOLOGY).write_text("")
    assert example_topology(site_packages, elsewhere) is None


def test_a_found_example_is_suggested_as_is(tmp_path):
    topology = (ROOT / EXAMPLE_TOPOLOGY).resolve()
    assert submit_suggestion(topology, tmp_path) == [
        f"  storm-py jar submit {topology} --name demo --conf-dir {tmp_path}"]


@pytest.mark.cluster  # starts a process
def test_the_banners_suggestion_exists_for_the_storm_py_on_this_path(tmp_path):
    # What the banner would print for the storm-py the tests run (a checkout on PYTHONPATH),
    # from a directory that is no checkout.
    code = ("from pathlib import Path; from daemons.devcluster import CODE_ROOT, example_topology, "
            "submit_suggestion; print(submit_suggestion(example_topology(CODE_ROOT, Path.cwd()), Path('c'))[0])")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=20,
                         env=env, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    path = out.stdout.split()[3]
    assert path.endswith(str(EXAMPLE_TOPOLOGY)) and os.path.isfile(path), out.stdout


def _dev_dir(base, mtime, pid=None):
    (base / "conf").mkdir(parents=True)
    (base / "conf" / "storm.yaml").write_text("nimbus.thrift.port: 1\n")
    os.utime(base / "conf" / "storm.yaml", (mtime, mtime))
    if pid is not None:
        dev_cluster_pid_file(base).parent.mkdir()
        dev_cluster_pid_file(base).write_text(f"{pid}\n")
    return (base / "conf").resolve()


@pytest.mark.cluster  # starts a process
def test_dev_clusters_are_found_where_dev_cluster_puts_them_running_ones_first(tmp_path):
    temp, cwd = tmp_path / "tmp", tmp_path / "work"
    temp.mkdir()
    cwd.mkdir()
    assert find_dev_clusters(temp, cwd) == []
    dev = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "dev-cluster"],
                           stdin=subprocess.DEVNULL)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.DEVNULL)
    try:
        old = _dev_dir(temp / "storm-py-dev-old", 1000)
        newer = _dev_dir(temp / "storm-py-dev-newer", 2000, pid=other.pid)  # a pid that is no dev cluster
        running = _dev_dir(temp / "storm-py-dev-running", 500, pid=dev.pid)
        readme = _dev_dir(cwd / "storm-py-dev", 1500)  # the README's --dir ./storm-py-dev
        _dev_dir(temp / "unrelated", 3000)
        (temp / "storm-py-dev-empty").mkdir()  # no conf: nothing to point at
        assert find_dev_clusters(temp, cwd) == [(running, True), (newer, False), (readme, False), (old, False)]
    finally:
        for proc in (dev, other):
            proc.kill()
            proc.wait(10)
    assert find_dev_clusters(temp, cwd)[0] == (newer, False)  # stale pid file: not running
