"""Exactly-once results end to end from a real source: N numbered events in a Redis stream,
read by RedisStreamSpout on a dev cluster (the run's shared one: tests/shared_clusters.py; 2
workers) from a Redis server of the test's own (as `storm-py dev-cluster --redis` offers one,
the state provider too) and stored by the Spark sink, exactly once although both workers are
SIGKILLed in turn while events flow: the raw table (no dedupe view) holds each event once, so
its sum is exactly N(N+1)/2, and the group's pending list is empty (every entry XACKed once a
commit covered it).

This is the example a user runs (examples/redis_events/: feed.py, topology.py, check_sum.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import psutil
import pytest
from devcluster_helpers import ROOT, storm_py, submit
from testutil import wait_until

pytestmark = [pytest.mark.timeout(480), pytest.mark.zk, pytest.mark.cluster, pytest.mark.spark,
              pytest.mark.redis, pytest.mark.slow]

EXAMPLE = ROOT / "examples" / "redis_events"
N = 10_000  # the kills come at +1,000 acked each: the rest is replays and steady flow
DEADLINE = 240


def _run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                         stdin=subprocess.DEVNULL)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    return out


def _group(client) -> dict:
    """The example's consumer group: entries handed out ('entries-read') and still unacked."""
    groups = [g for g in client.xinfo_groups("events") if g["name"] == b"summer"]
    return groups[0] if groups else {"entries-read": 0, "pending": 0, "last-delivered-id": b"0-0"}


def _acked(client) -> int:
    g = _group(client)
    return (g.get("entries-read") or 0) - g["pending"]


def _worker_pids(cluster, storm_id: str) -> list[int]:
    return sorted(cluster.worker_pids(storm_id).values())


def test_numbered_events_are_summed_exactly_once_under_worker_kills(tmp_path, shared_dev_cluster, redis_server,
                                                                    spark_remote):
    if shutil.which("java") is None:
        pytest.skip("needs Java and the Debian zookeeper package")
    import redis as redis_py

    table = tmp_path / "table"
    c = shared_dev_cluster
    port = redis_server.port
    client = redis_py.Redis(host="127.0.0.1", port=port, socket_timeout=10, socket_connect_timeout=5)
    try:
        fed = _run(str(EXAMPLE / "feed.py"), "--port", str(port), "--events", str(N))
        assert fed.returncode == 0 and f"their sum is {N * (N + 1) // 2}" in fed.stdout, fed
        storm_id = submit(c.conf_dir, EXAMPLE / "topology.py", "events", f"events.redis.port={port}",
                          f"events.table={table}", "topology.message.timeout.secs=20",
                          f"spark.remote={spark_remote['spark.remote']}",
                          "topology.max.spout.pending=2000", "topology.state.provider=redis",
                          f"topology.state.provider.config={{host: 127.0.0.1, port: {port}}}")
        # Kill every worker in turn, each time once events are being acked (committed, stored).
        for round_ in range(2):
            floor = _acked(client)
            wait_until(lambda f=floor: _acked(client) >= f + 1000, DEADLINE,
                       lambda r=round_: f"progress before kill {r + 1} ({_group(client)})", interval=0.5)
            pids = wait_until(lambda: p if len(p := _worker_pids(c, storm_id)) == 2 else None, DEADLINE,
                              "two workers running", interval=0.5)
            psutil.Process(pids[round_ % len(pids)]).kill()
        wait_until(lambda: _acked(client) >= N, DEADLINE,
                   lambda: f"every event stored and acked ({_group(client)})", interval=0.5)
        last = client.xrevrange("events", count=1)[0][0]
        assert _group(client)["last-delivered-id"] == last and _group(client)["pending"] == 0
        storm_py("kill", "events", "--wait", "0", conf_dir=c.conf_dir, check=0, timeout=120)
    finally:
        client.close()
    out = _run(str(EXAMPLE / "check_sum.py"), str(table), "--events", str(N),
               "--spark-remote", spark_remote["spark.remote"], timeout=300)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["exact"] and out.returncode == 0, result
    assert result["sum"] == N * (N + 1) // 2 and result["events"] == N and result["rows"] == N, result


def test_list_says_why_a_redis_stream_topology_reads_nothing(tmp_path, shared_dev_cluster):
    """Redis not reachable where the topology says: one error naming host:port reaches
    `storm-py list`, the workers keep running (no crash loop), and events flow once it is up."""
    if shutil.which("java") is None or shutil.which("redis-server") is None:
        pytest.skip("needs Java, the Debian zookeeper package and redis-server")
    import socket

    from redis_fixture import RedisServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    table = tmp_path / "table"
    c = shared_dev_cluster
    storm_id = submit(c.conf_dir, EXAMPLE / "topology.py", "events", f"events.redis.port={port}",
                      f"events.table={table}", "topology.workers=1")
    where = f"127.0.0.1:{port}"

    def listed() -> str:
        return storm_py("list", conf_dir=c.conf_dir).stdout

    out = wait_until(lambda: (lambda o: o if where in o and "unreachable" in o else None)(listed()), DEADLINE,
                     lambda: f"list naming {where}: {listed()}", interval=1)
    assert "Traceback" not in out, out
    pids = _worker_pids(c, storm_id)
    server = RedisServer(tmp_path / "redis", port=port).start()
    try:
        fed = _run(str(EXAMPLE / "feed.py"), "--port", str(port), "--events", "100")
        assert fed.returncode == 0, fed
        client = server.client()
        try:
            wait_until(lambda: _acked(client) >= 100, DEADLINE, lambda: f"events stored ({_group(client)})",
                       interval=0.5)
        finally:
            client.close()
        assert _worker_pids(c, storm_id) == pids  # the same workers: the outage cost no restart
    finally:
        storm_py("kill", "events", "--wait", "0", conf_dir=c.conf_dir, check=0, timeout=120)
        server.stop()
