"""Workers of LocalCluster: `WorkerProcess` (the distributed worker's own code) run as threads of
this process, launched and stopped by the real supervisor through `InProcessLauncher`.

What differs from a worker process is only what `InProcessRuntime` gives it: the in-memory
cluster state, the live topology object, the in-process transport (addresses carry the storm id,
so a port reused by another topology never receives the old one's tuples) and the listeners
LocalCluster reports errors, deaths and emits to. A "signal" stops the worker's threads.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.memory import InMemoryStore
from cluster_state.records import LocalAssignment
from daemons.inprocess.code import LiveCodeStore
from daemons.process_start import ProcessStart, process_start
from daemons.supervisor.worker_state import WorkerRecord
from executor.errors import ClearError, ComponentError, InvalidTopologyError, NotAliveError
from executor.lifecycle import LifecycleError, Status
from executor.transport import InProcessHub
from executor.worker import Worker, WorkerEvents
from executor.worker_process import WorkerProcess

log = logging.getLogger(__name__)


@dataclass
class TopologyHooks:
    """LocalCluster's listeners for one topology's workers (component errors, executor deaths,
    every emit for complete_topology)."""

    on_error: Callable[[str, int, BaseException], None]
    on_died: Callable[[Worker, ComponentError], None]
    emit_listener: Callable | None = None


class InProcessRuntime:
    """A LocalCluster worker's runtime (an executor.worker_runtime.WorkerRuntime, as the worker
    process's ProcessRuntime is)."""

    write_pid = False  # the worker is this process: there is no pid of its own to record
    # LocalCluster keeps a stopped worker's exact final figures itself (forget, stats_snapshots).
    carry_stats = False

    def __init__(self, store: InMemoryStore, code: LiveCodeStore, hub: InProcessHub):
        self.store = store
        self.code = code
        self.hub = hub

    def tune_process(self, conf: Mapping[str, Any]) -> None:
        """Nothing: the process is LocalCluster's host's (`storm-py local` tunes it itself)."""

    def cluster_state(self, conf: Mapping[str, Any]):
        return mk_storm_cluster_state(conf, store=self.store)

    def load_topology(self, storm_id: str, code_dir):
        try:
            return self.code.code(storm_id).topology
        except NotAliveError as exc:
            raise InvalidTopologyError(str(exc)) from None

    def transport(self, host: str, conf: Mapping[str, Any]):
        return self.hub.transport()

    def address(self, host: str, port: int, storm_id: str):
        return (host, port, storm_id)

    def events(self, storm_id: str, on_error, on_died) -> WorkerEvents:
        try:
            hooks = self.code.code(storm_id).hooks
        except NotAliveError:
            hooks = None
        if hooks is None:
            return WorkerEvents(on_error, on_died)

        def error(component: str, task: int, exc: BaseException) -> None:
            hooks.on_error(component, task, exc)
            on_error(component, task, exc)

        def died(worker: Worker, err: ComponentError) -> None:
            hooks.on_died(worker, err)
            # Stopping the worker joins the dying executor's thread: not from that thread.
            threading.Thread(target=on_died, args=(worker, err), name=f"died-{worker.address}", daemon=True).start()

        return WorkerEvents(error, died, emit_listener=hooks.emit_listener)


@dataclass
class _Launched:
    process: WorkerProcess
    stopper: threading.Thread | None = None


class InProcessLauncher:
    """The supervisor's launcher in LocalCluster (a launcher.WorkerLauncher, like ProcessLauncher)."""

    def __init__(self, conf: Mapping[str, Any], runtime: InProcessRuntime):
        self.conf = conf
        self.runtime = runtime
        self._lock = threading.Lock()
        self._workers: dict[str, _Launched] = {}
        self._retired: dict[str, list[dict]] = {}  # storm id -> component stats of forgotten workers
        self._me = (os.getpid(), process_start(os.getpid()))

    def launch(self, supervisor_id: str, worker_id: str, port: int,
               assignment: LocalAssignment) -> tuple[int, ProcessStart | None]:
        local_layout.worker_pids(self.conf, worker_id).mkdir(parents=True, exist_ok=True)
        local_layout.worker_heartbeats(self.conf, worker_id).mkdir(parents=True, exist_ok=True)
        process = WorkerProcess(self.conf, assignment.storm_id, supervisor_id, port, worker_id, runtime=self.runtime)
        launched = _Launched(process)
        with self._lock:
            self._workers[worker_id] = launched
        try:
            process.start()
        except (ClearError, LifecycleError) as exc:
            # LifecycleError: a component died while the worker started; its death (with the
            # trace) is logged by its executor already, so one line here.
            log.error("worker %s on port %s (%s) did not start: %s", worker_id, port, assignment.storm_id, exc)
        except Exception:  # noqa: BLE001 -- as a worker process that dies at start: the slot relaunches it
            log.exception("worker %s on port %s (%s) did not start", worker_id, port, assignment.storm_id)
        return self._me

    def _get(self, worker_id: str) -> _Launched | None:
        with self._lock:
            return self._workers.get(worker_id)

    def alive(self, record: WorkerRecord) -> bool:
        launched = self._get(record.worker_id)
        # Stopping is still alive: as a process after SIGTERM, its threads run (and write their
        # heartbeat dir) until it stopped; the slot cleans the dir up only after that.
        return launched is not None and launched.process.status in (Status.CREATED, Status.STARTING, Status.RUNNING,
                                                                     Status.STOPPING)

    def signal(self, record: WorkerRecord, sig: signal.Signals) -> bool:
        launched = self._get(record.worker_id)
        if launched is None:
            return False
        with self._lock:
            if launched.stopper is None:  # SIGTERM and a later SIGKILL: one stop, in the background
                launched.stopper = threading.Thread(target=launched.process.stop, name=f"stop-{record.worker_id}",
                                                    daemon=True)
                launched.stopper.start()
        return True

    def exit_status(self, worker_id: str) -> int | None:
        return None  # threads of this process: no exit status of their own

    def memory_bytes(self, record: WorkerRecord) -> int | None:
        return None  # threads of this process: no memory of their own

    def forget(self, worker_id: str) -> None:
        with self._lock:
            launched = self._workers.pop(worker_id, None)
            if launched is not None and launched.process.worker is not None:
                # A worker stopped for good: its final counts stay part of the topology's totals.
                process = launched.process
                self._retired.setdefault(process.storm_id, []).extend(process.worker.stats_records().values())

    def find_launched(self, record: WorkerRecord) -> tuple[int, ProcessStart] | None:
        return None  # a LocalCluster's supervisor never outlives its workers

    # -- for LocalCluster ----------------------------------------------------------------------

    def processes(self, storm_id: str | None = None) -> list[WorkerProcess]:
        with self._lock:
            found = [w.process for w in self._workers.values()]
        return [p for p in found if storm_id is None or p.storm_id == storm_id]

    def stats_snapshots(self, storm_id: str) -> list:
        """Executor stats records of every worker the topology had: those launched (running or
        not) and those forgotten, read at once so that a worker is never counted twice or missed."""
        with self._lock:
            launched = [w.process.worker for w in self._workers.values()
                        if w.process.storm_id == storm_id and w.process.worker is not None]
            return [rec for w in launched for rec in w.stats_records().values()] + \
                list(self._retired.get(storm_id, ()))

    def drop_retired(self, storm_id: str) -> None:
        with self._lock:
            self._retired.pop(storm_id, None)

    def stop_all(self, timeout: float = 30.0) -> None:
        """Stop every worker still running (the supervisor is stopped: nobody else will)."""
        with self._lock:
            launched = list(self._workers.values())
        for w in launched:
            w.process.stop()
        deadline = time.monotonic() + timeout
        for w in launched:
            if w.stopper is not None:
                w.stopper.join(max(0.0, deadline - time.monotonic()))
