"""RpcServer: one thread owns a ZeroMQ ROUTER socket (binds, serves, closes it) and dispatches
each request to `handlers[op](args) -> result`.

Handlers run on the socket thread, one request at a time: they must be quick (read state,
validate, record a decision); anything slow (waiting for a kill, scheduling rounds) belongs on
the daemon's own threads. A handler raising a typed error (see protocol.py) replies with that
kind; any other exception replies `internal` and is logged with its traceback. No request
can kill the server: garbage, a wrong version, an unknown op, an oversized frame each get an
error reply. A frame over `max_request_bytes` gets a too-large reply; zmq itself drops (and
disconnects) a frame over 16x that (ZMQ_MAXMSGSIZE), so a gigantic one never sits in memory.

A built-in `ping` op (unless a handler of that name is given) answers {"name", "v"}.
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from typing import Any, Callable, Mapping

import zmq

from daemons.rpc.protocol import (
    DEFAULT_MAX_REQUEST_BYTES,
    PROTOCOL_VERSION,
    AuthError,
    BadRequestError,
    Request,
    decode_request,
    encode_error,
    encode_ok,
    error_kind,
    error_message,
)
from executor.errors import ClearError
from executor.lifecycle import Service
from executor.transport.curve import CurveKeys, release_server, secure_server

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Any]
_POLL_MS = 100           # how soon the socket thread notices stop()
_BIND_TIMEOUT_SECS = 10.0
_JOIN_TIMEOUT_SECS = 10.0
_SLOW_HANDLER_SECS = 1.0  # a handler slower than this holds up every other caller: warn
_ZMQ_LIMIT_FACTOR = 16


class BindError(ClearError):
    """The server cannot listen on host:port (in use, or no such address)."""

    def __init__(self, message: str, host: str, port: int):
        super().__init__(message)
        self.host = host
        self.port = port


def bind_endpoint(host: str, port: int) -> str:
    """The zmq endpoint for host:port; port 0 picks a free port; '' / 0.0.0.0 listen everywhere."""
    if host in ("", "*", "0.0.0.0"):
        host = "*"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{'*' if port == 0 else port}"


class RpcServer(Service):
    def __init__(self, host: str, port: int, handlers: Mapping[str, Handler], *, secret: str | None = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, name: str = "rpc-server",
                 curve: CurveKeys | None = None):
        super().__init__(name)
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"{name}: port must be an int in 0..65535, got {port!r}")
        if max_request_bytes <= 0:
            raise ValueError(f"{name}: max_request_bytes must be positive, got {max_request_bytes!r}")
        self.host = host
        self._requested_port = port
        self._handlers: dict[str, Handler] = {"ping": self._ping, **dict(handlers)}
        self._secret = secret.encode("utf-8") if secret else None
        self._curve = curve  # CurveZMQ: encrypted, and only clients holding the cluster's key connect
        self.max_request_bytes = max_request_bytes
        self._stop_event = threading.Event()
        self._bound = threading.Event()
        self._bind_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None
        self.endpoint: str | None = None
        self.requests = 0
        self.errors = 0

    @property
    def ops(self) -> list[str]:
        return sorted(self._handlers)

    # -- lifecycle -------------------------------------------------------------------------------

    def _on_start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self.on_stop(self._stop_thread, "socket thread")
        if not self._bound.wait(_BIND_TIMEOUT_SECS):
            raise BindError(f"{self.name}: binding {self.host}:{self._requested_port} did not finish "
                            f"within {_BIND_TIMEOUT_SECS:g}s", self.host, self._requested_port)
        if self._bind_error is not None:
            raise self._bind_error

    def _stop_thread(self) -> None:
        self._stop_event.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT_SECS)
            if thread.is_alive():
                log.warning("%s: socket thread did not stop within %gs", self.name, _JOIN_TIMEOUT_SECS)

    # -- the socket thread ---------------------------------------------------------------------

    def _bind(self) -> zmq.Socket | None:
        sock = zmq.Context.instance().socket(zmq.ROUTER)
        sock.linger = 0
        # Over this zmq drops the frame and the connection before allocating it all.
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_request_bytes * _ZMQ_LIMIT_FACTOR)
        if ":" in self.host.strip("[]"):
            sock.ipv6 = True
        secure_server(sock, self._curve)
        endpoint = bind_endpoint(self.host, self._requested_port)
        try:
            sock.bind(endpoint)
        except zmq.ZMQError as exc:
            release_server(sock)
            sock.close()
            self._bind_error = BindError(
                f"{self.name}: cannot listen on {self.host}:{self._requested_port}: {exc.strerror}",
                self.host, self._requested_port)
            return None
        self.endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.port = int(self.endpoint.rsplit(":", 1)[1])
        return sock

    def _run(self) -> None:
        try:
            sock = self._bind()
        except Exception as exc:  # reported to start()
            self._bind_error = exc
            sock = None
        self._bound.set()
        if sock is None:
            return
        log.info("%s: listening on %s", self.name, self.endpoint)
        try:
            while not self._stop_event.is_set():
                if sock.poll(_POLL_MS, zmq.POLLIN):
                    self._serve_one(sock)
        except Exception as exc:  # zmq itself failed: this server cannot go on
            self.fatal(f"socket thread failed: {exc}", exc)
        finally:
            release_server(sock)
            sock.close(linger=0)

    def _serve_one(self, sock: zmq.Socket) -> None:
        parts = sock.recv_multipart(copy=False)
        # From a REQ: [identity, b"", body]; from a DEALER: [identity, body].
        if len(parts) >= 2 and len(parts[1]) == 0:
            envelope, body = parts[:2], parts[2:]
        else:
            envelope, body = parts[:1], parts[1:]
        peer = _peer(parts[-1])
        self.requests += 1
        if len(body) != 1:
            reply = self._error_reply(BadRequestError(f"expected one request frame, got {len(body)}"), "?", peer)
        else:
            reply = self._dispatch(body[0].buffer, peer)  # no copy: a too-large frame is refused by size
        # ROUTER drops a reply to a peer that left; it never blocks this thread.
        sock.send_multipart([*(p.bytes for p in envelope), reply])

    def _dispatch(self, frame: bytes | memoryview, peer: str) -> bytes:
        op = "?"
        try:
            request = decode_request(frame, self.max_request_bytes)
            op = request.op
            self._check_auth(request, peer)
            handler = self._handlers.get(op)
            if handler is None:
                raise BadRequestError(f"unknown operation {op!r} (known: {', '.join(self.ops)})")
            began = time.monotonic()
            result = handler(request.args)
            took = time.monotonic() - began
            if took > _SLOW_HANDLER_SECS:
                log.warning("%s: handler of %r took %.2fs (it holds up every caller)", self.name, op, took)
        except Exception as exc:
            return self._error_reply(exc, op, peer)
        try:
            return encode_ok(result)
        except Exception as exc:
            log.error("%s: result of %r cannot be encoded: %s", self.name, op, exc)
            self.errors += 1
            return encode_error("internal", f"result of {op!r} cannot be encoded: {exc}")

    def _check_auth(self, request: Request, peer: str) -> None:
        if self._secret is None:
            return
        if request.auth is None:
            log.warning("%s: refused %r from %s: no secret given", self.name, request.op, peer)
            raise AuthError(f"auth: call {request.op!r} refused: no secret given (the server requires one)")
        if not hmac.compare_digest(request.auth.encode("utf-8"), self._secret):
            log.warning("%s: refused %r from %s: wrong secret", self.name, request.op, peer)
            raise AuthError(f"auth: call {request.op!r} refused: wrong secret")

    def _error_reply(self, exc: Exception, op: str, peer: str) -> bytes:
        self.errors += 1
        kind = error_kind(exc)
        if kind is None:
            log.error("%s: %r from %s failed", self.name, op, peer, exc_info=exc)
            kind = "internal"
        elif kind != "auth":  # auth refusals were logged by _check_auth
            log.info("%s: %r from %s: %s: %s", self.name, op, peer, kind, exc)
        return encode_error(kind, error_message(exc))

    def _ping(self, _args: dict[str, Any]) -> dict[str, Any]:
        return {"name": self.name, "v": PROTOCOL_VERSION}


def _peer(frame: zmq.Frame) -> str:
    try:
        return frame.get("Peer-Address")
    except Exception:  # metadata is best effort (not every transport has it)
        return "unknown peer"
