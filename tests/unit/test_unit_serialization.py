"""Unit tests for executor/serialization.py: batch round trips, check_values, decode errors."""

from __future__ import annotations

import msgpack
import pytest

from executor.serialization import (
    ACKER_ACK,
    ACKER_FAIL,
    ACKER_INIT,
    SPOUT_ACK,
    SPOUT_FAIL,
    WIRE_VERSION,
    DecodeError,
    check_values,
    decode_batch,
    measure_values,
    pack_batch,
    unpack_batch,
)
from executor.tuple import Fields, Tuple

MAX_U64 = 2**64 - 1

STREAMS = {
    (3, "default"): ("split", Fields(["word", "count"])),
    (3, "errors"): ("split", Fields(["a", "b", "c", "d", "e", "f", "g", "h", "i"])),
    (9, "default"): ("spout", Fields(["sentence"])),
}


class Resolver:
    def __init__(self):
        self.calls: list[tuple[int, str]] = []

    def __call__(self, task, stream):
        self.calls.append((task, stream))
        return STREAMS[(task, stream)]


def _tuple(values, task=3, stream="default", anchors=None):
    comp, fields = STREAMS[(task, stream)]
    return Tuple(values, task, stream, comp, fields, anchors)


def test_tuple_round_trip_values_and_anchors():
    values = ["hello", 3]
    anchors = {MAX_U64: 2**63 + 5, 1: 0, 2**40: MAX_U64}
    t = _tuple(values, anchors=anchors)
    t.ack_val = 12345  # local bookkeeping: not carried on the wire
    resolve = Resolver()
    [(task, got)] = unpack_batch(pack_batch([(17, t)]), resolve)
    assert task == 17
    assert isinstance(got, Tuple)
    assert got.values == values
    assert got.anchors_to_ids == anchors
    assert got.source_task == 3 and got.source_stream == "default"
    assert got.source_component == "split" and got.fields == Fields(["word", "count"])
    assert got.get("count") == 3
    assert got.ack_val == 0
    assert not got.is_tick()


def test_tuple_round_trip_of_every_msgpack_type():
    values = ["caf\u00e9 \u4e2d", b"\x00\xffraw", -(2**63), MAX_U64, 1.5, None, True,
              [1, [2, {"k": [3]}]], {"nested": {"x": b"y"}, "n": None}]
    t = _tuple(values, stream="errors")
    [(_task, got)] = unpack_batch(pack_batch([(1, t)]), Resolver())
    assert got.values == values
    assert type(got.values[1]) is bytes and type(got.values[3]) is int


def test_tuple_values_become_lists():
    t = _tuple(("a", (1, 2)))
    [(_task, got)] = unpack_batch(pack_batch([(1, t)]), Resolver())
    assert got.values == ["a", [1, 2]]


@pytest.mark.parametrize("anchors", [None, {}])
def test_unanchored_tuple_round_trips_without_anchors(anchors):
    [(_task, got)] = unpack_batch(pack_batch([(2, _tuple(["x", 1], anchors=anchors))]), Resolver())
    assert not got.anchors_to_ids
    assert got.message_id == {}


@pytest.mark.parametrize("control", [
    (ACKER_INIT, MAX_U64, MAX_U64 - 1, 7),
    (ACKER_INIT, 0, 0, 1),
    (ACKER_ACK, MAX_U64, 2**63),
    (ACKER_FAIL, MAX_U64),
    (SPOUT_ACK, 123456789),
    (SPOUT_FAIL, MAX_U64),
])
def test_control_tuple_round_trip(control):
    [(task, got)] = unpack_batch(pack_batch([(4, control)]), Resolver())
    assert task == 4
    assert type(got) is tuple and got == control


def test_mixed_batch_keeps_order_between_two_tasks_and_resolves_each_source_once():
    entries = []
    for i in range(50):
        entries.append((i % 3 + 1, _tuple([f"w{i}", i], anchors={i + 1: MAX_U64 - i})))
        entries.append((10, (ACKER_ACK, i + 1, i)))
        entries.append((i % 2 + 1, _tuple([f"s{i}"], task=9)))
        if i % 10 == 0:  # a stream change between the same two tasks starts a new group
            entries.append((1, _tuple(list("abcdefghi"), stream="errors")))
    resolve = Resolver()
    columns, controls = decode_batch(pack_batch(entries), resolve)
    out = [e for c in columns for e in c] + controls
    assert len(out) == len(entries)

    def key(p):
        return "control" if type(p) is tuple else (p.source_task, tuple(p.values), p.source_stream,
                                                   tuple(sorted((p.anchors_to_ids or {}).items())))

    # Per (destination task, source task), the tuples come out in the order they went in.
    def per_pair(pairs):
        seen: dict = {}
        for task, p in pairs:
            seen.setdefault((task, "control" if type(p) is tuple else p.source_task), []).append(key(p))
        return seen

    assert per_pair(out) == per_pair(entries)
    assert [p for _t, p in controls] == [p for _t, p in entries if type(p) is tuple]
    assert sorted(set(resolve.calls)) == [(3, "default"), (3, "errors"), (9, "default")]
    assert len(resolve.calls) == 3  # cached per (task, stream)
    # One column per run of (task, source, stream): far fewer columns than tuples.
    assert len(columns) < 20
    assert all(c.anchors is None for c in columns if c.source_task == 9)  # unanchored: no anchor column


def test_a_column_is_one_batch_of_task_tuple_entries():
    entries = [(5, _tuple([f"w{i}", i])) for i in range(7)]
    [column], controls = decode_batch(pack_batch(entries), Resolver())
    assert controls == [] and len(column) == 7 and column.task == 5
    got = list(column)
    assert [t for t, _ in got] == [5] * 7
    assert [tup.values for _, tup in got] == [[f"w{i}", i] for i in range(7)]
    assert all(tup.source_component == "split" and tup.anchors_to_ids is None for _, tup in got)


def test_empty_batch():
    assert unpack_batch(pack_batch([]), Resolver()) == []


def test_unknown_source_stream_from_resolver_is_a_decode_error():
    data = pack_batch([(1, _tuple(["x", 1]))])

    def resolve(task, stream):
        raise KeyError(task)

    with pytest.raises(DecodeError):
        unpack_batch(data, resolve)


# ---------------------------------------------------------------- garbage


@pytest.mark.parametrize("data", [
    b"",
    b"\xc1",  # never-used msgpack byte
    b"\x92\x01",  # truncated array
    b"\x01\x02",  # extra data
    b"not msgpack at all \xff\xfe",
    msgpack.packb({"a": 1}),  # not a list
    msgpack.packb(5),
    msgpack.packb([[1]]),  # not [version, groups, controls]
    msgpack.packb([[], []]),  # no version
    msgpack.packb([WIRE_VERSION, [], [], []]),
    msgpack.packb([WIRE_VERSION, {}, []]),
    msgpack.packb([WIRE_VERSION, [[1, 3, "default", [["x", 1]]]], []]),  # group too short
    msgpack.packb([WIRE_VERSION, [[1, 3, "default", [["x", 1]], None, 7]], []]),  # group too long
    msgpack.packb([WIRE_VERSION, [[1, 3, "default", ["x", 1], None]], []]),  # values not lists
    msgpack.packb([WIRE_VERSION, [[1, 3, 7, [["x", 1]], None]], []]),  # stream not a string
    msgpack.packb([WIRE_VERSION, ["x", 3, "default", [["x", 1]], None]]),  # task not an int
    msgpack.packb([WIRE_VERSION, [[1, 3, "default", [["x", 1]], [{1: 2}, None]]], []]),  # anchors do not match
    msgpack.packb([WIRE_VERSION, [[1, 3, "default", [["x", 1]], [[1, 2]]]], []]),  # anchors not a map
    msgpack.packb([WIRE_VERSION, [[1, 3, "default", [["x", 1]], 5]], []]),
    msgpack.packb([WIRE_VERSION, [5], []]),  # group is not a list
    msgpack.packb([WIRE_VERSION, [], [5]]),  # control is not a list
    msgpack.packb([WIRE_VERSION, [], [["x", ACKER_FAIL, 1]]]),  # control task not an int
    pack_batch([(1, _tuple(["x", 1]))])[:-3],  # truncated real batch
])
def test_unpack_garbage_raises_decode_error(data):
    with pytest.raises(DecodeError):
        unpack_batch(data, Resolver())


def test_a_batch_of_another_wire_version_is_refused_naming_both():
    with pytest.raises(DecodeError, match=f"wire version {WIRE_VERSION + 1}; this worker reads version {WIRE_VERSION}"):
        unpack_batch(msgpack.packb([WIRE_VERSION + 1, [], []]), Resolver())


def test_every_batch_starts_with_the_wire_version():
    assert msgpack.unpackb(pack_batch([(1, _tuple(["x", 1]))]))[0] == WIRE_VERSION


def test_decode_error_is_a_value_error_with_description():
    with pytest.raises(ValueError) as info:
        unpack_batch(b"\xc1garbage", Resolver())
    assert isinstance(info.value, DecodeError)
    assert "batch" in str(info.value)


def test_unpack_row_that_is_a_string_raises_decode_error():
    with pytest.raises(DecodeError):
        unpack_batch(msgpack.packb([WIRE_VERSION, "ab", []]), Resolver())


@pytest.mark.parametrize("row", [[1, ACKER_ACK], [1, ACKER_INIT, 5, 6], [1, ACKER_FAIL], [1, SPOUT_ACK]])
def test_unpack_malformed_control_row_raises_decode_error(row):
    with pytest.raises(DecodeError):
        unpack_batch(msgpack.packb([[], [row]]), Resolver())


# ---------------------------------------------------------------- check_values


@pytest.mark.parametrize("values", [
    [],
    ["a", 1, 1.5, None, True, b"b"],
    [-(2**63), MAX_U64],
    [[1, [2, [3, {"k": [4, {"deep": b"x"}]}]]]],
    [{"a": [1, 2], "b": {"c": None}}],
    [(1, 2), bytearray(b"x")],
    ({"k": "v"},),
])
def test_check_values_accepts_msgpack_values(values):
    assert check_values(values) is None


@pytest.mark.parametrize("values,needle", [
    ([object()], "object"),
    (["ok", {1, 2}], "set"),
    ([2**64], str(2**64)),
    ([2**64 + 5], "64 bits"),
    ([-(2**63) - 1], "64 bits"),
    ([[1, {2}]], "list"),
    ([{"k": object()}], "dict"),
    ([[2**70]], "list"),
    ([1.5, complex(1, 1)], "complex"),
])
def test_check_values_flags_non_msgpack_values(values, needle):
    problem = check_values(values)
    assert isinstance(problem, str) and problem
    assert needle in problem


@pytest.mark.parametrize("record", [
    {"s": "the cow jumped over the moon"}, {"caf\u00e9": "\u20ac" * 40, "n": ""}, {}, {"a": "x" * 2000},
])
def test_a_dict_of_text_is_measured_without_packing_it_within_a_few_bytes(record):
    # A RedisStreamSpout's `fields`: measured per emit, so not packed for it (issue 33).
    problem, n = measure_values([record])
    packed = len(msgpack.packb(record, use_bin_type=True))
    assert problem is None
    assert packed <= n - 64 <= packed + 10 * len(record) + 5  # 64: the per-tuple overhead


@pytest.mark.parametrize("record, needle", [
    ({"k": "\ud800"}, "surrogates not allowed"), ({1: object()}, "object"), ({"k": {1, 2}}, "set"),
])
def test_a_dict_the_fast_measure_cannot_take_is_packed_and_its_problem_named(record, needle):
    problem, _ = measure_values([record])
    assert problem is not None and needle in problem, problem


def test_check_values_agrees_with_pack_batch():
    # whatever check_values accepts, pack_batch can carry
    ok = [[1, {"a": [b"x", None]}], "s", MAX_U64]
    assert check_values(ok) is None
    pack_batch([(1, _tuple(ok, stream="errors"))])
