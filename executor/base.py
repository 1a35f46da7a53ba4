"""What spout, bolt and acker executors share: the step protocol their runners drive, output
batching, pendingEmits, back-pressure, error reporting and stats."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from executor.adapters import Adapter
from executor.errors import ClearError, ComponentError, EmitError
from executor.receive_queue import ReceiveQueue
from executor.scheduling import DONE, INACTIVE
from executor.serialization import ACKER_ACK, LARGE_VALUE, batch_bytes, measure_values
from executor.stats import EMITTED, TRANSFERRED
from executor.wait import BACK_PRESSURE_WAIT, make_wait_strategy

log = logging.getLogger(__name__)

_LARGE_FLUSH = 1 << 20  # buffered bytes of large tuples that trigger a flush


class TopologyStatus:
    """Whether the topology is active; read by executor loops on every iteration."""

    def __init__(self, active: bool = False):
        self.active = active

    def set_active(self, active: bool) -> None:
        self.active = bool(active)


@dataclass
class ExecutorWiring:
    """Everything a worker hands an executor."""

    storm_id: str
    component_id: str
    task_ids: list[int]
    objs: dict[int, Any]                     # task id -> component instance (one copy per task)
    contexts: dict[int, Any]                 # task id -> TopologyContext
    routes: dict[int, dict]                  # task id -> stream -> StreamOut
    conf: dict[str, Any]                     # topology conf merged with component conf
    queue: ReceiveQueue                      # this executor's receive queue
    slot_queues: list                        # destination queues (local executors, transfer queue)
    task_slot: dict[int, int]                # any task id -> index into slot_queues
    acker_tasks: list[int]
    local_tasks: frozenset[int]              # the tasks of this worker (ackers among them: see spout.py)
    status: TopologyStatus
    report_error: Callable[[str, int, BaseException], None]
    on_die: Callable[[ComponentError], None]
    emit_listener: Callable[[str, int, str, list], None] | None = None
    on_cycle: bool = False                   # the component lies on a stream cycle
    inputs: tuple = ()                       # (component, stream) it subscribes to


class ExecutorBase:
    kind = "executor"
    burst = 1  # next_tuple calls per spout step; a shared runner raises it (executor/scheduling.py)

    def __init__(self, w: ExecutorWiring):
        self.w = w
        self.component_id = w.component_id
        self.task_ids = list(w.task_ids)
        self.conf = w.conf
        self.queue = w.queue
        self.status = w.status
        self._slot_queues = list(w.slot_queues)
        self._bufs: list[list] = [[] for _ in self._slot_queues]
        self._task_slot = w.task_slot
        self._new_routes: tuple | None = None
        self._reported: dict[str, int] = {}
        self._pending_emits: deque = deque()
        # Acks of this step, XOR-merged per root (the acker XORs them anyway): a bolt acking
        # several tuples of one tree in a batch sends the acker one message, not one per tuple.
        self._pending_acks: dict[int, int] = {}
        self._batch_size = max(1, int(w.conf["topology.producer.batch.size"]))
        self._max_tuple_bytes = int(w.conf["topology.max.tuple.size.bytes"])
        # Bytes of large tuples buffered since the last full flush: while non-zero, batches are
        # measured for the queues' byte bound, and buffers are flushed every _LARGE_FLUSH bytes.
        self._large_bytes = 0
        self._acker_tasks = list(w.acker_tasks)
        self._n_ackers = len(self._acker_tasks)
        self._has_ackers = self._n_ackers > 0
        self._listener = w.emit_listener
        # Back-pressure waits for room downstream, not for input: sleeping on our own queue would
        # return at once while input is queued, and a spinning producer starves (GIL) the very
        # consumer it waits for.
        self.bp_wait = make_wait_strategy(w.conf, BACK_PRESSURE_WAIT, time.sleep)
        self.idle_wait = None  # the spout's or bolt's wait strategy (set by the subclass)
        self._where = "startup"
        self._cur_task = self.task_ids[0]
        self.prepared = False
        self.dead: ComponentError | None = None
        self.stopped = threading.Event()
        # Stats are counted per stream (counters()); these totals are what the loops need.
        self.emitted = 0          # spouts: emits (next_tuple pacing)
        self.executed = 0         # bolts and ackers: tuples executed
        self.acked = 0            # spouts and ackers: tuple trees completed
        self.failed = 0           # spouts and ackers: tuple trees failed (timeouts included)

    @property
    def executor_id(self) -> tuple[int, int]:
        return (self.task_ids[0], self.task_ids[-1])

    @property
    def name(self) -> str:
        s, e = self.executor_id
        return f"{self.component_id}[{s}-{e}]"

    # ---- lifecycle (driven by a runner, executor/scheduling.py) ----
    def run_step(self) -> int:
        """One turn: open/prepare once the topology is active (as Storm's Executor.java does),
        then one step of the loop. Returns a step outcome (executor/scheduling.py); DONE once the executor died."""
        try:
            if not self.prepared:
                if not self.status.active:
                    return INACTIVE
                self._prepare()
                self.prepared = True
            return self.step()
        except Exception as exc:  # user code (or a bug): die loudly, never swallow
            self._die(exc)
            return DONE

    def finish(self) -> None:
        """After the last step, on the runner's thread: flush what is buffered and close/cleanup
        the components (not after a death: they are in an unknown state)."""
        try:
            if self.prepared and self.dead is None:
                try:
                    self._flush()
                except Exception as exc:
                    self._die(exc)
                if self.dead is None:
                    self._shutdown_components()
            if self.dead is not None:
                self._release_components()
        finally:
            self.stopped.set()

    def _release_components(self) -> None:
        """After a death, what must not outlive the executor even so: a shell component's
        subprocess (in a worker process the supervisor kills its process group; on LocalCluster
        the worker is threads of this process, and nothing else would stop it)."""
        for task in self.task_ids:
            obj = self.w.objs.get(task)
            if isinstance(obj, Adapter):
                try:
                    obj.release_on_death()
                except Exception:
                    log.exception("executor %s: releasing task %d after its death failed", self.name, task)

    def step(self) -> int:
        raise NotImplementedError

    def queues(self) -> list[ReceiveQueue]:
        """What this executor consumes: a runner idles until one of them gets input."""
        return [self.queue]

    def _prepare(self) -> None:
        raise NotImplementedError

    def _shutdown_components(self) -> None:
        pass

    def _die(self, exc: BaseException) -> None:
        trace = traceback.format_exc()
        err = exc if isinstance(exc, ComponentError) else ComponentError(
            self.component_id, self._cur_task, self._where, exc, trace)
        self.dead = err
        if isinstance(exc, ClearError):
            log.error("executor %s died: %s", self.name, err)
            log.debug("executor %s: traceback of %s\n%s", self.name, type(exc).__name__, trace)
        else:
            log.error("executor %s died: %s\n%s", self.name, err, trace)
        try:
            self.w.report_error(self.component_id, self._cur_task, err)
        finally:
            self.w.on_die(err)

    def emit_error(self, task, stream, values, out, direct: bool):
        declared = sorted(self.w.routes[task])
        if out is None:
            msg = f"stream {stream!r} is not declared (declared: {declared})"
        elif out.direct and not direct:
            msg = f"stream {stream!r} is declared direct; use emit_direct"
        elif direct and not out.direct:
            msg = f"stream {stream!r} is not declared direct; use emit"
        elif not isinstance(values, (list, tuple)) or len(values) != out.n:
            msg = (f"emitted {len(values) if hasattr(values, '__len__') else '?'} values {values!r} "
                   f"but stream {stream!r} declares {out.n} fields {out.fields.to_list()}")
        else:
            msg = measure_values(values)[0] or "invalid values"
        exc = EmitError(f"component {self.component_id!r} task {task}, stream {stream!r}: {msg}")
        self.report_error(task, exc)
        raise exc

    def check_emit(self, task, stream, values, out, direct: bool) -> None:
        """The emit path's slow check, for tuples with a large, int or container value: raises
        EmitError for a value msgpack cannot carry or a tuple over topology.max.tuple.size.bytes."""
        problem, nbytes = measure_values(values)
        if problem is not None:
            self.emit_error(task, stream, values, out, direct)
        if nbytes > self._max_tuple_bytes:
            exc = EmitError(
                f"component {self.component_id!r} task {task}, stream {stream!r}: tuple of about {nbytes} bytes "
                f"exceeds topology.max.tuple.size.bytes ({self._max_tuple_bytes}); emit smaller tuples "
                f"(e.g. a path or key instead of the data) or raise the limit")
            self.report_error(task, exc)
            raise exc
        if nbytes >= LARGE_VALUE:
            if self._large_bytes + nbytes > _LARGE_FLUSH:
                self._flush()  # before this tuple joins the buffers: bounds what they hold
            self._large_bytes += nbytes

    def report_error(self, task: int, exc: BaseException) -> None:
        # A component may report on every tuple: log the first of each message and then every
        # thousandth (with the count), so the log stays readable; every report still goes on.
        text = f"{type(exc).__name__}: {exc}"
        key = text if text in self._reported or len(self._reported) < 100 else "(other messages)"
        n = self._reported[key] = self._reported.get(key, 0) + 1
        if n == 1 or n % 1000 == 0:
            log.error("component %r task %d reported: %s%s", self.component_id, task, text,
                      f" ({n} such reports so far)" if n > 1 else "")
        self.w.report_error(self.component_id, task, exc)

    # ---- routing changes (handed over by the worker, applied on this executor's thread) ----
    def set_routes(self, slot_queues: list, task_slot: dict) -> None:
        self._new_routes = (list(slot_queues), dict(task_slot))

    def _apply_routes(self) -> None:
        routes, self._new_routes = self._new_routes, None
        self._flush()  # what is buffered goes out by the old map (pendingEmits keep their queues)
        self._slot_queues, self._task_slot = routes
        self._bufs = [[] for _ in self._slot_queues]

    # ---- output ----
    def _send(self, task: int, payload: Any) -> None:
        i = self._task_slot[task]
        buf = self._bufs[i]
        buf.append((task, payload))
        if len(buf) >= self._batch_size:
            self._flush_slot(i)

    def _flush_slot(self, i: int) -> None:
        buf = self._bufs[i]
        self._bufs[i] = []
        q = self._slot_queues[i]
        nbytes = batch_bytes(buf) if self._large_bytes else 0
        if self._pending_emits or not q.try_publish(buf, nbytes):
            self._pending_emits.append((q, buf, nbytes))

    def _flush(self) -> None:
        if self._pending_acks:
            self._send_pending_acks()
        bufs = self._bufs
        for i in range(len(bufs)):
            if bufs[i]:
                self._flush_slot(i)
        self._large_bytes = 0

    def _send_pending_acks(self) -> None:
        pending, self._pending_acks = self._pending_acks, {}
        acker_tasks = self._acker_tasks
        n = self._n_ackers
        send = self._send
        for root, value in pending.items():
            send(acker_tasks[root % n], (ACKER_ACK, root, value))

    def _try_flush_pending(self) -> bool:
        """Publish pendingEmits in order, stopping at the first refusal; True when empty."""
        pe = self._pending_emits
        while pe:
            q, b, nbytes = pe[0]
            if not q.try_publish(b, nbytes):
                return False
            pe.popleft()
        return True

    def has_backlog(self) -> bool:
        return bool(self._pending_emits or self._pending_acks) or any(self._bufs) or len(self.queue) > 0

    # ---- stats (executor/stats.py names them; read by the worker's heartbeat thread) ----
    def counters(self) -> dict[str, float]:
        """Cumulative counters, `metric|key` (executor/stats.py)."""
        out: dict[str, float] = {}
        for task in self.task_ids:
            for stream, so in self.w.routes.get(task, {}).items():
                emitted, transferred = so.counts
                if emitted:
                    out[f"{EMITTED}|{stream}"] = out.get(f"{EMITTED}|{stream}", 0) + emitted
                    out[f"{TRANSFERRED}|{stream}"] = out.get(f"{TRANSFERRED}|{stream}", 0) + transferred
        return out

    def gauges(self) -> dict:
        return {"queue_population": len(self.queue), "queue_capacity": self.queue.capacity,
                "backpressure": bool(self._pending_emits)}

