"""What spout, bolt and acker executors share: the step protocol their runners drive, output
batching, pendingEmits, back-pressure, error reporting and stats."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from executor.adapters import AdapterBase
from executor.core.outbox import Outbox
from executor.errors import ClearError, ComponentError
from executor.receive_queue import ReceiveQueue
from executor.scheduling import DONE, INACTIVE
from executor.stats import EMITTED, TRANSFERRED
from executor.wait import BACK_PRESSURE_WAIT, make_wait_strategy

log = logging.getLogger(__name__)


class TopologyStatus:
    """Whether the topology is active; read by executor loops on every iteration. `park`: a
    stopping topology's checkpoint spout is asked to start no further checkpoint (a swap)."""

    def __init__(self, active: bool = False):
        self.active = active
        self.park = False

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
    losses: Any = None                       # exactly-once: the worker's WorkerLosses (checkpoint/barrier_mode.py)


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
        self.outbox = Outbox(
            w.component_id, w.slot_queues, w.task_slot, batch_size=w.conf["topology.producer.batch.size"],
            max_tuple_bytes=w.conf["topology.max.tuple.size.bytes"], acker_tasks=w.acker_tasks,
            local_tasks=w.local_tasks, first_task=self.task_ids[0], listener=w.emit_listener,
            report_error=self.report_error, tasks=tuple(self.task_ids))
        self._reported: dict[str, int] = {}
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

    def checkpoint_mark(self):
        """Its CheckpointMark (cluster_state/records.py) for the worker's heartbeat, None when it
        takes no part in exactly-once checkpoints (the spout executor's says where it is)."""
        return None

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
            if isinstance(obj, AdapterBase):
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
        self.outbox.set_routes(slot_queues, task_slot)

    def _flush(self) -> None:
        self.outbox.flush()

    def has_backlog(self) -> bool:
        return self.outbox.has_backlog() or len(self.queue) > 0

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
        return {"queue_population": len(self.queue), "queue_capacity": self.queue.bound,
                "backpressure": bool(self.outbox.pending_emits)}

