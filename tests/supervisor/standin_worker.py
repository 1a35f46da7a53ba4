"""A stand-in for executor/worker_main.py with the same process contract (same arguments, pid
file, local heartbeat, exit 0 on SIGTERM), used until the real worker lands and for failure modes
the real worker has no switch for. Its executors come from the topology's assignment in
ZooKeeper, as the real worker's do. `STANDIN_MODE` in its environment: `ok` (default) or
`no-heartbeat` (runs but never heartbeats)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.local_state import LS_WORKER_HEARTBEAT, LocalState
from cluster_state.records import WorkerHeartbeat


def main() -> int:
    p = argparse.ArgumentParser()
    for name in ("--storm-id", "--supervisor-id", "--worker-id", "--conf-file"):
        p.add_argument(name, required=True)
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args()
    conf = json.loads(Path(args.conf_file).read_text())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pids = local_layout.worker_pids(conf, args.worker_id)
    pids.mkdir(parents=True, exist_ok=True)
    (pids / str(os.getpid())).touch()
    cluster = mk_storm_cluster_state(conf)
    try:
        assignment = cluster.assignment_info(args.storm_id)
    finally:
        cluster.disconnect()
    executors = [e for e, (node, port) in (assignment.executor_node_port.items() if assignment else ())
                 if node == args.supervisor_id and port == args.port]
    mode = os.environ.get("STANDIN_MODE", "ok")
    state = LocalState(local_layout.worker_heartbeats(conf, args.worker_id))
    started = time.time()
    freq = float(conf.get("worker.heartbeat.frequency.secs", 1))
    while not stop.is_set():
        if mode == "ok":
            now = time.time()
            state.put(LS_WORKER_HEARTBEAT, WorkerHeartbeat(args.storm_id, executors, args.port, int(now),
                                                           int(now - started)))
        stop.wait(freq)
    return 0


if __name__ == "__main__":
    sys.exit(main())
