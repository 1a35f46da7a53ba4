"""Supervisor launch and recovery latency with real worker processes. Prints one JSON line.

Starts its own standalone ZooKeeper on loopback (cluster_state.zkserver), a Nimbus code store
served by the Nimbus RPC handlers, and one in-process Supervisor with one slot, then measures:
  launch_s    from an assignment written to ZooKeeper (a freshly submitted topology, so the
              code download and extraction are included) to the worker's first local heartbeat
  recovery_s  from SIGKILL of a running worker to its replacement's first local heartbeat
Each the median of --rounds rounds (min and max alongside). The topology is
examples/exclamation (every executor in the one worker).

Targets (issue 10): launch < 2 s; recovery < supervisor.monitor.frequency.secs + 2 s.

usage: python bench/supervisor.py [--rounds 5] [--monitor-secs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cluster_state.config import default_config  # noqa: E402
from cluster_state.factory import mk_storm_cluster_state  # noqa: E402
from cluster_state.records import Assignment  # noqa: E402
from cluster_state.worker_beats import read_worker_heartbeat  # noqa: E402
from cluster_state.zkserver import ZooKeeperServer  # noqa: E402
from daemons.nimbus.code_store import CodeStore  # noqa: E402
from daemons.nimbus.core import NimbusCore  # noqa: E402
from daemons.nimbus.handlers import make_handlers  # noqa: E402
from daemons.rpc.server import RpcServer  # noqa: E402
from daemons.supervisor.daemon import Supervisor  # noqa: E402
from daemons.supervisor.launcher import signal_worker  # noqa: E402
from daemons.supervisor.slot import SlotPhase  # noqa: E402
from executor.package import build_package  # noqa: E402
from executor.topology_file import load_topology_file  # noqa: E402

TOPOLOGY_DIR = ROOT / "examples" / "exclamation"
POLL_SECS = 0.005
TIMEOUT_SECS = 60.0


class _NoSchedulingCore(NimbusCore):
    def mk_assignments(self, scratch=frozenset()) -> None:
        pass  # the bench places the executors itself


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, what: str):
    deadline = time.monotonic() + TIMEOUT_SECS
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {TIMEOUT_SECS:g}s waiting for {what}")
        time.sleep(POLL_SECS)


def summary(samples: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(samples), 3), "min": round(min(samples), 3),
            "max": round(max(samples), 3), "n": len(samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--monitor-secs", type=float, default=3.0,
                        help="supervisor.monitor.frequency.secs (default: Storm's 3)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="storm-py-bench-supervisor-"))
    zk = ZooKeeperServer(tmp / "zk")
    zk.start()
    port = free_port()
    conf = default_config()
    conf.update({"storm.zookeeper.servers": [zk.host], "storm.zookeeper.port": zk.port,
                 "storm.zookeeper.root": "/bench-supervisor", "storm.zookeeper.session.timeout": 10000,
                 "storm.local.dir": str(tmp / "local"), "storm.local.hostname": "127.0.0.1",
                 "nimbus.seeds": ["127.0.0.1"], "supervisor.slots.ports": [port],
                 "supervisor.monitor.frequency.secs": args.monitor_secs,
                 "supervisor.worker.shutdown.sleep.secs": 1, "worker.heartbeat.frequency.secs": 1,
                 "task.heartbeat.frequency.secs": 1})
    cluster = mk_storm_cluster_state(conf)
    store = CodeStore(tmp / "nimbus" / "nimbus")
    store.open()
    core = _NoSchedulingCore({**conf, "storm.local.dir": str(tmp / "nimbus")}, cluster, store)
    rpc = RpcServer("127.0.0.1", 0, make_handlers(core, store, 100 << 20, lambda: None), name="bench-nimbus-rpc")
    rpc.start()
    conf["nimbus.thrift.port"] = rpc.port
    sup = Supervisor(conf)
    sup.start()
    tf = load_topology_file(TOPOLOGY_DIR / "topology.py")
    launch, recovery = [], []

    def worker_with_heartbeat(exclude: str | None = None):
        state = sup.slot_states()[port]
        wid = state.worker_id
        if wid and wid != exclude and read_worker_heartbeat(conf, wid) is not None:
            return wid
        return None

    try:
        for i in range(args.rounds):
            pkg = tmp / f"pkg-{i}.zip"
            build_package(TOPOLOGY_DIR, "topology.py", pkg, structure=tf.topology.structure.to_dict(),
                          conf=tf.config, max_bytes=100 << 20)
            storm_id = core.submit(f"exclamation{i}", pkg)
            base = cluster.storm_base(storm_id)
            executors = [e for _, e in core.layout(storm_id, base).all_executors()]
            began = time.monotonic()
            cluster.set_assignment(storm_id, Assignment(
                str(store.topology_dir(storm_id)), {sup.supervisor_id: "127.0.0.1"},
                {e: (sup.supervisor_id, port) for e in executors}, {e: int(time.time()) for e in executors}))
            wid = wait_for(worker_with_heartbeat, "the first worker heartbeat")
            launch.append(time.monotonic() - began)
            wait_for(lambda: sup.slot_states()[port].phase is SlotPhase.RUNNING, "the slot RUNNING")
            pid = sup.worker_records()[wid].pid
            began = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            wait_for(lambda old=wid: worker_with_heartbeat(exclude=old), "the replacement's first heartbeat")
            recovery.append(time.monotonic() - began)
            wait_for(lambda: sup.slot_states()[port].phase is SlotPhase.RUNNING, "the replacement RUNNING")
            cluster.remove_storm(storm_id)
            wait_for(lambda: sup.slot_states()[port].phase is SlotPhase.EMPTY, "the slot EMPTY")
    finally:
        records = sup.worker_records()
        sup.stop()
        for record in records.values():  # leave nothing running (start time checked as the supervisor does)
            signal_worker(record, signal.SIGKILL)
        rpc.stop()
        cluster.disconnect()
        zk.stop()
    print(json.dumps({"bench": "supervisor", "launch_s": summary(launch), "recovery_s": summary(recovery),
                      "monitor_secs": args.monitor_secs, "python": platform.python_version(),
                      "cpus": os.cpu_count()}))


if __name__ == "__main__":
    main()
