"""A worker: hosts the executors of one slot, moves tuples between them and to other workers.

Inside a worker, tuples go straight from an executor's output batch into the destination
executor's receive queue. Tuples for tasks elsewhere go through the transfer thread (which
owns sending: it serializes one batch per destination worker) and arrive at the receive
thread of the destination (which owns the bound receiver and dispatches by task id).
"""

from __future__ import annotations

import copy
import heapq
import logging
import threading
import time
from typing import Any, Callable, Hashable

from executor.base import ExecutorBase, ExecutorWiring, TopologyStatus
from executor.bolt import AckerExecutor, BasicBoltAdapter, BoltExecutor
from executor.components import BasicBolt
from executor.context import TopologyContext
from executor.errors import ComponentError, InvalidTopologyError
from executor.layout import ACKER_COMPONENT, TopologyLayout
from executor.receive_queue import ReceiveQueue
from executor.routing import build_routes
from executor.serialization import LARGE_VALUE, DecodeError, pack_batch, unpack_batch
from executor.spout import SpoutExecutor
from executor.topology import StormTopology
from executor.tuple import make_tick

log = logging.getLogger(__name__)


def component_conf(storm_conf: dict, topology: StormTopology, component: str) -> dict:
    """Topology conf overlaid with the component's own configuration."""
    spec = topology.components.get(component)
    if spec is None or not spec.conf:
        return dict(storm_conf)
    return {**storm_conf, **spec.conf}


def tick_interval(conf: dict, kind: str, has_ackers: bool) -> float | None:
    """Seconds between ticks for an executor: spouts and ackers rotate their pending maps every
    message timeout; bolts get user ticks at topology.tick.tuple.freq.secs."""
    if kind in ("spout", "acker"):
        if not has_ackers or not conf.get("topology.enable.message.timeouts", True):
            return None
        return float(conf["topology.message.timeout.secs"])
    freq = conf.get("topology.tick.tuple.freq.secs")
    return float(freq) if freq else None


class TickTimer:
    """One thread delivering tick tuples to executor queues on schedule."""

    def __init__(self, name: str):
        self._name = name
        self._entries: list[tuple[float, int, float, ReceiveQueue, list]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, interval: float, queue: ReceiveQueue, tasks: list[int]) -> None:
        if interval <= 0:
            raise InvalidTopologyError(f"tick interval must be positive, got {interval}")
        tick = make_tick(interval)
        heapq.heappush(self._entries, (time.monotonic() + interval, len(self._entries), interval, queue,
                                       [(t, tick) for t in tasks]))

    def start(self) -> None:
        if self._thread is None and self._entries:
            self._thread = threading.Thread(target=self._run, name=f"ticks-{self._name}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread.ident is not None:
            self._thread.join(5)

    def _run(self) -> None:
        entries = self._entries
        while not self._stop.is_set():
            due, seq, interval, queue, batch = entries[0]
            delay = due - time.monotonic()
            if delay > 0:
                self._stop.wait(min(delay, 0.5))
                continue
            queue.publish_force(list(batch))
            heapq.heapreplace(entries, (due + interval, seq, interval, queue, batch))


class Worker:
    def __init__(self, storm_id: str, topology: StormTopology, conf: dict, layout: TopologyLayout,
                 executors: list[tuple[int, int]], address: Hashable, task_address: dict[int, Hashable],
                 transport: Any, status: TopologyStatus,
                 on_error: Callable[[str, int, BaseException], None],
                 on_die: Callable[["Worker", ComponentError], None],
                 emit_listener: Callable | None = None, port: int | None = None):
        self.storm_id = storm_id
        self.topology = topology
        self.conf = conf
        self.layout = layout
        self.executor_ids = sorted(executors)
        self.address = address
        self.task_address = task_address
        self.transport = transport
        self.status = status
        self._on_error = on_error
        self._on_die = on_die
        self._emit_listener = emit_listener
        self.port = port
        self.executors: list[ExecutorBase] = []
        self.dead: ComponentError | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._timer = TickTimer(str(address))
        self._receiver = None
        self._started = False
        self._stopped = False
        self._lifecycle_lock = threading.RLock()
        self.local_tasks = {t for s, e in self.executor_ids for t in range(s, e + 1)}
        self._task_queue: dict[int, ReceiveQueue] = {}
        self._transfer_queue: ReceiveQueue | None = None

    # ---- construction ----
    def _build(self) -> None:
        conf = self.conf
        layout = self.layout
        capacity = int(conf["topology.executor.receive.buffer.size"])
        byte_capacity = int(conf["topology.executor.receive.buffer.bytes"])
        batch = int(conf.get("topology.producer.batch.size") or 1)
        queues = []
        for s, e in self.executor_ids:
            comp = layout.task_to_component[s]
            q = ReceiveQueue(capacity, f"{comp}[{s}-{e}]", byte_capacity)
            queues.append(q)
            for t in range(s, e + 1):
                self._task_queue[t] = q
        slot_queues: list = list(queues)
        slot_of_queue = {id(q): i for i, q in enumerate(queues)}
        remote = [t for t in layout.task_to_component if t not in self.local_tasks]
        if remote:
            self._transfer_queue = ReceiveQueue(int(conf["topology.transfer.buffer.size"]) * batch,
                                                f"transfer-{self.address}", byte_capacity)
            slot_queues.append(self._transfer_queue)
        transfer_slot = len(slot_queues) - 1
        task_slot = {t: (slot_of_queue[id(self._task_queue[t])] if t in self.local_tasks else transfer_slot)
                     for t in layout.task_to_component}
        acker_tasks = layout.acker_tasks
        worker_tasks = sorted(self.local_tasks)
        for (s, e), q in zip(self.executor_ids, queues):
            comp = layout.task_to_component[s]
            tasks = list(range(s, e + 1))
            econf = component_conf(conf, self.topology, comp)
            objs, contexts, routes = {}, {}, {}
            for t in tasks:
                contexts[t] = TopologyContext(self.storm_id, self.topology, layout, t, self.port, worker_tasks)
                if comp == ACKER_COMPONENT:
                    objs[t] = None
                    routes[t] = {}
                    continue
                objs[t] = self._copy_component(comp)
                routes[t] = build_routes(self.topology, layout, comp, t, self.local_tasks, contexts[t],
                                         copy.deepcopy)
            wiring = ExecutorWiring(
                storm_id=self.storm_id, component_id=comp, task_ids=tasks, objs=objs, contexts=contexts,
                routes=routes, conf=econf, queue=q, slot_queues=slot_queues, task_slot=task_slot,
                acker_tasks=acker_tasks, status=self.status, report_error=self._on_error,
                on_die=self._executor_died, emit_listener=self._emit_listener,
                on_cycle=comp in self.topology.cycle_members)
            if comp == ACKER_COMPONENT:
                kind, ex = "acker", AckerExecutor(wiring)
            elif self.topology.components[comp].kind == "spout":
                kind, ex = "spout", SpoutExecutor(wiring)
            else:
                kind, ex = "bolt", BoltExecutor(wiring)
            self.executors.append(ex)
            interval = tick_interval(econf, kind, bool(acker_tasks))
            if interval:
                self._timer.add(interval, q, tasks[:1] if kind in ("spout", "acker") else tasks)

    def _copy_component(self, comp: str):
        # Each task gets its own instance, as if deserialized from the submitted topology.
        try:
            obj = copy.deepcopy(self.topology.objs[comp])
        except Exception as exc:
            raise InvalidTopologyError(
                f"component {comp!r}: its instance cannot be copied per task ({type(exc).__name__}: {exc}); "
                f"create sockets, locks and clients in open()/prepare(), not in __init__") from exc
        return BasicBoltAdapter(obj) if isinstance(obj, BasicBolt) else obj

    # ---- lifecycle ----
    def start(self) -> None:
        # Under the lifecycle lock: an executor may die (and ask for stop) while we still start.
        with self._lifecycle_lock:
            if self._started or self._stopped:
                return
            self._started = True
            self._start()

    def _start(self) -> None:
        self._build()
        if self.transport is not None:
            self._receiver = self.transport.bind(self.address)
            self._spawn(self._receive_loop, f"worker-recv-{self.address}")
        if self._transfer_queue is not None:
            self._spawn(self._transfer_loop, f"worker-transfer-{self.address}")
        for ex in self.executors:
            ex.start()
        self._timer.start()
        log.info("worker %s of %s started with executors %s", self.address, self.storm_id, self.executor_ids)

    def _spawn(self, fn, name: str) -> None:
        t = threading.Thread(target=fn, name=name, daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self, timeout: float = 10.0) -> None:
        # A dying executor's stop thread and LocalCluster.kill may both stop a worker: once only.
        # The second caller waits until the first has finished stopping.
        with self._lifecycle_lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
            self._timer.stop()
            for ex in self.executors:
                ex.signal_stop()
            for ex in self.executors:
                ex.stop(timeout)
            self._stop.set()
            if self._transfer_queue is not None:
                self._transfer_queue.wake()
            for t in self._threads:
                t.join(timeout)
            if self._receiver is not None:
                self._receiver.close()
        log.info("worker %s of %s stopped", self.address, self.storm_id)

    def _executor_died(self, err: ComponentError) -> None:
        if self.dead is None:
            self.dead = err
        self._on_die(self, err)

    # ---- transfer / receive threads ----
    def _transfer_loop(self) -> None:
        tq = self._transfer_queue
        task_address = self.task_address
        while not self._stop.is_set():
            batches = tq.consume()
            if not batches:
                tq.wait(0.05)
                continue
            groups: dict[Hashable, list] = {}
            for batch in batches:
                for entry in batch:
                    addr = task_address[entry[0]]
                    g = groups.get(addr)
                    if g is None:
                        g = groups[addr] = []
                    g.append(entry)
            for addr, entries in groups.items():
                data = pack_batch(entries)
                while not self.transport.send(addr, data, 0.1):
                    if self._stop.is_set():
                        log.warning("worker %s: dropped %d tuples for %s at shutdown", self.address,
                                    len(entries), addr)
                        break

    def _resolve(self, source_task: int, stream: str):
        comp = self.layout.task_to_component[source_task]
        return comp, self.topology.stream_fields(comp, stream)

    def _receive_loop(self) -> None:
        receiver = self._receiver
        task_queue = self._task_queue
        while not self._stop.is_set():
            data = receiver.recv(0.1)
            if data is None:
                continue
            try:
                entries = unpack_batch(data, self._resolve)
            except (DecodeError, KeyError) as exc:
                log.error("worker %s: dropping undecodable batch: %s", self.address, exc)
                continue
            # Large tuples count against the queues' byte bound by their share of the payload.
            share = len(data) // max(1, len(entries))
            measured = share >= LARGE_VALUE
            groups: dict[int, tuple[ReceiveQueue, list]] = {}
            for entry in entries:
                q = task_queue.get(entry[0])
                if q is None:
                    log.warning("worker %s: tuple for task %s, which is not here", self.address, entry[0])
                    continue
                g = groups.get(id(q))
                if g is None:
                    g = groups[id(q)] = (q, [])
                g[1].append(entry)
            for q, batch in groups.values():
                nbytes = share * len(batch) if measured else 0
                while not q.try_publish(batch, nbytes):  # back-pressure: hold the receiver, never drop
                    if self._stop.wait(0.0005):
                        return

    # ---- inspection ----
    def component_stats(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for ex in self.executors:
            agg = out.setdefault(ex.component_id, {})
            for k, v in ex.stats().items():
                agg[k] = agg.get(k, 0) + v
        return out

    def is_idle(self) -> bool:
        if any(ex.has_backlog() for ex in self.executors):
            return False
        return self._transfer_queue is None or len(self._transfer_queue) == 0
