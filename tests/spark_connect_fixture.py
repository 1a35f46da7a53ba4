"""A Spark Connect server shared by the run's clusters and tools (star-imported by
tests/conftest.py).

`spark_remote` (session): `{"spark.remote": "sc://127.0.0.1:PORT"}`, the conf that makes a
worker's Spark sink, or a `storm-py sink` command, use one `storm-py spark-connect` server
instead of starting a Spark JVM of its own (docs/operations.md, "One Spark per host"). One for
the whole run, started by the first test that asks, stopped at the end of the run (below). The
multi-host test runs its own `SparkConnectServer`, on its bridge's address.

Why: every worker of a dev-cluster test that writes the table started its own Spark JVM (~10
CPU-s each on this machine, again after every kill), which made Spark the largest CPU cost of
the suite (tests/DURATIONS.md). The tests whose claim is about the table, not about where Spark
runs, share this server; the embedded JVM stays covered by LocalCluster, the word count's own
test, the sink's process tests, the standalone Spark cluster's test and the table checks.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import psutil
import pytest
from testutil import free_port, wait_until
from zk_fixture import SESSION_PIDS

from daemons.process_start import process_start

__all__ = ["spark_remote", "SparkConnectServer", "stop_shared_server", "SHARED_DIR_ENV"]

REPO = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 240.0  # a JVM start on a loaded 2-core machine: ~20-60 s


class SparkConnectServer:
    """`storm-py spark-connect` as a child process on a free port of `host` (loopback unless
    given: the multi-host test binds it on the root namespace's address on its bridge)."""

    def __init__(self, base: Path, host: str = "127.0.0.1"):
        self.base = base
        self.host = host
        self.port = free_port()
        self.log = base / "spark-connect.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def start(self, wait: bool = True) -> None:
        """Start it (again, on the same port, after stop()) and wait until it serves (or later,
        with wait_ready(), while something else starts)."""
        self.base.mkdir(parents=True, exist_ok=True)
        # local[2]: the machine's cores, shared by every test that writes through it.
        cmd = [sys.executable, "-m", "daemons.cli", "spark-connect", "--host", self.host, "--port", str(self.port),
               "--master", "local[2]", "-c", f"storm.log.dir={self.base}"]
        with open(self.base / "spark-connect.out", "ab") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        SESSION_PIDS.add(self.proc.pid)
        if wait:
            self.wait_ready()

    def wait_ready(self) -> None:
        wait_until(self._ready, READY_TIMEOUT, lambda: f"the Spark Connect server on {self.url}: {self._tail()}",
                   interval=0.5)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"storm-py spark-connect exited with {self.proc.returncode}: {self._tail()}")
        # Its gRPC port opens last, once the server serves (the log says so only at INFO).
        return _accepts(self.host, self.port)

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
        SESSION_PIDS.discard(self.proc.pid)


# One server for the whole run, whichever of xdist's workers asks first: each JVM start and
# warm-up costs ~20 CPU-s, and a server per test process made three. The run's first process
# (xdist's controller, or the only one) names a directory its workers inherit; the first test
# process that asks starts the server under a lock there and records it, and the run's first
# process stops it at the end of the run (stop_shared_server, from tests/conftest.py).
SHARED_DIR_ENV = "STORM_PY_TESTS_SHARED_DIR"


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _shared_dir() -> Path:
    return Path(os.environ[SHARED_DIR_ENV]) / "spark-connect"


def _recorded(path: Path) -> dict[str, Any] | None:
    """The recorded server, if its process still runs (its start time guards a reused pid)."""
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    start = process_start(record["pid"])
    return record if start is not None and start.to_text() == record["started"] else None


@pytest.fixture(scope="session")
def spark_remote() -> dict[str, Any]:
    shared = _shared_dir()
    shared.mkdir(parents=True, exist_ok=True)
    path = shared / "server.json"
    with _locked(shared / "lock"):
        record = _recorded(path)
        if record is None or not _accepts(record["host"], record["port"]):
            server = SparkConnectServer(shared / f"started-by-{os.getpid()}")
            server.start()
            record = {"pid": server.proc.pid, "started": process_start(server.proc.pid).to_text(),
                      "host": server.host, "port": server.port, "url": server.url}
            path.write_text(json.dumps(record))
    return {"spark.remote": record["url"]}


def stop_shared_server() -> None:
    """Stop the run's server, if a test started one (the run's first process, at its end)."""
    record = _recorded(_shared_dir() / "server.json")
    if record is None:
        return
    try:
        proc = psutil.Process(record["pid"])
        proc.terminate()
        proc.wait(60)
    except psutil.TimeoutExpired:
        proc.kill()
        proc.wait(30)
    except psutil.NoSuchProcess:
        pass
