"""Transport between workers. The interface is what the worker needs; InProcessTransport
serves local mode (several in-process workers), the ZeroMQ one serves distributed mode.

A worker binds one receiver on its own address and sends serialized batches to peers.
Sends block (politely, checking a stop flag) while the peer's inbox is full (in payloads, or
in bytes), so a slow worker back-pressures its senders instead of growing memory.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Hashable, Protocol


class Receiver(Protocol):
    def recv(self, timeout: float) -> bytes | None: ...

    def close(self) -> None: ...


class Transport(Protocol):
    def bind(self, address: Hashable) -> Receiver: ...

    def send(self, address: Hashable, payload: bytes, timeout: float) -> bool: ...

    def close(self) -> None: ...


class _Inbox:
    def __init__(self, capacity: int, byte_capacity: int | None = None):
        self.capacity = capacity
        self.byte_capacity = byte_capacity
        self.items: deque[bytes] = deque()
        self.nbytes = 0
        self.cond = threading.Condition()
        self.closed = False

    def full_for(self, payload: bytes) -> bool:
        """Whether payload must wait; an empty inbox takes any payload."""
        if not self.items:
            return False
        return len(self.items) >= self.capacity or (
            self.byte_capacity is not None and self.nbytes + len(payload) > self.byte_capacity)

    def recv(self, timeout: float) -> bytes | None:
        with self.cond:
            if not self.items and not self.closed:
                self.cond.wait(timeout)
            if not self.items:
                return None
            item = self.items.popleft()
            self.nbytes -= len(item)
            self.cond.notify_all()  # a blocked sender may proceed
            return item

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class InProcessHub:
    """The shared 'network' of one LocalCluster: address -> inbox."""

    def __init__(self, capacity: int = 64, byte_capacity: int | None = None):
        self.capacity = capacity
        self.byte_capacity = byte_capacity
        self._inboxes: dict[Hashable, _Inbox] = {}
        self._lock = threading.Lock()

    def transport(self) -> "InProcessTransport":
        return InProcessTransport(self)

    def bind(self, address: Hashable) -> _Inbox:
        with self._lock:
            inbox = self._inboxes.get(address)
            if inbox is None or inbox.closed:
                inbox = self._inboxes[address] = _Inbox(self.capacity, self.byte_capacity)
            return inbox

    def unbind(self, address: Hashable, inbox: _Inbox) -> None:
        with self._lock:
            if self._inboxes.get(address) is inbox:
                del self._inboxes[address]
        inbox.close()

    def inbox(self, address: Hashable) -> _Inbox | None:
        return self._inboxes.get(address)


class _BoundReceiver:
    def __init__(self, hub: InProcessHub, address: Hashable):
        self._hub = hub
        self._address = address
        self._inbox = hub.bind(address)

    def recv(self, timeout: float) -> bytes | None:
        return self._inbox.recv(timeout)

    def close(self) -> None:
        self._hub.unbind(self._address, self._inbox)


class InProcessTransport:
    def __init__(self, hub: InProcessHub):
        self._hub = hub

    def bind(self, address: Hashable) -> _BoundReceiver:
        return _BoundReceiver(self._hub, address)

    def send(self, address: Hashable, payload: bytes, timeout: float) -> bool:
        """False when the peer is not bound (yet) or stayed full for `timeout` seconds."""
        inbox = self._hub.inbox(address)
        if inbox is None:
            return False
        with inbox.cond:
            if inbox.full_for(payload) and not inbox.closed:
                inbox.cond.wait(timeout)
            if inbox.closed or inbox.full_for(payload):
                return False
            inbox.items.append(payload)
            inbox.nbytes += len(payload)
            inbox.cond.notify_all()
            return True

    def close(self) -> None:
        pass
