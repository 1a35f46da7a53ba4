"""The ZeroMQ transport of distributed mode: one PULL bound on the worker's slot port, one
PUSH per peer worker. Payloads are bytes (msgpack batches); no pickle.

Threads (see base.py): the receive thread calls `bind` and then owns the ZmqReceiver; the
transfer thread calls `connector` and then owns the ZmqSender with all its PUSH sockets and
their monitor sockets; `close` is called once both are closed. The zmq context is thread-safe
and shared; sockets never cross threads.

Bounded memory on both sides: the PULL has a bounded RCVHWM and every PUSH a bounded SNDHWM,
so when a receiver's owner stops reading, its peers' `try_send` returns False after about
SNDHWM + RCVHWM messages (plus what the kernel buffers hold; `sndbuf`/`rcvbuf` bound those).
ZMQ_IMMEDIATE queues messages only onto a completed connection: nothing piles up for a peer
that is down, `try_send` refuses instead. A peer that dies and comes back on the same port is
reconnected by ZeroMQ (every `reconnect_ivl_ms`, backing off to `reconnect_ivl_max_ms`)
without the sender doing anything. A payload is sent once; what was in flight to a dying peer
may be lost (the acker replays it).

With the cluster's CURVE keys (`curve`, executor/transport/curve.py) the PULL is a CURVE server
and every PUSH a CURVE client: payloads are encrypted and a peer without the key is refused. A
refused handshake is logged by the sender naming the peer, once until it succeeds.
"""

from __future__ import annotations

import logging
import math
import struct
import threading
import time

import zmq

from executor.transport.base import Address, BindError, TransportError
from executor.transport.curve import CurveKeys, release_server, secure_client, secure_server

log = logging.getLogger(__name__)

# Sender side: a peer counts as connected once the ZMTP handshake succeeded (that is also when
# ZMQ_IMMEDIATE starts queueing onto the connection), and stops when it disconnects.
_UP = zmq.EVENT_HANDSHAKE_SUCCEEDED
_DOWN = zmq.EVENT_DISCONNECTED | zmq.EVENT_MONITOR_STOPPED
_REFUSED = (zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
_EVENT = struct.Struct("=HI")  # a monitor message's first frame: event id, value
_UNBIND_WAIT = 2.0             # seconds close() waits for the listener to be gone


def _keepalive(sock: zmq.Socket, secs: int | None) -> None:
    """TCP keepalive: a peer whose host vanished without closing its connections is noticed
    after about `secs` (idle) + 5 unanswered probes a second apart. Not ZeroMQ's heartbeats:
    they travel behind the payloads, so a receiver that back-pressures its link for longer than
    their timeout (a busy worker, a long checkpoint alignment) looked dead and its link was
    made again, mixing the payloads of two connections; the kernel answers a keepalive probe
    whatever the reader does."""
    if not secs:
        return
    sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
    sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, secs)
    sock.setsockopt(zmq.TCP_KEEPALIVE_INTVL, 1)
    sock.setsockopt(zmq.TCP_KEEPALIVE_CNT, 5)


def _endpoint(host: str, port: int | str) -> str:
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def _check_address(address: Address, *, bind: bool = False) -> tuple[str, int]:
    ok = (isinstance(address, tuple) and len(address) == 2 and isinstance(address[0], str)
          and address[0] and isinstance(address[1], int) and not isinstance(address[1], bool))
    if ok:
        port = address[1]
        ok = (0 if bind else 1) <= port <= 65535
    if not ok:
        raise TransportError(f"a ZeroMQ address is (host, port) with a port in 1..65535"
                             f"{' (0: any free port)' if bind else ''}, got {address!r}")
    return address[0], address[1]


class ZmqReceiver:
    """A PULL socket bound on tcp://{bind_host}:{port}. Owned by the thread that called bind().

    `address` is (host, port) with the port actually bound (useful when binding port 0)."""

    def __init__(self, transport: "ZmqTransport", address: Address):
        host, port = _check_address(address, bind=True)
        bind_host = transport.bind_host or host
        self._transport = transport
        sock = transport.context.socket(zmq.PULL)
        sock.setsockopt(zmq.RCVHWM, transport.hwm)
        _keepalive(sock, transport.keepalive_secs)
        sock.setsockopt(zmq.LINGER, 0)  # closing the receiver drops what was not read
        if transport.max_msg_bytes is not None:
            sock.setsockopt(zmq.MAXMSGSIZE, transport.max_msg_bytes)  # a larger message drops its peer
        if transport.rcvbuf is not None:
            sock.setsockopt(zmq.RCVBUF, transport.rcvbuf)
        if ":" in bind_host:
            sock.setsockopt(zmq.IPV6, 1)
        secure_server(sock, transport.curve)
        # Watches the listener so that close() returns only once the port is free again.
        self._monitor = sock.get_monitor_socket(zmq.EVENT_CLOSED)
        try:
            sock.bind(_endpoint(bind_host, port or "*"))
        except zmq.ZMQError as exc:
            sock.disable_monitor()
            self._monitor.close(0)
            release_server(sock)
            sock.close(0)
            raise BindError(f"cannot bind the worker's receiver on {_endpoint(bind_host, port)}: "
                            f"{zmq.strerror(exc.errno).lower()}") from None
        self._socket = sock
        self._poll_in = [(sock, zmq.POLLIN)]
        self._endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.address = (host, int(self._endpoint.rsplit(":", 1)[1]))
        self._closed = False
        transport._opened()
        log.info("receiver bound on %s", self._endpoint)

    def recv(self, timeout: float) -> bytes | None:
        sock = self._socket
        if timeout <= 0:
            try:
                return sock.recv(zmq.NOBLOCK)  # the busy path: no poll when a message is waiting
            except zmq.Again:
                return None
        # The idle wait, called right after a step found nothing: poll first, with the socket's
        # poll list made once (Socket.poll builds a Poller and converts flags at every call: a
        # third of an idle worker's CPU, whose executor thread waits here ~1,000 times a second).
        if not zmq.zmq_poll(self._poll_in, math.ceil(timeout * 1000)):
            return None
        try:
            return sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return None

    def close(self) -> None:
        """Unbind, wait (bounded) until the listener is closed, then close the sockets."""
        if self._closed:
            return
        self._closed = True
        sock, monitor = self._socket, self._monitor
        try:
            sock.unbind(self._endpoint)
            deadline = time.monotonic() + _UNBIND_WAIT
            while (left := deadline - time.monotonic()) > 0 and monitor.poll(int(left * 1000) + 1):
                frames = monitor.recv_multipart()
                if _EVENT.unpack_from(frames[0])[0] == zmq.EVENT_CLOSED:
                    break
            else:
                log.warning("receiver on %s: listener not closed after %.1fs", self._endpoint, _UNBIND_WAIT)
        except zmq.ZMQError as exc:  # the socket still closes below, which frees the port soon after
            log.warning("receiver on %s: unbind failed: %s", self._endpoint, exc)
        finally:
            sock.disable_monitor()
            monitor.close(0)
            release_server(sock)
            sock.close(0)
            self._transport._closed_one()
            log.info("receiver on %s closed", self._endpoint)


class _Peer:
    __slots__ = ("socket", "monitor", "endpoint", "connected", "refused")

    def __init__(self, sock: zmq.Socket, monitor: zmq.Socket, endpoint: str):
        self.socket = sock
        self.monitor = monitor
        self.endpoint = endpoint
        self.connected = False
        self.refused = False  # its handshake failed since the last success (logged once)


class ZmqSender:
    """One PUSH socket per peer. Owned by the thread that called connector(): every method
    runs there, and the connection state is read from each PUSH's monitor socket inside
    these calls (non-blocking)."""

    def __init__(self, transport: "ZmqTransport"):
        self._transport = transport
        self._peers: dict[Address, _Peer] = {}
        self._closed = False
        transport._opened()

    def connect(self, address: Address) -> None:
        if self._closed:
            raise TransportError("connect on a closed sender")
        if address in self._peers:
            return
        host, port = _check_address(address)
        t = self._transport
        sock = t.context.socket(zmq.PUSH)
        sock.setsockopt(zmq.SNDHWM, t.hwm)
        sock.setsockopt(zmq.IMMEDIATE, 1)       # queue only onto a completed connection
        sock.setsockopt(zmq.LINGER, t.linger_ms)
        sock.setsockopt(zmq.RECONNECT_IVL, t.reconnect_ivl_ms)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, t.reconnect_ivl_max_ms)
        _keepalive(sock, t.keepalive_secs)
        if t.sndbuf is not None:
            sock.setsockopt(zmq.SNDBUF, t.sndbuf)
        if ":" in host:
            sock.setsockopt(zmq.IPV6, 1)
        secure_client(sock, t.curve)
        monitor = sock.get_monitor_socket(_UP | _DOWN | _REFUSED)
        endpoint = _endpoint(host, port)
        sock.connect(endpoint)  # asynchronous: resolving and connecting happen on zmq's I/O thread
        self._peers[address] = _Peer(sock, monitor, endpoint)
        log.debug("connecting to %s", endpoint)

    def disconnect(self, address: Address) -> None:
        peer = self._peers.pop(address, None)
        if peer is not None:
            self._close_peer(peer)
            log.info("disconnected from %s", peer.endpoint)

    def is_connected(self, address: Address) -> bool:
        peer = self._peers.get(address)
        if peer is None:
            return False
        self._poll_monitor(peer)
        return peer.connected

    def try_send(self, address: Address, payload: bytes) -> bool:
        peer = self._peers.get(address)
        if peer is None:
            return False
        if not peer.connected:
            self._poll_monitor(peer)
            if not peer.connected:
                return False
        try:
            peer.socket.send(payload, zmq.NOBLOCK)
            return True
        except zmq.Again:  # high-water mark reached, or the connection just went away
            self._poll_monitor(peer)
            return False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for peer in self._peers.values():
            self._close_peer(peer)
        self._peers.clear()
        self._transport._closed_one()

    def _close_peer(self, peer: _Peer) -> None:
        peer.socket.disable_monitor()
        peer.monitor.close(0)
        peer.socket.close()  # with the transport's linger: queued payloads get a bounded time to leave

    @staticmethod
    def _poll_monitor(peer: _Peer) -> None:
        monitor = peer.monitor
        while True:
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            event = _EVENT.unpack_from(frames[0])[0]
            if event & _REFUSED:
                if not peer.refused:
                    peer.refused = True
                    log.warning("the handshake with %s failed: it does not hold this cluster's CURVE key, or "
                                "this worker does not hold its (storm.messaging.curve.*)", peer.endpoint)
                continue
            up = event == _UP
            if up:
                peer.refused = False
            if up != peer.connected:
                peer.connected = up
                log.info("%s %s", "connected to" if up else "lost connection to", peer.endpoint)


class ZmqTransport:
    """ZeroMQ transport. `context`: a shared zmq.Context (default: its own, terminated by
    close()). `bind_host`: the interface receivers bind on (the worker's host, never a
    wildcard; default: the host of the address given to bind). `hwm`: SNDHWM and RCVHWM in
    messages. `linger_ms`: how long close() lets queued payloads leave. `keepalive_secs`: TCP
    keepalive's idle time (None: none; see _keepalive). `sndbuf`/`rcvbuf`:
    kernel buffer sizes in bytes (default: the OS's). `max_msg_bytes`: larger incoming
    messages drop their connection. `curve`: the cluster's CURVE keys (None: in clear)."""

    def __init__(self, context: zmq.Context | None = None, *, bind_host: str | None = None, hwm: int = 64,
                 linger_ms: int = 1000, reconnect_ivl_ms: int = 100, reconnect_ivl_max_ms: int = 1000,
                 keepalive_secs: int | None = 5, sndbuf: int | None = None,
                 rcvbuf: int | None = None, max_msg_bytes: int | None = None, curve: CurveKeys | None = None):
        if bind_host is not None and bind_host in ("*", "0.0.0.0", "::", ""):
            raise TransportError(f"bind_host must be the worker's own host, not the wildcard {bind_host!r}")
        if hwm < 1:
            raise TransportError(f"hwm must be >= 1 (0 would mean unbounded), got {hwm}")
        if linger_ms < 0:
            raise TransportError(f"linger_ms must be >= 0 (a negative linger blocks forever), got {linger_ms}")
        self._own_context = context is None
        self.context = zmq.Context() if context is None else context
        self.bind_host = bind_host
        self.hwm = hwm
        self.linger_ms = linger_ms
        self.reconnect_ivl_ms = reconnect_ivl_ms
        self.reconnect_ivl_max_ms = reconnect_ivl_max_ms
        self.keepalive_secs = keepalive_secs
        self.sndbuf = sndbuf
        self.rcvbuf = rcvbuf
        self.max_msg_bytes = max_msg_bytes
        self.curve = curve
        self._lock = threading.Lock()
        self._open = 0
        self._closed = False

    def bind(self, address: Address) -> ZmqReceiver:
        """Bind a receiver on (host, port); call it on the thread that will own the receiver."""
        if self._closed:
            raise TransportError("bind on a closed transport")
        return ZmqReceiver(self, address)

    def connector(self) -> ZmqSender:
        """A new sender; call it on the thread that will own the sender."""
        if self._closed:
            raise TransportError("connector on a closed transport")
        return ZmqSender(self)

    def close(self) -> None:
        """Terminate the transport's own context (waits at most linger_ms for queued payloads).
        Receivers and senders must be closed first, by their threads: with any still open the
        context is left alone rather than risk blocking forever."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            still_open = self._open
        if not self._own_context:
            return
        if still_open:
            log.warning("transport closed with %d receivers/senders still open: context left to the "
                        "process exit", still_open)
            return
        self.context.term()

    def _opened(self) -> None:
        with self._lock:
            self._open += 1

    def _closed_one(self) -> None:
        with self._lock:
            self._open -= 1
