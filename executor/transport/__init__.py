"""Transport between workers: the seam (base), the in-process transport of local mode and the
ZeroMQ transport of distributed mode. See base.py for which thread may call what.

ZmqTransport is imported on first use, so local mode does not load zmq.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from executor.transport.base import Address, BindError, Receiver, Sender, Transport, TransportError
from executor.transport.inprocess import InProcessHub, InProcessReceiver, InProcessSender, InProcessTransport

if TYPE_CHECKING:
    from executor.transport.zmq import ZmqTransport

__all__ = [
    "Address", "BindError", "InProcessHub", "InProcessReceiver", "InProcessSender", "InProcessTransport",
    "Receiver", "Sender", "Transport", "TransportError", "ZmqTransport",
]


def __getattr__(name: str) -> Any:
    if name == "ZmqTransport":
        from executor.transport.zmq import ZmqTransport

        return ZmqTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
