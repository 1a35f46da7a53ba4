"""The multilang protocol as data (executor/multilang/protocol.py): Storm's JSON framing and
pystorm's msgpack framing fed in pieces, message parsing with Storm's defaults, log levels."""

from __future__ import annotations

import msgpack
import pytest

from executor.multilang import protocol as P

pytestmark = pytest.mark.timeout(30)


def test_json_framing_takes_messages_in_any_pieces_and_over_lines():
    f = P.JsonFraming()
    data = b'{"command": "emit",\n "tuple": ["a\\nb"]}\nend\n{"command": "sync"}\nend\n[1, 2]\nend\n'
    out = []
    for i in range(len(data)):
        out += f.feed(data[i:i + 1])
    assert out == [{"command": "emit", "tuple": ["a\nb"]}, {"command": "sync"}, [1, 2]]
    assert f.encode({"id": "1", "tuple": ["é"]}) == '{"id":"1","tuple":["é"]}\nend\n'.encode()


def test_json_framing_names_what_is_not_json():
    with pytest.raises(P.ProtocolError, match="not JSON.*hello"):
        P.JsonFraming().feed(b"hello\nend\n")


def test_msgpack_framing_takes_partial_messages():
    f = P.MsgpackFraming()
    data = msgpack.packb({"command": "emit", "tuple": ["x", 1]}) + msgpack.packb({"command": "sync"})
    assert f.feed(data[:5]) == []
    assert f.feed(data[5:]) == [{"command": "emit", "tuple": ["x", 1]}, {"command": "sync"}]
    assert msgpack.unpackb(f.encode([3, 4])) == [3, 4]


def test_the_serializer_setting():
    assert P.framing("json").name == "json" and P.framing("MSGPACK").name == "msgpack"
    assert P.framing("org.apache.storm.multilang.JsonSerializer").name == "json"
    with pytest.raises(ValueError, match="topology.multilang.serializer.*'xml'"):
        P.framing("xml")


def test_emit_defaults_are_storms():
    emit = P.parse({"command": "emit", "tuple": [1]}, "bolt")
    assert emit == P.Emit([1], "default", 0, (), None, True)  # need_task_ids absent: true
    emit = P.parse({"command": "emit", "tuple": [1], "anchors": "7", "need_task_ids": False, "stream": "s",
                    "task": 4, "id": 12}, "spout")
    assert (emit.anchors, emit.need_task_ids, emit.stream, emit.task, emit.msg_id) == (("7",), False, "s", 4, 12)


@pytest.mark.parametrize("msg, says", [
    ("text", "expected a message object"),
    ({"tuple": [1]}, "no 'command'"),
    ({"command": "explode"}, "unknown command 'explode'"),
    ({"command": "emit"}, "without a 'tuple' list"),
    ({"command": "emit", "tuple": [1], "task": "x"}, "task that is not an integer"),
    ({"command": "ack"}, "ack without an 'id'"),
    ({"command": "metrics", "params": 1}, "metrics without a 'name'"),
])
def test_broken_messages_are_named(msg, says):
    with pytest.raises(P.ProtocolError, match=says):
        P.parse(msg, "bolt")


def test_log_levels_are_storms_integers():
    assert [P.log_level({"level": n}) for n in range(5)] == [5, 10, 20, 30, 40]
    assert P.log_level({}) == 20 and P.log_level({"level": "x"}) == 20


def test_bolt_tuples_carry_all_five_keys():
    assert P.bolt_tuple("9", "split", "default", 3, ("a",)) == {"id": "9", "comp": "split", "stream": "default",
                                                                "task": 3, "tuple": ["a"]}
    assert P.heartbeat("1") == {"id": "1", "comp": None, "stream": "__heartbeat", "task": -1, "tuple": []}
