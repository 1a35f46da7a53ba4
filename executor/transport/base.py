"""The transport seam between workers: what the worker needs, nothing more.

Every object here is used by ONE thread, which owns it from creation to close():
- `Transport.bind(address)` is called on the worker's receive thread; that thread then owns
  the `Receiver` (reads it and closes it).
- `Transport.connector()` is called on the worker's transfer thread; that thread then owns the
  `Sender` (connects, sends, disconnects and closes it).
- `Transport.close()` is called once both are closed, by whoever created the transport.

Sends never block: `try_send` returns False when a peer cannot take a payload now (its
high-water mark is reached, or it is not connected), so the caller keeps that destination's
batch in that destination's own queue and serves the other destinations meanwhile. The
transport never duplicates a payload; what was in flight to a peer that died may be lost
(the acker replays it).
"""

from __future__ import annotations

from typing import Hashable, Protocol, runtime_checkable

# (host, port) for ZeroMQ; any hashable for the in-process transport.
Address = Hashable


class TransportError(RuntimeError):
    """A transport could not do what was asked (a message that names the address)."""


class BindError(TransportError):
    """The receiver could not bind its address (for example: address in use)."""


@runtime_checkable
class Receiver(Protocol):
    """Both implementations also expose `address`: what was bound (for ZeroMQ, (host, port)
    with the port actually bound, useful when binding port 0)."""

    def recv(self, timeout: float) -> bytes | None:
        """The next payload, or None when none arrived within `timeout` seconds."""
        ...

    def close(self) -> None:
        """Stop receiving and release the address (a new bind on it succeeds afterwards)."""
        ...


@runtime_checkable
class Sender(Protocol):
    def connect(self, address: Address) -> None:
        """Start connecting to a peer; never blocks (idempotent)."""
        ...

    def disconnect(self, address: Address) -> None:
        """Forget a peer (idempotent); what is queued for it gets a bounded linger."""
        ...

    def is_connected(self, address: Address) -> bool:
        """Whether the peer accepted the connection (and can be sent to)."""
        ...

    def try_send(self, address: Address, payload: bytes) -> bool:
        """Queue payload for the peer without blocking; False when it cannot take it now."""
        ...

    def close(self) -> None:
        """Close every connection (bounded linger); idempotent."""
        ...


@runtime_checkable
class Transport(Protocol):
    def bind(self, address: Address) -> Receiver:
        """Bind a receiver on address (raises BindError naming it); see the module doc for threads."""
        ...

    def connector(self) -> Sender:
        """A new sender, owned by the calling thread."""
        ...

    def close(self) -> None:
        """Release shared resources once receivers and senders are closed; idempotent."""
        ...
