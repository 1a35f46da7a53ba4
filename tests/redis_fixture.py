"""Real Redis servers for tests (star-imported by tests/conftest.py).

Fixtures:
- `redis_server` (function): one `redis-server` of its own on a free 127.0.0.1 port, with its
  own temp directory, the append-only file on (`appendonly yes`, `appendfsync always`) and no
  RDB snapshots (`save ''`), so that `stop()` then `start()` (same port, same data) loses no
  acknowledged write. Stopped by its pid at teardown.
- `redis_server_factory` (function): `start(password=None) -> RedisServer` for tests that need
  more than one server or one with `requirepass`; all are stopped at teardown.

A `RedisServer` offers `host`, `port`, `password`, `pid`, `running`, `start()`, `stop()`
(SIGTERM: Redis flushes and exits), `kill()` (SIGKILL: a crash), `conf(**overrides)` (the storm-py
conf selecting the redis state provider on this server: `topology.state.provider` and
`topology.state.provider.config`), `provider_config(**overrides)` (that mapping alone), `client()`
(a redis-py client for inspecting the server; close it) and `log_tail()`.

redis-server comes from the Debian package `redis-server` (deploy/install-test-deps.sh). Without
it these fixtures fail with a message saying so; STORM_PY_SKIP_REDIS=1 makes them skip instead.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

__all__ = ["RedisServer", "redis_server", "redis_server_factory"]

_START_TIMEOUT_SECS = 20.0
_STOP_TIMEOUT_SECS = 10.0
KEY_PREFIX = "storm-py-test"


def _die_with_parent() -> None:
    # In the child between fork and exec: a test run killed outright takes its servers along.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    """Whether the server takes commands: PONG, or NOAUTH from one with a password (LOADING while
    it reads its append-only file is not yet)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            reply = s.recv(128)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH"))


class RedisServer:
    host = "127.0.0.1"

    def __init__(self, directory: Path, password: str | None = None):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.port: int | None = None  # chosen at the first start, kept for every restart
        self._proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def start(self) -> "RedisServer":
        """Start (again, on the same port and data); returns once it answers. Idempotent."""
        if self.running:
            return self
        executable = shutil.which("redis-server")
        if executable is None:
            message = ("redis-server is not on PATH: install the Debian package redis-server "
                       "(bash deploy/install-test-deps.sh does)")
            if os.environ.get("STORM_PY_SKIP_REDIS") == "1":
                pytest.skip(message)
            pytest.fail(message, pytrace=False)
        tries = 1 if self.port is not None else 3  # a free port taken meanwhile: pick another
        for attempt in range(tries):
            port = self.port if self.port is not None else _free_port()
            if self._launch(executable, port):
                self.port = port
                return self
            if "Address already in use" not in self.log_tail() or attempt == tries - 1:
                break
        pytest.fail(f"redis-server on 127.0.0.1:{port} did not come up within {_START_TIMEOUT_SECS:g}s; "
                    f"its log ({self.log_path}):\n{self.log_tail()}", pytrace=False)

    def _launch(self, executable: str, port: int) -> bool:
        args = [executable, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--logfile", str(self.log_path), "--daemonize", "no", "--save", "",
                "--appendonly", "yes", "--appendfsync", "always"]
        if self.password is not None:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + _START_TIMEOUT_SECS
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                return False
            if _answers(port):
                return True
            time.sleep(0.02)  # poll with the deadline above
        self.stop()
        return False

    def stop(self) -> None:
        """SIGTERM by pid (Redis writes out its append-only file and exits), SIGKILL if it has not
        exited within the deadline. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(_STOP_TIMEOUT_SECS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(_STOP_TIMEOUT_SECS)

    def kill(self) -> None:
        """SIGKILL by pid: a crash (with appendfsync always no acknowledged write is lost)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(_STOP_TIMEOUT_SECS)

    def provider_config(self, **overrides: Any) -> dict[str, Any]:
        config = {"host": self.host, "port": self.port, "key_prefix": KEY_PREFIX, "timeout": 2.0}
        if self.password is not None:
            config["password"] = self.password
        config.update(overrides)
        return config

    def conf(self, **overrides: Any) -> dict[str, Any]:
        return {"topology.state.provider": "redis",
                "topology.state.provider.config": self.provider_config(**overrides)}

    def client(self):
        import redis

        return redis.Redis(host=self.host, port=self.port, password=self.password, protocol=2,
                           socket_timeout=5, socket_connect_timeout=5)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"RedisServer(127.0.0.1:{self.port}, pid={self.pid}, dir={str(self.directory)!r})"


@pytest.fixture
def redis_server_factory(tmp_path_factory: pytest.TempPathFactory):
    servers: list[RedisServer] = []

    def start(password: str | None = None) -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("redis"), password=password)
        servers.append(server)
        return server.start()

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def redis_server(redis_server_factory) -> RedisServer:
    return redis_server_factory()
