"""Numbered links for exactly-once topologies (executor/checkpoint/barrier_mode.py): a tuple lost
between two live workers must not pass unseen, since no acker tracks it there. Each sender
numbers the payloads it hands to each peer (a 16-byte header: its own random id, the number);
the receiver checks that every sender's numbers follow on, and calls `on_gap` when one does not
(ZeroMQ dropped what was queued on a connection that broke and was made again). A sender that
starts afresh (its worker restarted) has a new id, whose numbers start at 0.

The wrappers keep the Transport seam (executor/transport/base.py) and its threads: the
sender's header is made on the transfer thread, the check runs on the receive thread."""

from __future__ import annotations

import logging
import os
import struct
from typing import Callable

from executor.transport.base import Address, Receiver, Sender, Transport

log = logging.getLogger(__name__)

_HEADER = struct.Struct("<QQ")   # sender id, payload number on this link
HEADER_BYTES = _HEADER.size


class LinkGap(Exception):
    """What a receiver reports: `sender` (its id) skipped from `expected` to `got`."""

    def __init__(self, sender: int, expected: int, got: int):
        super().__init__(f"payloads {expected}..{got - 1} from sender {sender:016x} never arrived"
                         if got > expected else f"sender {sender:016x} sent payload {got} again (expected {expected})")
        self.sender, self.expected, self.got = sender, expected, got


def next_on_link(last: dict[int, int], sender: int, number: int) -> LinkGap | None:
    """Record payload `number` from `sender`; the gap when it does not follow the last one (a
    sender not seen before must start at 0). Pure but for `last`, which it updates."""
    expected = last.get(sender, -1) + 1
    last[sender] = number
    return None if number == expected else LinkGap(sender, expected, number)


class SequencedSender:
    def __init__(self, inner: Sender):
        self._inner = inner
        self._id = int.from_bytes(os.urandom(8), "little")
        self._next: dict[Address, int] = {}

    def connect(self, address: Address) -> None:
        self._inner.connect(address)

    def disconnect(self, address: Address) -> None:
        self._inner.disconnect(address)

    def is_connected(self, address: Address) -> bool:
        return self._inner.is_connected(address)

    def try_send(self, address: Address, payload: bytes) -> bool:
        n = self._next.get(address, 0)
        if not self._inner.try_send(address, _HEADER.pack(self._id, n) + payload):
            return False  # not taken: the same number goes with the next try
        self._next[address] = n + 1
        return True

    def close(self) -> None:
        self._inner.close()


class SequencedReceiver:
    def __init__(self, inner: Receiver, on_gap: Callable[[LinkGap], None]):
        self._inner = inner
        self._on_gap = on_gap
        self._last: dict[int, int] = {}
        self.address = inner.address

    def recv(self, timeout: float) -> bytes | None:
        data = self._inner.recv(timeout)
        if data is None:
            return None
        if len(data) < HEADER_BYTES:
            self._on_gap(LinkGap(0, 0, 0))  # not one of ours: whatever it carried is lost
            return None
        sender, number = _HEADER.unpack_from(data)
        gap = next_on_link(self._last, sender, number)
        if gap is not None:
            self._on_gap(gap)
        return data[HEADER_BYTES:]

    def close(self) -> None:
        self._inner.close()


class SequencedTransport:
    """`inner` with numbered links; `on_gap` is called on the receive thread."""

    def __init__(self, inner: Transport, on_gap: Callable[[LinkGap], None]):
        self.inner = inner
        self._on_gap = on_gap

    def bind(self, address: Address) -> SequencedReceiver:
        return SequencedReceiver(self.inner.bind(address), self._on_gap)

    def connector(self) -> SequencedSender:
        return SequencedSender(self.inner.connector())

    def close(self) -> None:
        self.inner.close()
