"""Run a Redis server (Debian's `redis-server` package) on loopback: the state provider of
`storm-py dev-cluster --redis`, and the test fixtures' (tests/redis_fixture.py).

As cluster_state/zkserver.py does for ZooKeeper: no systemd, no fixed port (a free one, kept
across restarts), data and log in a directory of its own, ready when it answers PING, stopped by
its pid (SIGTERM: Redis writes out its append-only file; SIGKILL after a deadline). The
append-only file is on (`appendfsync always`) and snapshots off, so a stop and a start on the
same directory lose no acknowledged write.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from .zkserver import die_with_parent, free_port

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
START_TIMEOUT_SECS = 20.0
STOP_TIMEOUT_SECS = 10.0


class RedisUnavailable(RuntimeError):
    """redis-server is not installed, or the server did not come up."""


def answers(port: int, host: str = HOST) -> bool:
    """Whether the server takes commands: PONG, or NOAUTH from one with a password (LOADING
    while it reads its append-only file is not yet)."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            reply = s.recv(128)
    except OSError:
        return False
    return reply.startswith((b"+PONG", b"-NOAUTH"))


class RedisServer:
    host = HOST

    def __init__(self, directory: str | Path, password: str | None = None, port: int | None = None):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.password = password
        self.port = port  # chosen at the first start when None, kept for every restart
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
        """Start (again, on the same port and data); returns once it answers. Idempotent.
        Raises RedisUnavailable naming the cause."""
        if self.running:
            return self
        executable = shutil.which("redis-server")
        if executable is None:
            raise RedisUnavailable("redis-server is not on PATH: install the Debian package redis-server")
        tries = 1 if self.port is not None else 3  # a free port taken meanwhile: pick another
        port = self.port
        for attempt in range(tries):
            port = self.port if self.port is not None else free_port(HOST)
            if self._launch(executable, port):
                self.port = port
                log.info("redis-server ready on %s:%d (pid %d)", HOST, port, self.pid)
                return self
            if "Address already in use" not in self.log_tail() or attempt == tries - 1:
                break
        raise RedisUnavailable(f"redis-server on {HOST}:{port} did not come up within {START_TIMEOUT_SECS:g}s; "
                               f"its log ({self.log_path}):\n{self.log_tail()}")

    def _launch(self, executable: str, port: int) -> bool:
        args = [executable, "--port", str(port), "--bind", HOST, "--dir", str(self.directory),
                "--logfile", str(self.log_path), "--daemonize", "no", "--save", "",
                "--appendonly", "yes", "--appendfsync", "always"]
        if self.password is not None:
            args += ["--requirepass", self.password]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
        deadline = time.monotonic() + START_TIMEOUT_SECS
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self._proc = None
                return False
            if answers(port):
                return True
            time.sleep(0.02)  # poll with the deadline above
        self.stop()
        return False

    def stop(self) -> None:
        """SIGTERM by pid, SIGKILL if it has not exited within the deadline. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_SECS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(STOP_TIMEOUT_SECS)

    def kill(self) -> None:
        """SIGKILL by pid: a crash (with appendfsync always no acknowledged write is lost)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(STOP_TIMEOUT_SECS)

    def provider_config(self, **overrides: Any) -> dict[str, Any]:
        """`topology.state.provider.config` for this server."""
        config: dict[str, Any] = {"host": self.host, "port": self.port}
        if self.password is not None:
            config["password"] = self.password
        config.update(overrides)
        return config

    def conf(self, **overrides: Any) -> dict[str, Any]:
        """The storm-py conf selecting the redis state provider on this server."""
        return {"topology.state.provider": "redis", "topology.state.provider.config": self.provider_config(**overrides)}

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"RedisServer({HOST}:{self.port}, pid={self.pid}, dir={str(self.directory)!r})"
