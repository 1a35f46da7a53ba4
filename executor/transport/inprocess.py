"""The in-process transport of local mode: several workers of one LocalCluster exchange the
same serialized batches they would send over ZeroMQ, through bounded inboxes in a shared hub.

Threads: the hub is shared and locked; each Receiver and Sender is owned by one thread (see
base.py). An inbox is bounded in payloads and in bytes; a full inbox refuses `try_send`, so a
slow worker back-pressures its senders instead of growing memory. A worker that unbinds and
binds again at the same address (a restarted worker) gets a fresh inbox, which senders find
by address on their next send without doing anything.
"""

from __future__ import annotations

import threading
from collections import deque

from executor.transport.base import Address, BindError


class _Inbox:
    def __init__(self, capacity: int, byte_capacity: int | None = None):
        self.capacity = capacity
        self.byte_capacity = byte_capacity
        self.items: deque[bytes] = deque()
        self.nbytes = 0
        self.cond = threading.Condition()
        self.closed = False

    def full_for(self, payload: bytes) -> bool:
        """Whether payload must wait; an empty inbox takes any payload (so a large one passes)."""
        if not self.items:
            return False
        return len(self.items) >= self.capacity or (
            self.byte_capacity is not None and self.nbytes + len(payload) > self.byte_capacity)

    def offer(self, payload: bytes) -> bool:
        """Append unless closed or full (caller holds self.cond)."""
        if self.closed or self.full_for(payload):
            return False
        self.items.append(payload)
        self.nbytes += len(payload)
        self.cond.notify_all()
        return True

    def recv(self, timeout: float) -> bytes | None:
        with self.cond:
            if not self.items and not self.closed:
                self.cond.wait(timeout)
            if not self.items:
                return None
            item = self.items.popleft()
            self.nbytes -= len(item)
            return item  # nobody waits for room: senders use try_send and retry

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.items.clear()  # nobody reads them any more: the acker replays their tuples
            self.nbytes = 0
            self.cond.notify_all()


class InProcessHub:
    """The shared 'network' of one LocalCluster: address -> inbox, each bounded to `capacity`
    payloads and `byte_capacity` bytes (None: count bound only)."""

    def __init__(self, capacity: int = 64, byte_capacity: int | None = None):
        if capacity < 1:
            raise ValueError(f"inbox capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.byte_capacity = byte_capacity
        self._inboxes: dict[Address, _Inbox] = {}
        self._lock = threading.Lock()

    def transport(self) -> "InProcessTransport":
        return InProcessTransport(self)

    def bind(self, address: Address) -> _Inbox:
        """A fresh inbox at address; BindError while another receiver holds it."""
        with self._lock:
            inbox = self._inboxes.get(address)
            if inbox is not None and not inbox.closed:
                raise BindError(f"cannot bind in-process address {address!r}: address in use")
            inbox = self._inboxes[address] = _Inbox(self.capacity, self.byte_capacity)
            return inbox

    def unbind(self, address: Address, inbox: _Inbox) -> None:
        with self._lock:
            if self._inboxes.get(address) is inbox:
                del self._inboxes[address]
        inbox.close()

    def queued(self, address: Address) -> int:
        """Payloads sent to `address` and not taken by its receiver yet."""
        inbox = self._inboxes.get(address)
        return 0 if inbox is None else len(inbox.items)

    def inbox(self, address: Address) -> _Inbox | None:
        return self._inboxes.get(address)  # a dict read: atomic, no lock on the send path


class InProcessReceiver:
    """Owned by the thread that bound it."""

    def __init__(self, hub: InProcessHub, address: Address):
        self.address = address
        self._hub = hub
        self._inbox = hub.bind(address)
        self._closed = False

    def recv(self, timeout: float) -> bytes | None:
        return self._inbox.recv(timeout)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._hub.unbind(self.address, self._inbox)


class InProcessSender:
    """Owned by the thread that called connector(). A peer is 'connected' while it is bound."""

    def __init__(self, hub: InProcessHub):
        self._hub = hub
        self._peers: set[Address] = set()

    def connect(self, address: Address) -> None:
        self._peers.add(address)

    def disconnect(self, address: Address) -> None:
        self._peers.discard(address)

    def is_connected(self, address: Address) -> bool:
        if address not in self._peers:
            return False
        inbox = self._hub.inbox(address)
        return inbox is not None and not inbox.closed

    def try_send(self, address: Address, payload: bytes) -> bool:
        if address not in self._peers:
            return False
        inbox = self._hub.inbox(address)  # looked up each time: a rebound peer is found at once
        if inbox is None:
            return False
        with inbox.cond:
            return inbox.offer(payload)

    def close(self) -> None:
        self._peers.clear()


class InProcessTransport:
    def __init__(self, hub: InProcessHub):
        self._hub = hub

    def bind(self, address: Address) -> InProcessReceiver:
        return InProcessReceiver(self._hub, address)

    def connector(self) -> InProcessSender:
        return InProcessSender(self._hub)

    def close(self) -> None:
        pass
