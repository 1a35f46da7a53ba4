"""Nimbus HA on a real ZooKeeper (issue 21): a second `storm-py nimbus` on the same root becomes
a standby that leaves the running topology alone (assignment bytes and worker processes
unchanged), refuses writes naming the leader and copies the code; clients given the seeds
[standby, leader] work; when the leader is SIGKILLed the standby takes over once the leader's
session ends, a new submit runs, and every tuple the spouts saw acked reached the bolt."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
import zmq
from devcluster_helpers import ROOT, storm_py
from testutil import CLI_ENV, stop_process, wait_until

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.paths import assignment_path
from daemons.devcluster import DevCluster
from daemons.rpc.client import RpcClient
from daemons.rpc.protocol import NotLeaderError, decode_reply, encode_request

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)

STANDBY_HOST = "127.0.0.3"
FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1, "storm.zookeeper.session.timeout": 4000,
        "nimbus.code.sync.freq.secs": 1}

COMPONENTS = '''
import os
import time

from executor.api import Bolt, Spout

OUT = {out!r}


class CountSpout(Spout):
    """Numbers every 50 ms; each one the acker reports fully processed goes to acked-{{pid}}."""

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0
        self.acked = open(os.path.join(OUT, f"acked-{{os.getpid()}}"), "a")

    def next_tuple(self):
        time.sleep(0.05)
        self.n += 1
        value = f"{{os.getpid()}}-{{self.n}}"
        self.collector.emit([value], msg_id=value)

    def ack(self, msg_id):
        self.acked.write(f"{{msg_id}}\\n")
        self.acked.flush()


class RecordBolt(Bolt):
    """Writes each number to received-{{pid}} (flushed) before acking it."""

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.received = open(os.path.join(OUT, f"received-{{os.getpid()}}"), "a")

    def execute(self, tup):
        self.received.write(f"{{tup.values[0]}}\\n")
        self.received.flush()
        self.collector.ack(tup)
'''

TOPOLOGY = '''
from {module} import CountSpout, RecordBolt

from executor.api import TopologyBuilder

builder = TopologyBuilder()
builder.set_spout("count", CountSpout(), 1)
builder.set_bolt("record", RecordBolt(), 1).shuffle_grouping("count")
topology = builder.create_topology()
config = {{"topology.workers": 1, "topology.max.spout.pending": 20}}
'''


def counting_topology(root: Path, name: str) -> tuple[Path, Path]:
    """(topology.py, its output dir)."""
    out = root / f"{name}-out"
    out.mkdir(parents=True)
    d = root / f"{name}-topology"
    d.mkdir()
    module = f"ha_count_{name}"
    (d / f"{module}.py").write_text(textwrap.dedent(COMPONENTS.format(out=str(out))))
    (d / "topology.py").write_text(TOPOLOGY.format(module=module))
    return d / "topology.py", out


def lines(out: Path, prefix: str) -> set[str]:
    return {ln for p in out.glob(f"{prefix}-*") for ln in p.read_text().splitlines() if ln.strip()}


def write_conf(d: Path, conf: dict) -> Path:
    d.mkdir(parents=True)
    (d / "storm.yaml").write_text(yaml.safe_dump(conf))
    return d


def submit(conf_dir: Path, topology: Path, name: str) -> str:
    out = storm_py("jar", "submit", str(topology), "--name", name, conf_dir=conf_dir)
    found = [ln for ln in out.stdout.splitlines() if ln.startswith(f"submitted topology {name} as ")]
    assert len(found) == 1, out.stdout + out.stderr
    return found[0].rsplit(" ", 1)[1]


def raw_call(host: str, port: int, op: str, **args):
    """One request without the client's redirect: what that Nimbus itself answers."""
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.linger = 0
    try:
        sock.connect(f"tcp://{host}:{port}")
        sock.send(encode_request(op, args))
        assert sock.poll(10_000, zmq.POLLIN), f"{host}:{port} did not answer {op}"
        return decode_reply(sock.recv())
    finally:
        sock.close(linger=0)


def nimbus_statuses(host: str, port: int) -> dict[str, str]:
    with RpcClient(host, port, timeout_secs=5) as client:
        return {f"{n['host']}:{n['port']}": n["status"] for n in client.call("cluster_info")["nimbuses"]}


def test_a_standby_nimbus_destroys_nothing_refuses_writes_and_takes_over(tmp_path):
    # The supervisor's nimbus.seeds list both Nimbus daemons, as Nimbus HA requires.
    dev = DevCluster(tmp_path / "dev", supervisors=1, slots=2, user_conf=FAST, more_nimbus_hosts=(STANDBY_HOST,))
    standby = standby_out = state = None
    try:
        dev.start()
        port = int(dev.conf["nimbus.thrift.port"])
        leader_id, standby_id = f"127.0.0.1:{port}", f"{STANDBY_HOST}:{port}"
        state = mk_storm_cluster_state(dev.conf)
        topology, out = counting_topology(tmp_path, "first")
        storm_id = submit(dev.conf_dir, topology, "first")
        wait_until(lambda: len(lines(out, "acked")) >= 20, timeout=120, message="the first topology's acks",
                   interval=0.2)
        assignment = state.cluster_state.get_data(assignment_path(storm_id))
        workers = dict(dev.worker_pids())
        assert workers

        # A second Nimbus on the same ZooKeeper root, its own (empty) local dir.
        standby_conf = {**dev.conf, "storm.local.hostname": STANDBY_HOST,
                        "storm.local.dir": str(tmp_path / "nimbus-2"), "storm.log.dir": str(tmp_path / "logs-2")}
        standby_dir = write_conf(tmp_path / "conf-standby", standby_conf)
        standby_out = open(tmp_path / "standby.out", "wb")
        standby = subprocess.Popen([sys.executable, "-m", "daemons.cli", "nimbus", "--conf-dir", str(standby_dir)],
                                   cwd=ROOT, stdin=subprocess.DEVNULL, stdout=standby_out,
                                   stderr=subprocess.STDOUT, env=CLI_ENV)
        standby_code = local_layout.nimbus_dir(standby_conf) / "stormdist" / storm_id / "stormjar.zip"
        wait_until(lambda: standby_code.is_file() and nimbus_statuses(STANDBY_HOST, port) == {
            leader_id: "Leader", standby_id: "Not a Leader"}, timeout=60, interval=0.2,
            message=lambda: "the standby registered with the code copied:\n" + (tmp_path / "standby.out").read_text(),
            tolerate=(Exception,))
        assert state.cluster_state.get_data(assignment_path(storm_id)) == assignment
        assert dev.worker_pids() == workers

        # The standby refuses a write, naming the leader; a client given [standby, leader] works.
        with pytest.raises(NotLeaderError, match=rf"^Nimbus {standby_id} is not the leader; the leader is "
                                                 rf"{leader_id}$"):
            raw_call(STANDBY_HOST, port, "deactivate", name="first")
        both = write_conf(tmp_path / "conf-both", {**dev.conf, "nimbus.seeds": [STANDBY_HOST, "127.0.0.1"]})
        assert dev.conf["nimbus.seeds"] == ["127.0.0.1", STANDBY_HOST]
        listed = storm_py("list", conf_dir=both).stdout.splitlines()
        assert listed[:2] == [f"nimbus {leader_id} Leader", f"nimbus {standby_id} Not a Leader"]
        assert listed[2].split()[:8] == ["NAME", "ID", "STATUS", "TASKS", "WORKERS", "UPTIME", "RESTARTS(5m)", "LAST"]
        assert listed[3].split()[:3] == ["first", storm_id, "ACTIVE"]
        storm_py("deactivate", "first", conf_dir=both)
        assert state.storm_base(storm_id).status == "inactive"
        storm_py("activate", "first", conf_dir=both)
        assert state.storm_base(storm_id).status == "active"
        one_nimbus = storm_py("list", conf_dir=dev.conf_dir).stdout  # the leader first: same lines
        assert one_nimbus.splitlines()[:2] == listed[:2]

        # SIGKILL the leader: the standby takes over once its session ends.
        acked_at_kill = len(lines(out, "acked"))
        dev.stop_nimbus(kill=True)
        wait_until(lambda: nimbus_statuses(STANDBY_HOST, port) == {standby_id: "Leader"}, timeout=60,
                   interval=0.2, tolerate=(Exception,), message="the standby to become the only Nimbus, leading")
        assert dev.worker_pids() == workers

        second, second_out = counting_topology(tmp_path, "second")
        second_id = submit(both, second, "second")
        wait_until(lambda: len(lines(second_out, "acked")) >= 20 and len(lines(out, "acked")) >= acked_at_kill + 20,
                   timeout=120, interval=0.2, message=lambda: (
                       f"acks of both topologies after the takeover (first: {len(lines(out, 'acked'))}, "
                       f"{acked_at_kill} at the kill; second: {len(lines(second_out, 'acked'))})"))
        assert state.storm_base(second_id) is not None and state.storm_base(storm_id).status == "active"
        assert dev.worker_pids().items() >= workers.items()  # the first topology's worker never restarted

        # Nothing acked is lost: every number a spout saw acked reached the bolt.
        for d in (out, second_out):
            acked = lines(d, "acked")
            assert acked and acked <= lines(d, "received")
    finally:
        if standby is not None:
            stop_process(standby, 30, "the standby nimbus")
            standby_out.close()
        if state is not None:
            state.disconnect()
        dev.stop()
