"""`storm-py dev-zookeeper` and `storm-py dev-cluster`: a real cluster on one machine, for
development. Both run in the foreground; SIGTERM or Ctrl-C stops everything they started and
exits 0. A failure to start is one `error:` line naming the culprit (and its log) and exit 1.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import click

from cluster_state import local_layout
from daemons.cli_daemons import log_to_file
from daemons.cli_options import command, common_options, fail
from executor.lifecycle import PeriodicThread, Service, Status

log = logging.getLogger(__name__)

_SIGNAL_POLL_SECS = 0.1  # how soon the foreground loop notices a signal or a stopped service
JAVA_PACKAGE = "openjdk-17-jre-headless"


def run_foreground(service: Service, cancel: Callable[[], None] | None = None) -> tuple[int, BaseException | None]:
    """Start `service`, wait for SIGTERM/SIGINT/SIGHUP (or its own stop), stop it. Unlike
    executor.lifecycle.run_service, a signal during a slow start reaches the service through
    `cancel` (an attribute store, safe in a handler) so the start gives up at once.
    Returns (exit code, the exception a failed start raised)."""
    received: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signum)
        if cancel is not None:
            cancel()

    previous = {}
    if threading.current_thread() is threading.main_thread():
        # SIGHUP too: a closed terminal must stop the cluster, not leave its workers running
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        try:
            service.start()
        except Exception as exc:  # the start unwound what it had started; the caller reports it
            return (0 if received else 1), exc
        while not received and not service.done:
            time.sleep(_SIGNAL_POLL_SECS)  # bounded wait for a signal; the handler only appends
        if received:
            log.info("%s: received %s, stopping", service.name, signal.Signals(received[0]).name)
        service.stop()
        return (1 if service.status is Status.FAILED else 0), None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _require_java() -> None:
    if shutil.which("java") is None:
        fail(f"java not found on PATH: ZooKeeper needs Java 17 (Debian: apt-get install -y {JAVA_PACKAGE} zookeeper)")


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class DevZooKeeper(Service):
    """A ZooKeeperServer as a Service: its JVM exiting by itself is a fatal error."""

    def __init__(self, server: Any) -> None:
        super().__init__("dev-zookeeper")
        self.server = server

    def _on_start(self) -> None:
        self.server.start()
        self.on_stop(self.server.stop, "zookeeper")
        self.start_child(PeriodicThread("dev-zookeeper-watch", 0.5, self._watch, run_at_start=False))

    def _watch(self) -> None:
        if not self.server.running:
            self.fatal("the ZooKeeper server exited by itself")


@command("dev-zookeeper")
@click.option("--port", type=click.IntRange(1, 65535), help="Client port (default: storm.zookeeper.port).")
@click.option("--data-dir", type=click.Path(file_okay=False),
              help="Where ZooKeeper keeps its data (default: <storm.local.dir>/zookeeper/data).")
@common_options
def dev_zookeeper(conf, port, data_dir):
    """Run a ZooKeeper server on 127.0.0.1 in the foreground, for development (the Debian
    package's jar; SIGTERM or Ctrl-C stops it)."""
    from cluster_state.zkserver import ZooKeeperServer, ZooKeeperUnavailable

    port = int(port if port is not None else conf["storm.zookeeper.port"])
    _require_java()
    if _port_taken(port):
        fail(f"port 127.0.0.1:{port} is taken (another ZooKeeper?): stop it or choose another with --port")
    base = local_layout.local_dir(conf) / "zookeeper"
    log_path = local_layout.log_dir(conf) / "zookeeper.log"
    try:
        log_to_file(local_layout.log_dir(conf) / "dev-zookeeper.log")
    except OSError as exc:
        fail(f"dev-zookeeper: cannot write its log in {local_layout.log_dir(conf)}: {exc}")
    # tickTime 1000: sessions are clamped to 20 x tickTime and Storm's default timeout is 20 s.
    server = ZooKeeperServer(base, port=port, tick_time_ms=1000)
    if data_dir is not None:
        server.data_dir = Path(os.path.abspath(data_dir))
    server.log_path = log_path
    service = DevZooKeeper(server)
    service.when_running(lambda _s: click.echo(
        f"zookeeper running on {server.connect_string} (data {server.data_dir}); log: {log_path}"))
    code, exc = run_foreground(service)
    if exc is not None:
        if code == 0:
            return  # interrupted while starting: stopped, as asked
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "Address already in use" in str(exc):
            text = f"port 127.0.0.1:{port} is taken"
        if not isinstance(exc, ZooKeeperUnavailable):
            text = f"{type(exc).__name__}: {text}"
        fail(f"zookeeper cannot start: {text} (log: {log_path})")
    if code != 0:
        fail(f"zookeeper stopped: {service.failure} (log: {log_path})")


@command("dev-cluster")
@click.option("--supervisors", type=click.IntRange(1, 32), default=2, show_default=True,
              help="How many supervisors.")
@click.option("--slots", type=click.IntRange(1, 16), default=2, show_default=True,
              help="Slot ports per supervisor.")
@click.option("--dir", "base_dir", type=click.Path(file_okay=False),
              help="Where confs, data, logs and pids go (default: a new temp dir, printed; kept at exit).")
@click.option("--ready-timeout", type=click.FloatRange(1, 600), default=60, show_default=True,
              help="Seconds to wait for every process to be ready.")
@click.option("--redis", is_flag=True,
              help="Also run a Redis server (Debian's redis-server) as every topology's state provider "
                   "(topology.state.provider: redis), unless -c or storm.yaml names another; its "
                   "address is printed, for RedisStreamSpout topologies too.")
@common_options
def dev_cluster(conf, supervisors, slots, base_dir, ready_timeout, redis):
    """Run ZooKeeper, Nimbus and N supervisors on 127.0.0.1 in the foreground, for development.
    Client commands use it with --conf-dir DIR/conf. SIGTERM or Ctrl-C stops everything,
    workers included."""
    from daemons.devcluster import DEV_DIR_PREFIX, Cancelled, DevCluster, dev_cluster_pid_file

    _require_java()
    if base_dir is None:
        base_dir = tempfile.mkdtemp(prefix=DEV_DIR_PREFIX)
    base = Path(os.path.abspath(base_dir))
    click.echo(f"starting a dev cluster in {base} ...")
    try:
        base.mkdir(parents=True, exist_ok=True)
        log_to_file(base / "logs" / "dev-cluster.log")
    except OSError as exc:
        fail(f"dev-cluster: cannot use {base}: {exc}")

    def child_exited(child) -> None:
        click.echo(f"warning: {child.why_dead()}; the rest keeps running", err=True)

    cluster = DevCluster(base, supervisors=supervisors, slots=slots, user_conf=conf,
                         ready_timeout=ready_timeout, on_child_exit=child_exited, redis=redis)
    cluster.when_running(lambda c: click.echo(c.describe(), nl=True))
    (base / "pids").mkdir(parents=True, exist_ok=True)
    own_pid = dev_cluster_pid_file(base)  # also how client commands tell it runs (find_dev_clusters)
    own_pid.write_text(f"{os.getpid()}\n", encoding="ascii")
    try:
        code, exc = run_foreground(cluster, cancel=cluster.cancel)
    finally:
        own_pid.unlink(missing_ok=True)
    if exc is not None and not isinstance(exc, Cancelled) and code != 0:
        fail(f"dev cluster cannot start: {exc}; everything it started was stopped")
    if code != 0:
        fail(f"dev cluster stopped after an error: {cluster.failure} (log: {base / 'logs' / 'dev-cluster.log'})")
    click.echo(f"dev cluster stopped; logs kept in {base / 'logs'}")
