"""Run a standalone ZooKeeper (the Debian `zookeeper` package) on loopback.

Used by the test fixtures (tests/zk_fixture.py), the benchmark (bench/cluster_state.py) and
for trying storm-py on one machine. No systemd, no fixed ports: the server listens on
127.0.0.1 on a free port, keeps its data and log in a directory of its own, is ready when it
answers `ruok` with `imok`, and is stopped by its pid (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .auth import digest_id

log = logging.getLogger(__name__)

DEFAULT_JAR = "/usr/share/java/zookeeper.jar"
# Optional slf4j binding so the server writes a readable log (without it slf4j stays silent).
_SLF4J_SIMPLE = "/usr/share/java/slf4j-simple.jar"
JAR_ENV = "STORM_PY_ZOOKEEPER_JAR"


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper or Java is not installed, or the server did not come up."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (e.g. ruok, srvr) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def die_with_parent() -> None:
    # Runs in the child between fork and exec: if the process that started the server dies
    # without stopping it (SIGKILL), the kernel sends the server SIGTERM. Linux only; tied to
    # the starting thread, which is fine for fixtures and the benchmark.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class ZooKeeperServer:
    """A standalone ZooKeeper process. `start`/`stop` are idempotent; `restart` keeps port and data."""

    def __init__(
        self,
        base_dir: str | os.PathLike | None = None,
        *,
        port: int | None = None,
        tick_time_ms: int = 500,
        heap: str = "256m",
        super_password: str | None = None,
        force_sync: bool = True,
        java: str = "java",
    ) -> None:
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir) if base_dir is not None else Path(tempfile.mkdtemp(prefix="storm-py-zk-"))
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "zookeeper.log"
        self.host = "127.0.0.1"
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port(self.host)
        self.tick_time_ms = tick_time_ms
        self.heap = heap
        self.super_password = super_password
        self.force_sync = force_sync
        self.java = java
        self._proc: subprocess.Popen | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def max_session_timeout_ms(self) -> int:
        """ZooKeeper clamps client session timeouts to [2, 20] x tickTime."""
        return 20 * self.tick_time_ms

    def _classpath(self) -> str:
        jar = os.environ.get(JAR_ENV, DEFAULT_JAR)
        if not os.path.exists(jar):
            raise ZooKeeperUnavailable(
                f"ZooKeeper jar {jar} not found: install the Debian package `zookeeper` "
                f"(deploy/install-test-deps.sh) or set {JAR_ENV}")
        if shutil.which(self.java) is None:
            raise ZooKeeperUnavailable(f"{self.java!r} not found on PATH: ZooKeeper needs Java")
        # The Debian jar's manifest Class-Path names its dependencies in /usr/share/java.
        return os.pathsep.join([jar] + ([_SLF4J_SIMPLE] if os.path.exists(_SLF4J_SIMPLE) else []))

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.base_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join([
                f"tickTime={self.tick_time_ms}",
                f"dataDir={self.data_dir}",
                f"clientPort={self.port}",
                f"clientPortAddress={self.host}",
                # Otherwise the admin server takes port 8080 and parallel servers collide.
                "admin.enableServer=false",
                "4lw.commands.whitelist=ruok,srvr,mntr,stat",
                "maxClientCnxns=0",
                f"forceSync={'yes' if self.force_sync else 'no'}",
                "",
            ]),
            encoding="utf-8",
        )
        return cfg

    def _command(self, cfg: Path) -> list[str]:
        cmd = [self.java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Dorg.slf4j.simpleLogger.showDateTime=true"]
        if self.super_password is not None:
            # The superuser bypasses ACLs: tests use it to clean up nodes they locked down.
            cmd.append(f"-Dzookeeper.DigestAuthenticationProvider.superDigest={digest_id('super:' + self.super_password)}")
        cmd += ["-cp", self._classpath(), "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)]
        return cmd

    def start(self, timeout: float = 30.0) -> None:
        if self.running:
            return
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            try:
                self._start_once(timeout)
                return
            except ZooKeeperUnavailable as exc:
                if attempt + 1 == attempts or "Address already in use" not in str(exc):
                    raise
                self.port = free_port(self.host)  # lost the race for the free port; try another
                log.info("ZooKeeper port taken, retrying on %d", self.port)

    def _start_once(self, timeout: float) -> None:
        cfg = self._write_config()
        with open(self.log_path, "ab") as log_file:
            log_file.write(f"==== starting ZooKeeper on {self.connect_string} ====\n".encode())
            log_file.flush()
            self._proc = subprocess.Popen(
                self._command(cfg), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                cwd=self.base_dir, preexec_fn=die_with_parent, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise ZooKeeperUnavailable(f"ZooKeeper exited with {code} while starting:\n{self.log_tail(40)}")
            if self._ready():
                log.info("ZooKeeper ready on %s (pid %d)", self.connect_string, self._proc.pid)
                return
            if time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperUnavailable(
                    f"ZooKeeper on {self.connect_string} not ready within {timeout:g}s:\n{self.log_tail(40)}")
            time.sleep(0.05)  # poll interval of the readiness loop (bounded by the deadline)

    def _ready(self) -> bool:
        # `ruok` answers `imok` as soon as the port is bound, while sessions are still refused
        # ("ZooKeeperServer not running"); `srvr` reports a Mode only once it serves requests.
        try:
            return (four_letter_word(self.host, self.port, "ruok", timeout=0.5) == "imok"
                    and "Mode:" in four_letter_word(self.host, self.port, "srvr", timeout=0.5))
        except OSError:
            return False  # not listening yet

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM by pid, SIGKILL after `timeout`. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("ZooKeeper pid %d ignored SIGTERM for %.0fs; killing it", proc.pid, timeout)
            proc.kill()
            proc.wait(timeout)

    def restart(self, timeout: float = 30.0) -> None:
        """Stop and start again on the same port with the same data directory."""
        self.stop()
        self._fixed_port = True
        self.start(timeout)

    def log_tail(self, lines: int = 200) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no ZooKeeper log)"
        return "\n".join(text.splitlines()[-lines:])

    def cleanup(self) -> None:
        """Stop the server and, if this object created its directory, remove it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"ZooKeeperServer({self.connect_string}, pid={self.pid}, dir={str(self.base_dir)!r})"
