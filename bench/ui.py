"""The REST API's answer times on a real dev cluster running a 200-executor topology
(bench/wide_topology: 4 workers on 2 supervisors), through `storm-py ui` and Nimbus's RPC as a
client sees them. Prints one JSON line: per endpoint the median, p90 and max milliseconds of
`--requests` sequential GETs, taken after the topology ran `--warmup` seconds.

Targets (issue 17): GET /api/v1/topology/ID median < 100 ms, GET /metrics median < 200 ms.

usage: python bench/ui.py [--requests 50] [--warmup 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from daemons.devcluster import DevCluster  # noqa: E402

TOPOLOGY = os.path.join(ROOT, "bench", "wide_topology", "topology.py")
FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1}


def fetch(url: str) -> tuple[float, bytes]:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as reply:
        body = reply.read()
    return (time.perf_counter() - began) * 1000.0, body


def timed(url: str, n: int) -> dict:
    times, size = [], 0
    for _ in range(n):
        ms, body = fetch(url)
        times.append(ms)
        size = len(body)
    times.sort()
    return {"median_ms": round(statistics.median(times), 1), "p90_ms": round(times[int(0.9 * (n - 1))], 1),
            "max_ms": round(times[-1], 1), "bytes": size}


def wait_running(ui: str, storm_id: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        _ms, body = fetch(f"{ui}/api/v1/topology/{storm_id}")
        detail = json.loads(body)
        alive = all(w["alive"] for w in detail["workers"]) and len(detail["workers"]) == 4
        if alive and detail["executorsTotal"] == 200 and detail["topologyStats"][3]["emitted"] > 0:
            return detail
        if time.monotonic() > deadline:
            raise SystemExit(f"the wide topology did not run within {timeout:g}s: {detail['diagnosis']}")
        time.sleep(1)  # poll interval, bounded by the deadline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--warmup", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="storm-py-bench-ui-") as base:
        dev = DevCluster(os.path.join(base, "dev"), supervisors=2, slots=2, user_conf=FAST)
        dev.start()
        try:
            out = subprocess.run([sys.executable, "-m", "daemons.cli", "jar", "submit", TOPOLOGY, "--name", "wide",
                                  "--conf-dir", str(dev.conf_dir)], cwd=ROOT, capture_output=True, text=True,
                                 timeout=120, check=True)
            storm_id = out.stdout.strip().rsplit(" ", 1)[1]
            ui = dev.ui_url
            detail = wait_running(ui, storm_id, 180)
            time.sleep(args.warmup)
            result = {
                "bench": "ui", "executors": detail["executorsTotal"], "workers": len(detail["workers"]),
                "requests": args.requests,
                "topology": timed(f"{ui}/api/v1/topology/{storm_id}", args.requests),
                "topology_600_sys": timed(f"{ui}/api/v1/topology/{storm_id}?window=600&sys=1", args.requests),
                "component": timed(f"{ui}/api/v1/topology/{storm_id}/component/parse", args.requests),
                "visualization": timed(f"{ui}/api/v1/topology/{storm_id}/visualization", args.requests),
                "topology_summary": timed(f"{ui}/api/v1/topology/summary", args.requests),
                "metrics": timed(f"{ui}/metrics", args.requests),
            }
        finally:
            dev.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
