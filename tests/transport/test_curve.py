"""CurveZMQ on real sockets: the worker transport and the RPC to Nimbus with the cluster's key
pair work as before; a peer without it, or with another key, gets nothing through, is refused
and the refusal is logged naming its address. Attackers here are real ZeroMQ clients."""

from __future__ import annotations

import contextlib
import logging

import pytest
import zmq
from testutil import wait_until
from zmq.utils import z85

from cluster_state.config import ConfigError
from daemons.rpc.client import RpcClient, client_from_conf
from daemons.rpc.protocol import UnreachableError
from daemons.rpc.server import RpcServer
from executor.transport import ZmqTransport
from executor.transport.curve import (
    PUBLIC_KEY,
    SECRET_KEY,
    CurveConfigError,
    CurveKeys,
    curve_keys,
    new_keys,
    zap_decision,
)

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"


def keys_of(conf) -> CurveKeys:
    keys = curve_keys(conf)
    assert keys is not None
    return keys


CLUSTER = keys_of(new_keys())
OTHER = keys_of(new_keys())


def test_keys_from_the_conf_are_checked_naming_the_key():
    assert curve_keys({}) is None
    pair = new_keys()
    assert "secret" not in repr(keys_of(pair)).replace("secret=<hidden>", "")
    with pytest.raises(CurveConfigError, match=SECRET_KEY):
        curve_keys({PUBLIC_KEY: pair[PUBLIC_KEY]})
    with pytest.raises(CurveConfigError, match=PUBLIC_KEY):
        curve_keys({PUBLIC_KEY: "short", SECRET_KEY: pair[SECRET_KEY]})
    with pytest.raises(CurveConfigError, match="not one key pair"):
        curve_keys({PUBLIC_KEY: pair[PUBLIC_KEY], SECRET_KEY: new_keys()[SECRET_KEY]})
    with pytest.raises(ConfigError, match="not one key pair"):  # as a client command reports it
        client_from_conf({PUBLIC_KEY: pair[PUBLIC_KEY], SECRET_KEY: new_keys()[SECRET_KEY]})


def test_zap_lets_in_the_clusters_key_only():
    raw = z85.decode(CLUSTER.public)
    assert zap_decision(b"CURVE", raw, CLUSTER.public) == (True, "OK")
    assert not zap_decision(b"CURVE", z85.decode(OTHER.public), CLUSTER.public)[0]
    assert not zap_decision(b"NULL", None, CLUSTER.public)[0]


def _recv(r, timeout: float = 10.0) -> bytes:
    got: list[bytes] = []

    def one() -> bool:
        m = r.recv(0.05)
        if m is not None:
            got.append(m)
        return bool(got)

    wait_until(one, timeout=timeout, message="a message")
    return got[0]


def impostor(kind: int, endpoint: str) -> zmq.Socket:
    """A real ZeroMQ client that knows the cluster's public key (it is no secret) but holds
    a key pair of its own."""
    public, secret = zmq.curve_keypair()
    sock = zmq.Context.instance().socket(kind)
    sock.linger = 0
    sock.curve_serverkey = CLUSTER.public
    sock.curve_publickey, sock.curve_secretkey = public, secret
    sock.connect(endpoint)
    return sock


def test_worker_links_carry_tuples_only_between_holders_of_the_key(caplog):
    caplog.set_level(logging.INFO)
    server = ZmqTransport(bind_host=HOST, curve=CLUSTER, linger_ms=0)
    peers = {name: ZmqTransport(bind_host=HOST, curve=keys, linger_ms=0)
             for name, keys in (("member", CLUSTER), ("other-cluster", OTHER), ("no-key", None))}
    receiver = server.bind((HOST, 0))
    senders = {name: t.connector() for name, t in peers.items()}
    addr = receiver.address
    attacker = impostor(zmq.PUSH, f"tcp://{HOST}:{addr[1]}")
    try:
        for s in senders.values():
            s.connect(addr)
        wait_until(lambda: senders["member"].try_send(addr, b"hello"), message="the member's link")
        assert _recv(receiver) == b"hello"
        with contextlib.suppress(zmq.Again):  # no connection comes up to take it
            attacker.send(b"forged by an impostor", zmq.NOBLOCK)
        wait_until(lambda: "refused a connection from 127.0.0.1: a CURVE key that is not the cluster's"
                   in caplog.text, timeout=15, message=lambda: f"the refusal logged:\n{caplog.text}")
        # a worker of another cluster (or with a wrong key) says why its link does not come up
        def sender_said_why() -> bool:
            senders["other-cluster"].is_connected(addr)  # the sender reads its link's events
            return f"the handshake with tcp://{HOST}:{addr[1]} failed" in caplog.text

        wait_until(sender_said_why, timeout=15,
                   message=lambda: f"the sender's side logged:\n{caplog.text}")
        for name in ("other-cluster", "no-key"):
            assert not senders[name].try_send(addr, b"forged " + name.encode())
            assert not senders[name].is_connected(addr)
        assert receiver.recv(0.3) is None
    finally:
        attacker.close(0)
        for s in senders.values():
            s.close()
        receiver.close()
        for t in (*peers.values(), server):
            t.close()


def test_nimbus_rpc_answers_holders_of_the_key_only(caplog):
    caplog.set_level(logging.INFO)
    server = RpcServer(HOST, 0, {"echo": lambda args: args}, name="curve-rpc", curve=CLUSTER)
    server.start()
    try:
        with RpcClient(HOST, server.port, timeout_secs=5, curve=CLUSTER) as member:
            assert member.call("echo", x=1) == {"x": 1}
        before = server.requests
        attacker = impostor(zmq.REQ, f"tcp://{HOST}:{server.port}")
        try:
            with contextlib.suppress(zmq.Again):
                attacker.send(b"forged", zmq.NOBLOCK)
            assert not attacker.poll(1000)  # no answer: the handshake was refused
        finally:
            attacker.close(0)
        for keys in (OTHER, None):
            with RpcClient(HOST, server.port, timeout_secs=1, curve=keys) as intruder:
                with pytest.raises(UnreachableError) as info:
                    intruder.call("echo", x=2)
                if keys is not None:
                    assert "storm.messaging.curve" in str(info.value)
        assert server.requests == before  # nothing of theirs was handled
        assert "refused a connection from 127.0.0.1: a CURVE key that is not the cluster's" in caplog.text
    finally:
        server.stop()
