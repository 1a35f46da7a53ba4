"""A Spark Connect server shared by this test process's clusters and tools (star-imported by
tests/conftest.py).

`spark_remote` (session): `{"spark.remote": "sc://127.0.0.1:PORT"}`, the conf that makes a
worker's Spark sink, or a `storm-py sink` command, use one `storm-py spark-connect` server
instead of starting a Spark JVM of its own (docs/operations.md, "One Spark per host"). Started by
the first test that asks, stopped at the end of the session.

Why: every worker of a dev-cluster test that writes the table started its own Spark JVM (~10
CPU-s each on this machine, again after every kill), which made Spark the largest CPU cost of
the suite (tests/DURATIONS.md). The tests whose claim is about the table, not about where Spark
runs, share this server; the embedded JVM stays covered by LocalCluster, the word count's own
test, the sink's process tests and the multi-host cluster (its hosts are network namespaces that
do not reach this server's loopback address).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testutil import free_port, wait_until
from zk_fixture import SESSION_PIDS

__all__ = ["spark_remote", "SparkConnectServer"]

REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 240.0  # a JVM start on a loaded 2-core machine: ~20-60 s


class SparkConnectServer:
    """`storm-py spark-connect` as a child process on a free loopback port."""

    def __init__(self, base: Path):
        self.base = base
        self.port = free_port()
        self.log = base / "spark-connect.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it (again, on the same port, after stop()) and wait until it serves."""
        self.base.mkdir(parents=True, exist_ok=True)
        # local[2]: the machine's cores, shared by every test that writes through it.
        cmd = [sys.executable, "-m", "daemons.cli", "spark-connect", "--port", str(self.port),
               "--master", "local[2]", "-c", f"storm.log.dir={self.base}"]
        with open(self.base / "spark-connect.out", "ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        SESSION_PIDS.add(self.proc.pid)
        wait_until(self._ready, READY_TIMEOUT, lambda: f"the Spark Connect server on {self.url}: {self._tail()}",
                   interval=0.5)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"storm-py spark-connect exited with {self.proc.returncode}: {self._tail()}")
        # Its gRPC port opens last, once the server serves (the log says so only at INFO).
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def _tail(self) -> str:
        text = ""
        for path in (self.base / "spark-connect.out", self.log):
            try:
                text += path.read_text(errors="replace")[-1500:]
            except FileNotFoundError:
                pass
        return text or "(no output)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


@pytest.fixture(scope="session")
def spark_remote(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    server = SparkConnectServer(tmp_path_factory.mktemp("spark-connect"))
    try:
        server.start()
        yield {"spark.remote": server.url}
    finally:
        server.stop()
        SESSION_PIDS.discard(server.proc.pid if server.proc else -1)

