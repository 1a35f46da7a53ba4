"""A whole storm-py cluster on one machine for development: ZooKeeper, Nimbus and N supervisors
as child processes on free loopback ports, everything under one directory.

    D/conf/storm.yaml                 the client's (and Nimbus's) conf: `--conf-dir D/conf`
    D/conf/supervisor-{i}/storm.yaml  supervisor i's conf (its own slot ports and local dir)
    D/zookeeper/                      zoo.cfg and ZooKeeper's data (data/)
    D/nimbus/                         Nimbus's storm.local.dir
    D/supervisor-{i}/                 supervisor i's storm.local.dir (localstate, workers/, ...)
    D/logs/                           zookeeper.log, nimbus.log, {name}.out (a child's terminal
                                      output), supervisor-{i}/supervisor.log and its workers-artifacts/
    D/pids/{name}.pid                 one file per running child (removed when it is stopped)
    D/credentials.yaml                the daemons' ZooKeeper credentials, made at the first start
                                      (mode 600; every storm.yaml above carries them): ZooKeeper's
                                      nodes are writable by the daemons and by each topology's own
                                      identity only (cluster_state/auth.py)

The processes are the real daemons (`storm-py nimbus`, `storm-py supervisor`), each in its own
session, so a Ctrl-C at the terminal reaches only this orchestrator, which stops them in order:
supervisors first (so none relaunches a worker), then their workers, Nimbus, ZooKeeper last.
Workers outlive their supervisor by design (own session); they are found through the
supervisor's records in its LocalState, the pid files under workers/{id}/pids/, and, as a last
net, any `executor.worker_main` process whose command line names a worker dir of this cluster.
A re-used directory keeps ZooKeeper's data and Nimbus's code, so topologies come back.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import psutil
import yaml

from cluster_state import local_layout
from cluster_state.acl_upgrade import new_credentials, secure_tree
from cluster_state.auth import ROLE_DAEMON, credentials
from cluster_state.config import default_config
from cluster_state.local_state import LS_APPROVED_WORKERS, LS_ID, LocalState
from cluster_state.redisserver import RedisServer, RedisUnavailable
from cluster_state.zkserver import ZooKeeperServer, die_with_parent, four_letter_word
from daemons.supervisor import launcher
from daemons.supervisor.worker_state import ProcessStatus, WorkerRecord
from executor.lifecycle import PeriodicThread, Service

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
CODE_ROOT = Path(__file__).resolve().parent.parent
# The banner's first topology to submit, relative to a source checkout (not in the package).
EXAMPLE_TOPOLOGY = Path("examples", "exclamation", "topology.py")
# Where dev-cluster puts everything unless told (--dir): a new temp dir named so.
DEV_DIR_PREFIX = "storm-py-dev-"
# The --dir the README uses, under the current directory.
README_DEV_DIR = "storm-py-dev"
# Keys the dev cluster decides for each process; a user's storm.yaml or -c cannot move them.
CREDENTIALS_FILE = "credentials.yaml"
ZK_CREDENTIAL_KEYS = ("storm.zookeeper.auth.scheme", "storm.zookeeper.auth.payload")
FIXED_KEYS = frozenset({
    "storm.zookeeper.servers", "storm.zookeeper.port", "storm.local.dir", "storm.log.dir",
    "storm.local.hostname", "nimbus.seeds", "nimbus.thrift.port", "supervisor.slots.ports",
})
STOP_TIMEOUT_SECS = 15.0   # a daemon's grace after SIGTERM before SIGKILL (each stops well within it)
WATCH_SECS = 0.5           # how often a running cluster checks that its children live
_POLL_SECS = 0.1           # readiness poll interval (every wait has a deadline)


@dataclass(frozen=True)
class ZooKeeperAt:
    """A ZooKeeper a dev cluster uses instead of starting its own: the cluster's nodes live
    under `root` there (each cluster its own root, as each test of kazoo's harness has its
    own chroot on one server), and stopping the cluster leaves the server and the nodes be."""

    host: str
    port: int
    root: str


class DevClusterError(RuntimeError):
    """A child could not start or died while starting; the message names it and its log."""


class Cancelled(RuntimeError):
    """The start was interrupted (SIGTERM/Ctrl-C) before the cluster was ready."""


def free_ports(n: int, taken: set[int]) -> list[int]:
    """`n` ports free now on loopback, none in `taken` (which is updated)."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port not in taken:
            taken.add(port)
            ports.append(port)
    return ports


def carried_conf(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The user's own settings (storm.yaml and -c: whatever differs from the packaged defaults)
    that every process of the dev cluster gets, minus the keys the dev cluster decides."""
    defaults = default_config()
    missing = object()
    return {k: v for k, v in conf.items() if k not in FIXED_KEYS and defaults.get(k, missing) != v}


@dataclass
class Child:
    """One daemon process of the cluster."""

    name: str
    argv: list[str]
    log_path: Path          # the daemon's own log
    out_path: Path          # its terminal output (the "running" line, an `error:` line)
    pid_path: Path
    proc: subprocess.Popen | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CODE_ROOT), env.get("PYTHONPATH")) if p)
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=CODE_ROOT, env=env, start_new_session=True,
                                         preexec_fn=die_with_parent)
        self.pid_path.parent.mkdir(parents=True, exist_ok=True)
        self.pid_path.write_text(f"{self.proc.pid}\n", encoding="ascii")
        log.info("%s started (pid %d)", self.name, self.proc.pid)

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def why_dead(self) -> str:
        """One line: its exit code, its last `error:` line if it printed one, and its log."""
        reason = ""
        try:
            lines = self.out_path.read_text(encoding="utf-8", errors="replace").splitlines()
            errors = [ln for ln in lines if ln.startswith("error:")]
            if errors:
                reason = f": {errors[-1].removeprefix('error:').strip()}"
        except OSError:
            pass
        where = f"output: {self.out_path}" if "(log:" in reason else f"log: {self.log_path}, output: {self.out_path}"
        return f"{self.name} exited with code {self.exit_code()}{reason} ({where})"

    def stop(self, timeout: float = STOP_TIMEOUT_SECS) -> None:
        """SIGTERM by pid, SIGKILL after `timeout`. Idempotent."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM for %.0fs; killing it", self.name, proc.pid, timeout)
                proc.kill()
                proc.wait(timeout)
        self.pid_path.unlink(missing_ok=True)

    def kill(self, timeout: float = STOP_TIMEOUT_SECS) -> None:
        """SIGKILL by pid (a crash: nothing is cleaned up) and reap it. Idempotent."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout)
        self.pid_path.unlink(missing_ok=True)


# -- workers --------------------------------------------------------------------------------------


def _matches(proc: psutil.Process, *, record: Mapping[str, Any] | None = None, mentions: str | None = None) -> bool:
    """Whether `proc` is still the process we mean (guards against a reused pid): the one its
    supervisor's `record` names, and one whose command line mentions `mentions`."""
    try:
        if record is not None and launcher.record_status(WorkerRecord.from_dict(record)) is ProcessStatus.REUSED:
            return False
        if mentions is not None and not any(mentions in arg for arg in proc.cmdline()):
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied, TypeError, KeyError, ValueError):
        return False


def worker_processes(supervisor_conf: Mapping[str, Any]) -> dict[int, psutil.Process]:
    """Every live worker process of the supervisor whose conf is `supervisor_conf`."""
    found: dict[int, psutil.Process] = {}

    def add(pid: Any, **guard: Any) -> None:
        if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 and pid not in found:
            try:
                proc = psutil.Process(pid)
            except psutil.NoSuchProcess:
                return
            if _matches(proc, **guard):
                found[pid] = proc

    # 1. The supervisor's records (pid plus its start time, as the supervisor itself checks).
    try:
        records = LocalState(local_layout.supervisor_localstate(supervisor_conf),
                             create=False).get(LS_APPROVED_WORKERS) or {}
    except (OSError, ValueError) as exc:
        log.warning("cannot read the worker records of %s: %s", local_layout.local_dir(supervisor_conf), exc)
        records = {}
    for worker_id, data in records.items() if isinstance(records, dict) else ():
        if isinstance(data, dict):
            add(data.get("pid"), record=data, mentions=str(worker_id))
    # 2. The pid files workers write (workers/{id}/pids/{pid}); the process names its worker id.
    root = local_layout.worker_root(supervisor_conf)
    for pid_file in root.glob("*/pids/*") if root.is_dir() else ():
        if pid_file.name.isdigit():
            add(int(pid_file.name), mentions=pid_file.parent.parent.name)
    # 3. The net: a worker launched just before its supervisor stopped, not recorded yet.
    prefix = f"{root}{os.sep}"
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or ()
        if "executor.worker_main" in cmdline and any(arg.startswith(prefix) for arg in cmdline):
            add(proc.pid)
    return found


def _signal_group(proc: psutil.Process, sig: signal.Signals) -> None:
    """`sig` to the worker's whole session when it leads one (its own subprocesses too)."""
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except (ProcessLookupError, psutil.NoSuchProcess):
        pass


def stop_workers(supervisor_confs: list[Mapping[str, Any]], timeout: float) -> list[int]:
    """SIGTERM every worker of these supervisors, SIGKILL those still running after `timeout`;
    returns the pids that had to be killed."""
    procs: dict[int, psutil.Process] = {}
    for conf in supervisor_confs:
        procs.update(worker_processes(conf))
    if not procs:
        return []
    log.info("stopping workers %s", sorted(procs))
    for proc in procs.values():
        _signal_group(proc, signal.SIGTERM)
    _gone, alive = psutil.wait_procs(list(procs.values()), timeout=timeout)
    for proc in alive:
        log.warning("worker pid %d ignored SIGTERM for %.0fs; killing it", proc.pid, timeout)
        _signal_group(proc, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=timeout)
    return [p.pid for p in alive]


# -- the cluster ----------------------------------------------------------------------------------


class DevCluster(Service):
    """ZooKeeper + Nimbus + `supervisors` supervisors under `base_dir`; start() returns once all
    are ready (or raises DevClusterError naming the child that failed, after stopping the rest).
    `cancel()` (safe from a signal handler) makes a start in progress give up with Cancelled."""

    def __init__(self, base_dir: str | os.PathLike, *, supervisors: int = 2, slots: int = 2,
                 user_conf: Mapping[str, Any] | None = None, ready_timeout: float = 60.0,
                 on_child_exit: Callable[[Child], Any] | None = None, more_nimbus_hosts: tuple[str, ...] = (),
                 redis: bool = False, zookeeper_at: ZooKeeperAt | None = None) -> None:
        super().__init__("dev-cluster")
        if supervisors < 1 or slots < 1:
            raise ValueError("a dev cluster needs at least one supervisor with at least one slot")
        self.base_dir = Path(os.path.abspath(base_dir))
        self.n_supervisors = supervisors
        self.n_slots = slots
        self.user_conf = carried_conf(user_conf or {})
        self.ready_timeout = ready_timeout
        self.on_child_exit = on_child_exit
        # Loopback hosts of more Nimbus daemons started by the caller (Nimbus HA, same port):
        # every conf's nimbus.seeds lists them after this cluster's Nimbus.
        self.more_nimbus_hosts = tuple(more_nimbus_hosts)
        self.conf_dir = self.base_dir / "conf"
        self.log_dir = self.base_dir / "logs"
        self.pid_dir = self.base_dir / "pids"
        self.zookeeper: ZooKeeperServer | None = None
        # None: start a ZooKeeper of its own (D/zookeeper/); else the one to use, under its root
        self.zookeeper_at = zookeeper_at
        # `redis`: a Redis server started and stopped with the rest, every topology's state
        # provider unless the user's conf names another
        self.want_redis = redis
        self.redis: RedisServer | None = None
        self.nimbus: Child | None = None
        self.ui: Child | None = None
        self.logviewers: list[Child] = []
        self.supervisors: list[Child] = []
        self.conf: dict[str, Any] = {}          # the client's conf (D/conf/storm.yaml)
        self._cancelled = False
        self._reported: set[str] = set()

    # -- what callers read -------------------------------------------------------------------

    @property
    def nimbus_address(self) -> str:
        return f"{HOST}:{self.conf['nimbus.thrift.port']}"

    @property
    def ui_url(self) -> str:
        return f"http://{HOST}:{self.conf['ui.port']}"

    def supervisor_conf(self, index: int) -> dict[str, Any]:
        return dict(self.supervisors[index].extra["conf"])

    def children(self) -> list[Child]:
        return [c for c in [self.nimbus, self.ui, *self.supervisors, *self.logviewers] if c is not None]

    def cancel(self) -> None:
        # Only an attribute store: called from signal handlers.
        self._cancelled = True

    # -- start -------------------------------------------------------------------------------

    def _on_start(self) -> None:
        for d in (self.conf_dir, self.log_dir, self.pid_dir):
            d.mkdir(parents=True, exist_ok=True)
        taken: set[int] = set()
        zk_port, nimbus_port, ui_port = free_ports(3, taken)
        at = self.zookeeper_at
        zookeeper = ({"storm.zookeeper.servers": [HOST], "storm.zookeeper.port": zk_port} if at is None else
                     {"storm.zookeeper.servers": [at.host], "storm.zookeeper.port": at.port,
                      "storm.zookeeper.root": at.root})
        state = self._start_redis() if self.want_redis else {}
        common = {
            **state,
            **self.zookeeper_credentials(),
            **self.user_conf,
            **zookeeper,
            "storm.local.hostname": HOST,
            "nimbus.seeds": [HOST, *self.more_nimbus_hosts],
            "nimbus.thrift.port": nimbus_port,
        }
        # logviewer.port 0: no logviewer serves this conf's log dir (nimbus.log, ui.log: each one
        # serves a supervisor's), so the UI gives Nimbus no log link instead of one to port 8000.
        self.conf = {**common, "storm.local.dir": str(self.base_dir / "nimbus"), "storm.log.dir": str(self.log_dir),
                     "ui.host": HOST, "ui.port": ui_port, "logviewer.port": 0}
        _write_yaml(self.conf_dir / "storm.yaml", self.conf,
                    "Generated by `storm-py dev-cluster`: the client's and Nimbus's conf (use --conf-dir "
                    f"{self.conf_dir}). Rewritten on every start.")

        if at is None:
            self._start_zookeeper(zk_port)
        self._secure_zookeeper(common)
        # One undo for all the daemons (registered before any starts, so a failed start stops
        # whatever did): Nimbus first, so a stopping supervisor's slots are not rescheduled onto
        # the others; then every supervisor, so none launches a worker; then the workers they
        # leave running; ZooKeeper (its own undo) last.
        self.on_stop(self._stop_daemons, "nimbus, supervisors and workers")
        self._start_nimbus()
        self._start_ui()
        for i in range(1, self.n_supervisors + 1):
            slots_and_logviewer = free_ports(self.n_slots + 1, taken)
            self._start_supervisor(i, common, slots_and_logviewer[:-1], slots_and_logviewer[-1])
        self._wait_ready()
        self.start_child(PeriodicThread("dev-cluster-watch", WATCH_SECS, self._watch, run_at_start=False))

    def _start_zookeeper(self, port: int) -> None:
        # tickTime 1000: ZooKeeper clamps sessions to 20 x tickTime, and Storm's default session
        # timeout is 20 s (storm.zookeeper.session.timeout, docs/operations.md).
        zk = ZooKeeperServer(self.base_dir / "zookeeper", port=port, tick_time_ms=1000)
        zk.log_path = self.log_dir / "zookeeper.log"
        self.zookeeper = zk
        self._check_cancelled()
        try:
            zk.start(timeout=min(30.0, self.ready_timeout))
        except RuntimeError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DevClusterError(f"zookeeper cannot start: {first} (log: {zk.log_path})") from None
        self.on_stop(lambda: self._stop_zookeeper(zk), "zookeeper")
        (self.pid_dir / "zookeeper.pid").write_text(f"{zk.pid}\n", encoding="ascii")

    def zookeeper_credentials(self) -> dict[str, Any]:
        """The daemons' ZooKeeper credentials (each topology's identity is derived from them):
        made at the first start, kept in D/credentials.yaml (mode 600) so the nodes a cluster
        made stay its own across restarts; none when the user's conf brings its own."""
        if credentials(self.user_conf, ROLE_DAEMON) is not None:
            return {}
        path = self.base_dir / CREDENTIALS_FILE
        if path.exists():
            kept = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            if credentials(kept, ROLE_DAEMON) is not None:
                return {k: kept[k] for k in ZK_CREDENTIAL_KEYS}
        fresh = {k: v for k, v in new_credentials().items() if k in ZK_CREDENTIAL_KEYS}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("# Made by `storm-py dev-cluster`: its daemons' ZooKeeper credentials\n"
                    + yaml.safe_dump(fresh, sort_keys=True))
        return fresh

    def _zookeeper_access(self) -> str:
        payload = self.conf.get("storm.zookeeper.auth.payload")
        if payload is None:
            return "open to anyone: no storm.zookeeper.auth.* credentials"
        path = self.base_dir / CREDENTIALS_FILE
        kept = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}
        if kept.get("storm.zookeeper.auth.payload") == payload:
            return (f"writable by the daemons (credentials in {path}, carried by every storm.yaml here) "
                    f"and each topology's own identity only")
        return "writable with your conf's storm.zookeeper.auth.* credentials only"

    def _secure_zookeeper(self, conf: Mapping[str, Any]) -> None:
        """Nodes left by an earlier run without credentials (or another's) get this cluster's
        ACLs, as `storm-py secure zookeeper` would set them (a fresh ZooKeeper has none)."""
        if credentials(conf, ROLE_DAEMON) is None:
            return
        try:
            report = secure_tree({**default_config(), **conf}, timeout=min(15.0, self.ready_timeout))
        except Exception as exc:  # the daemons would meet the same problem: say it here first
            raise DevClusterError(f"zookeeper: cannot set its ACLs: {type(exc).__name__}: {exc}") from None
        if report.changed:
            log.info("zookeeper: set the ACLs of %d node(s) left without them", report.changed)

    def _start_redis(self) -> dict[str, Any]:
        """Start the cluster's Redis; the conf that makes it the topologies' state provider."""
        self._check_cancelled()
        server = RedisServer(self.base_dir / "redis")
        try:
            server.start()
        except RedisUnavailable as exc:
            raise DevClusterError(f"redis cannot start: {str(exc).splitlines()[0]}") from None
        self.redis = server
        self.on_stop(lambda: self._stop_redis(server), "redis")
        (self.pid_dir / "redis.pid").write_text(f"{server.pid}\n", encoding="ascii")
        return server.conf()

    def _stop_redis(self, server: RedisServer) -> None:
        server.stop()
        (self.pid_dir / "redis.pid").unlink(missing_ok=True)

    def _stop_zookeeper(self, zk: ZooKeeperServer) -> None:
        zk.stop()
        (self.pid_dir / "zookeeper.pid").unlink(missing_ok=True)

    def _daemon_argv(self, command: str, conf_dir: Path) -> list[str]:
        return [sys.executable, "-m", "daemons.cli", command, "--conf-dir", str(conf_dir)]

    def _start_nimbus(self) -> None:
        self._check_cancelled()
        child = Child("nimbus", self._daemon_argv("nimbus", self.conf_dir), self.log_dir / "nimbus.log",
                      self.log_dir / "nimbus.out", self.pid_dir / "nimbus.pid")
        self.nimbus = child
        child.start()

    def _start_ui(self) -> None:
        self._check_cancelled()
        child = Child("ui", self._daemon_argv("ui", self.conf_dir), self.log_dir / "ui.log",
                      self.log_dir / "ui.out", self.pid_dir / "ui.pid")
        self.ui = child
        child.start()

    def _start_supervisor(self, index: int, common: Mapping[str, Any], ports: list[int],
                          logviewer_port: int) -> None:
        self._check_cancelled()
        name = f"supervisor-{index}"
        conf = {**common, "storm.local.dir": str(self.base_dir / name), "storm.log.dir": str(self.log_dir / name),
                "supervisor.slots.ports": ports, "logviewer.port": logviewer_port, "logviewer.host": HOST}
        conf_dir = self.conf_dir / name
        _write_yaml(conf_dir / "storm.yaml", conf,
                    f"Generated by `storm-py dev-cluster`: {name}'s conf. Rewritten on every start.")
        child = Child(name, self._daemon_argv("supervisor", conf_dir), self.log_dir / name / "supervisor.log",
                      self.log_dir / f"{name}.out", self.pid_dir / f"{name}.pid",
                      extra={"conf": conf, "conf_dir": conf_dir, "ports": ports})
        self.supervisors.append(child)
        child.start()
        # One logviewer per supervisor "host", serving that supervisor's log dir.
        viewer = Child(f"logviewer-{index}", self._daemon_argv("logviewer", conf_dir),
                       self.log_dir / name / "logviewer.log", self.log_dir / f"logviewer-{index}.out",
                       self.pid_dir / f"logviewer-{index}.pid", extra={"port": logviewer_port})
        self.logviewers.append(viewer)
        viewer.start()

    def _stop_daemons(self) -> None:
        if self.ui is not None:
            self.ui.stop()
        for viewer in self.logviewers:
            viewer.stop()
        if self.nimbus is not None:
            self.nimbus.stop()
        for child in self.supervisors:  # SIGTERM to all at once: they stop in parallel
            if child.exit_code() is None and child.proc is not None:
                child.proc.terminate()
        for child in self.supervisors:
            child.stop()
        grace = float(self.conf.get("supervisor.worker.shutdown.sleep.secs")
                      or default_config().get("supervisor.worker.shutdown.sleep.secs") or 3) + 5.0
        killed = stop_workers([c.extra["conf"] for c in self.supervisors], timeout=grace)
        if killed:
            log.warning("workers %s had to be killed", killed)

    # -- readiness -----------------------------------------------------------------------------

    def _check_cancelled(self) -> None:
        if self._cancelled:
            raise Cancelled("interrupted while starting")

    def _check_children(self, names: list[str] | None = None) -> None:
        for child in self.children():
            if (names is None or child.name in names) and child.exit_code() is not None:
                raise DevClusterError(child.why_dead())
        if self.zookeeper is not None and not self.zookeeper.running:
            raise DevClusterError(f"zookeeper exited (log: {self.zookeeper.log_path})")

    def _wait_ready(self, names: list[str] | None = None, since: float = 0.0) -> None:
        """Until every child in `names` (default: all) is ready; a supervisor counts once it
        heartbeat after `since` (epoch seconds: a restarted one, not its predecessor's node)."""
        from cluster_state.factory import mk_storm_cluster_state

        deadline = time.monotonic() + self.ready_timeout
        checked = None if not names else list(names)  # a restart does not judge the others
        waiting = names or ["zookeeper", "nimbus", "ui", *(c.name for c in self.supervisors),
                            *(c.name for c in self.logviewers)]
        if "zookeeper" not in waiting:
            waiting = ["zookeeper", *waiting]  # its state client is what checks the supervisors
        state = None
        try:
            while waiting:
                self._check_cancelled()
                self._check_children(checked)
                if "zookeeper" in waiting and self._zookeeper_ok():
                    waiting.remove("zookeeper")
                    state = mk_storm_cluster_state(self.conf)
                if "nimbus" in waiting and self._nimbus_ok():
                    waiting.remove("nimbus")
                if "ui" in waiting and "nimbus" not in waiting and self._ui_ok():
                    waiting.remove("ui")
                for viewer in self.logviewers:
                    if viewer.name in waiting and _http_ok(f"http://{HOST}:{viewer.extra['port']}/api/v1/listLogs",
                                                                   self._secret()):
                        waiting.remove(viewer.name)
                if state is not None:
                    for child in self.supervisors:
                        if child.name in waiting and self._supervisor_registered(state, child, since):
                            waiting.remove(child.name)
                if not waiting:
                    break
                if time.monotonic() > deadline:
                    named = ", ".join(f"{n} (log: {self._log_of(n)})" for n in waiting)
                    raise DevClusterError(f"not ready within {self.ready_timeout:g}s: {named}")
                time.sleep(_POLL_SECS)  # readiness poll interval, bounded by the deadline
        finally:
            if state is not None:
                state.disconnect()

    def _log_of(self, name: str) -> Path:
        if name == "zookeeper" and self.zookeeper is not None:
            return self.zookeeper.log_path
        return next(c.log_path for c in self.children() if c.name == name)

    def _zookeeper_ok(self) -> bool:
        try:
            return four_letter_word(self.conf["storm.zookeeper.servers"][0], self.conf["storm.zookeeper.port"],
                                    "ruok", timeout=0.5) == "imok"
        except OSError:
            return False

    def _nimbus_ok(self) -> bool:
        from daemons.rpc.client import client_from_conf
        from daemons.rpc.protocol import REMOTE_ERRORS

        # A short timeout per attempt: the overall deadline is _wait_ready's.
        client = client_from_conf({**self.conf, "nimbus.thrift.timeout": 1})
        try:
            client.call("cluster_info")
            return True
        except REMOTE_ERRORS as exc:
            log.debug("nimbus not answering yet: %s", exc)
            return False
        finally:
            client.close()

    def _ui_ok(self) -> bool:
        return _http_ok(f"{self.ui_url}/api/v1/cluster/summary", self._secret())

    def _secret(self) -> str | None:
        return self.conf.get("nimbus.authentication.secret") or None

    @staticmethod
    def _supervisor_registered(state: Any, child: Child, since: float = 0.0) -> bool:
        conf = child.extra["conf"]
        path = local_layout.supervisor_localstate(conf)
        if not path.is_dir():
            return False  # not yet, or not a directory at all: the supervisor reports that itself
        supervisor_id = LocalState(path, create=False).get(LS_ID)
        if not isinstance(supervisor_id, str):
            return False
        child.extra["id"] = supervisor_id
        info = state.supervisor_info(supervisor_id)
        # Its meta must be this run's ports: a node of a previous run (same dir) is not it.
        return (info is not None and sorted(int(p) for p in (info.meta or ())) == sorted(child.extra["ports"])
                # After a restart: a heartbeat from a later second than `since`, not the killed one's.
                and (not since or info.time_secs > int(since)))

    # -- running -----------------------------------------------------------------------------

    def _watch(self) -> None:
        """A child that dies after the start is reported once (the rest keeps running: a
        cluster survives losing a supervisor; Nimbus and ZooKeeper can be restarted)."""
        dead = [c for c in self.children() if c.exit_code() is not None and c.name not in self._reported]
        for child in dead:
            self._reported.add(child.name)
            log.warning("%s", child.why_dead())
            if self.on_child_exit is not None:
                self.on_child_exit(child)

    # -- faults (tests/devcluster/test_faults.py, bench/chaos.py) ------------------------------
    # Each acts on one child by its pid and returns once the child is back and ready (or raises
    # DevClusterError). A child killed on purpose is not reported by the watch thread.

    def worker_pids(self, storm_id: str | None = None) -> dict[int, int]:
        """Slot port -> pid of every live worker process of this cluster's supervisors (of the
        topology `storm_id` alone, if given)."""
        out: dict[int, int] = {}
        for child in self.supervisors:
            for pid, proc in worker_processes(child.extra["conf"]).items():
                try:
                    cmdline = proc.cmdline()
                    if storm_id is None or _arg_of(cmdline, "--storm-id") == storm_id:
                        out[_port_of(cmdline)] = pid
                except (psutil.Error, ValueError):
                    continue  # gone meanwhile, or not a worker command line
        return out

    def kill_worker(self, port: int) -> int:
        """SIGKILL the worker process on slot `port` (its supervisor restarts it); its pid."""
        pid = self.worker_pids().get(port)
        if pid is None:
            raise DevClusterError(f"no worker process on port {port}")
        os.kill(pid, signal.SIGKILL)
        log.info("killed worker pid %d on port %d", pid, port)
        return pid

    def _supervisor(self, index: int) -> Child:
        return self.supervisors[index - 1]  # supervisor-1 is index 1, as its name says

    def kill_supervisor(self, index: int) -> None:
        """SIGKILL supervisor-`index` (its workers live on: own sessions)."""
        child = self._supervisor(index)
        self._reported.add(child.name)
        child.kill()
        log.info("killed %s", child.name)

    def start_supervisor(self, index: int) -> None:
        """Start supervisor-`index` again: same conf, local dir and slot ports, so it keeps its
        id and re-adopts its workers."""
        child = self._supervisor(index)
        since = time.time()
        child.start()
        self._wait_ready([child.name], since=since)
        self._reported.discard(child.name)

    def restart_nimbus(self, kill: bool = False) -> None:
        """Stop Nimbus (SIGTERM, or SIGKILL with `kill`) and start it again on the same port and
        local dir; returns once it answers."""
        self.stop_nimbus(kill)
        self.start_nimbus_again()

    def stop_nimbus(self, kill: bool = False) -> None:
        """Stop Nimbus (SIGTERM, or SIGKILL with `kill`) until start_nimbus_again()."""
        self._reported.add(self.nimbus.name)
        self.nimbus.kill() if kill else self.nimbus.stop()

    def start_nimbus_again(self) -> None:
        """Start the stopped Nimbus on its port and local dir; returns once it answers."""
        self.nimbus.start()
        self._wait_ready(["nimbus"])
        self._reported.discard(self.nimbus.name)

    def restart_zookeeper(self) -> None:
        """Stop ZooKeeper (SIGTERM) and start it again: same port, same data dir."""
        zk = self.zookeeper
        if zk is None:
            raise DevClusterError("zookeeper is not this cluster's own (zookeeper_at): it cannot restart it")
        try:
            zk.restart(timeout=min(30.0, self.ready_timeout))
        except RuntimeError as exc:
            raise DevClusterError(f"zookeeper cannot restart: {exc} (log: {zk.log_path})") from None
        (self.pid_dir / "zookeeper.pid").write_text(f"{zk.pid}\n", encoding="ascii")
        self._wait_ready(["zookeeper"])

    def restart_redis(self, kill: bool = False) -> None:
        """Stop the cluster's Redis (SIGTERM, or SIGKILL with `kill`: a crash; with `appendfsync
        always` no acknowledged write is lost either way) and start it again: same port, same data."""
        server = self.redis
        if server is None:
            raise DevClusterError("this dev cluster runs no Redis (start it with redis=True, --redis)")
        server.kill() if kill else server.stop()
        try:
            server.start()
        except RedisUnavailable as exc:
            raise DevClusterError(f"redis cannot start again: {str(exc).splitlines()[0]}") from None
        (self.pid_dir / "redis.pid").write_text(f"{server.pid}\n", encoding="ascii")

    def describe(self) -> str:
        """Where everything is, and three commands to try."""
        zk, at = self.zookeeper, self.zookeeper_at
        where = (f"{at.host}:{at.port}{at.root}  (not this cluster's own)" if at is not None else
                 f"{zk.connect_string if zk else '?'}  (pid {zk.pid if zk else '?'}, log {zk.log_path if zk else '?'})")
        lines = [
            f"storm-py dev cluster ready in {self.base_dir}",
            f"  zookeeper     {where}",
            f"                {self._zookeeper_access()}",
            f"  nimbus        {self.nimbus_address}  (pid {self.nimbus.pid}, log {self.nimbus.log_path})",
            f"  ui            {self.ui_url}  (pid {self.ui.pid}, log {self.ui.log_path})",
        ]
        if self.redis is not None:
            lines.append(f"  redis         {self.redis.host}:{self.redis.port}  (pid {self.redis.pid}, log "
                         f"{self.redis.log_path}; the topologies' state provider, and a server for "
                         f"RedisStreamSpout: -c events.redis.port={self.redis.port} for examples/redis_events)")
        for child in self.supervisors:
            ports = ",".join(str(p) for p in child.extra["ports"])
            lines.append(f"  {child.name:<13} slots {ports}  (pid {child.pid}, local dir "
                         f"{child.extra['conf']['storm.local.dir']}, log {child.log_path})")
        for viewer in self.logviewers:
            lines.append(f"  {viewer.name:<13} http://{HOST}:{viewer.extra['port']}  (pid {viewer.pid}, "
                         f"log {viewer.log_path})")
        lines += [
            f"  conf dir      {self.conf_dir}",
            f"  log dir       {self.log_dir}",
            "try:",
            *submit_suggestion(example_topology(CODE_ROOT, Path.cwd()), self.conf_dir),
            f"  storm-py list --conf-dir {self.conf_dir}",
            f"  storm-py kill demo -w 0 --conf-dir {self.conf_dir}",
            "Ctrl-C stops everything (workers included).",
        ]
        return "\n".join(lines)


def example_topology(code_root: Path, cwd: Path) -> Path | None:
    """The example topology the banner suggests submitting: that of the source checkout storm-py
    runs from (`pip install -e .`, or PYTHONPATH), else that of a checkout in the current
    directory (where `pip install .` was run); None when neither has it: `pip install .`
    installs no examples (examples/ is not part of the package)."""
    for root in (code_root, cwd):
        path = root / EXAMPLE_TOPOLOGY
        if path.is_file() and (path.parent / "exclamation_components.py").is_file():
            return path.resolve()
    return None


def submit_suggestion(topology: Path | None, conf_dir: Path) -> list[str]:
    """The banner's `jar submit` line(s) for `topology` (example_topology's answer)."""
    if topology is not None:
        return [f"  storm-py jar submit {topology} --name demo --conf-dir {conf_dir}"]
    return [f"  storm-py jar submit TOPOLOGY.py --name demo --conf-dir {conf_dir}",
            f"    (TOPOLOGY.py: a topology file of yours, or {EXAMPLE_TOPOLOGY} of a storm-py source "
            "checkout: `pip install .` does not install examples/)"]


def dev_cluster_pid_file(base: Path) -> Path:
    """The pid of the `storm-py dev-cluster` running in `base` (removed when it stops)."""
    return base / "pids" / "dev-cluster.pid"


def _dev_cluster_runs(base: Path) -> bool:
    try:
        pid = int(dev_cluster_pid_file(base).read_text(encoding="ascii").strip())
        return "dev-cluster" in psutil.Process(pid).cmdline()
    except (OSError, ValueError, psutil.Error):
        return False


def find_dev_clusters(temp_root: Path, cwd: Path) -> list[tuple[Path, bool]]:
    """The conf dirs of the dev clusters where `storm-py dev-cluster` puts them unless told
    otherwise (its temp dirs `temp_root/storm-py-dev-*`, and ./storm-py-dev as the README runs
    it), each with whether its dev cluster runs now (its pid file names a live dev-cluster
    process): running ones first, then the newest first. It records them nowhere else."""
    found: dict[Path, tuple[bool, float]] = {}
    try:
        bases = [*temp_root.glob(DEV_DIR_PREFIX + "*"), cwd / README_DEV_DIR]
    except OSError:
        bases = [cwd / README_DEV_DIR]
    for base in bases:
        conf_dir = base / "conf"
        try:
            mtime = (conf_dir / "storm.yaml").stat().st_mtime
            conf_dir = conf_dir.resolve()
        except OSError:
            continue
        found[conf_dir] = (_dev_cluster_runs(base), mtime)
    return [(c, runs) for c, (runs, _m) in sorted(found.items(), key=lambda kv: (not kv[1][0], -kv[1][1]))]


def _http_ok(url: str, secret: str | None = None) -> bool:
    """Whether a daemon answers `url` with 200 (a readiness probe); with the cluster's secret as
    the bearer when it has one (the UI and the logviewers then answer 401 without it)."""
    import urllib.request

    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as reply:
            return reply.status == 200
    except OSError as exc:  # URLError and HTTPError are OSErrors
        log.debug("%s not answering yet: %s", url, exc)
        return False


def _arg_of(cmdline: list[str], option: str) -> str:
    """The value after `option` on a worker's command line (launcher.worker_command's)."""
    return cmdline[cmdline.index(option) + 1]


def _port_of(cmdline: list[str]) -> int:
    """The slot port on a worker's command line (launcher.worker_command's --port)."""
    return int(_arg_of(cmdline, "--port"))


def _write_yaml(path: Path, conf: Mapping[str, Any], header: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {header}\n" + yaml.safe_dump(dict(conf), sort_keys=True), encoding="utf-8")
