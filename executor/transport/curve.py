"""CurveZMQ for the links between workers and for the RPC to Nimbus (docs/operations.md,
"Security"): encrypted, and open only to peers holding the cluster's key.

One key pair per cluster (`storm.messaging.curve.public` / `storm.messaging.curve.secret`,
made by `storm-py secure credentials`, distributed by the conf like the other credentials):
every server socket is a CURVE server with it, every client uses it both as its own key pair
and to authenticate the server. A CURVE client with another key is refused by this process's
ZAP handler, which logs the refusal with the peer's address; a client without CURVE fails the
handshake and never gets a message through.
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Mapping

import zmq
from zmq.utils import z85

from executor.errors import ClearError

log = logging.getLogger(__name__)

PUBLIC_KEY = "storm.messaging.curve.public"
SECRET_KEY = "storm.messaging.curve.secret"
ZAP_ENDPOINT = "inproc://zeromq.zap.01"   # RFC 27: where libzmq asks who may connect
ZAP_DOMAIN = "storm-py"
_POLL_MS = 100


class CurveConfigError(ClearError):
    """The conf's CURVE keys are unusable (the message names the key)."""


@dataclass(frozen=True)
class CurveKeys:
    public: bytes   # Z85, 40 characters
    secret: bytes

    def __repr__(self) -> str:  # never the secret
        return f"CurveKeys(public={self.public.decode('ascii')!r}, secret=<hidden>)"


def new_keys() -> dict[str, str]:
    """A fresh cluster key pair, as conf values."""
    public, secret = zmq.curve_keypair()
    return {PUBLIC_KEY: public.decode("ascii"), SECRET_KEY: secret.decode("ascii")}


def curve_keys(conf: Mapping[str, Any]) -> CurveKeys | None:
    """The cluster's key pair, or None when the conf sets neither key (links in clear)."""
    public, secret = conf.get(PUBLIC_KEY), conf.get(SECRET_KEY)
    if public is None and secret is None:
        return None
    for key, value in ((PUBLIC_KEY, public), (SECRET_KEY, secret)):
        if not isinstance(value, str) or len(value) != 40:
            raise CurveConfigError(f"config key {key!r} must be a 40-character Z85 CURVE key (both "
                                   f"{PUBLIC_KEY!r} and {SECRET_KEY!r}; `storm-py secure credentials` "
                                   f"makes them), got {'nothing' if value is None else 'another value'}")
    if not zmq.has("curve"):
        raise CurveConfigError(f"{PUBLIC_KEY!r} is set but this libzmq has no CURVE support")
    try:
        derived = zmq.curve_public(secret.encode("ascii"))
    except (zmq.ZMQError, ValueError, UnicodeEncodeError):
        raise CurveConfigError(f"config key {SECRET_KEY!r} is not a Z85 CURVE key") from None
    if derived != public.encode("ascii"):
        raise CurveConfigError(f"config keys {PUBLIC_KEY!r} and {SECRET_KEY!r} are not one key pair")
    return CurveKeys(public.encode("ascii"), secret.encode("ascii"))


def secure_server(sock: zmq.Socket, keys: CurveKeys | None) -> None:
    """Make a socket that binds a CURVE server of the cluster's key (before bind). Its owner
    calls `release_server(sock)` when it closes it (the ZAP handler stops with the last)."""
    if keys is None:
        return
    acquire_zap(sock.context, keys)
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_server = True
    sock.zap_domain = ZAP_DOMAIN.encode("ascii")


def secure_client(sock: zmq.Socket, keys: CurveKeys | None) -> None:
    """Make a socket that connects a CURVE client of the cluster (before connect)."""
    if keys is None:
        return
    sock.curve_serverkey = keys.public
    sock.curve_publickey = keys.public
    sock.curve_secretkey = keys.secret


# ---- ZAP: who may connect ----

_handlers: "weakref.WeakKeyDictionary[zmq.Context, _ZapHandler]" = weakref.WeakKeyDictionary()
_handlers_lock = threading.Lock()


def acquire_zap(context: zmq.Context, keys: CurveKeys) -> None:
    """This context's ZAP handler (it answers for every CURVE server socket in it), started by
    the first server socket."""
    with _handlers_lock:
        handler = _handlers.get(context)
        if handler is None or not handler.alive():
            handler = _ZapHandler(context, keys)
            handler.start()
            _handlers[context] = handler
        elif handler.keys != keys:
            raise CurveConfigError("two different CURVE key pairs in one process")
        handler.users += 1


def release_server(sock: zmq.Socket) -> None:
    """A CURVE server socket is closing: stop the ZAP handler after the last one."""
    if not sock.curve_server:
        return
    with _handlers_lock:
        handler = _handlers.get(sock.context)
        if handler is None:
            return
        handler.users -= 1
        if handler.users > 0:
            return
        del _handlers[sock.context]
    handler.stop()


def zap_decision(mechanism: bytes, client_key: bytes | None, allowed: bytes) -> tuple[bool, str]:
    """(allowed?, why): only CURVE clients holding the cluster's key (pure)."""
    if mechanism != b"CURVE":
        return False, f"mechanism {mechanism.decode('ascii', 'replace')} (CURVE required)"
    if client_key is None or z85.encode(client_key) != allowed:
        return False, "a CURVE key that is not the cluster's"
    return True, "OK"


class _ZapHandler:
    """RFC 27's handler on its own thread (the one that owns its socket)."""

    def __init__(self, context: zmq.Context, keys: CurveKeys):
        self.context = context
        self.keys = keys
        self.users = 0
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="zap-handler", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise CurveConfigError(f"cannot start the CURVE authenticator: {self._error}")

    def alive(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        try:
            sock = self.context.socket(zmq.REP)
            sock.linger = 0
            sock.bind(ZAP_ENDPOINT)
        except zmq.ZMQError as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop.is_set():
                try:
                    if not sock.poll(_POLL_MS):
                        continue
                    frames = sock.recv_multipart()
                except zmq.ContextTerminated:
                    break
                sock.send_multipart(self._answer(frames))
        except zmq.ContextTerminated:
            pass
        finally:
            sock.close(0)

    def _answer(self, frames: list[bytes]) -> list[bytes]:
        if len(frames) < 6:
            return [b"1.0", frames[1] if len(frames) > 1 else b"", b"500", b"malformed ZAP request", b"", b""]
        version, request_id, domain, address, _identity, mechanism = frames[:6]
        key = frames[6] if mechanism == b"CURVE" and len(frames) > 6 else None
        ok, why = zap_decision(mechanism, key, self.keys.public)
        if ok:
            return [version, request_id, b"200", b"OK", b"storm-py", b""]
        log.warning("refused a connection from %s: %s", address.decode("ascii", "replace") or "?", why)
        return [version, request_id, b"400", why.encode("utf-8"), b"", b""]
