"""A supervisor given another `storm.zookeeper.root` than Nimbus's (issue 32), on real daemons:
Nimbus's `storm-py list` says no supervisor is registered under its root, naming it, and the
supervisor's log says no Nimbus is registered under its own root, naming ZooKeeper and the root."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys

import pytest
import yaml
from devcluster_helpers import ROOT, storm_py
from testutil import CLI_ENV, stop_process, wait_until

from cluster_state import local_layout
from daemons.devcluster import DevCluster

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("the dev cluster needs Java and the Debian zookeeper package", allow_module_level=True)

FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1, "nimbus.supervisor.timeout.secs": 5}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_error(conf_dir, name: str) -> str | None:
    for line in storm_py("list", conf_dir=conf_dir).stdout.splitlines():
        if line.split()[:1] == [name]:
            return line
    return None


def test_a_supervisor_on_another_root_and_nimbus_each_name_the_root_they_use(tmp_path):
    dev = DevCluster(tmp_path / "dev", supervisors=1, slots=1, user_conf=FAST)
    other = out = None
    try:
        dev.start()
        nimbus_root = dev.conf.get("storm.zookeeper.root", "/storm")  # the default unless set
        # The cluster's own supervisor goes: only the misconfigured one is left.
        dev.kill_supervisor(1)
        conf = {**dev.supervisor_conf(0), "storm.zookeeper.root": "/elsewhere",
                "storm.local.dir": str(tmp_path / "other"), "storm.log.dir": str(tmp_path / "other-logs"),
                "supervisor.slots.ports": [_free_port()]}
        conf_dir = tmp_path / "conf-other"
        conf_dir.mkdir()
        (conf_dir / "storm.yaml").write_text(yaml.safe_dump(conf))
        out = open(tmp_path / "other.out", "wb")
        other = subprocess.Popen([sys.executable, "-m", "daemons.cli", "supervisor", "--conf-dir", str(conf_dir)],
                                 cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 env=CLI_ENV)
        log = local_layout.daemon_log(conf, "supervisor")
        zk = f"ZooKeeper 127.0.0.1:{conf['storm.zookeeper.port']}"

        def logged(text):
            return log.is_file() and text in log.read_text()

        wait_until(lambda: logged(f"no Nimbus is registered under {zk} root '/elsewhere'"), 60,
                   lambda: f"the supervisor's log naming its root: {log.read_text() if log.is_file() else '-'}",
                   interval=0.5)
        assert logged(f"(local dir {tmp_path / 'other'}; {zk}, root /elsewhere)")

        storm_py("jar", "submit", str(ROOT / "examples" / "exclamation" / "topology.py"), "--name", "lonely",
                 conf_dir=dev.conf_dir)
        line = wait_until(
            lambda: (ln := _last_error(dev.conf_dir, "lonely")) and "none is registered under ZooKeeper root" in ln
            and ln, 90, lambda: f"list naming Nimbus's root: {_last_error(dev.conf_dir, 'lonely')}", interval=1)
        assert f"no supervisor offers slots: none is registered under ZooKeeper root '{nimbus_root}'" in line
        assert other.poll() is None  # it runs, unseen, and says so
        storm_py("kill", "lonely", "-w", "0", conf_dir=dev.conf_dir)
    finally:
        if other is not None:
            stop_process(other, 30, "the supervisor on another root")
        if out is not None:
            out.close()
        dev.stop()
