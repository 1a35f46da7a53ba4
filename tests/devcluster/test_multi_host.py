"""More than one host (issue 21): the numbered word count on a cluster spread over network
namespaces, each "host" with its own address on a private bridge this test creates and removes.

    host A (netns)   ZooKeeper and Nimbus, bound on A's address
    host B (netns)   a supervisor (storm.local.hostname = B's address), slots 6700 and 6701
    host C (netns)   a supervisor (storm.local.hostname = C's address), the same slot ports
    root namespace   this test: submits the topology and watches ZooKeeper over the bridge;
                     the Spark Connect server every worker's sink writes through

The bridge lives in a switch namespace of its own, so the host's own interfaces, routes and
firewall are never touched; the only thing the root namespace gets is one veth end with an
address in a private /24 nobody else uses here. Every namespace sees the same filesystem: the
Spark table and the spout offsets under tmp_path are "storage both hosts can reach".

B and C offer the same slot ports on purpose: a worker address resolved to loopback, or a slot
keyed by port alone, would send tuples to the wrong host. Then B's cable is pulled (its switch
port down) for longer than the ZooKeeper session and Nimbus's timeouts: its executors move to
C and the count goes on; once the cable is back B's supervisor rejoins (a fresh heartbeat in
ZooKeeper) and stops its stale workers; at the end the table holds every message (checked by
message number, examples/numbered_word_count/check_table.py).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from devcluster_helpers import ROOT, processes_under
from spark_connect_fixture import SparkConnectServer
from testutil import QUIET_IDLE, wait_until

from cluster_state import local_layout
from cluster_state.errors import ClusterStateError
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.local_state import LS_ID, LocalState
from cluster_state.zkserver import DEFAULT_JAR, JAR_ENV, ZooKeeperServer
from daemons.devcluster import Child, stop_workers, worker_processes

sys.path.insert(0, str(ROOT / "examples" / "numbered_word_count"))
import numbered_offsets as O  # noqa: E402
from faults import NumberedRun, recovered  # noqa: E402

log = logging.getLogger(__name__)

ZK_PORT, NIMBUS_PORT, SLOTS = 2181, 6627, [6700, 6701]  # each namespace has all ports free
SESSION_MS = 10_000
CONF = {
    "storm.zookeeper.port": ZK_PORT,
    "nimbus.thrift.port": NIMBUS_PORT,
    "storm.zookeeper.session.timeout": SESSION_MS,
    # Low, so that a cut supervisor is declared dead within seconds (the fault tests' style).
    "nimbus.task.timeout.secs": 8,
    "nimbus.supervisor.timeout.secs": 8,
    "nimbus.monitor.freq.secs": 1,
    "supervisor.monitor.frequency.secs": 1,
    "supervisor.heartbeat.frequency.secs": 1,
}
# 2 spout tasks x 150 messages/s: 53 s of input, so the cut and the rejoin both land while
# messages flow (B rejoins at ~7,500 emitted on a quiet machine; the cut's wait is mostly
# ZooKeeper's and Nimbus's timeouts, which a slow machine does not stretch).
MESSAGES = 16_000
RUN_CONF = {"numbered.rate": 150, "topology.message.timeout.secs": 10, **QUIET_IDLE}
# State reads while B's cable is out may fail for a moment (the test's own ZooKeeper client
# is not cut, but a read can race a session being expired): "not yet", not a failure.
TOLERATE = (ClusterStateError, OSError)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def _netns_unavailable(tag: str) -> str | None:
    """Why network namespaces cannot be made here (None when they can)."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"stpy-{tag}-probe"
    try:
        out = _ip("netns", "add", probe, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`ip netns add` cannot run: {exc}"
    if out.returncode != 0:
        return f"`ip netns add` failed (needs root and CAP_SYS_ADMIN): {out.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _remove_leftovers() -> None:
    """Namespaces and the root veth of an earlier run of this test whose process is gone (one
    killed before its finalizer ran); only names of this test's scheme, never a live run's."""
    def gone(pid: str) -> bool:
        return not Path(f"/proc/{pid}").exists()

    for line in _ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.fullmatch(r"stpy-(\d+)-(sw|a|b|c|probe)", name)
        if m and gone(m.group(1)):
            log.warning("removing namespace %s left by an earlier run", name)
            _ip("netns", "del", name, check=False)
    for line in _ip("-o", "link", "show").stdout.splitlines():
        m = re.match(r"\d+: (stpy(\d+)r)[@:]", line)
        if m and gone(m.group(2)):
            log.warning("removing interface %s left by an earlier run", m.group(1))
            _ip("link", "del", m.group(1), check=False)


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the root namespace has an address or a route in."""
    nets = []
    for args in (("-4", "-o", "addr", "show"), ("-4", "route", "show", "table", "all")):
        for word in _ip(*args).stdout.split():
            try:
                nets.append(ipaddress.IPv4Network(word, strict=False))
            except ValueError:
                continue  # not an address: a device name, a keyword
    return [n for n in nets if n.prefixlen > 0]  # the default route overlaps everything


def _free_subnet() -> ipaddress.IPv4Network:
    """A random private /24 in 10.0.0.0/8 that overlaps nothing the root namespace uses."""
    used = _used_networks()
    rng = random.Random()
    for _ in range(100):
        net = ipaddress.IPv4Network(f"10.{rng.randrange(64, 250)}.{rng.randrange(1, 255)}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError(f"no free /24 in 10.0.0.0/8 (in use: {used})")


class PrivateNet:
    """Namespaces on one bridge (in a switch namespace of its own) plus one veth end in the
    root namespace. Everything it creates is named with `tag` and removed by remove()."""

    def __init__(self, tag: str):
        self.tag = tag
        self.subnet = _free_subnet()
        self.switch = f"stpy-{tag}-sw"
        self.root_link = f"stpy{tag}r"          # interface names: at most 15 characters
        self.namespaces: list[str] = []          # created, in order
        self.addresses: dict[str, str] = {}      # host name -> its address
        self._hosts = 0

    def ns(self, host: str) -> str:
        return f"stpy-{self.tag}-{host}"

    def _address(self) -> str:
        self._hosts += 1
        return str(self.subnet.network_address + self._hosts)

    def _add_ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self.namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")  # Spark and py4j talk over loopback

    def start(self) -> None:
        self._add_ns(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        # The root namespace (this test, the CLI) reaches the hosts through the bridge too.
        _ip("link", "add", self.root_link, "type", "veth", "peer", "name", "p-root", "netns", self.switch)
        self._plug("p-root")
        self.addresses["root"] = self._address()
        _ip("addr", "add", f"{self.addresses['root']}/{self.subnet.prefixlen}", "dev", self.root_link)
        _ip("link", "set", self.root_link, "up")

    def _plug(self, port: str) -> None:
        _ip("-n", self.switch, "link", "set", port, "master", "br0")
        _ip("-n", self.switch, "link", "set", port, "up")

    def add_host(self, host: str) -> str:
        """A namespace with interface net0 on the bridge; returns its address."""
        ns = self.ns(host)
        self._add_ns(ns)
        # Both ends are created inside their namespaces: nothing appears in the root one.
        _ip("link", "add", "net0", "netns", ns, "type", "veth", "peer", "name", f"p-{host}", "netns", self.switch)
        self._plug(f"p-{host}")
        address = self.addresses[host] = self._address()
        _ip("-n", ns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "net0")
        _ip("-n", ns, "link", "set", "net0", "up")
        return address

    def cut(self, host: str) -> None:
        """Pull `host`'s cable: its switch port down (its own interface keeps its address)."""
        _ip("-n", self.switch, "link", "set", f"p-{host}", "down")

    def restore(self, host: str) -> None:
        _ip("-n", self.switch, "link", "set", f"p-{host}", "up")

    def exec_prefix(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host)]

    def netns_inode(self, host: str) -> int:
        return os.stat(f"/run/netns/{self.ns(host)}").st_ino

    def remove(self) -> None:
        """Delete the root veth and every namespace (their veths and the bridge go with them);
        waits until the kernel has removed the root veth (namespace cleanup is asynchronous)."""
        errors = []
        if _ip("link", "show", self.root_link, check=False).returncode == 0:
            out = _ip("link", "del", self.root_link, check=False)
            if out.returncode != 0:
                errors.append(out.stderr.strip())
        for name in reversed(self.namespaces):
            out = _ip("netns", "del", name, check=False)
            if out.returncode != 0:
                errors.append(out.stderr.strip())
        self.namespaces.clear()
        wait_until(lambda: _ip("link", "show", self.root_link, check=False).returncode != 0, timeout=20,
                   message=f"the root veth {self.root_link} to be removed", interval=0.2)
        assert not errors, f"removing the test network: {errors}"


class NetnsZooKeeper(ZooKeeperServer):
    """The Debian package's ZooKeeper run inside a namespace, bound on that host's address
    (readiness is polled from the root namespace, over the bridge)."""

    def __init__(self, base_dir: Path, host: str, prefix: list[str]):
        super().__init__(base_dir, port=ZK_PORT, tick_time_ms=1000)  # sessions of up to 20 s
        self.host = host
        self.prefix = prefix

    def _command(self, cfg: Path) -> list[str]:
        return [*self.prefix, *super()._command(cfg)]


class MultiHostCluster:
    """ZooKeeper and Nimbus on host "a", one supervisor on each of hosts "b" and "c". Offers what
    NumberedRun reads of a cluster: conf_dir (the client's), conf, log_dir."""

    def __init__(self, base: Path, net: PrivateNet):
        self.base, self.net = base, net
        self.conf_dir = base / "conf"
        self.log_dir = base / "logs"
        self.common: dict[str, Any] = {}
        self.conf: dict[str, Any] = {}
        self.zookeeper: NetnsZooKeeper | None = None
        self.nimbus: Child | None = None
        self.supervisors: dict[str, Child] = {}

    def _child(self, name: str, host: str, command: str, conf: dict[str, Any]) -> Child:
        conf_dir = self.conf_dir if name == "nimbus" else self.conf_dir / name
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "storm.yaml").write_text(yaml.safe_dump(conf, sort_keys=True), encoding="utf-8")
        argv = [*self.net.exec_prefix(host), sys.executable, "-m", "daemons.cli", command, "--conf-dir", str(conf_dir)]
        return Child(name, argv, Path(conf["storm.log.dir"]) / f"{command}.log", self.log_dir / f"{name}.out",
                     self.base / "pids" / f"{name}.pid", extra={"conf": conf, "host": host})

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        a = self.net.addresses["a"]
        self.common = {**CONF, "storm.zookeeper.servers": [a], "nimbus.seeds": [a]}
        # The client's conf (the CLI in the root namespace) and Nimbus's: Nimbus binds on A.
        self.conf = {**self.common, "storm.local.hostname": a, "storm.local.dir": str(self.base / "nimbus"),
                     "storm.log.dir": str(self.log_dir)}
        zk = self.zookeeper = NetnsZooKeeper(self.base / "zookeeper", a, self.net.exec_prefix("a"))
        zk.log_path = self.log_dir / "zookeeper.log"
        zk.start(timeout=60)
        self.nimbus = self._child("nimbus", "a", "nimbus", self.conf)
        self.nimbus.start()
        for host in ("b", "c"):
            name = f"supervisor-{host}"
            conf = {**self.common, "storm.local.hostname": self.net.addresses[host],
                    "storm.local.dir": str(self.base / name), "storm.log.dir": str(self.log_dir / name),
                    "supervisor.slots.ports": SLOTS}
            self.supervisors[host] = child = self._child(name, host, "supervisor", conf)
            child.start()
        self._wait_nimbus()

    def check_alive(self) -> None:
        for child in [self.nimbus, *self.supervisors.values()]:
            if child is not None and child.exit_code() is not None:
                raise AssertionError(child.why_dead())

    def _wait_nimbus(self) -> None:
        from daemons.rpc.client import client_from_conf
        from daemons.rpc.protocol import REMOTE_ERRORS

        def answers() -> bool:
            self.check_alive()
            client = client_from_conf({**self.conf, "nimbus.thrift.timeout": 1})
            try:
                client.call("cluster_info")
                return True
            finally:
                client.close()

        wait_until(answers, timeout=60, message=f"Nimbus on {self.net.addresses['a']} (log {self.nimbus.log_path})",
                   interval=0.2, tolerate=REMOTE_ERRORS)

    def supervisor_id(self, host: str) -> str | None:
        path = local_layout.supervisor_localstate(self.supervisors[host].extra["conf"])
        value = LocalState(path, create=False).get(LS_ID)
        return value if isinstance(value, str) else None

    def workers(self, host: str) -> dict[int, Any]:
        return worker_processes(self.supervisors[host].extra["conf"])

    def stop(self) -> None:
        """Nimbus first (so stopping supervisors' slots are not rescheduled), then the
        supervisors, their workers, ZooKeeper; each by its pid."""
        if self.nimbus is not None:
            self.nimbus.stop()
        for child in self.supervisors.values():
            child.stop()
        confs = [c.extra["conf"] for c in self.supervisors.values()]
        killed = stop_workers(confs, timeout=10)
        if killed:
            log.warning("workers %s had to be killed", killed)
        if self.zookeeper is not None:
            self.zookeeper.stop()


def _hosts_in_assignment(state: Any, storm_id: str) -> dict[str, set[int]]:
    """Host -> the slot ports that hold an executor of `storm_id` (from ZooKeeper)."""
    assignment = state.assignment_info(storm_id)
    out: dict[str, set[int]] = {}
    for node, port in (assignment.executor_node_port.values() if assignment else ()):
        out.setdefault(assignment.node_host.get(node, node), set()).add(port)
    return out


def _netns_of(pid: int) -> int | None:
    """The inode of `pid`'s network namespace (None once it exited)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _listeners(net: PrivateNet, host: str) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket in `host`'s namespace (/proc/net/tcp{,6}
    read from inside it: /proc/net shows the reader's namespace)."""
    out = set()
    for table in ("tcp", "tcp6"):
        text = subprocess.run([*net.exec_prefix(host), "cat", f"/proc/net/{table}"], capture_output=True, text=True,
                              timeout=30, check=True).stdout
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) < 4 or fields[3] != "0A":  # 0A: LISTEN
                continue
            addr_hex, port_hex = fields[1].split(":")
            raw = bytes.fromhex(addr_hex)
            # Each 32-bit word is printed in the host's (little-endian) byte order.
            ip = ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))
            if ip.version == 6 and ip.ipv4_mapped is not None:
                ip = ip.ipv4_mapped
            out.add((str(ip), int(port_hex, 16)))
    return out


def _on_port(listeners: set[tuple[str, int]], ports: list[int]) -> set[str]:
    return {address for address, port in listeners if port in ports}


@pytest.mark.timeout(480)
@pytest.mark.zk
@pytest.mark.cluster
@pytest.mark.spark
@pytest.mark.slow
def test_word_count_across_hosts_survives_a_cut_link(tmp_path):
    if shutil.which("java") is None or not os.path.exists(os.environ.get(JAR_ENV, DEFAULT_JAR)):
        pytest.skip("the cluster needs Java and the Debian zookeeper package")
    tag = str(os.getpid())  # names unique per run; "stpy{pid}r" fits 15 characters
    why = _netns_unavailable(tag)
    if why is not None:
        pytest.skip(f"cannot create network namespaces here: {why}")
    _remove_leftovers()

    net = PrivateNet(tag)
    cluster = MultiHostCluster(tmp_path / "cluster", net)
    run = NumberedRun(cluster, tmp_path / "run", MESSAGES, conf=dict(RUN_CONF))
    state = spark = None
    try:
        net.start()
        addr = {host: net.add_host(host) for host in ("a", "b", "c")}
        log.info("hosts on %s: %s", net.subnet, net.addresses)
        # One Spark the hosts share (docs/operations.md, "One Spark per host"), on the root
        # namespace's address on the bridge: every worker's sink is its client, where each worker
        # start (again on C after the cut) started a Spark JVM of its own. A cut host's sinks
        # lose it with the rest of the cluster.
        spark = SparkConnectServer(tmp_path / "spark", host=net.addresses["root"])
        spark.start(wait=False)
        run.conf["spark.remote"] = spark.url
        cluster.start()
        spark.wait_ready()
        state = mk_storm_cluster_state(cluster.conf)

        def registered(host: str, since: float = 0.0) -> bool:
            """The supervisor of `host` has a node in ZooKeeper, advertising its address,
            with a heartbeat later than `since`."""
            cluster.check_alive()
            sid = cluster.supervisor_id(host)
            info = state.supervisor_info(sid) if sid else None
            return info is not None and info.hostname == addr[host] and info.time_secs > since

        for host in ("b", "c"):
            wait_until(lambda h=host: registered(h), timeout=60, interval=0.2, tolerate=TOLERATE,
                       message=lambda h=host: f"supervisor on {addr[h]} to register (logs {cluster.log_dir})")

        storm_id = run.submit()  # from the root namespace, over the bridge
        # Nimbus spreads the 2 workers over the 2 hosts (one each), by their addresses.
        wait_until(lambda: set(_hosts_in_assignment(state, storm_id)) == {addr["b"], addr["c"]}, timeout=60,
                   interval=0.2, tolerate=TOLERATE,
                   message=lambda: f"executors on both {addr['b']} and {addr['c']}: "
                                   f"{_hosts_in_assignment(state, storm_id)}")
        # Each supervisor's workers really run on its host (in its network namespace) and
        # listen on its address only: no loopback, no wildcard.
        for host in ("b", "c"):
            inode = net.netns_inode(host)
            wait_until(lambda h=host, i=inode: any(_netns_of(p) == i for p in cluster.workers(h)), timeout=90,
                       interval=0.5, message=lambda h=host: f"a worker running on host {h} ({cluster.log_dir})")
            assert {_netns_of(p) for p in cluster.workers(host)} <= {inode, None}, host  # None: exited meanwhile
            wait_until(lambda h=host: _on_port(_listeners(net, h), SLOTS), timeout=60, interval=0.5,
                       message=lambda h=host: f"a worker listening on host {h}")
            assert _on_port(_listeners(net, host), SLOTS) == {addr[host]}, _listeners(net, host)
        # ZooKeeper and Nimbus listen on A's address only.
        assert _on_port(_listeners(net, "a"), [ZK_PORT, NIMBUS_PORT]) == {addr["a"]}, _listeners(net, "a")
        run.wait(lambda: run.committed() >= 1000, 180, "the first 1,000 messages committed across hosts")
        log.info("running across hosts: %s", run.describe())

        # Pull B's cable for longer than the session and Nimbus's timeouts.
        b_id = cluster.supervisor_id("b")
        offsets = run.offsets()
        marks = {o.index: o.emitted for o in offsets}
        net.cut("b")
        log.info("cut host b (%s) at %d committed", addr["b"], sum(o.committed for o in offsets))
        # Its session expires (its node goes) and Nimbus moves its executors to C.
        wait_until(lambda: state.supervisor_info(b_id) is None, timeout=SESSION_MS / 1000 + 30, interval=0.5,
                   tolerate=TOLERATE, message="B's supervisor node to expire while its link is down")
        wait_until(lambda: set(_hosts_in_assignment(state, storm_id)) == {addr["c"]}, timeout=60, interval=0.5,
                   tolerate=TOLERATE,
                   message=lambda: f"B's executors to move to C: {_hosts_in_assignment(state, storm_id)}")
        # The count goes on without B: everything emitted before the cut gets committed
        # (replayed from C where it was lost on B), and newer messages too.
        run.wait(lambda: run.done() or recovered(marks, run.offsets()), 150,
                 "every message emitted before the cut committed, without B")
        after = run.committed()
        run.wait(lambda: run.done() or run.committed() > after, 60, "progress without B")
        log.info("without B: %s", run.describe())

        restored = time.time()
        net.restore("b")
        # B rejoins: a heartbeat after the restore, under its own id and address.
        wait_until(lambda: registered("b", since=restored), timeout=60, interval=0.5, tolerate=TOLERATE,
                   message=f"B's supervisor to rejoin after its link came back (log "
                           f"{cluster.supervisors['b'].log_path})")
        assert cluster.supervisor_id("b") == b_id
        # ... and stops the workers it ran before the cut: their executors are C's now.
        wait_until(lambda: not cluster.workers("b"), timeout=60, interval=0.5,
                   message=lambda: f"B's stale workers to stop: {sorted(cluster.workers('b'))}")
        log.info("B rejoined: %s", run.describe())

        run.wait(run.done, 240, "every message committed")
        run.kill_topology()
    finally:
        if state is not None:
            state.disconnect()
        try:
            cluster.stop()
        finally:
            try:
                if spark is not None:
                    spark.stop()
            finally:
                net.remove()
    left = processes_under(tmp_path / "cluster")
    assert not left, f"processes left behind: {[p.pid for p in left]}"

    del run.conf["spark.remote"]  # its address went with the bridge: the check runs a Spark of its own
    verdict = run.check_table()
    log.info("table: %s", verdict)
    assert verdict["missing"] == 0, verdict
    assert verdict["wrong"] == 0, verdict
    assert verdict["deduped"] == verdict["distinct"] == verdict["expected"] == MESSAGES * 3, verdict
    assert verdict["ok"], verdict


def test_a_stale_instance_does_not_lower_a_saved_offset(tmp_path):
    # After a partition the cut-off host's spout task and its replacement both save the offset:
    # the older numbers (the stale one's) must not undo the other's progress.
    path = O.offset_path(tmp_path, 0, 2)
    O.save(path, O.Offset(0, 2, 50, 40, 45))
    O.save(path, O.Offset(0, 2, 50, 20, 30))
    assert O.load(path, 0, 2, 50) == O.Offset(0, 2, 50, 40, 45)
    O.save(path, O.Offset(0, 2, 50, 50, 50))
    assert O.load(path, 0, 2, 50) == O.Offset(0, 2, 50, 50, 50)
    assert list(tmp_path.iterdir()) == [path]  # no temp or lock file left
