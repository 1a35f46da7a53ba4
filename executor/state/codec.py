"""How keys and values are stored: their msgpack bytes (as the wire format, executor/serialization.py).

A key's identity is its encoding: ("a", 1) and ["a", 1] are the same key, 1 and 1.0 or True
and 1 are not (they differ in msgpack), and values come back as msgpack returns them (tuples as
lists, a fresh copy on every get). Deletions are recorded as TOMBSTONE, the empty byte string,
which no msgpack value encodes to.
"""

from __future__ import annotations

from typing import Any

import msgpack

from executor.state.errors import StateValueError

TOMBSTONE = b""

_CARRIES = "None, bool, int (64-bit), float, str, bytes, and lists, tuples and dicts of those"


def _short(obj: Any) -> str:
    try:
        text = repr(obj)
    except Exception:  # a user object whose __repr__ raises: its type still says enough
        text = f"<{type(obj).__name__}>"
    return text if len(text) <= 100 else text[:97] + "..."


def encode_key(namespace: str, key: Any) -> bytes:
    try:
        return msgpack.packb(key, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise StateValueError(
            f"state {namespace!r}: key {_short(key)} ({type(key).__name__}) cannot be stored: "
            f"msgpack cannot carry it ({exc}); keys and values must be {_CARRIES}") from exc


def encode_value(namespace: str, key: Any, value: Any) -> bytes:
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise StateValueError(
            f"state {namespace!r}: put of key {_short(key)}: its value {_short(value)} "
            f"({type(value).__name__}) cannot be stored: msgpack cannot carry it ({exc}); keys and "
            f"values must be {_CARRIES}") from exc


def decode(data: bytes) -> Any:
    # strict_map_key=False: dict keys inside values may be ints, bytes, ...
    return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
