"""LocalCluster: a whole cluster in this process, on the distributed daemons' own code.

Nimbus (`daemons.nimbus`, without its RPC server) validates, schedules and runs the topology
state machine (kill, activate, deactivate, rebalance); a supervisor (`daemons.supervisor`) follows
the assignments and launches workers, which are `WorkerProcess` itself run as threads here; all
of them share an in-memory cluster state in place of ZooKeeper, and tuples between workers go
through an in-process transport as serialized batches, exactly as they would over ZeroMQ. What
is local is only `daemons.inprocess`: a code store of live topology objects, the in-process
launcher and the worker's runtime.

The calls block until the cluster caught up (a submitted topology's workers are running, a
killed topology's workers are stopped, a rebalanced topology runs its new assignment), so that
LocalCluster's callers see the same synchronous API as before the daemons existed.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from cluster_state.config import default_config, validate_config
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.memory import InMemoryStore
from cluster_state.records import STATUS_ACTIVE
from daemons.inprocess.code import LiveCode, LiveCodeStore, LiveSupervisorCode
from daemons.inprocess.workers import InProcessLauncher, InProcessRuntime, TopologyHooks
from daemons.nimbus.daemon import Nimbus
from daemons.nimbus.swaps.steps import stopped_at_checkpoint
from daemons.supervisor.daemon import Supervisor
from executor.checkpoint.protocol import CHECKPOINT_COMPONENT
from executor.checkpoint.wiring import STATEFUL_SPOUT
from executor.core import log_core
from executor.errors import ComponentError, InvalidTopologyError, NotAliveError
from executor.layout import TopologyLayout
from executor.lifecycle import Status
from executor.stats import component_figures, component_totals, group_by_component
from executor.stats_windows import ALL_TIME
from executor.structure import validate_topology_name
from executor.topology import StormTopology
from executor.transport import InProcessHub
from executor.tuple import is_system_id
from executor.windowing.spec import fires_within_secs
from executor.worker import Worker

log = logging.getLogger(__name__)

_MAX_ERRORS = 1000  # error records kept per topology
_HOST = "localhost"
_FIRST_PORT = 6700
_SLOTS = 64             # the local supervisor's slots: ports are names here, nothing binds them
_CATCH_UP_SECS = 60.0   # how long a call waits for the daemons to carry it out
_POLL_SECS = 0.01

# Daemon timings of a cluster in one process: a worker that stops heartbeating is stuck (no
# slow network or loaded host to allow for), and state changes reach workers at once.
_LOCAL_DAEMON_CONF = {
    "storm.local.hostname": _HOST,
    "supervisor.slots.ports": [_FIRST_PORT + i for i in range(_SLOTS)],
    "supervisor.worker.shutdown.sleep.secs": 1,
    "logviewer.port": 0,  # no logviewer serves a local run's logs: the UI shows no log links
}


@dataclass
class ErrorRecord:
    component_id: str
    task_id: int
    error: str
    time_secs: float


@dataclass
class _Topology:
    """What LocalCluster keeps about a topology beyond the cluster state: its run's reports."""

    name: str
    storm_id: str
    errors: list[ErrorRecord] = field(default_factory=list)
    died: list[ComponentError] = field(default_factory=list)


class LocalCluster:
    def __init__(self, daemon_conf: dict | None = None):
        log_core()
        self.conf = default_config()
        if daemon_conf:
            validate_config(daemon_conf, "LocalCluster config")
            self.conf.update(daemon_conf)
        self._dir = tempfile.mkdtemp(prefix="storm-py-local-")
        self.conf.update(_LOCAL_DAEMON_CONF)
        self.conf["storm.local.dir"] = self._dir
        self._hub = InProcessHub(byte_capacity=int(self.conf["topology.executor.receive.buffer.bytes"]))
        self._store = InMemoryStore()
        self._code = LiveCodeStore()
        self._launcher = InProcessLauncher(self.conf, InProcessRuntime(self._store, self._code, self._hub))
        self._topologies: dict[str, _Topology] = {}
        self._lock = threading.RLock()
        self._closed = False
        self.nimbus = Nimbus(self.conf, cluster_factory=self._cluster_state, store=self._code, serve_rpc=False)
        self.supervisor = Supervisor(self.conf, worker_launcher=self._launcher,
                                     code=LiveSupervisorCode(self.conf, self._code),
                                     cluster_factory=self._cluster_state)
        try:
            self.nimbus.start()
            self.supervisor.start()
            self._until(lambda: self._supervisor_known(), "the local supervisor to register with Nimbus")
        except BaseException:
            self._stop_daemons()
            raise

    def nimbus_calls(self):
        """Nimbus's RPC operations on this cluster, called in process (what `storm-py local
        --ui-port` gives the UI): the same handlers, encoding and errors as `storm-py nimbus`."""
        from daemons.nimbus.handlers import make_handlers
        from daemons.rpc.calls import LocalCalls

        handlers = make_handlers(self.nimbus.core, self._code, int(self.conf["storm.package.max.bytes"]),
                                 self.nimbus.wake)
        return LocalCalls(handlers)

    def _cluster_state(self):
        return mk_storm_cluster_state(self.conf, store=self._store)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ---- topology lifecycle ----
    def submit_topology(self, name: str, conf: dict | None, topology: StormTopology,
                        initial_status: str = "active", *, emit_listener=None) -> str:
        """Start a topology; returns its storm id once its workers run. initial_status
        "inactive" opens no spout."""
        if self._closed:
            raise RuntimeError("LocalCluster is shut down")
        validate_topology_name(name)
        if not isinstance(topology, StormTopology):
            raise InvalidTopologyError(
                f"topology {name!r}: expected the result of TopologyBuilder.create_topology(), "
                f"got {type(topology).__name__}")
        if initial_status not in ("active", "inactive"):
            raise InvalidTopologyError(f"initial_status must be 'active' or 'inactive', got {initial_status!r}")
        with self._lock:
            rec = _Topology(name, "")
            hooks = TopologyHooks(self._error_hook(rec), self._died_hook(rec), emit_listener)
            # Nimbus's own submit: validation, the conf merge, the storm base, the assignment.
            storm_id = self._core.submit_code(name, topology.structure, conf or {}, LiveCode(topology, hooks),
                                              initial_status)
            rec.storm_id = storm_id
            self._topologies[name] = rec
        # An executor that dies at once stops its worker before it was ever seen running: the
        # topology is submitted all the same (died() reports it, the supervisor restarts it).
        self._until(lambda: self._caught_up(storm_id) or rec.died, f"the workers of topology {name!r} to start")
        return storm_id

    @property
    def _core(self):
        return self.nimbus.core

    def _error_hook(self, rec: _Topology) -> Callable[[str, int, BaseException], None]:
        def on_error(component: str, task: int, exc: BaseException) -> None:
            if len(rec.errors) < _MAX_ERRORS:  # a component may report on every tuple
                rec.errors.append(ErrorRecord(component, task, f"{type(exc).__name__}: {exc}", time.time()))
        return on_error

    def _died_hook(self, rec: _Topology) -> Callable[[Worker, ComponentError], None]:
        def on_died(worker: Worker, err: ComponentError) -> None:
            rec.died.append(err)
            # The executor logged the error itself; its worker stops (as a worker process exits)
            # and the supervisor starts it again.
            log.info("topology %s: worker %s stops after its executor %s[%d] died", rec.name, worker.address,
                     err.component_id, err.task_id)
        return on_died

    def _get(self, name: str) -> _Topology:
        rec = self._topologies.get(name)
        if rec is None:
            raise NotAliveError(f"no running topology named {name!r}")
        return rec

    def kill_topology(self, name: str, wait_secs: float = 0) -> None:
        """Deactivate, wait wait_secs for in-flight tuples, then stop the workers."""
        rec = self._get(name)
        self._core.kill(name, wait_secs)
        self.nimbus.wake()  # its monitor then sleeps until the kill's timer is due, and serves it
        with self._lock:
            self._topologies.pop(name, None)
        self._until(lambda: self._gone(rec.storm_id), f"topology {name!r} to be removed and its workers stopped",
                    extra=wait_secs or 0)
        self._launcher.drop_retired(rec.storm_id)
        log.info("killed topology %s", name)

    def activate(self, name: str) -> None:
        self._get(name)
        self._core.activate(name)
        self._until(lambda: self._spouts_active(name, True), f"the spouts of {name!r} to be activated")

    def deactivate(self, name: str) -> None:
        self._get(name)
        self._core.deactivate(name)
        self._until(lambda: self._spouts_active(name, False), f"the spouts of {name!r} to be deactivated")

    def drain(self, name: str, timeout_secs: float, give_up: Callable[[], bool] = lambda: False) -> bool:
        """Deactivate the topology, then wait (at most `timeout_secs`) until everything its spouts
        sent is done: acked, and in an exactly-once topology committed (every stateful spout
        passed a checkpoint while inactive, and that checkpoint committed), and then what its
        processing-time windows still held fired and committed too (its output is in the
        table). False: it was not, within the time or before `give_up()`."""
        rec = self._get(name)
        self.deactivate(name)
        structure, _conf = self._core.topology_code(rec.storm_id)
        stateful = frozenset(cid for cid, c in structure.components.items() if c.conf.get(STATEFUL_SPOUT))
        spouts = [cid for cid in structure.spouts if not is_system_id(cid)]
        windows = max((fires_within_secs(c.conf) for c in structure.components.values()), default=0.0)
        deadline = time.monotonic() + timeout_secs

        def committed() -> int | None:
            marks = self._core.checkpoint_marks(rec.storm_id).get(CHECKPOINT_COMPONENT) or (None,)
            return None if marks[0] is None else marks[0].committed_txid

        def wait(done: Callable[[], bool]) -> bool:
            while not done():
                if time.monotonic() >= deadline or self.died(name) or give_up():
                    return False
                time.sleep(_POLL_SECS)
            return True

        def stopped() -> bool:
            stats = self.component_stats(name, include_sys=False)
            if any(stats.get(cid, {}).get("pending") for cid in spouts):
                return False
            return not stateful or stopped_at_checkpoint(self._core.checkpoint_marks(rec.storm_id), stateful,
                                                         CHECKPOINT_COMPONENT) is not None

        if not wait(stopped):
            return False
        if not stateful or not windows:
            return True
        # A window holding the last tuples fires within `windows`; its rows commit with the
        # first checkpoint that starts after that (two commits on: one may be under way).
        fired = time.monotonic() + windows + _POLL_SECS
        if not wait(lambda: time.monotonic() >= fired):
            return False
        since = committed() or 0
        return wait(lambda: (committed() or 0) >= since + 2)

    def rebalance(self, name: str, wait_secs: float = 0, num_workers: int | None = None,
                  executors: dict[str, int] | None = None) -> None:
        """Redistribute a topology: optionally a new worker count and per-component executor counts
        (never more than the component's tasks). In-flight tuples are replayed by their spouts."""
        rec = self._get(name)
        self._core.rebalance(name, wait_secs, num_workers, executors)
        self.nimbus.wake()
        self._until(lambda: self._rebalanced(rec.storm_id), f"topology {name!r} to run its new assignment",
                    extra=wait_secs or 0)
        log.info("rebalanced topology %s", name)

    def shutdown(self) -> None:
        if self._closed:
            return
        with self._lock:
            names = list(self._topologies)
        try:
            for name in names:
                try:
                    self.kill_topology(name)
                except NotAliveError:
                    pass
        finally:
            self._closed = True
            self._stop_daemons()

    def _stop_daemons(self) -> None:
        self.supervisor.stop()
        self.nimbus.stop()
        self._launcher.stop_all()
        shutil.rmtree(self._dir, ignore_errors=True)

    # ---- waiting for the daemons ----
    def _until(self, done: Callable[[], bool], what: str, extra: float = 0) -> None:
        deadline = time.monotonic() + _CATCH_UP_SECS + extra
        while not done():
            for daemon in (self.nimbus, self.supervisor):
                if daemon.status is not Status.RUNNING:
                    raise RuntimeError(f"LocalCluster: {daemon.name} is {daemon.status.value} "
                                       f"({daemon.failure or 'stopped'}) while waiting for {what}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"LocalCluster: timed out after {_CATCH_UP_SECS + extra:.0f}s waiting for {what}")
            time.sleep(_POLL_SECS)

    def _supervisor_known(self) -> bool:
        return self.supervisor.supervisor_id in self._core.cluster.all_supervisor_info()

    def _running(self, storm_id: str) -> list:
        return [p for p in self._launcher.processes(storm_id) if p.status is Status.RUNNING and p.worker is not None]

    def _caught_up(self, storm_id: str) -> bool:
        """Every slot of the assignment runs a worker with exactly its executors, and no other
        worker of the topology runs."""
        assignment = self._core.cluster.assignment_info(storm_id)
        if assignment is None:
            return False
        wanted: dict[int, set] = {}
        for executor, (_node, port) in assignment.executor_node_port.items():
            wanted.setdefault(port, set()).add(executor)
        running = self._running(storm_id)
        have = {p.port: set(p.worker.executor_ids) for p in running}
        return len(have) == len(running) and have == wanted

    def _gone(self, storm_id: str) -> bool:
        return (self._core.cluster.storm_base(storm_id) is None
                and not any(p.status in (Status.STARTING, Status.RUNNING, Status.STOPPING)
                            for p in self._launcher.processes(storm_id)))

    def _rebalanced(self, storm_id: str) -> bool:
        # Under Nimbus's lock: its rebalance step writes the new base, then the new assignment,
        # both under it; read between the two, the base says done while the old assignment
        # (whose workers run) still stands.
        with self._core.lock:
            base = self._core.cluster.storm_base(storm_id)
            if base is None:
                raise NotAliveError(f"topology {storm_id} was removed while rebalancing")
            if base.status == "rebalancing":
                return False
            return self._caught_up(storm_id)

    def _spouts_active(self, name: str, active: bool) -> bool:
        rec = self._get(name)
        base = self._core.cluster.storm_base(rec.storm_id)
        if base is None or (base.status == STATUS_ACTIVE) != active:
            return False
        return all(p.topology_status.active == active for p in self._running(rec.storm_id))

    # ---- inspection ----
    def topology_names(self) -> list[str]:
        return list(self._topologies)

    def storm_id(self, name: str) -> str:
        return self._get(name).storm_id

    def _workers(self, name: str) -> list[Worker]:
        return [p.worker for p in self._running(self._get(name).storm_id)]

    def component_stats(self, name: str, include_sys: bool = True) -> dict[str, dict[str, float]]:
        """All-time totals of the topology's run: every worker it had, including ones that
        died (their final figures), merged by executor/stats.py as Nimbus merges heartbeats.
        `include_sys=False`: the user's streams only (no ticks, checkpoint or acker tuples) and
        no system components, as Storm's UI shows a topology without sys=1."""
        records = self._launcher.stats_snapshots(self._get(name).storm_id)
        if include_sys:
            return {comp: component_totals(recs) for comp, recs in group_by_component(records).items()}
        return {comp: component_figures(recs, ALL_TIME, False) for comp, recs in group_by_component(records).items()
                if not is_system_id(comp)}

    def errors(self, name: str) -> list[ErrorRecord]:
        return list(self._get(name).errors)

    def died(self, name: str) -> list[ComponentError]:
        return list(self._get(name).died)

    def is_idle(self, name: str) -> bool:
        """No tuple queued in any worker, nor in transit between workers (the hub's inboxes,
        which no worker's backlog counts)."""
        workers = self._workers(name)
        return all(w.is_idle() for w in workers) and not any(self._hub.queued(w.address) for w in workers)

    def is_prepared(self, name: str) -> bool:
        """True once every executor opened/prepared (only happens while active)."""
        return all(ex.prepared for w in self._workers(name) for ex in w.executors)

    def layout(self, name: str) -> TopologyLayout:
        storm_id = self._get(name).storm_id
        return self._core.layout(storm_id, self._core.cluster.storm_base(storm_id))

    def workers(self, name: str) -> list[Worker]:
        return self._workers(name)
