"""Nimbus RPC round trip on loopback. Prints one JSON line.

Measures, against an RpcServer on 127.0.0.1 (its socket thread in this process, the client on
the main thread, one call at a time):
  noop_ms     a call whose handler returns None (framing, dispatch and the zmq round trip)
  echo_1k_ms  a call carrying a 1 KiB argument that the handler sends back
  auth_ms     the no-op call with a shared secret set on both sides
Each as median/p99 in milliseconds over --calls calls, after a warm-up.

usage: python bench/rpc.py [--calls 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from daemons.rpc.client import RpcClient  # noqa: E402
from daemons.rpc.server import RpcServer  # noqa: E402

WARMUP = 100


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {"median": round(statistics.median(ordered) * 1000, 4), "p99": round(p99 * 1000, 4),
            "n": len(ordered)}


def timed(call, calls: int) -> dict[str, float]:
    for _ in range(WARMUP):
        call()
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        call()
        samples.append(time.perf_counter() - began)
    return percentiles(samples)


def measure(calls: int, secret: str | None = None) -> dict[str, dict[str, float]]:
    handlers = {"noop": lambda args: None, "echo": lambda args: args["data"]}
    server = RpcServer("127.0.0.1", 0, handlers, secret=secret, name="bench-rpc")
    server.start()
    try:
        with RpcClient("127.0.0.1", server.port, timeout_secs=10, secret=secret) as client:
            out = {"noop_ms": timed(lambda: client.call("noop"), calls)}
            if secret is None:
                data = b"x" * 1024
                out["echo_1k_ms"] = timed(lambda: client.call("echo", data=data), calls)
            return out
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    opts = parser.parse_args()
    result = {"bench": "rpc", "python": platform.python_version(), "cpus": os.cpu_count()}
    result.update(measure(opts.calls))
    result["auth_ms"] = measure(opts.calls, secret="bench-secret")["noop_ms"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
