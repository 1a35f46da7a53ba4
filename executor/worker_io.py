"""A worker's two I/O threads: the transfer thread (sends to other workers) and the receive
thread (dispatches what other workers sent to the local executor queues).

Each owns its side of the transport: the receive thread binds, reads and closes the receiver;
the transfer thread creates, uses and closes the sender. Neither lets one peer or one executor
hold up the others:
- every destination worker has its own bounded queue (executors publish into it and are
  back-pressured by it alone); the transfer thread serves the destinations round robin and a
  refused send only leaves that destination's batch pending;
- the receive thread parks tuples for a full executor queue in that executor's overflow and
  goes on dispatching to the others; it stops reading only while the overflows hold more than
  their bound (then the transport back-pressures the senders).
Routing changes (an assignment moved a task to another worker) are handed over to the transfer
thread, which applies them between rounds.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable, Hashable

from executor.receive_queue import ReceiveQueue
from executor.serialization import LARGE_VALUE, DecodeError, pack_batch, unpack_batch

log = logging.getLogger(__name__)

Address = Hashable
_IDLE_WAIT = 0.01       # transfer thread's longest wait for input (a publish wakes it at once)
_REFUSED_WAIT = 0.0002  # its nap while a destination refuses (peer at its high-water mark)
_CONSUME_MAX = 5000     # tuples per destination per round: one payload stays a few hundred KB


class TransferThread:
    """Owns the sending side: per-destination queues in, payloads out. The sender is created,
    connected, used and closed on this thread only."""

    def __init__(self, name: str, transport: Any, queues: dict[Address, ReceiveQueue],
                 on_stale: Callable[[Address, list], None] | None = None,
                 wakeup: threading.Event | None = None):
        self.name = name
        self._transport = transport
        self._queues = dict(queues)
        self._unsent: dict[Address, bytes] = {}
        self._pending_queues: dict[Address, ReceiveQueue] | None = None
        self._on_stale = on_stale
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.all_connected = not queues  # read by other threads: spouts wait for it
        # The event the destination queues were created with (see _idle).
        self.wakeup = wakeup if wakeup is not None else threading.Event()
        self.sent_batches = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.wakeup.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def set_queues(self, queues: dict[Address, ReceiveQueue]) -> None:
        """Hand over new destinations; applied by the transfer thread between rounds."""
        self._pending_queues = dict(queues)
        self.wakeup.set()

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

    def _run(self) -> None:
        sender = self._transport.connector()
        try:
            for addr in self._queues:
                sender.connect(addr)
            self._loop(sender)
        finally:
            if self._unsent:
                log.warning("%s: %d batches unsent at shutdown (their tuples are replayed by the acker)",
                            self.name, len(self._unsent))
            sender.close()

    def _loop(self, sender) -> None:
        try_send = sender.try_send
        rounds = 0
        while not self._stop.is_set():
            if self._pending_queues is not None:
                self._apply_queues(sender)
            rounds += 1
            if rounds % 64 == 1 or not self.all_connected:  # cheap enough, and spouts wait on it
                self.all_connected = all(sender.is_connected(a) for a in self._queues)
            progressed = False
            for addr, q in self._queues.items():
                payload = self._unsent.pop(addr, None)
                if payload is None:
                    batches = q.consume(_CONSUME_MAX)
                    if not batches:
                        continue
                    payload = pack_batch([entry for b in batches for entry in b])
                if try_send(addr, payload):
                    self.sent_batches += 1
                    progressed = True
                else:
                    self._unsent[addr] = payload  # this destination waits; the others go on
            if not progressed:
                self._idle()

    def _idle(self) -> None:
        """Wait for input without spinning: every destination queue sets the shared event on a
        publish while we wait. A refused send is retried after a short nap instead (nothing
        signals that a peer has room again)."""
        if self._unsent:
            self._stop.wait(_REFUSED_WAIT)
            return
        queues = list(self._queues.values())
        self.wakeup.clear()
        for q in queues:
            q.set_waiting(True)
        try:
            if not any(len(q) for q in queues) and self._pending_queues is None:
                self.wakeup.wait(_IDLE_WAIT)
        finally:
            for q in queues:
                q.set_waiting(False)


class ReceiveThread:
    """Owns the receiver: binds it, dispatches by task id, closes it."""

    def __init__(self, name: str, transport: Any, address: Address, task_queue: dict[int, ReceiveQueue],
                 resolve, overflow_limit: int):
        self.name = name
        self._transport = transport
        self._address = address
        self._task_queue = task_queue
        self._resolve = resolve
        self._overflow_limit = overflow_limit
        self._overflow: dict[int, tuple[ReceiveQueue, deque]] = {}
        self._overflowing = 0
        self._stop = threading.Event()
        self._bound = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.unknown_tasks = 0

    def start(self, timeout: float = 10.0) -> None:
        """Start the thread and wait until it bound the receiver (a bind error is raised here)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self._bound.wait(timeout)
        if self._error is not None:
            raise self._error

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            receiver = self._transport.bind(self._address)
        except BaseException as exc:  # reported to start()'s caller
            self._error = exc
            self._bound.set()
            return
        self._bound.set()
        try:
            while not self._stop.is_set():
                if self._overflowing:
                    self._drain_overflow()
                    if self._overflowing >= self._overflow_limit:
                        self._stop.wait(0.0005)  # hold the socket: the senders are back-pressured
                        continue
                data = receiver.recv(0.05 if not self._overflowing else 0.0005)
                if data is not None:
                    self._dispatch(data)
        finally:
            receiver.close()

    def _dispatch(self, data: bytes) -> None:
        try:
            entries = unpack_batch(data, self._resolve)
        except (DecodeError, KeyError) as exc:
            log.error("%s: dropping undecodable batch: %s", self.name, exc)
            return
        # Large tuples count against the queues' byte bound by their share of the payload.
        share = len(data) // max(1, len(entries))
        measured = share >= LARGE_VALUE
        groups: dict[int, tuple[ReceiveQueue, list]] = {}
        task_queue = self._task_queue
        for entry in entries:
            q = task_queue.get(entry[0])
            if q is None:
                self.unknown_tasks += 1
                if self.unknown_tasks in (1, 10, 100) or self.unknown_tasks % 10000 == 0:
                    log.warning("%s: %d tuples for tasks not on this worker dropped (stale routing; the "
                                "acker replays them)", self.name, self.unknown_tasks)
                continue
            g = groups.get(id(q))
            if g is None:
                g = groups[id(q)] = (q, [])
            g[1].append(entry)
        for key, (q, batch) in groups.items():
            nbytes = share * len(batch) if measured else 0
            parked = self._overflow.get(key)
            if parked is None and q.try_publish(batch, nbytes):
                continue
            if parked is None:
                parked = self._overflow[key] = (q, deque())
            parked[1].append((batch, nbytes))
            self._overflowing += len(batch)

    def _drain_overflow(self) -> None:
        for key in list(self._overflow):
            q, parked = self._overflow[key]
            while parked and q.try_publish(*parked[0]):
                self._overflowing -= len(parked.popleft()[0])
            if not parked:
                del self._overflow[key]

    def backlog(self) -> int:
        return self._overflowing

