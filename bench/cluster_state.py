"""Cluster-state latency on a real ZooKeeper it starts itself. Prints one JSON line.

Measures, on a standalone ZooKeeper on loopback (cluster_state.zkserver, the same launcher
the test fixture uses):
  set_ms / get_ms                      raw ClusterState set_data / get_data of a 256-byte node
  set_assignment_ms / assignment_info_ms   the same through StormClusterState (msgpack records)
  watch_ms                             from calling set_assignment on one client to the
                                       assignment_info callback running on another client
                                       (re-registered each round, as the supervisor does)
and, for comparison, the in-memory store (local mode) under "memory".

usage: python bench/cluster_state.py [--ops 2000] [--rounds 300]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from cluster_state import Assignment, InMemoryStore, mk_storm_cluster_state  # noqa: E402
from cluster_state.config import default_config  # noqa: E402
from cluster_state.zkserver import ZooKeeperServer, four_letter_word  # noqa: E402


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"median": round(statistics.median(ordered) * 1000, 4), "p99": round(p99 * 1000, 4),
            "n": len(ordered)}


def timed(fn, n: int, warmup: int) -> list[float]:
    for i in range(warmup):
        fn(i)
    samples = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return samples


def assignment(i: int) -> Assignment:
    # A modest topology: 40 executors on 4 slots of 2 nodes.
    slots = [("node-a", 6700), ("node-a", 6701), ("node-b", 6700), ("node-b", 6701)]
    executors = {(t, t): slots[t % 4] for t in range(1, 41)}
    return Assignment(f"/nimbus/stormdist/bench-{i}", {"node-a": "host-a", "node-b": "host-b"},
                      executors, {e: 1700000000 + i for e in executors})


def measure(conf: dict, ops: int, rounds: int, store: InMemoryStore | None = None) -> dict:
    kwargs = {"store": store} if store is not None else {}
    writer = mk_storm_cluster_state(conf, **kwargs)
    watcher = mk_storm_cluster_state(conf, **kwargs)
    try:
        cs = writer.cluster_state
        payload = os.urandom(256)
        warmup = max(ops // 10, 10)
        result = {
            "set_ms": percentiles(timed(lambda i: cs.set_data("/bench/node", payload), ops, warmup)),
            "get_ms": percentiles(timed(lambda i: cs.get_data("/bench/node"), ops, warmup)),
            "set_assignment_ms": percentiles(
                timed(lambda i: writer.set_assignment("bench-1", assignment(i)), ops, warmup)),
            "assignment_info_ms": percentiles(
                timed(lambda i: writer.assignment_info("bench-1"), ops, warmup)),
        }
        fired = threading.Event()
        fired_at = [0.0]

        def callback() -> None:  # runs on the watcher's event thread
            fired_at[0] = time.perf_counter()
            fired.set()

        samples = []
        for i in range(rounds + 10):
            fired.clear()
            watcher.assignment_info("bench-1", callback)  # one-shot: re-register every round
            start = time.perf_counter()
            writer.set_assignment("bench-1", assignment(i))
            if not fired.wait(10):
                raise RuntimeError("watch callback did not fire within 10 s")
            if i >= 10:  # warm-up rounds
                samples.append(fired_at[0] - start)
        result["watch_ms"] = percentiles(samples)
        cs.delete_node("/bench")
        return result
    finally:
        watcher.disconnect()
        writer.disconnect()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000, help="timed operations per measurement")
    ap.add_argument("--rounds", type=int, default=300, help="timed set_assignment -> callback rounds")
    args = ap.parse_args()

    conf = default_config()
    with ZooKeeperServer() as server:
        conf.update({"storm.zookeeper.servers": [server.host], "storm.zookeeper.port": server.port,
                     "storm.zookeeper.root": "/storm-bench",
                     "storm.zookeeper.session.timeout": server.max_session_timeout_ms})
        version = four_letter_word(server.host, server.port, "srvr").splitlines()[0]
        zk = measure(conf, args.ops, args.rounds)
    memory = measure(conf, args.ops, args.rounds, store=InMemoryStore())
    print(json.dumps({
        "bench": "cluster_state",
        "zookeeper": version.split(":", 1)[-1].strip().split("-")[0],
        "force_sync": True,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        **zk,
        "memory": memory,
    }), flush=True)


if __name__ == "__main__":
    main()
