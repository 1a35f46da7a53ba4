"""msgpack encoding of tuple batches between workers. No pickle on the wire.

What a worker sends is entries (task_id, payload): a payload is a Tuple (user data) or a small
control tuple whose first element is one of the message kinds below (acker traffic). On the wire
a batch is columnar, so that neither side handles a row per tuple:

    [version, groups, controls]
    version:  WIRE_VERSION (a batch of another version is refused, naming both)
    groups:   [[task, source_task, stream, [values, ...], anchors], ...]
    anchors:  nil when no tuple of the group is anchored, else one entry per tuple: its
              root -> edge map, or nil
    controls: [[task, kind, ...], ...]

A group holds consecutive tuples from one source task on one stream to one task, in emit order
(a stream change starts a new group), so the order between two tasks is kept as Storm keeps it.
The receiving side turns a group into one TupleColumn, dispatched to its executor's queue as
one batch; a Tuple is built only when the executor iterates the column.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import msgpack

from executor.tuple import Fields, Tuple

ACKER_INIT = 1   # (ACKER_INIT, root, xor_of_edges, spout_task)   spout -> acker
ACKER_ACK = 2    # (ACKER_ACK, root, edge ^ ack_val)                bolt -> acker
ACKER_FAIL = 3   # (ACKER_FAIL, root)                               bolt -> acker
SPOUT_ACK = 4    # (SPOUT_ACK, root)                                acker -> spout
SPOUT_FAIL = 5   # (SPOUT_FAIL, root)                               acker -> spout
CHECKPOINT_FAILED = 6  # (CHECKPOINT_FAILED, spout_task)  stateful spout -> checkpoint spout (exactly-once)
CHECKPOINT_WANTED = 7  # (CHECKPOINT_WANTED, spout_task)  stateful spout at max spout pending -> checkpoint spout

WIRE_VERSION = 1  # the first element of every batch (one byte on the wire)

_CONTROL_LEN = {ACKER_INIT: 4, ACKER_ACK: 3, ACKER_FAIL: 2, SPOUT_ACK: 2, SPOUT_FAIL: 2, CHECKPOINT_FAILED: 2,
                CHECKPOINT_WANTED: 2}

Resolver = Callable[[int, str], "tuple[str, Fields]"]

_packer = msgpack.Packer(use_bin_type=True, autoreset=True)


class DecodeError(ValueError):
    """Bytes from the wire are not a storm-py batch."""


class TupleColumn:
    """A received group of tuples for one task (one source task, one stream), iterated as
    (task, Tuple) entries like any batch in an executor's queue."""

    __slots__ = ("task", "source_task", "stream", "component", "fields", "values", "anchors")

    def __init__(self, task: int, source_task: int, stream: str, component: str, fields: Fields,
                 values: list, anchors: list | None):
        self.task = task
        self.source_task = source_task
        self.stream = stream
        self.component = component
        self.fields = fields
        self.values = values
        self.anchors = anchors

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        task, src, stream, comp, fields = self.task, self.source_task, self.stream, self.component, self.fields
        if self.anchors is None:
            for v in self.values:
                yield task, Tuple(v, src, stream, comp, fields, None)
        else:
            for v, a in zip(self.values, self.anchors):
                yield task, Tuple(v, src, stream, comp, fields, a or None)


def pack_batch(entries: Iterable) -> bytes:
    """(task, payload) entries as one columnar batch (see the module docstring)."""
    groups: list = []
    controls: list = []
    open_groups: dict = {}  # (task, source_task) -> its newest group
    last_key = None
    values = anchors = None
    for task, p in entries:
        if type(p) is tuple:
            controls.append([task, *p])
            continue
        src = p.source_task
        stream = p.source_stream
        if last_key is None or task != last_key[0] or src != last_key[1] or stream != last_key[2]:
            g = open_groups.get((task, src))
            if g is None or g[2] != stream:
                g = [task, src, stream, [], []]
                groups.append(g)
                open_groups[(task, src)] = g
            last_key = g
            values = g[3]
            anchors = g[4]
        values.append(p.values)
        anchors.append(p.anchors_to_ids)
    for g in groups:
        if not any(g[4]):  # nothing anchored (empty maps included): no column at all
            g[4] = None
    return _packer.pack([WIRE_VERSION, groups, controls])


def decode_batch(data: bytes, resolve: Resolver) -> tuple[list[TupleColumn], list]:
    """A batch as (tuple columns, control entries); resolve(source_task, stream) gives the
    source component and fields. DecodeError on anything that is not a storm-py batch."""
    try:
        batch = msgpack.unpackb(data, raw=False, strict_map_key=False, use_list=True)
    except (msgpack.UnpackException, ValueError) as exc:
        raise DecodeError(f"undecodable tuple batch ({len(data)} bytes): {exc}") from None
    if type(batch) is list and len(batch) == 3 and batch[0] != WIRE_VERSION and type(batch[0]) is int:
        raise DecodeError(f"tuple batch of wire version {batch[0]}; this worker reads version {WIRE_VERSION} "
                          f"(workers of different storm-py versions in one topology?)")
    if type(batch) is not list or len(batch) != 3 or type(batch[1]) is not list or type(batch[2]) is not list:
        raise DecodeError(f"a tuple batch is [{WIRE_VERSION}, groups, controls], not {_short(batch)}")
    columns = []
    cache: dict = {}
    for g in batch[1]:
        if type(g) is not list or len(g) != 5:
            raise DecodeError(f"malformed tuple group {_short(g)}")
        task, src, stream, values, anchors = g
        if type(task) is not int or type(src) is not int or type(stream) is not str or type(values) is not list:
            raise DecodeError(f"malformed tuple group {_short(g)}")
        for v in values:
            if type(v) is not list:
                raise DecodeError(f"malformed tuple group {_short(g)}: values {_short(v)} are not a list")
        if anchors is not None:
            if type(anchors) is not list or len(anchors) != len(values):
                raise DecodeError(f"malformed tuple group {_short(g)}: anchors do not match its tuples")
            for a in anchors:
                if a is not None and type(a) is not dict:
                    raise DecodeError(f"malformed tuple group {_short(g)}: anchors {_short(a)} are not a map")
        meta = cache.get((src, stream))
        if meta is None:
            try:
                meta = cache[(src, stream)] = resolve(src, stream)
            except KeyError as exc:
                raise DecodeError(f"tuples from unknown task {src} stream {stream!r}: {exc}") from None
        columns.append(TupleColumn(task, src, stream, meta[0], meta[1], values, anchors))
    controls = []
    for row in batch[2]:
        if type(row) is not list or len(row) < 2 or type(row[0]) is not int \
                or _CONTROL_LEN.get(row[1]) != len(row) - 1:
            raise DecodeError(f"malformed control row {_short(row)}")
        controls.append((row[0], tuple(row[1:])))
    return columns, controls


def unpack_batch(data: bytes, resolve: Resolver) -> list:
    """A batch as a flat list of (task, payload) entries: the tuples of each column in order,
    then the control entries (tests and tools; workers dispatch whole columns)."""
    columns, controls = decode_batch(data, resolve)
    return [entry for c in columns for entry in c] + controls


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


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
            if t is dict:  # a record of text fields (a RedisStreamSpout's `fields`): measured, not packed
                m = _text_dict_bytes(v)
                if m >= 0:
                    n += m
                    continue
            try:
                n += len(msgpack.packb(v, use_bin_type=True))
            except (TypeError, ValueError, OverflowError) as exc:
                return f"value {v!r:.200} of type {t.__name__} cannot be serialized ({exc})", n
    return None, n


def _text_dict_bytes(d: dict) -> int:
    """The msgpack size of a dict of str to str (within a few bytes), or -1 for any other dict
    (and for text msgpack cannot encode: the caller packs it to report the problem)."""
    n = 5
    for k, x in d.items():
        if type(k) is not str or type(x) is not str:
            return -1
        if k.isascii() and x.isascii():
            n += len(k) + len(x) + 10
        else:
            try:
                n += len(k.encode("utf-8")) + len(x.encode("utf-8")) + 10
            except UnicodeEncodeError:
                return -1
    return n


def batch_bytes(batch: list) -> int:
    """Estimated bytes of a batch of (task, payload) entries; control payloads are small."""
    n = 0
    for _task, p in batch:
        if type(p) is tuple:
            n += 32
        else:
            n += measure_values(p.values)[1]
    return n


__all__ = ["pack_batch", "decode_batch", "unpack_batch", "TupleColumn", "check_values", "measure_values", "batch_bytes", "DecodeError", "WIRE_VERSION", "ACKER_INIT",
           "ACKER_ACK", "ACKER_FAIL", "SPOUT_ACK", "SPOUT_FAIL", "CHECKPOINT_FAILED",
           "CHECKPOINT_WANTED"]
