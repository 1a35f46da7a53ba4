"""The fetcher's read-and-ack connection (executor/spouts/stream_wire.py) on a real Redis: replies
as redis-py's parser gives them, errors as redis-py's exception types naming what happened, a
server that stops answering ends the call within the timeout, and a password and db are used."""

from __future__ import annotations

import socket
import threading

import pytest
import redis.exceptions as rex

from executor.spouts.stream_wire import StreamWire
from executor.state.redis_client import RedisSettings

pytestmark = [pytest.mark.timeout(60), pytest.mark.redis]


def _settings(server, password=None, db=0, timeout=2.0) -> RedisSettings:
    return RedisSettings(server.host, server.port, db, password, "", timeout)


def test_commands_in_one_round_trip_replies_as_redis_py_parses_them(redis_server):
    wire = StreamWire(_settings(redis_server))
    wire.open()
    try:
        ids = wire.call([("XADD", "s", "*", "f", "caf\u00e9"), ("XADD", "s", "*", "f", b"\xff")])
        wire.call([("XGROUP", "CREATE", "s", "g", "0")])
        replies = wire.call([("XACK", "s", "g", "0-1"),
                             ("XREADGROUP", "GROUP", "g", "c", "COUNT", 10, "STREAMS", "s", ">")])
        assert replies[0] == 0
        [[stream, entries]] = replies[1]
        assert stream == "s" and [e[0] for e in entries] == ids
        # text, with bytes that are not UTF-8 kept as lone surrogates (what map_fields checks)
        assert entries[0][1] == ["f", "caf\u00e9"]
        assert entries[1][1] == ["f", b"\xff".decode("utf-8", "surrogateescape")]
        assert wire.call([("XACK", "s", "g", *ids)]) == [2]
        # a reply bigger than one receive
        big = "x" * 1000
        for _ in range(3):
            wire.call([("XADD", "s", "*", "f", big) for _ in range(200)])
        [[_, entries]] = wire.call([("XREADGROUP", "GROUP", "g", "c", "COUNT", 600, "STREAMS", "s", ">")])[0]
        assert len(entries) == 600 and all(e[1] == ["f", big] for e in entries)
    finally:
        wire.close()


def test_an_error_reply_is_raised_after_every_reply_is_read(redis_server):
    wire = StreamWire(_settings(redis_server))
    wire.open()
    try:
        with pytest.raises(rex.ResponseError, match="NOGROUP"):
            wire.call([("XREADGROUP", "GROUP", "nope", "c", "STREAMS", "missing", ">"), ("PING",)])
        assert wire.is_open and wire.call([("PING",)]) == ["PONG"]  # nothing left unread
    finally:
        wire.close()


def test_password_and_db_are_used(redis_server_factory):
    server = redis_server_factory(password="s3cret")
    wire = StreamWire(_settings(server, password="s3cret", db=3))
    wire.open()
    try:
        wire.call([("SET", "k", "v")])
    finally:
        wire.close()
    import redis

    client = redis.Redis(host=server.host, port=server.port, password="s3cret", db=3)
    try:
        assert client.get("k") == b"v"
    finally:
        client.close()
    wrong = StreamWire(_settings(server, password="wrong"))
    with pytest.raises(rex.ResponseError, match="WRONGPASS|invalid"):
        wrong.open()
    assert not wrong.is_open


def test_refused_connection_is_a_connection_error_naming_the_address():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    wire = StreamWire(RedisSettings("127.0.0.1", port, 0, None, "", 1.0))
    with pytest.raises(rex.ConnectionError, match=f"connecting to 127.0.0.1:{port}"):
        wire.open()


def test_a_server_that_stops_answering_ends_the_call_with_a_timeout():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept():  # accepts, reads nothing, answers nothing
        conn, _ = listener.accept()
        accepted.append(conn)
        done.wait(30)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    wire = StreamWire(RedisSettings("127.0.0.1", listener.getsockname()[1], 0, None, "", 0.3))
    try:
        wire.open()
        with pytest.raises(rex.TimeoutError, match="no answer within 0.3s"):
            wire.call([("PING",)])
        assert not wire.is_open
    finally:
        done.set()
        thread.join(10)
        for conn in accepted:
            conn.close()
        listener.close()
