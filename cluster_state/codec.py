"""msgpack encoding of records and of LocalState values.

A record travels as msgpack ExtType(RECORD_EXT, envelope) where the envelope is the msgpack map
`{"schema": SCHEMA_VERSION, "type": <class name>, "fields": {<name>: <value>}}`. Using an
extension type means records can sit anywhere inside a plain value (LocalState keeps e.g.
`{port: LocalAssignment}`) and a ZooKeeper node holds exactly one such value.

Mappings keyed by tuples (executor ids) inside records travel as `[[key, value], ...]` so the
wire form stays readable by any msgpack reader. Arrays decode as tuples (use_list=False): that
keeps tuple map keys in plain values hashable and matches the immutable records.
Anything that cannot be decoded raises DecodeError naming the path it came from.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, TypeVar

import msgpack

from .errors import DecodeError
from .records import (
    RECORD_TYPES,
    SCHEMA_VERSION,
    Assignment,
    WorkerHeartbeat,
)

log = logging.getLogger(__name__)

RECORD_EXT = 1

T = TypeVar("T")

_BY_NAME: dict[str, type] = {cls.__name__: cls for cls in RECORD_TYPES}
# Fields whose mapping keys are tuples, so they travel as lists of pairs.
_PAIR_FIELDS: dict[type, frozenset[str]] = {
    Assignment: frozenset({"executor_node_port", "executor_start_time_secs"}),
    WorkerHeartbeat: frozenset({"executor_stats", "checkpoint_marks"}),
}
_FIELD_NAMES: dict[type, frozenset[str]] = {
    cls: frozenset(f.name for f in dataclasses.fields(cls)) for cls in RECORD_TYPES
}


class _WireError(Exception):
    """Raised inside msgpack hooks, turned into DecodeError once the path is known."""


def _record_to_wire(record: Any) -> dict[str, Any]:
    cls = type(record)
    pair_fields = _PAIR_FIELDS.get(cls, frozenset())
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name in pair_fields:
            value = [[list(k), v] for k, v in value.items()]
        fields[f.name] = value
    return {"schema": SCHEMA_VERSION, "type": cls.__name__, "fields": fields}


def _ext_default(obj: Any) -> Any:
    if type(obj) in _FIELD_NAMES:
        envelope = _record_to_wire(obj)
        return msgpack.ExtType(RECORD_EXT, msgpack.packb(envelope, default=_ext_default, use_bin_type=True))
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)  # sets travel as sorted lists (msgpack has no set)
    raise TypeError(f"cannot encode {type(obj).__name__} {obj!r} with msgpack")


def _record_from_wire(envelope: Any) -> Any:
    if not isinstance(envelope, dict) or not {"schema", "type", "fields"} <= envelope.keys():
        raise _WireError("not a storm-py record envelope")
    schema, type_name, fields = envelope["schema"], envelope["type"], envelope["fields"]
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise _WireError(f"invalid schema version {schema!r}")
    if schema > SCHEMA_VERSION:
        raise _WireError(f"written with record schema {schema}, this storm-py reads up to {SCHEMA_VERSION}")
    cls = _BY_NAME.get(type_name) if isinstance(type_name, str) else None
    if cls is None:
        raise _WireError(f"unknown record type {type_name!r}")
    if not isinstance(fields, dict):
        raise _WireError(f"{type_name} fields are not a map")
    known = _FIELD_NAMES[cls]
    kwargs = {k: v for k, v in fields.items() if k in known}
    unknown = set(fields) - known
    if unknown:
        # Same schema, newer writer that added optional fields: keep what we understand.
        log.debug("ignoring unknown %s fields %s", type_name, sorted(map(str, unknown)))
    try:
        for name in _PAIR_FIELDS.get(cls, frozenset()):
            if name in kwargs:
                pairs = kwargs[name]
                if not isinstance(pairs, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
                    raise _WireError(f"{type_name}.{name} is not a list of [key, value] pairs")
                kwargs[name] = dict(pairs)
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise _WireError(f"invalid {type_name}: {exc}") from None


def _ext_hook(code: int, data: bytes) -> Any:
    if code != RECORD_EXT:
        raise _WireError(f"unknown msgpack extension type {code}")
    return _record_from_wire(_unpack(data))


def _unpack(data: bytes) -> Any:
    # strict_map_key=False: LocalState values use int keys (ports) and msgpack refuses
    # non-str keys by default. The data comes from our own cluster, not from strangers.
    return msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=False, ext_hook=_ext_hook)


def encode_value(value: Any) -> bytes:
    """Any msgpack-able value, with records anywhere inside it."""
    return msgpack.packb(value, default=_ext_default, use_bin_type=True)


def decode_value(data: bytes, path: str) -> Any:
    """Inverse of encode_value; DecodeError(path, ...) on anything malformed."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError(path, f"expected bytes, got {type(data).__name__}")
    if not data:
        raise DecodeError(path, "empty data")
    try:
        return _unpack(bytes(data))
    except _WireError as exc:
        raise DecodeError(path, str(exc)) from None
    except (ValueError, TypeError, msgpack.exceptions.UnpackException) as exc:
        # Truncated or garbage bytes: msgpack raises ValueError subclasses (ExtraData,
        # FormatError, "incomplete input"); unhashable keys raise TypeError.
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise DecodeError(path, f"not valid msgpack ({detail})") from None


def encode_record(record: Any) -> bytes:
    if type(record) not in _FIELD_NAMES:
        raise TypeError(f"{type(record).__name__} is not a storm-py record")
    return encode_value(record)


def decode_record(data: bytes, path: str, expected: type[T]) -> T:
    """Decode one record of type `expected`; DecodeError naming `path` otherwise."""
    value = decode_value(data, path)
    if not isinstance(value, expected):
        raise DecodeError(path, f"expected a {expected.__name__}, found {type(value).__name__}")
    return value
