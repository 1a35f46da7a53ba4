"""The RPC wire format and its typed errors (pure: no zmq here).

One msgpack map per frame:
    request  {"v": PROTOCOL_VERSION, "op": str, "args": {str: any}, "auth": str (optional)}
    reply    {"v": PROTOCOL_VERSION, "ok": true, "result": any}
          or {"v": PROTOCOL_VERSION, "ok": false, "error": {"kind": str, "message": str}}

An error reply's kind names the exception the client raises with the server's message:
    not-alive -> NotAliveError, already-alive -> AlreadyAliveError,
    invalid-topology -> InvalidTopologyError (these three from executor.errors),
    illegal-state -> IllegalStateError, too-large -> TooLargeError,
    bad-request -> BadRequestError, auth -> AuthError, internal -> InternalError,
    not-leader -> NotLeaderError (a standby Nimbus; the message names the leader's host:port).
A handler may also raise any exception class carrying an `rpc_kind` attribute (e.g.
`rpc_kind = "illegal-state"`); it reaches the client as the class of that kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import msgpack

from executor.errors import AlreadyAliveError, ClearError, InvalidTopologyError, NotAliveError

PROTOCOL_VERSION = 1
DEFAULT_MAX_REQUEST_BYTES = 16 * 1024 * 1024  # a code upload sends chunks well under this


class RpcError(ClearError):
    """Base of the RPC layer's own errors; `kind` is the wire name."""

    kind = "internal"

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        if kind is not None:
            self.kind = kind


class IllegalStateError(RpcError):
    """The operation makes no sense in the target's current state (e.g. activate a killed topology)."""

    kind = "illegal-state"


class TooLargeError(RpcError):
    """A request (or an upload) exceeds the server's size limit."""

    kind = "too-large"


class BadRequestError(RpcError):
    """A malformed request: not msgpack, wrong version, unknown op, missing or mistyped argument."""

    kind = "bad-request"


class AuthError(RpcError):
    """The call carried no secret or a wrong one."""

    kind = "auth"


class NotLeaderError(RpcError):
    """A standby Nimbus refused a write (Storm's Nimbus.java assertIsLeader); `leader` is the
    leader's "host:port" when one is known (also in the message, which is what travels)."""

    kind = "not-leader"

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message, kind)
        self.leader = leader_in_message(message)


_LEADER_IS = "; the leader is "


def not_leader_message(me: str, leader: str | None) -> str:
    """`Nimbus 127.0.0.3:6627 is not the leader; the leader is 127.0.0.2:6627` (or that no leader is known)."""
    if leader is None or leader == me:
        return f"Nimbus {me} is not the leader; no leader is elected now (try again shortly)"
    return f"Nimbus {me} is not the leader{_LEADER_IS}{leader}"


def leader_in_message(message: str) -> str | None:
    """The leader's "host:port" in a not_leader_message, or None."""
    _, sep, leader = message.rpartition(_LEADER_IS)
    host, colon, port = leader.rpartition(":")
    return leader if sep and colon and host and port.isdigit() else None


class InternalError(RpcError):
    """The handler failed unexpectedly (a server bug); the message holds the exception text."""

    kind = "internal"


class UnavailableError(RpcError):
    """The server cannot act now (Nimbus without ZooKeeper); nothing was changed."""

    kind = "unavailable"


class ProtocolError(RpcError):
    """Client side: the reply is not a valid frame of this protocol."""

    kind = "protocol"


class UnreachableError(RpcError):
    """Client side: the server could not be reached, or did not answer, within the timeout;
    the message names host:port and the timeout."""

    kind = "unreachable"


_KIND_TO_CLASS: dict[str, type[Exception]] = {
    "not-alive": NotAliveError,
    "already-alive": AlreadyAliveError,
    "invalid-topology": InvalidTopologyError,
    "illegal-state": IllegalStateError,
    "too-large": TooLargeError,
    "bad-request": BadRequestError,
    "auth": AuthError,
    "internal": InternalError,
    "unavailable": UnavailableError,
    "not-leader": NotLeaderError,
}
KINDS = tuple(_KIND_TO_CLASS)
# Everything RpcClient.call raises for a failed call (the CLI catches these as one `error:` line).
REMOTE_ERRORS: tuple[type[Exception], ...] = (RpcError, NotAliveError, AlreadyAliveError, InvalidTopologyError)


def error_kind(exc: BaseException) -> str | None:
    """The wire kind of a typed error, or None for any other exception (a server bug)."""
    kind = getattr(exc, "rpc_kind", None)
    if isinstance(kind, str) and kind in _KIND_TO_CLASS:
        return kind
    if isinstance(exc, RpcError) and exc.kind in _KIND_TO_CLASS:
        return exc.kind
    for kind, cls in _KIND_TO_CLASS.items():
        if isinstance(exc, cls):
            return kind
    return None


def error_from_wire(kind: str, message: str) -> Exception:
    """The exception a client raises for an error reply; an unknown kind (a newer server) keeps it."""
    cls = _KIND_TO_CLASS.get(kind)
    if cls is None:
        return RpcError(message, kind=kind)
    return cls(message)


def error_message(exc: BaseException) -> str:
    """The text an error reply carries."""
    text = str(exc)
    if error_kind(exc) is not None:  # typed: the message was written for the user
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- frames ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    op: str
    args: dict[str, Any]
    auth: str | None = None


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _unpack(frame: bytes | memoryview) -> Any:
    # strict_map_key=False: results may hold int keys (task ids); args keys are checked below.
    return msgpack.unpackb(frame, raw=False, strict_map_key=False)


def encode_request(op: str, args: Mapping[str, Any] | None = None, auth: str | None = None) -> bytes:
    if not isinstance(op, str) or not op:
        raise BadRequestError(f"operation name must be a non-empty string, got {op!r}")
    message: dict[str, Any] = {"v": PROTOCOL_VERSION, "op": op, "args": dict(args or {})}
    if auth is not None:
        message["auth"] = auth
    try:
        return _pack(message)
    except (TypeError, ValueError, OverflowError) as exc:
        raise BadRequestError(f"arguments of {op!r} cannot be encoded: {exc}") from None


def decode_request(frame: bytes | memoryview, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> Request:
    """Parse a request frame; raises only TooLargeError or BadRequestError (clear messages)."""
    if len(frame) > max_bytes:
        raise TooLargeError(f"request of {len(frame)} bytes exceeds the limit of {max_bytes} bytes")
    try:
        message = _unpack(frame)
    except Exception as exc:  # msgpack raises ValueError, ExtraData, StackError, FormatError...
        raise BadRequestError(f"request is not a valid msgpack frame (garbage or truncated): {exc}") from None
    if not isinstance(message, dict):
        raise BadRequestError(f"request must be a map, got {type(message).__name__}")
    if "v" not in message:
        raise BadRequestError("request has no protocol version ('v')")
    version = message["v"]
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise BadRequestError(f"unsupported protocol version {version!r} (this server speaks {PROTOCOL_VERSION})")
    op = message.get("op")
    if not isinstance(op, str) or not op:
        raise BadRequestError(f"request has no operation name ('op' must be a non-empty string, got {op!r})")
    args = message.get("args", {})
    if not isinstance(args, dict):
        raise BadRequestError(f"arguments of {op!r} must be a map, got {type(args).__name__}")
    bad_keys = [k for k in args if not isinstance(k, str)]
    if bad_keys:
        raise BadRequestError(f"argument names of {op!r} must be strings, got {bad_keys[0]!r}")
    auth = message.get("auth")
    if auth is not None and not isinstance(auth, str):
        raise BadRequestError(f"'auth' of {op!r} must be a string")
    return Request(op, args, auth)


def encode_ok(result: Any) -> bytes:
    """Raises TypeError/ValueError when `result` cannot be encoded (the server replies internal)."""
    return _pack({"v": PROTOCOL_VERSION, "ok": True, "result": result})


def encode_error(kind: str, message: str) -> bytes:
    return _pack({"v": PROTOCOL_VERSION, "ok": False, "error": {"kind": kind, "message": message}})


def decode_reply(frame: bytes) -> Any:
    """The result of an ok reply; raises the typed error of an error reply, ProtocolError for
    a frame that is not a reply of this protocol."""
    try:
        message = _unpack(frame)
    except Exception as exc:
        raise ProtocolError(f"reply is not a valid msgpack frame: {exc}") from None
    if not isinstance(message, dict) or "ok" not in message:
        raise ProtocolError(f"reply is not a map with 'ok': {type(message).__name__}")
    if message.get("v") != PROTOCOL_VERSION:
        raise ProtocolError(f"server speaks protocol version {message.get('v')!r}, "
                            f"this client {PROTOCOL_VERSION}")
    if message["ok"] is True:
        return message.get("result")
    error = message.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("kind"), str):
        raise ProtocolError("error reply without an error kind")
    text = error.get("message")
    raise error_from_wire(error["kind"], text if isinstance(text, str) else repr(text))


# -- argument helpers for handlers ----------------------------------------------------------------

_MISSING: Any = object()


def arg(args: Mapping[str, Any], name: str, types: type | tuple[type, ...], default: Any = _MISSING) -> Any:
    """`args[name]` checked against `types` (bool never passes as int); a missing argument takes
    `default` or, without one, raises BadRequestError naming the argument."""
    if name not in args or args[name] is None:
        if default is _MISSING:
            raise BadRequestError(f"argument {name!r} is required")
        return default
    value = args[name]
    types = types if isinstance(types, tuple) else (types,)
    if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise BadRequestError(f"argument {name!r} must be {names}, got {type(value).__name__}")
    return value
