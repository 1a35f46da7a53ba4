"""Bounded multi-producer single-consumer queue of tuple batches.

Producers hand over whole batches (lists of (task_id, payload)) under a lock, so the lock is
paid once per batch, not per tuple. The bound is in entries and, for batches that carry large
tuples, in bytes: a publish that would exceed either is refused (the producer keeps the batch
in its pendingEmits and applies back-pressure). Only batches the producer measured (it does so
once it has emitted a large tuple) count against the byte bound, so small-tuple traffic pays
nothing for it; their memory is bounded by the entry count.

System traffic (ticks) travels in a lane of its own that ignores the bounds and that a
back-pressured consumer can drain without taking user tuples: timeouts must fire while the
data path is full. The consumer may wait for input; producers wake it only when it is
actually waiting.
"""

from __future__ import annotations

import threading
import time
from collections import deque


class Calls(list):
    """A system-lane batch of (task, fn): the consuming executor runs fn() on its own thread (a
    multilang bolt's subprocess messages, read on another thread, act through the collector,
    which only the executor's thread may use)."""


class BarrierBatch(list):
    """A user-lane batch that may hold checkpoint-stream tuples (executor/checkpoint/). The
    outbox sends those tuples in batches of this type and of no other (Outbox.begin_barriers),
    so a plain list taken from a queue holds none: an executor finds the barriers by a batch's
    type, not by reading the stream of every tuple."""


# Producers refused for want of room take turns (ReceiveQueue._turns): one that has not offered
# again for this long (its executor stopped, or waits on other work) loses its turn. A refused
# producer offers again each step of its thread, far sooner; the bound only limits how long a
# gone one holds the others back.
TURN_SECS = 0.1
# The turn key of the batches from other workers (try_publish_remote): the worker's receive.
REMOTE = "remote"

# Debloating (Flink's buffer debloating, FLIP-183): an executor queue's bound follows what its
# consumer takes in `target` seconds, measured over periods of this many seconds and smoothed ...
DEBLOAT_PERIOD = 0.1
DEBLOAT_SMOOTHING = 0.3  # the weight of the newest period's rate
# ... never under this many tuples (a few batches: a consumer slowed for a moment must not be
# starved once it speeds up again) nor over the queue's capacity.
DEBLOAT_FLOOR = 1000


def debloated_bound(rate: float, target_secs: float, floor: int, capacity: int) -> int:
    """The bound of a queue whose consumer takes `rate` tuples/s: `target_secs` of them, within
    [floor, capacity] (a floor above the capacity yields the capacity)."""
    return min(capacity, max(floor, int(rate * target_secs)))


class ReceiveQueue:
    __slots__ = ("name", "capacity", "byte_capacity", "_lock", "_batches", "_system", "_size", "_bytes",
                 "_measured", "_event", "_waiting", "_refusing", "_refusing_until", "_turns",
                 "bound", "_target", "_floor", "_rate", "_taken", "_since")

    def __init__(self, capacity: int, name: str = "", byte_capacity: int | None = None,
                 event: threading.Event | None = None, target_secs: float | None = None,
                 floor: int = DEBLOAT_FLOOR):
        if capacity < 1:
            raise ValueError(f"queue {name!r}: capacity must be >= 1")
        if byte_capacity is not None and byte_capacity < 1:
            raise ValueError(f"queue {name!r}: byte capacity must be >= 1")
        self.name = name
        self.capacity = capacity
        self.byte_capacity = byte_capacity
        self._lock = threading.Lock()
        self._batches: deque = deque()
        self._system: deque = deque()
        self._size = 0
        self._bytes = 0
        self._measured: dict[int, int] = {}  # id(batch) -> bytes, for measured batches only
        # One consumer serving several queues (the transfer thread) passes one shared event.
        self._event = event if event is not None else threading.Event()
        self._waiting = False
        self._refusing: frozenset = frozenset()  # refuse()
        self._refusing_until = 0.0
        # Producers whose batch was refused for want of room, in the order they were refused,
        # with the time of their last offer: the next room goes to the first (_take_turn).
        self._turns: dict = {}
        # The bound in tuples now: the capacity, or with `target_secs` what the consumer takes
        # in that time (debloated_bound), so that what waits here, and the checkpoint barriers
        # behind it, wait about that long whatever the consumer's speed.
        self.bound = capacity
        self._target = target_secs
        self._floor = floor
        self._rate = -1.0  # tuples/s, smoothed; < 0 before the first period
        self._taken = 0
        self._since = time.monotonic()

    def try_publish(self, batch: list, nbytes: int = 0, producer: tuple | None = None) -> bool:
        """Enqueue a batch unless the queue is full; an empty queue accepts any batch.

        nbytes > 0 marks a measured batch: it also needs room under the byte bound. `producer`:
        the tasks of the local executor publishing (refuse())."""
        refusing = self._refusing
        if refusing and producer and refusing.issuperset(producer) and time.monotonic() < self._refusing_until:
            return False
        if not self._turns and self._append(batch, nbytes):
            return True
        return self._take_turn(batch, nbytes, producer)  # refused, or others wait: in line

    def try_publish_remote(self, batch: list, nbytes: int = 0) -> bool:
        """try_publish of a batch from another worker (the worker's receive, which parks a refused
        one and offers it again each step): it takes its turn with the local producers."""
        return self.try_publish(batch, nbytes, REMOTE)

    def _take_turn(self, batch: list, nbytes: int, producer) -> bool:
        """A full queue's room goes to its producers in the order they were refused, so that none
        waits while others take it: in a worker's shared thread the executors step in a fixed
        order, and the first producer after the consumer would take all the room the moment it
        frees, leaving the later ones (a link's receive, the checkpoint spout's barrier) waiting
        for as long as it runs."""
        turns = self._turns
        now = time.monotonic()
        with self._lock:  # producers on other threads (dedicated executors) take turns too
            while turns:
                first = next(iter(turns))
                if first == producer or turns[first] >= now - TURN_SECS:
                    break
                del turns[first]  # gone: it stopped offering
            if not turns or next(iter(turns)) == producer or not self._size:
                if self._append_locked(batch, nbytes):
                    turns.pop(producer, None)
                    ok = True
                else:
                    turns[producer] = now
                    ok = False
            else:
                turns[producer] = now  # keeps its place if it had one
                ok = False
        if ok and self._waiting:
            self._event.set()
        return ok

    def _append(self, batch: list, nbytes: int) -> bool:
        with self._lock:
            ok = self._append_locked(batch, nbytes)
        if ok and self._waiting:
            self._event.set()
        return ok

    def _append_locked(self, batch: list, nbytes: int) -> bool:
        n = len(batch)
        size = self._size
        if size and (size + n > self.bound or (
                nbytes and self.byte_capacity is not None and self._bytes + nbytes > self.byte_capacity)):
            return False
        self._batches.append(batch)
        self._size = size + n
        if nbytes:
            self._bytes += nbytes
            self._measured[id(batch)] = nbytes
        return True

    def publish_force(self, batch: list) -> None:
        """Enqueue system traffic (ticks) regardless of the bounds, in its own lane."""
        with self._lock:
            self._system.append(batch)
        if self._waiting:
            self._event.set()

    def consume(self, max_entries: int = 1 << 30) -> list:
        """Take whole batches: pending system batches first, then at least one and up to about
        max_entries entries of user batches."""
        if not self._size and not self._system:
            return []
        out = []
        with self._lock:
            system = self._system
            while system:
                out.append(system.popleft())
            batches = self._batches
            taken = 0
            while batches and taken < max_entries:
                b = batches.popleft()
                taken += len(b)
                out.append(b)
            self._size -= taken
            if self._measured:
                measured = self._measured
                for b in out:
                    self._bytes -= measured.pop(id(b), 0)
        if self._target is not None:
            self._taken += taken
            now = time.monotonic()
            if now - self._since >= DEBLOAT_PERIOD:
                self._debloat(now)
        return out

    def _debloat(self, now: float) -> None:
        """A period's rate into the smoothed one, and the bound from it (consumer's thread)."""
        rate = self._taken / (now - self._since)
        self._rate = rate if self._rate < 0 else self._rate + DEBLOAT_SMOOTHING * (rate - self._rate)
        self._taken = 0
        self._since = now
        self.bound = debloated_bound(self._rate, self._target, self._floor, self.capacity)

    def refuse(self, tasks, until: float) -> None:
        """Until time.monotonic() `until`, refuse batches from local executors all of whose tasks are in
        `tasks` (they keep them in their pendingEmits: back-pressure), whether or not there is
        room; an empty `tasks` ends it. An exactly-once barrier alignment refuses the inputs
        whose barrier came once it holds enough of their tuples (executor/checkpoint/forwarder.py);
        batches from other workers are never refused: they share a link with others."""
        self._refusing_until = until
        self._refusing = frozenset(tasks)

    def consume_system(self) -> list:
        """Take only the system batches (for a consumer that cannot take user tuples now)."""
        if not self._system:
            return []
        with self._lock:
            out = list(self._system)
            self._system.clear()
        return out

    def wait(self, timeout: float) -> None:
        """Sleep up to timeout, returning early once something is published."""
        if timeout <= 0:
            time.sleep(0)  # just let other threads run
            return
        self._event.clear()
        self._waiting = True
        try:
            if not self._size and not self._system:
                self._event.wait(timeout)
        finally:
            self._waiting = False

    def set_waiting(self, waiting: bool) -> None:
        """For a consumer that waits on a shared event itself: publishes set it while True."""
        self._waiting = waiting

    def use_own_event(self) -> None:
        """Stop sharing the event given at construction (the consumer now waits on this queue
        alone); called by the consumer before it next waits."""
        self._event = threading.Event()

    def wake(self) -> None:
        self._event.set()

    def __len__(self) -> int:
        return self._size + len(self._system)

    @property
    def nbytes(self) -> int:
        """Bytes of the measured batches queued now."""
        return self._bytes

    def is_full(self) -> bool:
        return self._size >= self.bound or (
            self.byte_capacity is not None and self._bytes >= self.byte_capacity)
