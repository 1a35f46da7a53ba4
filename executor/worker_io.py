"""A worker's two I/O parts: the transfer (sends to other workers) and the receive (dispatches
what other workers sent to the local executor queues).

Each is a step function like an executor (executor/scheduling.py), run either on the worker's
shared thread with its executors (then no GIL hand-off separates an emit from its send, or a
receive from its execute) or on a thread of its own (`start()`, the dedicated arrangement).
Whichever thread runs it owns its side of the transport: the receive binds, reads and closes
the receiver; the transfer creates, uses and closes the sender. Neither lets one peer or one
executor hold up the others:
- every destination worker has its own bounded queue (executors publish into it and are
  back-pressured by it alone); the transfer serves the destinations round robin and a refused
  send only leaves that destination's batch pending;
- the receive parks tuples for a full executor queue in that executor's overflow and goes on
  dispatching to the others; it stops reading only while the overflows hold more than their
  bound (then the transport back-pressures the senders).
Routing changes (an assignment moved a task to another worker) are handed over to the
transfer, which applies them between steps.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from itertools import chain
from typing import Any, Callable, Hashable

from executor.receive_queue import ReceiveQueue
from executor.scheduling import BLOCKED, BUSY, DONE, IDLE
from executor.serialization import LARGE_VALUE, DecodeError, decode_batch, pack_batch

log = logging.getLogger(__name__)

Address = Hashable
_IDLE_WAIT = 0.01       # own thread: the transfer's longest wait for input (a publish wakes it at once)
_RECV_WAIT = 0.05       # own thread: the receive's longest wait for input
_REFUSED_WAIT = 0.0002  # own thread: nap while a destination refuses (peer at its high-water mark)
_CONSUME_MAX = 5000     # tuples per destination per step: one payload stays a few hundred KB
_MESSAGES_PER_STEP = 8  # payloads the receive dispatches per step before yielding


class _OwnThread:
    """Running a step-based I/O part on a thread of its own (the dedicated arrangement)."""

    name = "io"

    def __init__(self):
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run_own, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop its own thread (a part run by a shared runner is finished by that runner)."""
        self._stop.set()
        self.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run_own(self) -> None:
        try:
            while not self._stop.is_set():
                r = self.run_step()
                if r == DONE:
                    break
                if r == BLOCKED:
                    self._stop.wait(_REFUSED_WAIT)
                elif r == IDLE:
                    self.idle(self._stop)
        finally:
            self.finish()

    def wake(self) -> None:
        pass

    def run_step(self) -> int:
        try:
            return self.step()
        except Exception:  # a bug: this part is dead, say so loudly (the acker replays what it held)
            log.exception("%s failed; it stops", self.name)
            return DONE

    def step(self) -> int:
        raise NotImplementedError

    def idle(self, stop: threading.Event) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError


class TransferIO(_OwnThread):
    """The sending side: per-destination queues in, payloads out."""

    def __init__(self, name: str, transport: Any, queues: dict[Address, ReceiveQueue],
                 on_stale: Callable[[Address, list], None] | None = None,
                 wakeup: threading.Event | None = None):
        super().__init__()
        self.name = name
        self._transport = transport
        self._queues = dict(queues)
        self._unsent: dict[Address, bytes] = {}
        self._pending_queues: dict[Address, ReceiveQueue] | None = None
        self._on_stale = on_stale
        self._sender = None
        self._rounds = 0
        self.all_connected = not queues  # read by other threads: spouts wait for it
        # The event the destination queues were created with (see idle).
        self.wakeup = wakeup if wakeup is not None else threading.Event()

    def set_queues(self, queues: dict[Address, ReceiveQueue]) -> None:
        """Hand over new destinations; applied by the transfer between steps."""
        self._pending_queues = dict(queues)
        self.wakeup.set()

    def wake(self) -> None:
        self.wakeup.set()

    def queues(self) -> list[ReceiveQueue]:
        return list(self._queues.values())

    def backlog(self) -> int:
        return sum(len(q) for q in list(self._queues.values())) + len(self._unsent)

    def _apply_queues(self, sender) -> None:
        new, self._pending_queues = self._pending_queues, None
        for addr, q in self._queues.items():
            if addr not in new:
                left = q.consume()
                if self._on_stale is not None and left:
                    self._on_stale(addr, left)
                self._unsent.pop(addr, None)
                sender.disconnect(addr)
        for addr in new:
            sender.connect(addr)
        self._queues = new

    def step(self) -> int:
        sender = self._sender
        if sender is None:  # created on the thread that runs this part, which then owns it
            sender = self._sender = self._transport.connector()
            for addr in self._queues:
                sender.connect(addr)
        if self._pending_queues is not None:
            self._apply_queues(sender)
        self._rounds += 1
        if self._rounds % 64 == 1 or not self.all_connected:  # cheap enough, and spouts wait on it
            self.all_connected = all(sender.is_connected(a) for a in self._queues)
        try_send = sender.try_send
        unsent = self._unsent
        progressed = False
        for addr, q in self._queues.items():
            payload = unsent.pop(addr, None)
            if payload is None:
                batches = q.consume(_CONSUME_MAX)
                if not batches:
                    continue
                payload = pack_batch(chain.from_iterable(batches))
            if try_send(addr, payload):
                progressed = True
            else:
                unsent[addr] = payload  # this destination waits; the others go on
        if progressed:
            return BUSY
        return BLOCKED if unsent else IDLE

    def idle(self, stop: threading.Event) -> None:
        """Own thread: wait for input without spinning: every destination queue sets the shared
        event on a publish while we wait."""
        queues = list(self._queues.values())
        self.wakeup.clear()
        for q in queues:
            q.set_waiting(True)
        try:
            if not any(len(q) for q in queues) and self._pending_queues is None and not stop.is_set():
                self.wakeup.wait(_IDLE_WAIT)
        finally:
            for q in queues:
                q.set_waiting(False)

    def finish(self) -> None:
        if self._unsent:
            log.warning("%s: %d batches unsent at shutdown (their tuples are replayed by the acker)",
                        self.name, len(self._unsent))
        if self._sender is not None:
            self._sender.close()


class ReceiveIO(_OwnThread):
    """The receiving side: binds the receiver, dispatches by task id, closes it."""

    def __init__(self, name: str, transport: Any, address: Address, task_queue: dict[int, ReceiveQueue],
                 resolve, overflow_limit: int):
        super().__init__()
        self.name = name
        self._transport = transport
        self._address = address
        self._task_queue = task_queue
        self._resolve = resolve
        self._overflow_limit = overflow_limit
        self._overflow: dict[int, tuple[ReceiveQueue, deque]] = {}
        self._overflowing = 0
        self._receiver = None
        self._held: bytes | None = None  # a payload idle() received, dispatched by the next step
        self._waited_empty = False       # the last wait_input found the socket empty
        self.bound = threading.Event()
        self.error: BaseException | None = None
        self.unknown_tasks = 0

    def start(self, timeout: float = 10.0) -> None:
        """Own thread: start it and wait until it bound the receiver (a bind error is raised here)."""
        super().start()
        self.wait_bound(timeout)

    def wait_bound(self, timeout: float) -> None:
        if not self.bound.wait(timeout):
            raise TimeoutError(f"{self.name}: the receiver was not bound within {timeout:g}s")
        if self.error is not None:
            raise self.error

    def queues(self) -> list[ReceiveQueue]:
        return []

    def step(self) -> int:
        if self._receiver is None:
            if self.error is not None:
                return DONE
            try:
                self._receiver = self._transport.bind(self._address)
            except BaseException as exc:  # reported to whoever waits in wait_bound()
                self.error = exc
                return DONE
            finally:
                self.bound.set()
        if self._overflowing:
            self._drain_overflow()
            if self._overflowing >= self._overflow_limit:
                return BLOCKED  # hold the socket: the senders are back-pressured
        got = 0
        data, self._held = self._held, None
        if self._waited_empty:
            # The idle wait polled the socket a moment ago and found nothing: looking again now
            # (a recv that finds nothing raises inside pyzmq) would cost an idle worker a tenth
            # of its wake-ups' CPU; a payload that came since is seen by the next wait at once.
            self._waited_empty = False
            if data is None:
                return IDLE
        recv = self._receiver.recv
        while got < _MESSAGES_PER_STEP and self._overflowing < self._overflow_limit:
            if data is None:
                data = recv(0)
                if data is None:
                    break
            self._dispatch(data)
            data = None
            got += 1
        return BUSY if got else IDLE

    def idle(self, stop: threading.Event) -> None:
        self.wait_input(_RECV_WAIT)

    def wait_input(self, timeout: float) -> None:
        """Wait up to timeout for a payload (kept for the next step): the idle wait of the thread
        that runs this part, which then wakes on input from other workers."""
        if self._receiver is not None and self._held is None:
            self._held = self._receiver.recv(timeout)
            self._waited_empty = self._held is None

    def finish(self) -> None:
        self.bound.set()  # nobody waits for a bind that will not come
        if self._receiver is not None:
            self._receiver.close()

    def _dispatch(self, data: bytes) -> None:
        try:
            columns, controls = decode_batch(data, self._resolve)
        except DecodeError as exc:
            log.error("%s: dropping undecodable batch: %s", self.name, exc)
            return
        # Large tuples count against the queues' byte bound by their share of the payload.
        share = len(data) // max(1, sum(len(c) for c in columns) + len(controls))
        measured = share >= LARGE_VALUE
        task_queue = self._task_queue
        for column in columns:  # one batch per column: no per-tuple work here
            q = task_queue.get(column.task)
            if q is None:
                self._unknown(len(column))
            else:
                self._publish(q, column, share * len(column) if measured else 0)
        if controls:
            groups: dict[int, tuple[ReceiveQueue, list]] = {}
            for entry in controls:
                q = task_queue.get(entry[0])
                if q is None:
                    self._unknown(1)
                    continue
                g = groups.get(id(q))
                if g is None:
                    g = groups[id(q)] = (q, [])
                g[1].append(entry)
            for q, batch in groups.values():
                self._publish(q, batch, 0)

    def _unknown(self, n: int) -> None:
        before = self.unknown_tasks
        after = self.unknown_tasks = before + n
        # Logged at the 1st, 10th and 100th, then every 10,000th: a stale route can last a while.
        if any(before < mark <= after for mark in (1, 10, 100)) or after // 10000 > before // 10000:
            log.warning("%s: %d tuples for tasks not on this worker dropped (stale routing; the "
                        "acker replays them)", self.name, after)

    def _publish(self, q: ReceiveQueue, batch, nbytes: int) -> None:
        """Into the executor's queue, or behind what is already parked for it (order kept)."""
        key = id(q)
        parked = self._overflow.get(key)
        if parked is None and q.try_publish_remote(batch, nbytes):
            return
        if parked is None:
            parked = self._overflow[key] = (q, deque())
        parked[1].append((batch, nbytes))
        self._overflowing += len(batch)

    def _drain_overflow(self) -> None:
        for key in list(self._overflow):
            q, parked = self._overflow[key]
            while parked and q.try_publish_remote(*parked[0]):
                self._overflowing -= len(parked.popleft()[0])
            if not parked:
                del self._overflow[key]

    def backlog(self) -> int:
        return self._overflowing + (self._held is not None)
