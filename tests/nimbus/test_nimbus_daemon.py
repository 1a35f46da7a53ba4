"""`storm-py nimbus` as a real process and every client command against it, through the CLI:
submit, list, deactivate/activate, rebalance, kill, their failure modes, auth, a hostile RPC
peer, SIGTERM, and refusing to start (port taken, ZooKeeper unreachable)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest
import yaml
import zmq
from nimbus_helpers import package, register_supervisor, topology_dir
from testutil import CLI_ENV, ROOT, one_error_line, stop_process, storm_py, wait_until

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.zkserver import free_port

pytestmark = [pytest.mark.timeout(120), pytest.mark.zk, pytest.mark.cluster]


class NimbusProcess:
    def __init__(self, conf_dir: Path, *args: str):
        self.conf_dir = conf_dir
        self.proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "nimbus", "--conf-dir", str(conf_dir), *args],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=CLI_ENV)

    def wait_ready(self, port: int) -> None:
        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"nimbus exited {self.proc.returncode}: {self.proc.stderr.read()}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_until(up, timeout=30, message="nimbus to listen")

    def stop(self, timeout: float = 15) -> int:
        try:
            return stop_process(self.proc, timeout, "nimbus")
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture
def cluster(zk_conf, tmp_path):
    port = free_port()
    conf = {
        "storm.zookeeper.servers": zk_conf["storm.zookeeper.servers"],
        "storm.zookeeper.port": zk_conf["storm.zookeeper.port"],
        "storm.zookeeper.root": zk_conf["storm.zookeeper.root"],
        "storm.zookeeper.session.timeout": zk_conf["storm.zookeeper.session.timeout"],
        "storm.zookeeper.connection.timeout": 5000,
        "storm.local.dir": str(tmp_path / "nimbus-local"),
        "storm.local.hostname": "127.0.0.1",
        "nimbus.seeds": ["127.0.0.1"],
        "nimbus.thrift.port": port,
        "nimbus.thrift.timeout": 5,
        "nimbus.monitor.freq.secs": 1,
        # The supervisors below are records that never heartbeat again: Nimbus would take them
        # for dead nimbus.supervisor.timeout.secs after it first saw them (a loaded run's test
        # took 88 s, and its rebalance found no slot).
        "nimbus.supervisor.timeout.secs": 3600,
    }
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "storm.yaml").write_text(yaml.safe_dump(conf))
    state = mk_storm_cluster_state({**zk_conf})
    register_supervisor(state, "sup-1", "127.0.0.1")
    register_supervisor(state, "sup-2", "127.0.0.1", ports=(6710, 6711, 6712, 6713))
    nimbus = NimbusProcess(conf_dir)
    procs = [nimbus]

    class C:
        pass

    c = C()
    c.conf, c.conf_dir, c.port, c.state, c.nimbus, c.root, c.procs = conf, conf_dir, port, state, nimbus, tmp_path, procs
    try:
        nimbus.wait_ready(port)
        yield c
    finally:
        for p in procs:
            p.stop()
        state.disconnect()


def listing(c) -> dict[str, list[str]]:
    out = storm_py("list", conf_dir=c.conf_dir, check=0)
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if ln.strip()]
    return {r[0]: r for r in rows if r[0] != "No"}


@pytest.mark.slow
def test_submit_list_deactivate_activate_rebalance_kill(cluster):
    c = cluster
    topo = topology_dir(c.root, spouts=2, bolts=2, config={"topology.workers": 2})
    out = storm_py("jar", "submit", str(topo / "topology.py"), "--name", "wc", conf_dir=c.conf_dir, check=0)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("submitted topology wc as ")]
    assert len(line) == 1, out.stdout
    storm_id = line[0].rsplit(" ", 1)[1]
    name, counter, launch = storm_id.rsplit("-", 2)
    assert name == "wc" and counter.isdigit() and abs(int(launch) - time.time()) < 120
    rows = listing(c)
    assert rows["wc"][1] == storm_id and rows["wc"][2] == "ACTIVE"
    assert len(set(c.state.assignment_info(storm_id).executor_node_port.values())) == 2

    storm_py("deactivate", "wc", conf_dir=c.conf_dir, check=0)
    assert listing(c)["wc"][2] == "INACTIVE" and c.state.storm_base(storm_id).status == "inactive"
    storm_py("activate", "wc", conf_dir=c.conf_dir, check=0)
    assert listing(c)["wc"][2] == "ACTIVE"

    out = storm_py("rebalance", "wc", "-w", "0", "-n", "1", conf_dir=c.conf_dir, check=0)
    assert out.stdout.splitlines() == ["rebalancing topology wc now"]  # nothing capped: no note
    wait_until(lambda: c.state.storm_base(storm_id).status == "active"
               and len(set(c.state.assignment_info(storm_id).executor_node_port.values())) == 1,
               timeout=20, message="rebalance to 1 worker")
    assert c.state.storm_base(storm_id).num_workers == 1
    out = storm_py("rebalance", "wc", "-w", "0", "-e", "pass=5", conf_dir=c.conf_dir, check=0)
    assert "note: component 'pass' has 2 task(s): it runs 2 executor(s), not 5" in out.stdout
    wait_until(lambda: c.state.storm_base(storm_id).status == "active", timeout=20, message="the second rebalance")

    # A wait long enough for `storm-py list` to see it KILLED on a loaded machine (with 2 s, a
    # list whose start took longer found it removed already).
    out = storm_py("kill", "wc", "-w", "15", conf_dir=c.conf_dir, check=0)
    # the CLI says how long the wait is and when it ends (it used to wait silently)
    assert re.fullmatch(r"killed topology wc: its spouts are stopped; it is removed in 15s \(at \d\d:\d\d:\d\d\) "
                        r"\(in-flight tuples finish meanwhile; -w 0 removes it at once\)\n", out.stdout), out.stdout
    assert listing(c)["wc"][2] == "KILLED" and c.state.storm_base(storm_id).status == "killed"
    wait_until(lambda: "wc" not in listing(c) and c.state.storm_base(storm_id) is None
               and c.state.assignment_info(storm_id) is None, timeout=45, message="the killed topology removed")


def test_c_overrides_the_topology_conf_and_secrets_are_not_copied(cluster):
    c = cluster
    topo = topology_dir(c.root, config={"topology.max.spout.pending": 7, "topology.workers": 1})
    out = storm_py("jar", "submit", str(topo / "topology.py"), "--name", "over", "-c", "topology.max.spout.pending=3",
                   "-c", "my.app.password=hunter2", conf_dir=c.conf_dir, check=0)
    storm_id = out.stdout.strip().rsplit(" ", 1)[1]
    stored = (Path(c.conf["storm.local.dir"]) / "nimbus" / "stormdist" / storm_id / "stormconf.json").read_text()
    assert '"topology.max.spout.pending": 3' in stored
    assert "hunter2" not in stored and "my.app.password" not in stored


def test_daemon_keys_given_at_submit_are_named_and_not_shipped(cluster):
    # They reach the client (nimbus.seeds finds Nimbus), never the topology's workers.
    c = cluster
    topo = topology_dir(c.root, config={"topology.workers": 1, "supervisor.worker.timeout.secs": 5})
    out = storm_py("jar", "submit", str(topo / "topology.py"), "--name", "daemonkeys",
                   "-c", "storm.zookeeper.port=1", "-c", "nimbus.task.timeout.secs=1", conf_dir=c.conf_dir, check=0)
    assert "submitted topology daemonkeys as " in out.stdout
    warnings = [ln for ln in out.stderr.splitlines() if ln.startswith("warning: ")]
    assert any("-c: nimbus.task.timeout.secs, storm.zookeeper.port apply to the daemons" in w for w in warnings), out.stderr
    assert any("supervisor.worker.timeout.secs applies to the daemons" in w for w in warnings), out.stderr
    storm_id = out.stdout.strip().rsplit(" ", 1)[1]
    stored = json.loads((Path(c.conf["storm.local.dir"]) / "nimbus" / "stormdist" / storm_id / "stormconf.json")
                        .read_text())
    assert not [k for k in stored if k.startswith(("storm.zookeeper.", "nimbus.", "supervisor."))], stored


def test_a_package_zip_built_by_jar_build_submits_unchanged(cluster):
    c = cluster
    topo = topology_dir(c.root)
    zip_path = c.root / "pkg.zip"
    storm_py("jar", "build", str(topo), "-o", str(zip_path), conf_dir=c.conf_dir, check=0)
    out = storm_py("jar", "submit", str(zip_path), "--name", "fromzip", conf_dir=c.conf_dir, check=0)
    assert "submitted topology fromzip as fromzip-" in out.stdout
    assert "fromzip" in listing(c)


@pytest.mark.slow
def test_client_failures_are_one_error_line_naming_the_culprit(cluster, tmp_path):
    c = cluster
    for cmd in (["kill", "ghost"], ["activate", "ghost"], ["deactivate", "ghost"], ["rebalance", "ghost", "-n", "2"]):
        assert "ghost" in one_error_line(storm_py(*cmd, conf_dir=c.conf_dir))
    topo = topology_dir(c.root)
    storm_py("jar", "submit", str(topo / "topology.py"), "--name", "dup", conf_dir=c.conf_dir, check=0)
    assert "'dup'" in one_error_line(storm_py("jar", "submit", str(topo / "topology.py"), "--name", "dup",
                                              conf_dir=c.conf_dir))
    assert "'a.b'" in one_error_line(storm_py("jar", "submit", str(topo / "topology.py"), "--name", "a.b",
                                              conf_dir=c.conf_dir))

    def bad(d):
        d["components"]["pass"]["inputs"][0]["source"] = "ghost"

    broken = package(c.root, structure_edit=bad)
    assert "'pass'" in one_error_line(storm_py("jar", "submit", str(broken), "--name", "broken",
                                               conf_dir=c.conf_dir))
    assert "broken" not in listing(c)
    # An unreachable Nimbus: the host:port tried, within nimbus.thrift.timeout.
    dead = free_port()
    started = time.monotonic()
    err = one_error_line(storm_py("list", "-c", f"nimbus.thrift.port={dead}", "-c", "nimbus.thrift.timeout=2",
                                  conf_dir=c.conf_dir))
    assert f"127.0.0.1:{dead}" in err and time.monotonic() - started < 30


def test_nimbus_survives_hostile_requests(cluster):
    c = cluster
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    sock.rcvtimeo = 10000
    sock.connect(f"tcp://127.0.0.1:{c.port}")
    try:
        for frame in (b"\xc1garbage", msgpack.packb({"v": 999, "op": "cluster_info", "args": {}}),
                      msgpack.packb({"v": 1, "op": "no_such_op", "args": {}}),
                      msgpack.packb({"v": 1, "op": "kill", "args": {"name": 5}}),
                      b"x" * (100 * 1024 * 1024)):
            sock.send(frame)
            reply = msgpack.unpackb(sock.recv(), raw=False)
            assert reply["ok"] is False and reply["error"]["kind"] in ("bad-request", "too-large"), reply
    finally:
        sock.close()
        ctx.term()
    assert "No topologies running." in storm_py("list", conf_dir=c.conf_dir, check=0).stdout
    assert c.nimbus.proc.poll() is None


def test_auth_secret_is_required_when_set(zk_conf, tmp_path):
    port = free_port()
    conf = {"storm.zookeeper.servers": zk_conf["storm.zookeeper.servers"],
            "storm.zookeeper.port": zk_conf["storm.zookeeper.port"],
            "storm.zookeeper.root": zk_conf["storm.zookeeper.root"],
            "storm.local.dir": str(tmp_path / "local"), "storm.local.hostname": "127.0.0.1",
            "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": port, "nimbus.thrift.timeout": 5,
            "nimbus.authentication.secret": "s3cret"}
    nimbus_dir, client_dir = tmp_path / "nconf", tmp_path / "cconf"
    nimbus_dir.mkdir()
    client_dir.mkdir()
    (nimbus_dir / "storm.yaml").write_text(yaml.safe_dump(conf))
    (client_dir / "storm.yaml").write_text(yaml.safe_dump({k: v for k, v in conf.items()
                                                            if k != "nimbus.authentication.secret"}))
    nimbus = NimbusProcess(nimbus_dir)
    try:
        nimbus.wait_ready(port)
        for extra in ([], ["-c", "nimbus.authentication.secret=wrong"]):
            err = one_error_line(storm_py("list", *extra, conf_dir=client_dir))
            assert "auth" in err or "secret" in err
        assert storm_py("list", "-c", "nimbus.authentication.secret=s3cret", conf_dir=client_dir).returncode == 0
        topo = topology_dir(tmp_path)
        out = storm_py("jar", "submit", str(topo / "topology.py"), "--name", "authd",
                       "-c", "nimbus.authentication.secret=s3cret", conf_dir=client_dir, check=0)
        storm_id = out.stdout.strip().rsplit(" ", 1)[1]
        stored = (tmp_path / "local" / "nimbus" / "stormdist" / storm_id / "stormconf.json").read_text()
        assert "s3cret" not in stored
    finally:
        assert nimbus.stop() == 0
    log_text = (tmp_path / "local" / "logs" / "nimbus.log").read_text()
    assert "auth" in log_text.lower() and "s3cret" not in log_text


def test_sigterm_stops_nimbus_cleanly_and_a_taken_port_or_dead_zookeeper_refuse_to_start(cluster, tmp_path):
    c = cluster
    # A second Nimbus on the same port refuses with one error line naming host:port.
    err = one_error_line(storm_py("nimbus", "-c", f"storm.local.dir={tmp_path / 'other'}", conf_dir=c.conf_dir))
    assert f"127.0.0.1:{c.port}" in err
    # ZooKeeper unreachable past storm.zookeeper.connection.timeout.
    err = one_error_line(storm_py("nimbus", "-c", f"storm.zookeeper.port={free_port()}",
                                  "-c", "storm.zookeeper.connection.timeout=1500",
                                  "-c", f"nimbus.thrift.port={free_port()}",
                                  "-c", f"storm.local.dir={tmp_path / 'other2'}", conf_dir=c.conf_dir))
    assert "ZooKeeper" in err
    started = time.monotonic()
    assert c.nimbus.stop() == 0
    assert time.monotonic() - started < 15


def test_the_log_file_records_info_by_default_and_the_level_log_level_names(cluster):
    log_file = local_layout.daemon_log(cluster.conf, "nimbus")
    storm_py("list", conf_dir=cluster.conf_dir, check=0)
    assert cluster.nimbus.stop() == 0
    default_run = log_file.read_text()
    assert " INFO " in default_run and " DEBUG " not in default_run
    log_file.unlink()
    debug = NimbusProcess(cluster.conf_dir, "--log-level", "debug")
    cluster.procs.append(debug)
    debug.wait_ready(cluster.port)
    storm_py("list", conf_dir=cluster.conf_dir, check=0)
    wait_until(lambda: " DEBUG " in log_file.read_text(), timeout=30, message=lambda: f"DEBUG lines in {log_file}")



@pytest.mark.slow
def test_a_submit_while_zookeeper_is_down_fails_and_leaves_nothing_behind(zk_server_factory, tmp_path):
    # It used to time out on the client and start by itself once ZooKeeper came back: a ghost.
    from zk_fixture import zk_conf_for

    from cluster_state.errors import ClusterStateError

    server = zk_server_factory()
    zk = zk_conf_for(server, "/ghost-test")
    port = free_port()
    conf = {k: v for k, v in zk.items() if k.startswith("storm.zookeeper.")}
    conf.update({"storm.local.dir": str(tmp_path / "nimbus-local"), "storm.local.hostname": "127.0.0.1",
                 "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": port, "nimbus.thrift.timeout": 5,
                 "nimbus.monitor.freq.secs": 1})
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "storm.yaml").write_text(yaml.safe_dump(conf))
    state = mk_storm_cluster_state(zk)
    register_supervisor(state, "sup-1", "127.0.0.1")
    nimbus = NimbusProcess(conf_dir)
    try:
        nimbus.wait_ready(port)
        topo = topology_dir(tmp_path, config={"topology.workers": 1})
        server.stop()

        said = []

        def refused():
            out = storm_py("jar", "submit", str(topo / "topology.py"), "--name", "ghost", conf_dir=conf_dir,
                           timeout=60)
            assert out.returncode != 0, out.stdout  # never "submitted" while ZooKeeper is down
            said.append(out.stderr.strip())
            return "cannot reach ZooKeeper" in out.stderr and one_error_line(out)

        line = wait_until(refused, 60, interval=0.5, message=lambda: f"submit refused naming ZooKeeper: {said[-3:]}")
        assert "nothing was done" in line or "topology 'ghost' was not submitted" in line, line
        server.restart()
        # Nimbus works again: a submit now runs (and its round would assign any leftover)
        wait_until(lambda: storm_py("jar", "submit", str(topo / "topology.py"), "--name", "after",
                                    conf_dir=conf_dir, timeout=60).returncode == 0, 60, interval=1,
                   message="a submit once ZooKeeper is back")
        wait_until(lambda: "after" in listing_of(conf_dir), 30, message="the new topology listed")
        names = wait_until(lambda: [state.storm_base(s).storm_name for s in state.active_storms()], 30,
                           tolerate=(ClusterStateError,), message="the storms in ZooKeeper")
        assert names == ["after"] and "ghost" not in listing_of(conf_dir)
        assert not [d for d in (tmp_path / "nimbus-local" / "nimbus" / "stormdist").iterdir()
                    if d.name.startswith("ghost-")]
    finally:
        nimbus.stop()
        state.disconnect()


def listing_of(conf_dir: Path) -> dict[str, list[str]]:
    out = storm_py("list", conf_dir=conf_dir, check=0)
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if ln.strip()]
    return {r[0]: r for r in rows if r[0] != "No"}
