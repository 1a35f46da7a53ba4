"""Runners: the threads that drive executors (and a worker's I/O parts), one step at a time.

An executor is a step function (`ExecutorBase.run_step`: one turn of Storm's spout or bolt
loop) with a stepping outcome; a runner decides when to call it and how to idle. Two runners:

- `SharedRunner`: one thread per worker runs all its executors cooperatively, round robin,
  each step consuming one batch (or one burst of next_tuple calls) before yielding to the next,
  and the worker's receive and transfer (executor/worker_io.py) the same way, so that the
  whole data path of a worker is one thread.
  Under CPython's GIL the executors of one worker never run in parallel anyway; on one thread
  they also stop paying for GIL hand-offs (a thread waiting for the GIL waits up to the switch
  interval, 5 ms) and for waking each other, and a full queue is drained in the same round by
  its consumer instead of a sleeping producer waiting for a thread switch. It idles only when
  every member is idle: on the worker's receive socket when the receive is a member, else on
  one event that any publish into a member's queue sets.
- `DedicatedRunner`: one thread for one executor, with that executor's wait strategies (Storm's
  arrangement). For components that block in their calls (`topology.executor.thread.mode:
  dedicated` in their component config), and for every executor when the topology sets it.

A step on a shared thread that runs longer than `topology.executor.blocking.step.millis` (user
code that sleeps or waits on I/O) would stall every executor of the worker: the watchdog
gives the blocked thread to that executor for good (it carries on as its dedicated runner once
the step returns) and starts a new shared thread for the others.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Protocol, Sequence

log = logging.getLogger(__name__)

# Step outcomes.
BUSY = 0       # did work: step again soon
IDLE = 1       # nothing to do (no input, nothing emitted, max spout pending reached)
BLOCKED = 2    # output refused downstream (pendingEmits): back-pressure
INACTIVE = 3   # the topology is not active (before open/prepare, or a deactivated spout)
DONE = 4       # the executor died: never step it again

_INACTIVE_WAIT = 0.05  # how soon an inactive executor notices activation
_WATCHED_ROUNDS = 256  # idle waits between two collections of the members' queues (see _sleep)
SPOUT_BURST = 100      # next_tuple calls per step of a spout on a shared thread (it keeps emitting)


class Member(Protocol):
    """What a runner drives: an executor (executor/base.py) or a worker's I/O part
    (executor/worker_io.py)."""

    name: str

    def run_step(self) -> int: ...

    def finish(self) -> None: ...

    def queues(self) -> list: ...


class Executor(Member, Protocol):
    """An executor: its own wait strategies (used when it runs alone) and its spout burst."""

    queue: Any
    idle_wait: Any
    bp_wait: Any
    burst: int


class InputPart(Member, Protocol):
    """The worker's receive: a runner that runs it idles on its socket."""

    def wait_input(self, timeout: float) -> None: ...


def run_dedicated(ex: Executor, stop: threading.Event) -> None:
    """The loop of an executor on a thread of its own, idling with its own wait strategies."""
    idle_wait = ex.idle_wait.idle
    bp_wait = ex.bp_wait.idle
    idle = bp = 0
    try:
        while not stop.is_set():
            r = ex.run_step()
            if r == BUSY:
                idle = bp = 0
            elif r == IDLE:
                bp = 0
                idle = idle_wait(idle)
            elif r == BLOCKED:
                bp = bp_wait(bp)
            elif r == INACTIVE:
                ex.queue.wait(_INACTIVE_WAIT)
            else:
                break
    finally:
        ex.finish()


class DedicatedRunner:
    """One executor on one thread."""

    def __init__(self, ex: Executor, stop: threading.Event):
        self.executors = [ex]
        self._stop = stop
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=run_dedicated, args=(self.executors[0], self._stop),
                                            name=f"executor-{self.executors[0].name}", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self.executors[0].queue.wake()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, deadline: float) -> list[str]:
        """Wait until the thread ended (bounded); the names of executors still running."""
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                return [self.executors[0].name]
        return []


class SharedRunner:
    """Executors (and I/O parts) of one worker on one thread, cooperatively (see the module
    docstring)."""

    def __init__(self, name: str, executors: Sequence[Executor], event: threading.Event, stop: threading.Event,
                 idle_wait_factory: Callable[[Callable[[float], Any]], Any], bp_wait: Any,
                 blocking_secs: float | None, on_spawn: Callable[["SharedRunner"], None]):
        self.name = name
        self.executors: list[Executor] = list(executors)
        self._io: list[Member] = []     # I/O parts: stepped like executors, never handed a thread
        self._input: InputPart | None = None  # the receive among them: the idle wait's socket
        self._event = event             # set by a publish into any member's queue while we idle
        self._stop = stop               # shared by every runner of the worker
        self._idle_wait_factory = idle_wait_factory
        self._idle_wait = idle_wait_factory(self._sleep).idle
        self._bp_strategy = bp_wait
        self._blocking_secs = blocking_secs
        self._on_spawn = on_spawn
        self._lock = threading.Lock()   # guards the hand-over below (the step in progress) and _joining
        self._current: Any = None       # the member whose step runs now
        self._step_started = 0.0
        self._handed: Executor | None = None  # the executor this thread was given to by the watchdog
        self._joining: list[tuple[Member, bool]] = []  # I/O parts added while running, taken each round
        self._watched: list | None = None  # the members' queues, as _sleep last collected them
        self._watched_left = 0
        self._thread: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        for ex in self.executors:
            ex.burst = SPOUT_BURST

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"executor-shared-{self.name}", daemon=True)
        self._thread.start()
        if self._blocking_secs:
            self._watchdog = threading.Thread(target=self._watch, name=f"executor-watchdog-{self.name}",
                                              daemon=True)
            self._watchdog.start()

    def add_io(self, part: Member, *, is_input: bool = False) -> None:
        """An I/O part joining a running (or not yet started) runner, from any thread; the
        receive is added with is_input (the runner then idles on its socket)."""
        with self._lock:
            self._joining.append((part, is_input))
        self._event.set()

    def _take_joining(self) -> None:
        with self._lock:
            joining, self._joining = self._joining, []
        for part, is_input in joining:
            self._io.append(part)
            if is_input:
                self._input = part  # type: ignore[assignment]
        if joining:
            self._watched = None

    def wake(self) -> None:
        self._event.set()

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self, deadline: float) -> list[str]:
        still = []
        for t in (self._thread, self._watchdog):
            if t is not None and t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))
                if t.is_alive() and t is self._thread:
                    still.extend(ex.name for ex in self.executors)
        return still

    # ---- the loop ----
    def _run(self) -> None:
        lock = self._lock
        monotonic = time.monotonic
        idle = bp = 0
        try:
            while not self._stop.is_set() and (self.executors or self._io or self._joining):
                if self._joining:
                    self._take_joining()
                busy = blocked = False
                for m in (*self.executors, *self._io):
                    with lock:
                        self._current = m
                        self._step_started = monotonic()
                    r = m.run_step()
                    with lock:
                        self._current = None
                        handed = self._handed
                    if handed is not None:
                        self._become_dedicated(handed)
                        return
                    if r == BUSY:
                        busy = True
                    elif r == BLOCKED:
                        blocked = True
                    elif r == DONE:
                        (self.executors if m in self.executors else self._io).remove(m)
                        self._watched = None
                        m.finish()
                if busy:
                    idle = bp = 0
                elif blocked:  # waiting for another thread (a peer's transfer, a dedicated executor)
                    bp = self._bp_strategy.idle(bp)
                else:
                    bp = 0
                    idle = self._idle_wait(idle)
        finally:
            if self._handed is None:
                self._take_joining()
                for m in (*self.executors, *self._io):
                    m.finish()

    def _sleep(self, timeout: float) -> None:
        """The idle wait: until input (a publish into a member's queue; with the receive among
        the members, a payload on its socket: publishes from other threads, such as ticks and
        dedicated executors, are then seen within the timeout), or timeout."""
        if timeout <= 0:
            time.sleep(0)
            return
        # The queues are collected anew after a membership change and every _WATCHED_ROUNDS
        # waits, not at each (a worker's transfer replaces its queues when the assignment
        # changes): a queue missed for a while costs at most this wait's timeout, Storm's bound.
        queues = self._watched
        if queues is None or self._watched_left <= 0:
            queues = self._watched = [q for m in (*self.executors, *self._io) for q in m.queues()]
            self._watched_left = _WATCHED_ROUNDS
        self._watched_left -= 1
        if self._input is not None:
            # On the socket: the queues' event is not waited for, so publishes need not set it.
            if not any(map(len, queues)) and not self._stop.is_set():
                self._input.wait_input(timeout)
            return
        self._event.clear()
        for q in queues:
            q.set_waiting(True)
        try:
            if not any(map(len, queues)) and not self._stop.is_set():
                self._event.wait(timeout)
        finally:
            for q in queues:
                q.set_waiting(False)

    # ---- blocking steps ----
    def _watch(self) -> None:
        period = self._blocking_secs / 2
        while not self._stop.wait(period):
            with self._lock:
                ex = self._current
                if (ex is None or ex not in self.executors  # executors only, not the worker's I/O
                        or time.monotonic() - self._step_started < self._blocking_secs):
                    continue
                self._handed = ex
                others = [e for e in self.executors if e is not ex]
                io, joining, self._joining = self._io, self._joining, []
                input_part = self._input
            log.warning("executor %s blocked its worker's shared executor thread for over %.0f ms; it keeps "
                        "that thread to itself from now on and the other executors move to a new one (set "
                        "topology.executor.thread.mode: dedicated in its component config to start it that "
                        "way)", ex.name, self._blocking_secs * 1000)
            if others or io or joining:
                runner = SharedRunner(self.name + "+", others, self._event, self._stop, self._idle_wait_factory,
                                      self._bp_strategy, self._blocking_secs, self._on_spawn)
                for part in io:
                    runner.add_io(part, is_input=part is input_part)
                for part, is_input in joining:
                    runner.add_io(part, is_input=is_input)
                self._on_spawn(runner)
                runner.start()
            return

    def _become_dedicated(self, ex: Executor) -> None:
        # Now the only runner of ex: its own queue event again, its own wait strategies.
        self.executors, self._io, self._input = [ex], [], None
        ex.queue.use_own_event()
        ex.burst = 1
        run_dedicated(ex, self._stop)
