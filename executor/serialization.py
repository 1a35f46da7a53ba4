"""msgpack encoding of tuple batches between workers. No pickle on the wire.

An entry is (task_id, payload). A payload is a Tuple (user data) or a small control tuple
whose first element is one of the message kinds below (acker traffic).
"""

from __future__ import annotations

from typing import Any, Callable

import msgpack

from executor.tuple import Fields, Tuple

TUPLE = 0
ACKER_INIT = 1   # (ACKER_INIT, root, xor_of_edges, spout_task)   spout -> acker
ACKER_ACK = 2    # (ACKER_ACK, root, edge ^ ack_val)                bolt -> acker
ACKER_FAIL = 3   # (ACKER_FAIL, root)                               bolt -> acker
SPOUT_ACK = 4    # (SPOUT_ACK, root)                                acker -> spout
SPOUT_FAIL = 5   # (SPOUT_FAIL, root)                               acker -> spout

_CONTROL_LEN = {ACKER_INIT: 4, ACKER_ACK: 3, ACKER_FAIL: 2, SPOUT_ACK: 2, SPOUT_FAIL: 2}

Resolver = Callable[[int, str], "tuple[str, Fields]"]

_packer = msgpack.Packer(use_bin_type=True, autoreset=True)


class DecodeError(ValueError):
    """Bytes from the wire are not a storm-py batch."""


def pack_batch(entries: list) -> bytes:
    """A batch as one msgpack array of rows: [task, TUPLE, source_task, stream, values,
    anchors] (anchors: the root -> edge map as a msgpack map, or nil) or [task, *control]."""
    rows = []
    append = rows.append
    for task, p in entries:
        if type(p) is tuple:
            append([task, *p])
        else:
            append([task, TUPLE, p.source_task, p.source_stream, p.values, p.anchors_to_ids])
    return _packer.pack(rows)


def unpack_batch(data: bytes, resolve: Resolver) -> list:
    """Decode a batch; resolve(source_task, stream) gives the source component and fields."""
    try:
        rows = msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
    except (msgpack.UnpackException, ValueError) as exc:
        raise DecodeError(f"undecodable tuple batch ({len(data)} bytes): {exc}") from None
    if not isinstance(rows, list):
        raise DecodeError(f"tuple batch is a {type(rows).__name__}, not a list")
    out = []
    append = out.append
    cache: dict = {}
    for row in rows:
        if type(row) is not list or len(row) < 2:
            raise DecodeError(f"malformed tuple row {row!r}")
        try:
            kind = row[1]
            if kind == TUPLE:
                task, _kind, src, stream, values, a2i = row
                meta = cache.get((src, stream))
                if meta is None:
                    meta = cache[(src, stream)] = resolve(src, stream)
                if a2i is not None and type(a2i) is not dict:
                    raise DecodeError(f"malformed tuple row {row!r}: anchors are not a map")
                append((task, Tuple(values, src, stream, meta[0], meta[1], a2i or None)))
            else:
                if _CONTROL_LEN.get(kind) != len(row) - 1:
                    raise DecodeError(f"malformed control row {row!r}")
                append((row[0], tuple(row[1:])))
        except (ValueError, IndexError, TypeError, KeyError) as exc:
            if isinstance(exc, DecodeError):
                raise
            raise DecodeError(f"malformed tuple row {row!r}: {exc}") from None
    return out


# Types whose values never need a closer look (ints are range-checked in check_values).
FAST_TYPES = frozenset([str, float, bool, type(None), bytes])
# Values of these types have a small fixed size; str/bytes are measured only from LARGE_VALUE on.
SCALAR_TYPES = frozenset([float, bool, type(None)])
# A str/bytes value at least this long makes the emit path measure the tuple (size limit, byte
# bounds of the queues); shorter ones cost one len() call.
LARGE_VALUE = 1024
_TUPLE_OVERHEAD = 64  # rough per-tuple bytes besides its values (object, anchors, framing)
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1


def check_values(values: Any) -> str | None:
    """None when msgpack can carry every value, else a description of the first bad one."""
    return measure_values(values)[0]


def measure_values(values: Any) -> tuple[str | None, int]:
    """(problem, bytes): problem is None when msgpack can carry every value, else a description
    of the first bad one; bytes estimates the tuple's serialized size (exact for str/bytes)."""
    n = _TUPLE_OVERHEAD
    for v in values:
        t = type(v)
        if t is str:
            n += len(v) if v.isascii() else len(v.encode("utf-8", "surrogatepass"))
        elif t is bytes:
            n += len(v)
        elif t in SCALAR_TYPES:
            n += 9
        elif t is int:
            if not _INT_MIN <= v <= _INT_MAX:
                return f"integer {v} does not fit in 64 bits", n
            n += 9
        else:
            try:
                n += len(msgpack.packb(v, use_bin_type=True))
            except (TypeError, ValueError, OverflowError) as exc:
                return f"value {v!r:.200} of type {t.__name__} cannot be serialized ({exc})", n
    return None, n


def batch_bytes(batch: list) -> int:
    """Estimated bytes of a batch of (task, payload) entries; control payloads are small."""
    n = 0
    for _task, p in batch:
        if type(p) is tuple:
            n += 32
        else:
            n += measure_values(p.values)[1]
    return n


__all__ = ["pack_batch", "unpack_batch", "check_values", "measure_values", "batch_bytes", "DecodeError", "TUPLE", "ACKER_INIT",
           "ACKER_ACK", "ACKER_FAIL", "SPOUT_ACK", "SPOUT_FAIL"]
