"""Unit tests for the in-process transport (executor/transport/inprocess.py): the new
connector/Sender interface, its bounds, rebinding, and the old send() kept for the worker."""

from __future__ import annotations

import pytest

from executor.transport import (
    BindError,
    InProcessHub,
    Receiver,
    Sender,
    Transport,
)

pytestmark = pytest.mark.timeout(60)

A = ("localhost", 6700, "topo-1")
B = ("localhost", 6701, "topo-1")


@pytest.fixture
def hub():
    return InProcessHub(capacity=4)


def test_implements_the_declared_interface(hub):
    t = hub.transport()
    r = t.bind(A)
    s = t.connector()
    try:
        assert isinstance(t, Transport)
        assert isinstance(r, Receiver)
        assert isinstance(s, Sender)
    finally:
        s.close()
        r.close()
        t.close()


def test_round_trip_in_order(hub):
    t = hub.transport()
    r = t.bind(A)
    s = t.connector()
    s.connect(A)
    assert s.is_connected(A)
    got = []
    for i in range(100):
        assert s.try_send(A, b"m%d" % i)
        got.append(r.recv(1.0))
    assert got == [b"m%d" % i for i in range(100)]
    assert r.recv(0) is None
    s.close()
    r.close()


def test_not_connected_until_connect_and_bind(hub):
    t = hub.transport()
    s = t.connector()
    assert not s.try_send(A, b"x")     # never connected
    s.connect(A)
    assert not s.is_connected(A)       # no receiver yet
    assert not s.try_send(A, b"x")
    r = t.bind(A)
    assert s.is_connected(A)
    assert s.try_send(A, b"x")
    assert r.recv(1.0) == b"x"
    s.disconnect(A)
    assert not s.is_connected(A)
    assert not s.try_send(A, b"y")
    assert r.recv(0) is None
    s.close()
    r.close()


def test_count_bound_refuses_then_accepts_after_recv(hub):
    t = hub.transport()
    r = t.bind(A)
    s = t.connector()
    s.connect(A)
    accepted = 0
    while s.try_send(A, b"%d" % accepted):
        accepted += 1
        assert accepted <= 4
    assert accepted == 4
    assert r.recv(0) == b"0"
    assert s.try_send(A, b"4")
    assert not s.try_send(A, b"5")
    assert [r.recv(0) for _ in range(4)] == [b"1", b"2", b"3", b"4"]
    s.close()
    r.close()


def test_byte_bound_and_a_large_payload_passes_an_empty_inbox():
    hub = InProcessHub(capacity=100, byte_capacity=1000)
    t = hub.transport()
    r = t.bind(A)
    s = t.connector()
    s.connect(A)
    assert s.try_send(A, b"a" * 600)
    assert not s.try_send(A, b"b" * 600)   # over the byte bound
    assert s.try_send(A, b"c" * 300)
    assert r.recv(0) == b"a" * 600
    assert r.recv(0) == b"c" * 300
    assert s.try_send(A, b"d" * 5000)      # larger than the bound, but the inbox is empty
    assert r.recv(0) == b"d" * 5000
    s.close()
    r.close()


def test_one_full_peer_does_not_refuse_another(hub):
    t = hub.transport()
    ra, rb = t.bind(A), t.bind(B)
    s = t.connector()
    s.connect(A)
    s.connect(B)
    while s.try_send(A, b"a"):
        pass
    assert s.try_send(B, b"b")
    assert rb.recv(0) == b"b"
    s.close()
    ra.close()
    rb.close()


def test_rebound_peer_is_reached_without_the_sender_doing_anything(hub):
    t = hub.transport()
    r = t.bind(A)
    s = t.connector()
    s.connect(A)
    assert s.try_send(A, b"before")
    r.close()
    assert not s.is_connected(A)
    assert not s.try_send(A, b"while-down")  # refused, not queued
    r2 = t.bind(A)
    assert s.is_connected(A)
    assert s.try_send(A, b"after")
    assert r2.recv(1.0) == b"after"
    assert r2.recv(0) is None               # nothing from before the restart
    s.close()
    r2.close()


def test_bind_on_a_held_address_raises_naming_it(hub):
    t = hub.transport()
    r = t.bind(A)
    with pytest.raises(BindError, match="address in use") as info:
        t.bind(A)
    assert repr(A) in str(info.value)
    r.close()
    r.close()  # idempotent
    t.bind(A).close()  # released


def test_closed_receiver_returns_none_at_once(hub):
    t = hub.transport()
    r = t.bind(A)
    r.close()
    assert r.recv(5.0) is None


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity"):
        InProcessHub(capacity=0)
