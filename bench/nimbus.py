"""Nimbus round trips on a real ZooKeeper and a real Nimbus RPC server. Prints one JSON line.

  submit_ms      jar submit of a small topology whose package is ~1 MB (a data file beside
                 the topology file): upload in chunks, verify, install, schedule, write base and
                 assignment; median/max over --runs submissions (each under a new name)
  list_ms        `cluster_info` (what `storm-py list` calls) with 1 topology running and with all of
                 them (it reads each topology's base and assignment from ZooKeeper)
  schedule_ms    one scheduling round of 1,000 executors over 100 supervisors x 4 slots (the
                 pure function; bench/nimbus_schedule.py has the scenarios in detail)

The client is the one the CLI uses (daemons.rpc.client); process start-up of the CLI itself is
not included. usage: python bench/nimbus.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cluster_state.config import default_config  # noqa: E402
from cluster_state.factory import mk_storm_cluster_state  # noqa: E402
from cluster_state.records import SupervisorInfo  # noqa: E402
from cluster_state.zkserver import ZooKeeperServer  # noqa: E402
from daemons.cli_jar import upload  # noqa: E402
from daemons.nimbus.daemon import Nimbus  # noqa: E402
from daemons.nimbus.scheduler import SupervisorSlots, TopologyRequest, schedule  # noqa: E402
from daemons.rpc.client import RpcClient  # noqa: E402
from executor.package import build_package  # noqa: E402
from executor.topology_file import load_topology_file  # noqa: E402

TOPOLOGY = '''
from executor.api import Bolt, Spout, TopologyBuilder


class S(Spout):
    def declare_output_fields(self, d):
        d.declare(["n"])

    def next_tuple(self):
        pass


class B(Bolt):
    def declare_output_fields(self, d):
        d.declare(["n"])

    def execute(self, tup):
        pass


b = TopologyBuilder()
b.set_spout("s", S(), 2)
b.set_bolt("b", B(), 4).shuffle_grouping("s")
topology = b.create_topology()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ms(values: list[float]) -> dict:
    return {"median": round(statistics.median(values) * 1000, 2), "max": round(max(values) * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="storm-py-bench-nimbus-"))
    zk = ZooKeeperServer(tmp / "zk")
    zk.start()
    nimbus = None
    try:
        conf = {**default_config(), "storm.zookeeper.servers": ["127.0.0.1"], "storm.zookeeper.port": zk.port,
                "storm.local.dir": str(tmp / "local"), "storm.local.hostname": "127.0.0.1",
                "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": free_port()}
        state = mk_storm_cluster_state(conf)
        for i in range(4):
            state.supervisor_heartbeat(f"sup-{i}", SupervisorInfo(
                time_secs=1, hostname="127.0.0.1", assignment_id=f"sup-{i}", used_ports=(),
                meta=tuple(range(6700 + 10 * i, 6700 + 10 * i + 8)), scheduler_meta=None, uptime_secs=0))
        topo = tmp / "topo"
        topo.mkdir()
        (topo / "topology.py").write_text(TOPOLOGY)
        (topo / "data.bin").write_bytes(os.urandom(1 << 20))
        tf = load_topology_file(topo / "topology.py")
        pkg = tmp / "pkg.zip"
        build_package(topo, "topology.py", pkg, structure=tf.topology.structure.to_dict(), conf={},
                      max_bytes=10 << 20)
        nimbus = Nimbus(conf)
        nimbus.start()
        client = RpcClient("127.0.0.1", nimbus.port, timeout_secs=30)
        def list_times(n):
            out = []
            for _ in range(n):
                t0 = time.perf_counter()
                client.call("cluster_info")
                out.append(time.perf_counter() - t0)
            return out

        submit = []
        list_one = None
        for i in range(args.runs):
            t0 = time.perf_counter()
            client.call("submit", name=f"t{i}", upload_id=upload(client, pkg), conf={"topology.workers": 1})
            submit.append(time.perf_counter() - t0)
            if i == 0:
                list_one = list_times(50)
        listing = list_times(50)
        client.close()
        sups = [SupervisorSlots(f"s{i}", f"h{i}", (6700, 6701, 6702, 6703)) for i in range(100)]
        req = [TopologyRequest("big", tuple((i, i) for i in range(1, 1001)), 400)]
        sched = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            schedule(req, sups)
            sched.append(time.perf_counter() - t0)
        state.disconnect()
        print(json.dumps({"bench": "nimbus", "package_bytes": pkg.stat().st_size, "submit_ms": ms(submit),
                          "list_ms_1_topology": ms(list_one), f"list_ms_{args.runs}_topologies": ms(listing), "schedule_1000_executors_ms": ms(sched), "runs": args.runs,
                          "python": platform.python_version(), "cpus": os.cpu_count()}))
    finally:
        if nimbus is not None:
            nimbus.stop()
        zk.stop()


if __name__ == "__main__":
    main()
