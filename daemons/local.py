"""LocalCluster: runs topologies in this process, workers as in-process units.

Each topology gets `topology.workers` workers; executors are spread over them by the same
scheduling function nimbus uses, and tuples between workers go through an in-process
transport as serialized batches, exactly as they would over ZeroMQ. The seams that the
distributed daemons replace are the worker launcher (`_launch_worker`), the transport
(`InProcessHub`) and the topology records held here.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from cluster_state.config import ConfigError, default_config, merge_configs, validate_config
from daemons.nimbus.scheduler import SupervisorSlots, TopologyRequest, schedule
from executor.base import TopologyStatus
from executor.errors import AlreadyAliveError, ComponentError, InvalidTopologyError, NotAliveError
from executor.layout import TopologyLayout, compute_layout, num_ackers
from executor.stats import merge_stats
from executor.structure import validate_topology_name
from executor.topology import StormTopology
from executor.transport import InProcessHub
from executor.worker import Worker, WorkerEvents, WorkerSpec
from executor.worker_plan import task_addresses

log = logging.getLogger(__name__)

_MAX_ERRORS = 1000  # error records kept per topology

_FIRST_PORT = 6700


@dataclass
class ErrorRecord:
    component_id: str
    task_id: int
    error: str
    time_secs: float


@dataclass
class _Topology:
    name: str
    storm_id: str
    topology: StormTopology
    conf: dict
    status: TopologyStatus
    layout: TopologyLayout
    num_workers: int
    emit_listener: Any = None
    workers: list[Worker] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    died: list[ComponentError] = field(default_factory=list)
    launch_time: float = field(default_factory=time.time)


class LocalCluster:
    def __init__(self, daemon_conf: dict | None = None):
        self.conf = default_config()
        if daemon_conf:
            validate_config(daemon_conf, "LocalCluster config")
            self.conf.update(daemon_conf)
        self._hub = InProcessHub(byte_capacity=int(self.conf["topology.executor.receive.buffer.bytes"]))
        self._topologies: dict[str, _Topology] = {}
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._closed = False

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ---- topology lifecycle ----
    def submit_topology(self, name: str, conf: dict | None, topology: StormTopology,
                        initial_status: str = "active", *, emit_listener=None) -> str:
        """Start a topology; returns its storm id. initial_status "inactive" opens no spout."""
        if self._closed:
            raise RuntimeError("LocalCluster is shut down")
        validate_topology_name(name)
        if not isinstance(topology, StormTopology):
            raise InvalidTopologyError(
                f"topology {name!r}: expected the result of TopologyBuilder.create_topology(), "
                f"got {type(topology).__name__}")
        if initial_status not in ("active", "inactive"):
            raise InvalidTopologyError(f"initial_status must be 'active' or 'inactive', got {initial_status!r}")
        try:
            storm_conf = merge_configs(self.conf, conf or {}, source=f"topology {name!r} config")
        except ConfigError as exc:
            raise InvalidTopologyError(str(exc)) from None
        num_workers = int(storm_conf["topology.workers"])  # >= 1: the config schema checked it
        # Fix the acker task count at submit so a rebalance keeps task ids stable.
        storm_conf["topology.acker.executors"] = num_ackers(storm_conf, num_workers)
        storm_conf["topology.name"] = name
        with self._lock:
            if name in self._topologies:
                raise AlreadyAliveError(f"topology {name!r} is already running")
            storm_id = f"{name}-{next(self._ids)}-{int(time.time())}"
            storm_conf["storm.id"] = storm_id
            layout = compute_layout(topology, storm_conf, num_workers)
            rec = _Topology(name, storm_id, topology, storm_conf, TopologyStatus(initial_status == "active"),
                            layout, num_workers, emit_listener)
            self._topologies[name] = rec
            try:
                self._start_workers(rec)
            except Exception:
                self._topologies.pop(name, None)
                self._stop_workers(rec)
                raise
        log.info("submitted topology %s as %s (%d workers, %s)", name, storm_id, num_workers, initial_status)
        return storm_id

    def _start_workers(self, rec: _Topology) -> None:
        # Nimbus's scheduler over one local "supervisor" with a slot per worker; the in-process
        # addresses carry the storm id, so topologies never share an inbox.
        executors = tuple(ex for _c, ex in rec.layout.all_executors())
        ports = tuple(_FIRST_PORT + i for i in range(rec.num_workers))
        slots = schedule([TopologyRequest(rec.storm_id, executors, rec.num_workers)],
                         [SupervisorSlots("local", "localhost", ports)])[rec.storm_id]
        address = {slot: ("localhost", slot[1], rec.storm_id) for slot in set(slots.values())}
        task_address = task_addresses(slots, address.__getitem__)
        by_slot: dict = {}
        for ex, slot in slots.items():
            by_slot.setdefault(address[slot], []).append(ex)
        for addr, execs in sorted(by_slot.items()):
            rec.workers.append(self._launch_worker(rec, addr, sorted(execs), task_address))
        for w in rec.workers:
            w.start()

    def _launch_worker(self, rec: _Topology, slot, executors, task_address) -> Worker:
        def on_error(component: str, task: int, exc: BaseException) -> None:
            if len(rec.errors) < _MAX_ERRORS:  # a component may report on every tuple
                rec.errors.append(ErrorRecord(component, task, f"{type(exc).__name__}: {exc}", time.time()))

        spec = WorkerSpec(rec.storm_id, rec.conf, rec.layout, tuple(executors), slot, task_address, port=slot[1])
        events = WorkerEvents(on_error, self._worker_died(rec), emit_listener=rec.emit_listener)
        return Worker(spec, rec.topology, self._hub.transport(), rec.status, events)

    def _worker_died(self, rec: _Topology):
        def on_die(worker: Worker, err: ComponentError) -> None:
            rec.died.append(err)
            # The executor logged the error itself: here only what follows from it.
            log.info("topology %s: stopping worker %s after its executor %s[%d] died", rec.name,
                     worker.address, err.component_id, err.task_id)
            # Stop the whole worker, as a dying executor takes its worker process down; not from
            # the dying executor's own thread, which cannot join itself.
            threading.Thread(target=worker.stop, name=f"stop-{worker.address}", daemon=True).start()
        return on_die

    def _stop_workers(self, rec: _Topology) -> None:
        for w in reversed(rec.workers):
            w.stop()
        rec.workers = []

    def _get(self, name: str) -> _Topology:
        rec = self._topologies.get(name)
        if rec is None:
            raise NotAliveError(f"no running topology named {name!r}")
        return rec

    def kill_topology(self, name: str, wait_secs: float = 0) -> None:
        """Deactivate, wait wait_secs for in-flight tuples, then stop the workers."""
        with self._lock:
            rec = self._get(name)
            rec.status.set_active(False)
        if wait_secs and wait_secs > 0:
            time.sleep(wait_secs)
        with self._lock:
            self._topologies.pop(name, None)
        self._stop_workers(rec)
        log.info("killed topology %s", name)

    def activate(self, name: str) -> None:
        self._get(name).status.set_active(True)

    def deactivate(self, name: str) -> None:
        self._get(name).status.set_active(False)

    def rebalance(self, name: str, wait_secs: float = 0, num_workers: int | None = None,
                  executors: dict[str, int] | None = None) -> None:
        """Redistribute a topology: optionally a new worker count and per-component executor counts
        (never more than the component's tasks). In-flight tuples are replayed by their spouts."""
        with self._lock:
            rec = self._get(name)
            was_active = rec.status.active
            for comp, n in (executors or {}).items():
                if comp not in rec.layout.component_tasks:
                    raise InvalidTopologyError(f"rebalance {name!r}: unknown component {comp!r}")
                if not isinstance(n, int) or n < 1:
                    raise InvalidTopologyError(f"rebalance {name!r}: executors for {comp!r} must be >= 1")
            rec.status.set_active(False)
        if wait_secs and wait_secs > 0:
            time.sleep(wait_secs)
        with self._lock:
            self._stop_workers(rec)
            if num_workers is not None:
                if num_workers < 1:
                    raise InvalidTopologyError(f"rebalance {name!r}: num_workers must be >= 1")
                rec.num_workers = num_workers
                rec.conf["topology.workers"] = num_workers
            current = {c: len(es) for c, es in rec.layout.executors.items()}
            current.update(executors or {})
            rec.layout = compute_layout(rec.topology, rec.conf, rec.num_workers, current)
            rec.status.set_active(was_active)
            self._start_workers(rec)
        log.info("rebalanced topology %s: %d workers", name, rec.num_workers)

    def shutdown(self) -> None:
        with self._lock:
            names = list(self._topologies)
        for name in names:
            try:
                self.kill_topology(name)
            except NotAliveError:
                pass
        self._closed = True

    # ---- inspection ----
    def topology_names(self) -> list[str]:
        return list(self._topologies)

    def storm_id(self, name: str) -> str:
        return self._get(name).storm_id

    def component_stats(self, name: str) -> dict[str, dict[str, float]]:
        by_comp: dict[str, list] = {}
        for w in self._get(name).workers:
            for comp, stats in w.component_stats().items():
                by_comp.setdefault(comp, []).append(stats)
        return {comp: merge_stats(stats) for comp, stats in by_comp.items()}

    def spout_latencies(self, name: str) -> list[float]:
        out: list[float] = []
        for w in self._get(name).workers:
            for ex in w.executors:
                if ex.kind == "spout":
                    out.extend(ex.latencies)
        return out

    def errors(self, name: str) -> list[ErrorRecord]:
        return list(self._get(name).errors)

    def died(self, name: str) -> list[ComponentError]:
        return list(self._get(name).died)

    def is_idle(self, name: str) -> bool:
        """No tuple queued in any worker, nor in transit between workers (the hub's inboxes,
        which no worker's backlog counts)."""
        workers = self._get(name).workers
        return all(w.is_idle() for w in workers) and not any(self._hub.queued(w.address) for w in workers)

    def is_prepared(self, name: str) -> bool:
        """True once every executor opened/prepared (only happens while active)."""
        return all(ex.prepared for w in self._get(name).workers for ex in w.executors)

    def layout(self, name: str) -> TopologyLayout:
        return self._get(name).layout

    def workers(self, name: str) -> list[Worker]:
        return list(self._get(name).workers)
