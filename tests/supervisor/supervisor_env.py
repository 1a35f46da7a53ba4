"""Test environment for the supervisor: a real ZooKeeper chroot, topologies submitted to a real
NimbusCore whose code store is served by the real Nimbus RPC handlers on a free loopback port,
assignments of the topology's real executors written by the test (as Storm's supervisor_test
does; this Nimbus core never schedules), supervisors started in-process or as real processes,
real worker processes (executor.worker_main), and every worker they start stopped by pid
afterwards."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

import psutil
from testutil import QUIET_IDLE, wait_until

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.local_state import LS_APPROVED_WORKERS, LS_ID, LocalState
from cluster_state.records import Assignment
from cluster_state.worker_beats import read_worker_heartbeat
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.handlers import make_handlers
from daemons.process_start import ProcessStart, process_start
from daemons.rpc.server import RpcServer
from daemons.supervisor.daemon import Supervisor
from daemons.supervisor.slot import SlotPhase

sys.path.append(str(Path(__file__).resolve().parents[1] / "nimbus"))  # the Nimbus tests' package builder
from nimbus_helpers import package  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)


def failing_command(storm_id, supervisor_id, port, worker_id, conf_file):
    """A worker that dies at once (e.g. broken code), every time."""
    return [sys.executable, "-c", "import sys; sys.exit(3)"]


class _NoSchedulingCore(NimbusCore):
    """Nimbus's submit (validation, code store, storm base) without its scheduler: the tests
    place executors themselves."""

    def mk_assignments(self, scratch=frozenset()) -> None:
        pass


class Env:
    def __init__(self, zk_conf: Mapping[str, Any], tmp: Path):
        self.tmp = tmp
        self.base_conf = dict(zk_conf)
        self.store = CodeStore(tmp / "nimbus-local" / "nimbus")
        self.store.open()
        self.cluster = mk_storm_cluster_state(self.base_conf)
        self.core = core = _NoSchedulingCore({**self.base_conf, "storm.local.dir": str(tmp / "nimbus-local")}, self.cluster, self.store)
        self.rpc = RpcServer("127.0.0.1", 0, make_handlers(core, self.store, 100 << 20, lambda: None),
                             name="test-nimbus-rpc")
        self.rpc.start()
        self.supervisors: list[Supervisor] = []
        self.procs: list[subprocess.Popen] = []
        self.local_dirs: list[Path] = []
        self._n = 0

    def conf(self, name: str, ports: Iterable[int], **overrides: Any) -> dict[str, Any]:
        local = self.tmp / name
        self.local_dirs.append(local)
        return {**self.base_conf, "storm.local.dir": str(local), "storm.local.hostname": "127.0.0.1",
                "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": self.rpc.port, "nimbus.thrift.timeout": 5,
                "supervisor.slots.ports": list(ports), "supervisor.heartbeat.frequency.secs": 1,
                "supervisor.monitor.frequency.secs": 1, "supervisor.worker.start.timeout.secs": 15,
                "supervisor.worker.timeout.secs": 6, "supervisor.worker.shutdown.sleep.secs": 1,
                "worker.heartbeat.frequency.secs": 1, "task.heartbeat.frequency.secs": 1,
                "task.refresh.poll.secs": 1, **overrides}

    # -- topologies and assignments ----------------------------------------------------------

    def topology(self, name: str = "topo", install: bool = True) -> str:
        """Submit a topology (1 spout, 2 bolts, 3 ackers: six executors); with install=False its
        code is hidden from the download handlers until install(). The tests watch its workers'
        processes, not its tuples: 20 a second flow (its spout unpaced kept three workers busy
        for the whole test), and Storm's idle waits are 10 ms (tests/testutil.py)."""
        self._n += 1
        pkg = package(self.tmp / f"pkg-{self._n}", spouts=1, bolts=2,
                      config={"topology.workers": 3, "numbers.per.second": 20, **QUIET_IDLE})
        storm_id = self.core.submit(f"{name}{self._n}", pkg)
        if not install:
            os.rename(self.store.topology_dir(storm_id), self.tmp / f"hidden-{storm_id}")
        return storm_id

    def install(self, storm_id: str) -> None:
        os.rename(self.tmp / f"hidden-{storm_id}", self.store.topology_dir(storm_id))

    def executors(self, storm_id: str) -> list[tuple[int, int]]:
        base = self.cluster.storm_base(storm_id)
        return [e for _, e in self.core.layout(storm_id, base).all_executors()]

    def assign(self, storm_id: str, slots: list[tuple[str, int]]) -> None:
        """All of the topology's executors, dealt round robin over `slots`."""
        now = int(time.time())
        executors = self.executors(storm_id)
        enp = {ex: slots[i % len(slots)] for i, ex in enumerate(executors)}
        self.cluster.set_assignment(storm_id, Assignment(
            master_code_dir=str(self.store.topology_dir(storm_id)),
            node_host={node: "127.0.0.1" for node, _ in slots},
            executor_node_port=enp, executor_start_time_secs={ex: now for ex in enp}))

    def unassign(self, storm_id: str) -> None:
        self.cluster.remove_storm(storm_id)

    # -- supervisors -------------------------------------------------------------------------

    def supervisor(self, conf: Mapping[str, Any], worker_command=None) -> Supervisor:
        kwargs = {"worker_command": worker_command} if worker_command else {}
        sup = Supervisor(conf, **kwargs)
        self.supervisors.append(sup)
        sup.start()
        return sup

    def supervisor_process(self, conf: Mapping[str, Any]) -> subprocess.Popen:
        conf_file = Path(conf["storm.local.dir"]).parent / f"{Path(conf['storm.local.dir']).name}-conf.json"
        conf_file.write_text(json.dumps(conf))
        cmd = [sys.executable, str(HERE / "run_supervisor.py"), str(conf_file)]
        # Its log goes to a file (an unread pipe would block a chatty supervisor once full) that
        # a failing wait shows (diagnostics()).
        log = self.tmp / f"supervisor-process-{len(self.procs) + 1}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                    stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def diagnostics(self, lines: int = 40) -> str:
        """The last lines of every supervisor process's log and every worker log, for a
        failing wait's message."""
        logs = sorted(self.tmp.glob("supervisor-process-*.log"))
        for local in self.local_dirs:
            logs += sorted(local_layout.log_dir({"storm.local.dir": str(local)}).rglob("worker*.log"))
        out = []
        for log in logs:
            try:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError as e:
                tail = [f"(unreadable: {e})"]
            out.append(f"--- {log} ---\n" + "\n".join(tail))
        return "\n".join(out)

    def close(self) -> None:
        for sup in self.supervisors:
            sup.stop()
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        for local in self.local_dirs:
            kill_workers_of(local)
        self.rpc.stop()
        self.cluster.disconnect()


# -- looking at a supervisor's local dir ---------------------------------------------------------

def records_on_disk(conf: Mapping[str, Any]) -> dict[str, dict]:
    path = local_layout.supervisor_localstate(conf)
    return dict(LocalState(path, create=False).get(LS_APPROVED_WORKERS) or {})


def supervisor_id_on_disk(conf: Mapping[str, Any]) -> str | None:
    path = local_layout.supervisor_localstate(conf)
    return LocalState(path, create=False).get(LS_ID)


def running_workers(conf: Mapping[str, Any]) -> dict[int, tuple[str, int]]:
    """port -> (worker id, pid) of recorded workers with a fresh local heartbeat and a live pid."""
    out = {}
    now = time.time()
    for wid, rec in records_on_disk(conf).items():
        hb = read_worker_heartbeat(conf, wid)
        pid = rec.get("pid")
        if hb is not None and pid and now - hb.time_secs <= 3 and pid_alive(pid):
            out[rec["port"]] = (wid, pid)
    return out


def wait_running_workers(conf: Mapping[str, Any], expected: Mapping[int, tuple[str, int]], what: str,
                         timeout: float = 30.0, diagnostics=lambda: "") -> None:
    """Poll until running_workers(conf) is `expected`: one read can miss a live worker whose
    heartbeat is a few seconds late on a loaded machine; a replaced worker (another id or pid)
    never matches, so the deadline fails the test."""
    from testutil import wait_until

    wait_until(lambda: running_workers(conf) == expected, timeout,
               lambda: f"{what}: expected {dict(expected)}, heartbeating {running_workers(conf)}\n{diagnostics()}",
               interval=0.2)


def heartbeating_on(conf: Mapping[str, Any], ports: Iterable[int], timeout: float = 30.0) -> dict[int, tuple[str, int]]:
    """running_workers(conf) once every port in `ports` has a heartbeating worker (polled)."""
    from testutil import wait_until

    want = sorted(ports)

    def all_there():
        workers = running_workers(conf)
        return workers if sorted(workers) == want else None

    return wait_until(all_there, timeout,
                      lambda: f"heartbeating workers on ports {want}: {running_workers(conf)}", interval=0.2)


def pid_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def slots_running(sup: Supervisor, ports: Iterable[int]) -> bool:
    states = sup.slot_states()
    return all(states[p].phase is SlotPhase.RUNNING for p in ports)


def kill_workers_of(local_dir: Path) -> None:
    """SIGKILL every worker a supervisor recorded under `local_dir` (by pid, start time checked)."""
    conf = {"storm.local.dir": str(local_dir)}
    for rec in records_on_disk(conf).values():
        pid, start = rec.get("pid"), rec.get("pid_start")
        if not pid:
            continue
        try:
            proc = psutil.Process(pid)
            if start is not None and process_start(pid) != ProcessStart.from_text(start):
                continue
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        except (psutil.NoSuchProcess, psutil.TimeoutExpired):
            pass
        except psutil.AccessDenied:
            pass


def rounds(sup, n: int) -> None:
    """Wait until sync-processes has run `n` more times (no fixed sleeps)."""
    target = sup._processes_thread.runs + n
    wait_until(lambda: sup._processes_thread.runs >= target, 30, f"{n} sync-processes rounds")
