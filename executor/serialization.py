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
    rows = []
    append = rows.append
    for task, p in entries:
        if type(p) is tuple:
            append([task, *p])
        else:
            a2i = p.anchors_to_ids
            flat = None
            if a2i:
                flat = []
                for root, edge in a2i.items():
                    flat.append(root)
                    flat.append(edge)
            append([task, TUPLE, p.source_task, p.source_stream, p.values, flat])
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
    cache: dict = {}
    for row in rows:
        if type(row) is not list or len(row) < 2:
            raise DecodeError(f"malformed tuple row {row!r}")
        try:
            task, kind = row[0], row[1]
            if kind == TUPLE:
                src, stream, values, flat = row[2], row[3], row[4], row[5]
                key = (src, stream)
                meta = cache.get(key)
                if meta is None:
                    meta = cache[key] = resolve(src, stream)
                a2i = None
                if flat:
                    a2i = {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}
                out.append((task, Tuple(values, src, stream, meta[0], meta[1], a2i)))
            else:
                if _CONTROL_LEN.get(kind) != len(row) - 1:
                    raise DecodeError(f"malformed control row {row!r}")
                out.append((task, tuple(row[1:])))
        except (IndexError, TypeError, KeyError) as exc:
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
