"""Worker processes as the supervisor sees them: launch, facts, signals, local heartbeat, cleanup.

Nothing here decides anything (slot.py and worker_state.py do); these are the side effects
the slot actions name. A worker runs in its own session (a supervisor that stops or dies leaves
it running) with its output appended to `workers-artifacts/{id}/{port}/worker.log`. A pid is
signalled only after `WorkerRecord.process_status` saw the recorded process start time on it,
so a pid the kernel gave to another process is never touched.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import psutil

import executor
from cluster_state import local_layout
from cluster_state.auth import worker_conf
from cluster_state.records import LocalAssignment
from daemons.process_start import ProcessStart, process_start
from daemons.supervisor.worker_state import ProcessFacts, ProcessStatus, WorkerRecord

log = logging.getLogger(__name__)

WORKER_CONF_FILE = "supervisor-conf.json"
# Where `python -m executor.worker_main` is importable from: the storm-py the supervisor runs.
_CODE_ROOT = str(Path(executor.__file__).resolve().parent.parent)

CommandFn = Callable[[str, str, int, str, Path], Sequence[str]]


def worker_command(storm_id: str, supervisor_id: str, port: int, worker_id: str, conf_file: Path) -> list[str]:
    """The worker process's command line (the contract with executor/worker_main.py)."""
    return [sys.executable, "-m", "executor.worker_main", "--storm-id", storm_id, "--supervisor-id", supervisor_id,
            "--port", str(port), "--worker-id", worker_id, "--conf-file", str(conf_file)]


def write_worker_conf(conf: Mapping[str, Any], worker_id: str) -> Path:
    """The supervisor's effective conf as JSON in the worker's dir (it may hold secrets the
    worker needs for ZooKeeper: readable by the owner only)."""
    path = local_layout.worker_root(conf, worker_id) / WORKER_CONF_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(dict(conf), f, sort_keys=True, default=str)
    return path


def launch_worker(conf: Mapping[str, Any], supervisor_id: str, worker_id: str, port: int,
                  assignment: LocalAssignment, command: CommandFn = worker_command) -> subprocess.Popen:
    """Create workers/{id}/{pids,heartbeats} and start the worker; raises OSError when it cannot."""
    root = local_layout.worker_root(conf, worker_id)
    local_layout.worker_pids(conf, worker_id).mkdir(parents=True, exist_ok=True)
    local_layout.worker_heartbeats(conf, worker_id).mkdir(parents=True, exist_ok=True)
    # The worker gets its topology's own ZooKeeper identity, not the daemons' (cluster_state/auth.py).
    conf_file = write_worker_conf(worker_conf(conf, assignment.storm_id), worker_id)
    log_path = local_layout.worker_log(conf, assignment.storm_id, port)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = list(command(assignment.storm_id, supervisor_id, port, worker_id, conf_file))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_CODE_ROOT, env.get("PYTHONPATH")) if p)
    with open(log_path, "ab") as out:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=root,
                                env=env, start_new_session=True, close_fds=True)


def process_facts(pid: int) -> ProcessFacts:
    """What the kernel says about `pid` now (gathered, not interpreted)."""
    try:
        proc = psutil.Process(pid)
        start = process_start(pid)
        wall = proc.create_time()
        zombie = proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return ProcessFacts(False)
    except psutil.AccessDenied:
        return ProcessFacts(True, None)
    if start is None:  # gone between the looks
        return ProcessFacts(False)
    return ProcessFacts(True, start, zombie, wall)


def record_status(record: WorkerRecord) -> ProcessStatus:
    return record.process_status(process_facts(record.pid) if record.pid is not None else None)


def signals_group(sig: signal.Signals) -> bool:
    """Whether `sig` goes to the worker's whole process group. SIGTERM asks the worker to stop
    and goes to it alone: it stops what it started in order (its sinks finish their writes, then
    stop their Spark JVM; its subprocess components are closed). Sent to the group, the JVM
    stopped itself under a write in progress, and worker.log had a Py4J traceback at every
    stop. SIGKILL, the forced stop after the shutdown wait, takes the whole group."""
    return sig == signal.SIGKILL


def signal_worker(record: WorkerRecord, sig: signal.Signals) -> bool:
    """Send `sig` to the worker (SIGKILL: to its process group, the worker and anything it
    started) if the recorded pid is still our worker. Returns whether a signal was sent."""
    status = record_status(record)
    if status is not ProcessStatus.ALIVE:
        if status is ProcessStatus.REUSED:
            log.warning("not sending %s to pid %s: it no longer runs worker %s (pid reused)",
                        sig.name, record.pid, record.worker_id)
        return False
    pid = record.pid
    try:
        if signals_group(sig) and os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError as exc:
        log.error("cannot send %s to worker %s (pid %s): %s", sig.name, record.worker_id, pid, exc)
        return False
    log.info("sent %s to worker %s (pid %s)", sig.name, record.worker_id, pid)
    return True


def worker_pids_on_disk(conf: Mapping[str, Any], worker_id: str) -> list[int]:
    """Pids the worker wrote into workers/{id}/pids/."""
    try:
        names = os.listdir(local_layout.worker_pids(conf, worker_id))
    except OSError:
        return []
    return sorted(int(n) for n in names if n.isdigit() and int(n) > 0)


def find_launched_pid(conf: Mapping[str, Any], record: WorkerRecord) -> tuple[int, ProcessStart] | None:
    """For a record without a pid (the supervisor died between launch and writing it down):
    the worker's pid from its pid file, trusted only when that process started after the
    launch was recorded and its command line names this worker id."""
    for pid in worker_pids_on_disk(conf, record.worker_id):
        try:
            proc = psutil.Process(pid)
            start, wall = process_start(pid), proc.create_time()
            cmdline = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        # Both wall-clock times: a clock step between the launch and this look could misjudge
        # it, so the command line must name the worker too.
        if start is not None and wall + 1.0 >= record.launch_time_secs and record.worker_id in cmdline:
            return pid, start
    return None


def cleanup_worker(conf: Mapping[str, Any], worker_id: str) -> bool:
    """Remove workers/{id} (heartbeats, pids, conf). False when it could not (retried later)."""
    root = local_layout.worker_root(conf, worker_id)
    try:
        shutil.rmtree(root)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not clean up worker %s (%s); will retry", worker_id, exc)
        return False
    return True


def log_size(path: Path) -> int:
    """The log's size now (0 when it does not exist yet): where a worker launched now starts
    writing (the log is appended to)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def read_log_tail(path: Path, max_bytes: int, start: int = 0) -> tuple[bytes, bool]:
    """The last `max_bytes` of the log from byte `start` on (where the dead worker began writing;
    from 0 if the log is now shorter: rotated), read with a seek from the end, never whole.
    Returns (bytes, whether they begin after `start`, possibly mid-line). (b"", False) when the
    log cannot be read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if start > size:
                start = 0
            begin = max(start, size - max_bytes)
            f.seek(begin)
            return f.read(size - begin), begin > start
    except OSError as exc:
        log.debug("cannot read the tail of %s: %s", path, exc)
        return b"", False


def descendants(pid: int) -> list[int]:
    """The pids under `pid`, from Linux's /proc/PID/task/TID/children: it reads only the tree's
    own entries, where psutil's children() reads every process of the machine (the supervisor
    samples each worker's tree several times a second). A process may fork or exit meanwhile:
    the next sample sees it. Without those files (a kernel built without them): psutil's way."""
    out: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # exited meanwhile
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except FileNotFoundError:
                if not os.path.exists(f"/proc/{parent}/task/{tid}"):
                    continue  # the thread ended meanwhile
                return [c.pid for c in psutil.Process(pid).children(recursive=True)]
            except OSError:
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def tree_rss(record: WorkerRecord) -> int | None:
    """Resident bytes of the worker's process and its descendants (a Spark JVM, subprocesses)."""
    if record.pid is None:
        return None
    try:
        total = psutil.Process(record.pid).memory_info().rss
        pids = descendants(record.pid)
    except psutil.Error:
        return None
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            continue  # exited meanwhile
    return total


@runtime_checkable
class WorkerLauncher(Protocol):
    """What the supervisor needs of its launcher (Storm 2.x's ContainerLauncher: the side effects
    of the slot actions on worker processes): ProcessLauncher here, daemons/inprocess/workers.py's
    InProcessLauncher in LocalCluster. All calls come from the supervisor's sync-processes thread;
    tests/unit/test_unit_seams.py holds both to these signatures."""

    def launch(self, supervisor_id: str, worker_id: str, port: int,
               assignment: LocalAssignment) -> tuple[int, ProcessStart | None]:
        """Start the worker; its pid and process start. OSError when it cannot."""

    def alive(self, record: WorkerRecord) -> bool:
        """Whether the worker still runs (reaping it if it is our child and has exited)."""

    def signal(self, record: WorkerRecord, sig: signal.Signals) -> bool:
        """Signal the worker if it is still ours; whether a signal was sent."""

    def exit_status(self, worker_id: str) -> int | None:
        """How the worker's process ended, as Popen.returncode (negative: killed by that
        signal), once alive() saw it gone and until forget(); None when not known."""

    def memory_bytes(self, record: WorkerRecord) -> int | None:
        """Resident memory of the worker with its children (None: not known, or not its own process)."""

    def forget(self, worker_id: str) -> None:
        """The worker is cleaned up: drop anything kept about it."""

    def find_launched(self, record: WorkerRecord) -> tuple[int, ProcessStart] | None:
        """For a record without a pid: the worker's pid and start, if it can be trusted."""


class ProcessLauncher:
    """Workers as processes of their own (distributed mode): the process side of the slot
    actions (a WorkerLauncher)."""

    def __init__(self, conf: Mapping[str, Any], command: CommandFn = worker_command):
        self.conf = conf
        self.command = command
        self._popens: dict[str, subprocess.Popen] = {}
        self._exits: dict[str, int] = {}  # returncodes reaped by alive(), until forget()

    def launch(self, supervisor_id: str, worker_id: str, port: int,
               assignment: LocalAssignment) -> tuple[int, ProcessStart | None]:
        """Start the worker; returns its pid and start (None: it exited at once, and a record
        without a start never lets its pid be signalled). Raises OSError when it cannot."""
        popen = launch_worker(self.conf, supervisor_id, worker_id, port, assignment, self.command)
        self._popens[worker_id] = popen
        return popen.pid, process_start(popen.pid)

    def alive(self, record: WorkerRecord) -> bool:
        popen = self._popens.get(record.worker_id)
        if popen is not None and self._reaped(record.worker_id, popen.poll()):
            return False  # our child: reaped, so it is not a zombie that looks alive
        if record_status(record) is ProcessStatus.ALIVE:
            return True
        if popen is not None:
            # It exited between poll() and the status check: collect its exit status now.
            try:
                self._reaped(record.worker_id, popen.wait(timeout=1.0))
            except subprocess.TimeoutExpired:
                pass
        return False

    def _reaped(self, worker_id: str, code: int | None) -> bool:
        if code is None:
            return False
        popen = self._popens.pop(worker_id)
        log.info("worker %s (pid %s) exited with code %s", worker_id, popen.pid, code)
        self._exits[worker_id] = code
        return True

    def signal(self, record: WorkerRecord, sig: signal.Signals) -> bool:
        return signal_worker(record, sig)

    def exit_status(self, worker_id: str) -> int | None:
        return self._exits.get(worker_id)

    def forget(self, worker_id: str) -> None:
        self._exits.pop(worker_id, None)
        popen = self._popens.pop(worker_id, None)
        if popen is not None:
            popen.poll()

    def memory_bytes(self, record: WorkerRecord) -> int | None:
        return tree_rss(record) if record_status(record) is ProcessStatus.ALIVE else None

    def find_launched(self, record: WorkerRecord) -> tuple[int, ProcessStart] | None:
        return find_launched_pid(self.conf, record)

