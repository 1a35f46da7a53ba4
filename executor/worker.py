"""A worker: hosts the executors of one slot and moves tuples between them and to other workers.

Built from plain values (`WorkerSpec`: the topology conf and layout, this worker's executors,
the assignment's task -> worker address map) plus the live topology objects; the decisions are
in `executor.worker_plan`. Inside a worker, tuples go straight from an executor's output batch
into the destination executor's receive queue. Tuples for another worker go into that worker's
own destination queue, which the transfer thread serves (`executor.worker_io`), and arrive at
the destination's receive thread, which dispatches them by task id.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Mapping

from cluster_state.config import default_config, setting
from executor.adapting import adapt_bolt, adapt_spout
from executor.base import ExecutorBase, ExecutorWiring, TopologyStatus
from executor.bolt import AckerExecutor, BoltExecutor
from executor.checkpoint.barrier_mode import WorkerLosses, barrier_only
from executor.checkpoint.wiring import STATEFUL_SPOUT, is_checkpointed
from executor.context import TopologyContext
from executor.errors import ComponentError
from executor.layout import TopologyLayout
from executor.receive_queue import Calls, ReceiveQueue
from executor.routing import Locality, build_routes
from executor.scheduling import DedicatedRunner, SharedRunner
from executor.spout import SpoutExecutor
from executor.stats import component_totals, group_by_component
from executor.stats_keeper import StatsKeeper
from executor.stats_record import ExecutorStats, to_wire
from executor.ticks import TickTimer
from executor.topology import StormTopology, copy_for_task
from executor.transport.base import Transport
from executor.transport.sequenced import SequencedTransport
from executor.wait import BACK_PRESSURE_WAIT, BOLT_WAIT, make_wait_strategy
from executor.worker_io import ReceiveIO, TransferIO
from executor.worker_plan import ExecutorPlan, Routing, plan_executors, plan_routing, thread_groups

log = logging.getLogger(__name__)


class _Discard:
    """The destination of tasks no assignment places yet: their tuples are dropped."""

    name = "unplaced"

    def __init__(self):
        self.dropped = 0

    def try_publish(self, batch: list, nbytes: int = 0, producer: tuple | None = None) -> bool:
        self.dropped += len(batch)
        return True

    def __len__(self) -> int:
        return 0


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker runs, as plain values."""

    storm_id: str
    conf: Mapping[str, Any]
    layout: TopologyLayout
    executors: tuple[tuple[int, int], ...]
    address: Hashable                          # this worker's transport address
    task_address: Mapping[int, Hashable]       # the assignment: task -> worker address
    port: int | None = None


@dataclass
class WorkerEvents:
    """What a worker reports to whoever runs it (LocalCluster, or the worker process)."""

    on_error: Callable[[str, int, BaseException], None]
    on_die: Callable[["Worker", ComponentError], None]
    emit_listener: Callable | None = None


class Worker:
    def __init__(self, spec: WorkerSpec, topology: StormTopology, transport: Transport, status: TopologyStatus,
                 events: WorkerEvents):
        self.spec = spec
        self.storm_id = spec.storm_id
        self.topology = topology
        self.conf = spec.conf
        self.layout = spec.layout
        self.executor_ids = sorted(spec.executors)
        self.address = spec.address
        self.port = spec.port
        # exactly-once: what the worker may lose is counted (executor/checkpoint/barrier_mode.py),
        # and its links are numbered, so that a payload lost between live workers is seen
        self.losses = WorkerLosses(str(spec.address)) if barrier_only(self.conf) else None
        self.transport = transport if transport is None or self.losses is None else \
            SequencedTransport(transport, self.losses.gap)
        self.status = status
        self.events = events
        self.stats_keeper = StatsKeeper(time.monotonic)
        self.executors: list[ExecutorBase] = []
        self.dead: ComponentError | None = None
        self._timer = TickTimer(str(spec.address))
        self._receiver: ReceiveIO | None = None
        self._transfer: TransferIO | None = None
        self._shared: SharedRunner | None = None    # runs the I/O parts too, when there is one
        self._started = False
        self._stopped = False
        self._lifecycle_lock = threading.RLock()
        self._checkpointed = is_checkpointed(topology.structure)
        self.routing: Routing = plan_routing(spec.layout, spec.executors, spec.task_address, spec.address)
        self.local_tasks = set(self.routing.local_tasks)
        self._task_queue: dict[int, ReceiveQueue] = {}
        self._executor_queues: list[ReceiveQueue] = []
        self._runners: list = []                   # the threads running the executors
        self._runner_stop = threading.Event()
        self._destinations: dict[Hashable, ReceiveQueue] = {}
        self._transfer_wakeup = threading.Event()  # set by a publish into any destination queue

    # ---- construction ----
    def _new_queue(self, name: str, event: threading.Event | None) -> ReceiveQueue:
        conf = self.conf
        # null means no bound in time, so only an absent key takes the packaged default
        target_ms = conf.get(RECEIVE_TARGET_MS, default_config()[RECEIVE_TARGET_MS])
        return ReceiveQueue(int(conf["topology.executor.receive.buffer.size"]), name,
                            int(conf["topology.executor.receive.buffer.bytes"]), event=event,
                            target_secs=None if target_ms is None else float(target_ms) / 1000.0)

    def _slots(self, routing: Routing) -> tuple[list[ReceiveQueue], dict[int, int]]:
        """Destination queues (new ones created, surviving ones kept) and task -> slot index."""
        dests = {}
        for addr in routing.destinations:
            q = self._destinations.get(addr)
            if q is None:
                # In tuples, as in Storm: a bound in batches let ~10^5 tuples wait here, and the
                # garbage collector rescans whatever waits (bench/RESULTS.md, "third look").
                q = ReceiveQueue(int(self.conf["topology.transfer.buffer.size"]), f"to-{addr}",
                                 int(self.conf["topology.executor.receive.buffer.bytes"]),
                                 event=self._transfer_wakeup)
            dests[addr] = q
        self._destinations = dests
        slot_queues = list(self._executor_queues) + list(dests.values())
        index = {id(q): i for i, q in enumerate(slot_queues)}
        task_slot = {t: index[id(self._task_queue[t])] for t in routing.local_tasks}
        task_slot.update({t: index[id(dests[a])] for t, a in routing.remote.items()})
        # Tasks the assignment places nowhere (yet): their tuples are dropped (and replayed).
        unplaced = [t for t in self.layout.task_to_component if t not in task_slot]
        if unplaced:
            slot_queues.append(_Discard())
            task_slot.update({t: len(slot_queues) - 1 for t in unplaced})
        return slot_queues, task_slot

    def _build(self) -> None:
        layout = self.layout
        plans = plan_executors(self.topology.structure, self.conf, layout, self.executor_ids)
        shared, dedicated = thread_groups(plans)
        shared_event = threading.Event()  # the shared thread idles on it; its members' queues set it
        if shared:  # the transfer joins the shared thread: its destination queues wake that thread
            self._transfer_wakeup = shared_event
        for i, p in enumerate(plans):
            q = self._new_queue(f"{p.component_id}[{p.tasks[0]}-{p.tasks[-1]}]",
                                shared_event if i in shared else None)
            self._executor_queues.append(q)
            for t in p.tasks:
                self._task_queue[t] = q
        slot_queues, task_slot = self._slots(self.routing)
        for p, q in zip(plans, self._executor_queues):
            self.executors.append(self._make_executor(p, q, slot_queues, task_slot))
            if p.tick_secs:
                self._timer.add(p.tick_secs, q, list(p.tick_tasks))
        conf = self.conf
        if shared:
            millis = conf.get("topology.executor.blocking.step.millis")
            self._shared = SharedRunner(
                str(self.address), [self.executors[i] for i in shared], shared_event, self._runner_stop,
                lambda sleeper: make_wait_strategy(conf, BOLT_WAIT, sleeper),
                make_wait_strategy(conf, BACK_PRESSURE_WAIT, time.sleep),
                millis / 1000 if millis else None, self._runners.append)
            self._runners.append(self._shared)
        self._runners.extend(DedicatedRunner(self.executors[i], self._runner_stop) for i in dedicated)

    def _make_executor(self, p: ExecutorPlan, q: ReceiveQueue, slot_queues, task_slot) -> ExecutorBase:
        comp = p.component_id
        worker_tasks = sorted(self.local_tasks)
        objs, contexts, routes = {}, {}, {}
        for t in p.tasks:
            contexts[t] = TopologyContext(self.storm_id, self.topology, self.layout, t, self.port, worker_tasks)
            if p.kind == "acker":
                objs[t] = None
                routes[t] = {}
                continue
            objs[t] = self._copy_component(comp, p.kind)
            routes[t] = build_routes(self.topology, self.layout, comp, t, self.local_tasks, contexts[t],
                                     copy.deepcopy, Locality.from_conf(p.conf, self._task_load),
                                     p.conf.get("topology.fields.grouping.hash", "mixed").lower() != "crc32")
        wiring = ExecutorWiring(
            storm_id=self.storm_id, component_id=comp, task_ids=list(p.tasks), objs=objs, contexts=contexts,
            routes=routes, conf=dict(p.conf), queue=q, slot_queues=slot_queues, task_slot=task_slot,
            acker_tasks=self.layout.acker_tasks, local_tasks=frozenset(self.local_tasks), status=self.status,
            report_error=self.events.on_error,
            on_die=self._executor_died, emit_listener=self.events.emit_listener, on_cycle=p.on_cycle,
            losses=self.losses,
            inputs=() if p.kind == "acker" else tuple(
                (sub.source, sub.stream) for sub in self.topology.structure.components[comp].inputs))
        if p.kind == "acker":
            return AckerExecutor(wiring)
        return SpoutExecutor(wiring) if p.kind == "spout" else BoltExecutor(wiring)

    def _task_load(self, task: int) -> float:
        """A local task's receive queue fill, 0..1 (what locality-aware shuffles look at)."""
        q = self._task_queue.get(task)
        return len(q) / q.bound if q is not None else 1.0

    def _copy_component(self, comp: str, kind: str):
        obj = copy_for_task(self.topology.objs[comp], comp)
        if kind == "bolt":
            return adapt_bolt(obj, self._checkpointed, self.losses)
        return adapt_spout(obj, bool(self.topology.components[comp].conf.get(STATEFUL_SPOUT)))

    # ---- routing changes ----
    def update_routing(self, task_address: Mapping[int, Hashable]) -> bool:
        """Follow a new assignment's task -> address map (tasks moved between other workers).
        Each thread applies its part itself: the executors swap their destination slots
        between iterations, the transfer thread its destination queues. False if unchanged."""
        with self._lifecycle_lock:
            routing = plan_routing(self.layout, self.executor_ids, task_address, self.address)
            if routing == self.routing or not self._started or self._stopped:
                return False
            self.routing = routing
            slot_queues, task_slot = self._slots(routing)
            if self._transfer is not None:
                self._transfer.set_queues(dict(self._destinations))
            elif self._destinations:
                self._start_transfer()
            for ex in self.executors:
                ex.set_routes(slot_queues, task_slot)
            log.info("worker %s of %s: routing now to %d other workers", self.address, self.storm_id,
                     len(self._destinations))
            return True

    def _drop_stale(self, addr, batches) -> None:
        # Tuples queued for a worker that no longer hosts their tasks: dropped, even when their
        # task now lives here (the acker replays them).
        lost = sum(len(b) for b in batches)
        log.info("worker %s: %d tuples queued for %s dropped after reassignment", self.address, lost, addr)

    # ---- lifecycle ----
    def start(self) -> None:
        # Under the lifecycle lock: an executor may die (and ask for stop) while we still start.
        with self._lifecycle_lock:
            if self._started or self._stopped:
                return
            self._started = True
            self._start()

    def _start_transfer(self) -> None:
        self._transfer = TransferIO(f"worker-transfer-{self.address}", self.transport,
                                    dict(self._destinations), self._drop_stale, self._transfer_wakeup)
        self._start_io(self._transfer)

    def _start_io(self, part) -> None:
        """An I/O part runs on the shared executor thread when the worker has one, else on its own."""
        if self._shared is not None:
            self._shared.add_io(part, is_input=part is self._receiver)
        else:
            part.start()

    def _start(self) -> None:
        self._build()
        if self.transport is not None:
            self._receiver = ReceiveIO(
                f"worker-recv-{self.address}", self.transport, self.address, self._task_queue, self._resolve,
                overflow_limit=overflow_limit(self.conf))
            self._start_io(self._receiver)  # on its own thread: returns once bound (or raises)
            if self._destinations:
                self._start_transfer()
        for runner in list(self._runners):
            runner.start()
        if self._receiver is not None and self._shared is not None:
            try:  # bound by the shared thread's first step
                self._receiver.wait_bound(10.0)
            except BaseException:
                self._stop_threads(10.0)
                raise
        self._timer.start()
        log.info("worker %s of %s started with executors %s", self.address, self.storm_id, self.executor_ids)

    def stop(self, timeout: float = 10.0) -> None:
        # A dying executor's stop thread and LocalCluster.kill may both stop a worker: once only.
        # The second caller waits until the first has finished stopping.
        with self._lifecycle_lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
            self._timer.stop()
            self._stop_threads(timeout)
        log.info("worker %s of %s stopped", self.address, self.storm_id)

    def _stop_threads(self, timeout: float) -> None:
        """Stop the runners (each finishes its members: executors flush and clean up, I/O parts
        close their sockets), then the I/O parts that run on threads of their own."""
        self._runner_stop.set()
        deadline = time.monotonic() + timeout
        joined = 0
        still: list[str] = []
        while joined < len(self._runners):  # a runner may spawn another while stopping
            runners = self._runners[joined:]
            joined += len(runners)
            for runner in runners:
                runner.wake()
            for runner in runners:
                still.extend(runner.join(deadline))
        if still:
            log.warning("worker %s: executors %s did not stop within %.1fs", self.address, still, timeout)
        for io in (self._transfer, self._receiver):
            if io is not None:
                io.stop(max(0.0, deadline - time.monotonic()))

    def _executor_died(self, err: ComponentError) -> None:
        if self.dead is None:
            self.dead = err
        self.events.on_die(self, err)

    def _resolve(self, source_task: int, stream: str):
        comp = self.layout.task_to_component[source_task]
        return comp, self.topology.stream_fields(comp, stream)

    # ---- savepoints ----
    def write_savepoint(self, directory: str) -> int:
        """A directory savepoint of a topology whose state is in the memory provider: each task
        with state writes its committed values to `directory` on its executor's thread, then the
        worker writes its marker, named by its first task, listing what was written and what
        could not be (executor/savepoints/files.py). How many tasks were asked."""
        from executor.savepoints import files

        jobs = [(ex, task, get) for ex in self.executors for task in ex.task_ids
                if (get := getattr(ex.w.objs.get(task), "savepoint_state", None)) is not None]
        name = str(min(t for ex in self.executors for t in ex.task_ids))
        lock = threading.Lock()
        left = [len(jobs)]
        written: list = []
        missing: list = []

        def done(entry, ok: bool) -> None:
            with lock:
                (written if ok else missing).append(entry)
                left[0] -= 1
                last = left[0] == 0
            if last:
                files.write_worker_marker(directory, name, {"tasks": written, "missing": missing})

        for ex, task, get in jobs:
            ctx = ex.w.contexts[task]

            def write(ctx=ctx, get=get) -> None:
                entry = [ctx.this_component_id, ctx.this_task_index]
                try:
                    state = get()
                    if state is not None:
                        files.write_task(directory, entry[0], entry[1], state.committed_txid(),
                                         state.committed_stored())
                    done(entry, state is not None)
                except Exception as exc:  # one line; the client sees the task missing and says so
                    log.warning("savepoint to %s: task %s#%d: %s", directory, entry[0], entry[1], exc)
                    done(entry, False)

            ex.queue.publish_force(Calls([(task, write)]))
        if not jobs:
            files.write_worker_marker(directory, name, {"tasks": [], "missing": []})
        log.info("savepoint to %s: %d tasks with state asked", directory, len(jobs))
        return len(jobs)

    # ---- inspection ----
    def stats_records(self) -> dict[tuple[int, int], ExecutorStats]:
        """Per executor: its stats record (windows, gauges), as the heartbeat carries it."""
        return self.stats_keeper.records(self.executors)

    def component_stats(self) -> dict[str, dict]:
        """All-time figures per component of this worker's executors (executor/stats.py)."""
        return {comp: component_totals(recs)
                for comp, recs in group_by_component(self.stats_records().values()).items()}

    def checkpoint_marks(self) -> dict[tuple[int, int], Any]:
        """Per executor taking part in exactly-once checkpoints, its CheckpointMark (the heartbeat's)."""
        marks = {}
        for ex in self.executors:
            mark = ex.checkpoint_mark()
            if mark is not None:
                marks[tuple(ex.executor_id)] = mark
        return marks

    def executor_stats(self) -> dict[tuple[int, int], list]:
        """Per executor, the wire form of its record, for the worker's heartbeat."""
        return {ex: to_wire(rec) for ex, rec in self.stats_records().items()}

    def executors_running(self) -> bool:
        """Whether every thread running this worker's executors was started and still runs."""
        return bool(self._runners) and all(r.is_alive() for r in list(self._runners))

    def peers_connected(self) -> bool:
        """Whether every worker this one sends to accepted its connection (spouts wait for it)."""
        return self._transfer is None or self._transfer.all_connected

    def is_idle(self) -> bool:
        if any(ex.has_backlog() for ex in self.executors):
            return False
        if self._transfer is not None and self._transfer.backlog():
            return False
        return self._receiver is None or not self._receiver.backlog()


OVERFLOW_SIZE = "topology.worker.receive.overflow.size"
# An executor queue's bound in time (receive_queue.debloated_bound); null: its size alone.
RECEIVE_TARGET_MS = "topology.executor.receive.buffer.target.ms"


def overflow_limit(conf) -> int:
    """How many received tuples a worker parks for its full executor queues before it stops
    reading its links: topology.worker.receive.overflow.size, at most an executor queue's
    capacity. Kept small, what a busy executor holds up on a link stays small too: the other
    executors' tuples (a checkpoint's barriers, acker messages) come through behind at most this
    many (bench/RESULTS.md, "A small receive overflow")."""
    return min(int(setting(conf, OVERFLOW_SIZE)), int(conf["topology.executor.receive.buffer.size"]))
