"""daemons.rpc.protocol: every request rejection, reply round trips, error kinds (pure, no sockets)."""

from __future__ import annotations

import msgpack
import pytest

from daemons.rpc import protocol as p
from executor.errors import AlreadyAliveError, InvalidTopologyError, NotAliveError

pytestmark = pytest.mark.timeout(30)


def pack(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def test_protocol_module_imports_no_zmq():
    source = open(p.__file__).read()
    assert "import zmq" not in source and "pickle" not in source


def test_request_round_trip():
    frame = p.encode_request("kill", {"name": "wc", "wait_secs": 3}, auth="s3cret")
    assert p.decode_request(frame) == p.Request("kill", {"name": "wc", "wait_secs": 3}, "s3cret")
    assert p.decode_request(p.encode_request("list")) == p.Request("list", {}, None)


def test_decode_accepts_a_memoryview():
    frame = p.encode_request("list")
    assert p.decode_request(memoryview(frame)).op == "list"


@pytest.mark.parametrize("frame, match", [
    (b"\xc1\xc1garbage", "not a valid msgpack frame"),
    (b"", "not a valid msgpack frame"),
    (pack({"v": 1, "op": "list", "args": {}})[:-3], "garbage or truncated"),
    (pack({"v": 1, "op": "list", "args": {}}) + b"\x01", "not a valid msgpack frame"),
    (pack([1, "list", {}]), "must be a map, got list"),
    (pack("list"), "must be a map, got str"),
    (pack({"op": "list", "args": {}}), "no protocol version"),
    (pack({"v": 2, "op": "list", "args": {}}), "unsupported protocol version 2"),
    (pack({"v": "1", "op": "list", "args": {}}), "unsupported protocol version '1'"),
    (pack({"v": True, "op": "list", "args": {}}), "unsupported protocol version True"),
    (pack({"v": 1, "args": {}}), "no operation name"),
    (pack({"v": 1, "op": 7, "args": {}}), "no operation name"),
    (pack({"v": 1, "op": "", "args": {}}), "no operation name"),
    (pack({"v": 1, "op": "kill", "args": ["wc"]}), "arguments of 'kill' must be a map"),
    (pack({"v": 1, "op": "kill", "args": {1: "wc"}}), "argument names of 'kill' must be strings"),
    (pack({"v": 1, "op": "kill", "args": {}, "auth": 42}), "'auth' of 'kill' must be a string"),
    (b"\x91" * 100_000, "not a valid msgpack frame"),  # nesting too deep
], ids=["garbage", "empty", "truncated", "trailing", "list", "str", "no-version", "version-2",
        "version-str", "version-bool", "no-op", "op-int", "op-empty", "args-list", "args-int-key",
        "auth-int", "deep-nesting"])
def test_decode_rejects_bad_requests(frame, match):
    with pytest.raises(p.BadRequestError, match=match) as info:
        p.decode_request(frame)
    assert info.value.kind == "bad-request"


def test_decode_rejects_oversize_before_parsing():
    frame = p.encode_request("submit", {"chunk": b"x" * 2000})
    with pytest.raises(p.TooLargeError, match=f"request of {len(frame)} bytes exceeds the limit of 1000"):
        p.decode_request(frame, max_bytes=1000)
    # A huge declared length in a small frame is a bad request, never a huge allocation.
    with pytest.raises(p.BadRequestError):
        p.decode_request(b"\xdd\xff\xff\xff\xff")


def test_decode_never_raises_anything_else():
    import random
    rng = random.Random(7)
    good = p.encode_request("rebalance", {"name": "wc", "workers": 3, "executors": {"split": 4}})
    for _ in range(3000):
        frame = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(len(frame))] = rng.randrange(256)
        frame = bytes(frame[: rng.randint(0, len(frame))])
        try:
            p.decode_request(frame)
        except (p.BadRequestError, p.TooLargeError):
            pass


def test_encode_request_refuses_unencodable_args_and_bad_ops():
    with pytest.raises(p.BadRequestError, match="arguments of 'kill' cannot be encoded"):
        p.encode_request("kill", {"name": object()})
    with pytest.raises(p.BadRequestError, match="operation name"):
        p.encode_request("")


def test_ok_reply_round_trip():
    assert p.decode_reply(p.encode_ok({"topologies": [{"id": "wc-1-2"}], 3: "int keys ok"})) == {
        "topologies": [{"id": "wc-1-2"}], 3: "int keys ok"}
    assert p.decode_reply(p.encode_ok(None)) is None


@pytest.mark.parametrize("kind, cls", [
    ("not-alive", NotAliveError), ("already-alive", AlreadyAliveError),
    ("invalid-topology", InvalidTopologyError), ("illegal-state", p.IllegalStateError),
    ("too-large", p.TooLargeError), ("bad-request", p.BadRequestError), ("auth", p.AuthError),
    ("internal", p.InternalError),
])
def test_error_kinds_round_trip_to_their_classes(kind, cls):
    with pytest.raises(cls) as info:
        p.decode_reply(p.encode_error(kind, f"the {kind} message"))
    assert str(info.value) == f"the {kind} message"
    assert p.error_kind(cls("x")) == kind
    assert isinstance(info.value, p.REMOTE_ERRORS)


def test_unknown_error_kind_is_kept():
    with pytest.raises(p.RpcError) as info:
        p.decode_reply(p.encode_error("quota", "over quota"))
    assert info.value.kind == "quota" and str(info.value) == "over quota"


def test_error_kind_of_other_exceptions():
    assert p.error_kind(ValueError("x")) is None
    assert p.error_kind(KeyError("x")) is None

    class Transition(RuntimeError):
        rpc_kind = "illegal-state"

    assert p.error_kind(Transition("cannot activate a killed topology")) == "illegal-state"
    assert p.error_message(ValueError("bad")) == "ValueError: bad"
    assert p.error_message(NotAliveError("topology 'x' is not alive")) == "topology 'x' is not alive"


@pytest.mark.parametrize("frame, match", [
    (b"\xc1", "not a valid msgpack frame"),
    (pack([1]), "not a map"),
    (pack({"v": 9, "ok": True, "result": 1}), "server speaks protocol version 9"),
    (pack({"v": 1, "ok": False}), "without an error kind"),
])
def test_bad_replies_raise_protocol_error(frame, match):
    with pytest.raises(p.ProtocolError, match=match):
        p.decode_reply(frame)


def test_arg_helper():
    args = {"name": "wc", "workers": 3, "flag": True}
    assert p.arg(args, "name", str) == "wc"
    assert p.arg(args, "wait", (int, float), 30) == 30
    with pytest.raises(p.BadRequestError, match="argument 'missing' is required"):
        p.arg(args, "missing", str)
    with pytest.raises(p.BadRequestError, match="argument 'name' must be int, got str"):
        p.arg(args, "name", int)
    with pytest.raises(p.BadRequestError, match="argument 'flag' must be int, got bool"):
        p.arg(args, "flag", int)
