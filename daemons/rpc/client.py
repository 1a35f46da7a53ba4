"""RpcClient: calls an RpcServer; `call(op, **args)` returns the result or raises the typed error.

Socket choice (the "lazy pirate" pattern): one REQ socket kept between calls and thrown away
(linger 0) after any timeout. A REQ that never got its reply is stuck in its send/recv state
machine, so replacing it is the only safe recovery, and it also drops a late reply that would
otherwise be read as the answer to the next call. Keeping it between successful calls saves
a TCP handshake per call. ZMQ_IMMEDIATE makes the socket writable only once the connection is
up, so "cannot connect" (safe to try the next seed: nothing was sent) is told apart from "sent
but no reply" (not retried: the call may have happened, e.g. a submit).

One deadline, `timeout_secs`, bounds a whole call including the connection; with several
seeds each gets an equal share of what is left. Calls from several threads are serialized.

Nimbus HA (docs/operations.md, "Nimbus HA"): a standby Nimbus refuses a write with
NotLeaderError naming the leader's host:port; the call is then sent once more, to the leader
(it did nothing on the standby), and later calls go to the leader until it cannot be reached,
when the seeds are tried again in order.

`refused_is_final` (the CLI's clients): a seed whose TCP connect is refused outright (nothing
listens on its port) is given up at once, for the next seed or the error, instead of being
waited for until its share of the deadline ends; a seed that does not answer either way (a
timeout, a lost packet, a handshake that does not complete) is still waited for.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, Mapping, Sequence

import zmq
from zmq.utils.monitor import recv_monitor_message

from cluster_state.config import ConfigError, default_config
from daemons.rpc.protocol import NotLeaderError, UnreachableError, decode_reply, encode_request
from executor.transport.curve import CurveConfigError, CurveKeys, curve_keys, secure_client

log = logging.getLogger(__name__)

SEEDS_KEY = "nimbus.seeds"
PORT_KEY = "nimbus.thrift.port"
TIMEOUT_KEY = "nimbus.thrift.timeout"
SECRET_KEY = "nimbus.authentication.secret"
# With refused_is_final: how long zmq may take to connect before a plain TCP connect checks
# whether the seed refuses (a live seed on loopback connects in about a millisecond).
REFUSED_CHECK_AFTER_SECS = 0.05
# What a connecting socket's monitor reports: a handshake done, or refused by the server.
_HANDSHAKE_EVENTS = (zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                     | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


def connect_endpoint(host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{port}"


class RpcClient:
    def __init__(self, host: str | Sequence[str], port: int, *, timeout_secs: float,
                 secret: str | None = None, peer_name: str = "Nimbus", curve: CurveKeys | None = None,
                 refused_is_final: bool = False):
        hosts = [host] if isinstance(host, str) else list(host)
        if not hosts or not all(isinstance(h, str) and h for h in hosts):
            raise ValueError(f"RpcClient needs at least one host name, got {host!r}")
        if isinstance(timeout_secs, bool) or not isinstance(timeout_secs, (int, float)) or timeout_secs <= 0:
            raise ValueError(f"timeout_secs must be a positive number, got {timeout_secs!r}")
        self.hosts = hosts
        self.port = port
        self.timeout_secs = float(timeout_secs)
        self.peer_name = peer_name
        self._secret = secret
        self._curve = curve
        self.refused_is_final = refused_is_final
        self._lock = threading.Lock()
        self._sock: zmq.Socket | None = None
        self._current: tuple[str, int] = (hosts[0], port)  # the endpoint that answered last
        self._leader: tuple[str, int] | None = None  # named by a standby's NotLeaderError

    @property
    def addresses(self) -> list[str]:
        return [f"{h}:{self.port}" for h in self.hosts]

    def call(self, op: str, /, **args: Any) -> Any:
        """Send one request and wait up to timeout_secs for the reply. Raises UnreachableError
        (naming host:port and the timeout), the typed error of an error reply, or ProtocolError."""
        frame = encode_request(op, args, self._secret)
        with self._lock:
            try:
                return decode_reply(self._exchange(op, frame))
            except NotLeaderError as exc:
                leader = _endpoint(exc.leader)
                if leader is None or leader == self._current:
                    raise
                log.info("%s: %s; sending %r there", self.peer_name, exc, op)
                self._drop()
                self._leader = leader
                return decode_reply(self._exchange(op, frame))

    def _exchange(self, op: str, frame: bytes) -> bytes:
        deadline = time.monotonic() + self.timeout_secs
        sock = self._connected(deadline)
        try:
            sock.send(frame, zmq.NOBLOCK)
        except zmq.Again:
            self._drop()
            raise UnreachableError(self._unreachable_text()) from None
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not sock.poll(int(remaining * 1000) + 1, zmq.POLLIN):
            address = _address(self._current)
            self._drop()
            raise UnreachableError(f"{self.peer_name} at {address} did not answer {op!r} "
                                   f"within {self.timeout_secs:g}s")
        return sock.recv()

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()

    # -- connection ------------------------------------------------------------------------------

    def _connected(self, deadline: float) -> zmq.Socket:
        if self._sock is not None:
            if self._sock.poll(0, zmq.POLLOUT):
                return self._sock
            self._drop()  # the connection went away: look for a seed again
            self._leader = None
        order = self._order()
        refused: list[tuple[str, int]] = []
        handshakes: dict[tuple[str, int], int] = {}  # endpoint -> the failed handshake's event
        for left, endpoint in zip(range(len(order), 0, -1), order):
            share = (deadline - time.monotonic()) / left
            opened = self._open(*endpoint)
            sock = None if opened is None else opened[0]
            up: bool | int | None = False
            try:
                if opened is not None and share > 0:
                    up = self._wait_up(*opened, endpoint, time.monotonic() + share)
            finally:
                if opened is not None:
                    sock.disable_monitor()
                    opened[1].close(linger=0)
            if up is True:
                self._sock, self._current = sock, endpoint
                return sock
            if sock is not None:
                sock.close(linger=0)
            if up is None:
                refused.append(endpoint)
            elif up is not False:
                handshakes[endpoint] = up
            log.debug("%s at %s not reachable%s", self.peer_name, _address(endpoint),
                      " (connection refused)" if up is None else " (handshake refused)" if up else "")
        self._leader = None
        raise UnreachableError(self._unreachable_text(order, refused, handshakes))

    def _wait_up(self, sock: zmq.Socket, monitor: zmq.Socket, endpoint: tuple[str, int],
                 until: float) -> bool | int | None:
        """Whether `sock` connected before `until`; None when the seed refused the connection
        outright (only with refused_is_final: then it is not waited for); the zmq event of a
        handshake the seed refused (it listens, but not for this client's security: a CURVE key
        missing or not the cluster's), which is not waited for either. `monitor` reports the
        socket's handshakes."""
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLOUT)
        poller.register(monitor, zmq.POLLIN)
        check_refused_at = time.monotonic() + REFUSED_CHECK_AFTER_SECS if self.refused_is_final else None
        failed = 0
        while True:
            now = time.monotonic()
            if now >= until:
                return False
            wake = until if check_refused_at is None else min(until, check_refused_at)
            ready = dict(poller.poll(int(max(0.0, wake - now) * 1000) + 1))
            if sock in ready:
                return True
            if monitor in ready:
                event = recv_monitor_message(monitor)["event"]
                if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    failed = 0
                    continue
                failed += 1
                # A mechanism mismatch is final (zmq does not reconnect after it); another
                # failure counts twice in a row (not a server going away mid-handshake once).
                if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL or failed >= 2:
                    return event
                continue
            if check_refused_at is not None and time.monotonic() >= check_refused_at:
                check_refused_at = None
                if connection_refused(*endpoint, timeout=max(0.01, min(1.0, until - time.monotonic()))):
                    return None

    def _order(self) -> list[tuple[str, int]]:
        """The leader a standby named, if any; then the seeds, from the one that answered last."""
        seeds = [(h, self.port) for h in self.hosts]
        start = seeds.index(self._current) if self._current in seeds else 0
        order = seeds[start:] + seeds[:start]
        if self._leader is not None:
            order = [self._leader] + [e for e in order if e != self._leader]
        return order

    def _open(self, host: str, port: int) -> tuple[zmq.Socket, zmq.Socket] | None:
        """A REQ socket connecting to host:port, and the monitor of its handshakes (made before
        the connect: a refused handshake may be reported once only); the caller closes both."""
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.linger = 0
        sock.setsockopt(zmq.IMMEDIATE, 1)
        monitor = None
        try:
            if ":" in host.strip("[]"):
                sock.ipv6 = True
            secure_client(sock, self._curve)
            monitor = sock.get_monitor_socket(_HANDSHAKE_EVENTS)
            sock.connect(connect_endpoint(host, port))
        except zmq.ZMQError as exc:  # e.g. a malformed host: that seed is unreachable
            log.debug("cannot connect to %s:%s: %s", host, port, exc)
            if monitor is not None:
                sock.disable_monitor()
                monitor.close(linger=0)
            sock.close(linger=0)
            return None
        return sock, monitor

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None

    def _unreachable_text(self, tried: Sequence[tuple[str, int]] = (),
                          refused: Sequence[tuple[str, int]] = (),
                          handshakes: Mapping[tuple[str, int], int] | None = None) -> str:
        handshakes = handshakes or {}
        if refused and set(refused) == set(tried):
            return (f"cannot reach {self.peer_name} at {', '.join(_address(e) for e in tried)}: "
                    "connection refused (nothing listens there)")
        if handshakes and set(handshakes) | set(refused) == set(tried):
            text = "; ".join(f"cannot reach {self.peer_name} at {_address(e)}: {self._handshake_words(event)}"
                             for e, event in handshakes.items())
            if refused:
                text += f" ({', '.join(_address(e) for e in refused)}: connection refused)"
            return text
        text = f"cannot reach {self.peer_name} at {', '.join(self.addresses)} within {self.timeout_secs:g}s"
        if refused:
            text += f" ({', '.join(_address(e) for e in refused)}: connection refused)"
        if self._curve is not None:  # a handshake that stalls rather than fails looks the same
            text += " (or it does not accept this cluster's CURVE key: check storm.messaging.curve.*)"
        return text

    def _handshake_words(self, event: int) -> str:
        """What a refused handshake means for this client: its CURVE settings against the server's."""
        if self._curve is None:
            return ("it refused this client's handshake: it uses the cluster's CURVE keys and this client's "
                    "config has none (set storm.messaging.curve.public and storm.messaging.curve.secret as "
                    "in the daemons' storm.yaml)")
        if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
            return ("it refused this client's handshake: this client's config sets storm.messaging.curve.* "
                    "and the server does not use CURVE (or it is not Nimbus's port)")
        return ("it does not accept this client's CURVE key (not this cluster's CURVE key: check "
                "storm.messaging.curve.* against the daemons' storm.yaml)")


def connection_refused(host: str, port: int, timeout: float) -> bool:
    """Whether every address `host` resolves to (IPv4, as zmq connects, unless `host` is an IPv6
    literal) refuses a TCP connect to `port` outright: nothing listens there. False for anything
    else: a connection made (closed at once), a timeout, a name that does not resolve."""
    name = host.strip("[]")
    family = socket.AF_INET6 if ":" in name else socket.AF_INET
    try:
        infos = socket.getaddrinfo(name, port, family, socket.SOCK_STREAM)
    except OSError:
        return False
    for af, kind, proto, _canon, address in infos:
        with socket.socket(af, kind, proto) as probe:
            probe.settimeout(timeout)
            try:
                probe.connect(address)
            except ConnectionRefusedError:
                continue
            except OSError:
                return False
            return False
    return bool(infos)


def _address(endpoint: tuple[str, int]) -> str:
    return f"{endpoint[0]}:{endpoint[1]}"


def _endpoint(address: str | None) -> tuple[str, int] | None:
    """"host:port" (as a NotLeaderError names the leader) -> (host, port)."""
    if not address:
        return None
    host, _, port = address.rpartition(":")
    return (host.strip("[]"), int(port)) if host and port.isdigit() else None


def _conf_value(conf: Mapping[str, Any], key: str) -> Any:
    value = conf.get(key)
    return default_config().get(key) if value is None else value


def client_from_conf(conf: Mapping[str, Any], *, refused_is_final: bool = False) -> RpcClient:
    """A Nimbus client from `nimbus.seeds`, `nimbus.thrift.port`, `nimbus.thrift.timeout` and
    `nimbus.authentication.secret` (a key missing from `conf` takes its packaged default);
    `refused_is_final`: see the module's docstring."""
    seeds = _conf_value(conf, SEEDS_KEY)
    if isinstance(seeds, str):
        seeds = [seeds]
    if not isinstance(seeds, (list, tuple)) or not seeds or not all(isinstance(s, str) and s.strip() for s in seeds):
        raise ConfigError(f"config key {SEEDS_KEY!r} must be a non-empty list of host names, got {seeds!r}")
    port = _conf_value(conf, PORT_KEY)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"config key {PORT_KEY!r} must be a port number (1..65535), got {port!r}")
    timeout = _conf_value(conf, TIMEOUT_KEY)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigError(f"config key {TIMEOUT_KEY!r} must be a positive number of seconds, got {timeout!r}")
    secret = _conf_value(conf, SECRET_KEY)
    if secret is not None and not isinstance(secret, str):
        raise ConfigError(f"config key {SECRET_KEY!r} must be a string, got {type(secret).__name__}")
    try:
        curve = curve_keys(conf)
    except CurveConfigError as exc:
        raise ConfigError(str(exc)) from None
    return RpcClient([s.strip() for s in seeds], port, timeout_secs=timeout, secret=secret or None, curve=curve,
                     refused_is_final=refused_is_final)
