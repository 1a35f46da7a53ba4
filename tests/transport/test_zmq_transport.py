"""ZmqTransport on real sockets (127.0.0.1, free ports): round trip, order, back-pressure with
exact counts, a receiver process killed with SIGKILL and restarted on the same port, connection
state, bind errors and port release. No ZooKeeper.

Threads: unless a test says otherwise, the test thread owns every receiver and sender it makes."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq
from testutil import wait_until

from executor.transport import BindError, Receiver, Sender, Transport, TransportError, ZmqTransport

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"
REPO = str(Path(__file__).resolve().parents[2])


@pytest.fixture
def transport():
    t = ZmqTransport(bind_host=HOST, hwm=16, linger_ms=200)
    yield t
    t.close()
    assert t.context.closed  # every receiver and sender was closed by its test


def _free_port(t: ZmqTransport) -> int:
    r = t.bind((HOST, 0))
    port = r.address[1]
    r.close()
    return port


def _recv_n(r, n: int, timeout: float = 10.0) -> list[bytes]:
    got: list[bytes] = []

    def more() -> bool:
        m = r.recv(0.05)
        if m is not None:
            got.append(m)
        return len(got) >= n

    wait_until(more, timeout=timeout, message=lambda: f"{n} messages, got {len(got)}")
    return got


def _send(s, addr, payload: bytes) -> None:
    wait_until(lambda: s.try_send(addr, payload), message=f"room to send to {addr}")


def test_round_trip_and_declared_interface(transport):
    r = transport.bind((HOST, 0))
    addr = r.address
    s = transport.connector()
    try:
        assert isinstance(transport, Transport)
        assert isinstance(r, Receiver)
        assert isinstance(s, Sender)
        s.connect(addr)
        wait_until(lambda: s.is_connected(addr), message="connection")
        assert s.try_send(addr, b"\x00\x01binary\xff")
        assert _recv_n(r, 1) == [b"\x00\x01binary\xff"]
        assert r.recv(0) is None
    finally:
        s.close()
        r.close()


def test_many_messages_in_order_per_peer(transport):
    r1, r2 = transport.bind((HOST, 0)), transport.bind((HOST, 0))
    s = transport.connector()
    n = 5000
    got = {r1.address: [], r2.address: []}
    try:
        for r in (r1, r2):
            s.connect(r.address)
            wait_until(lambda r=r: s.is_connected(r.address), message="connection")
        sent = {r.address: 0 for r in (r1, r2)}

        def step() -> bool:
            for r in (r1, r2):
                a = r.address
                while sent[a] < n and s.try_send(a, b"%d" % sent[a]):
                    sent[a] += 1  # a refused message is offered again: sent once, never skipped
                while (m := r.recv(0)) is not None:
                    got[a].append(m)
            return all(len(g) >= n for g in got.values())

        wait_until(step, timeout=30, interval=0.0005, message=lambda: f"{n} messages each: {sent}")
        assert r1.recv(0.05) is None and r2.recv(0.05) is None
        for r in (r1, r2):
            seq = [int(m) for m in got[r.address]]
            assert seq == list(range(n))  # in order, nothing lost or duplicated
    finally:
        s.close()
        r1.close()
        r2.close()


def _reader_and_sender(t: ZmqTransport, read, name: str):
    """A thread that owns a receiver bound on `t` (it runs read(receiver), then closes it), and
    a sender of this thread connected to it: (thread, sender, address)."""
    ports: queue.Queue = queue.Queue()

    def run() -> None:
        r = t.bind((HOST, 0))
        try:
            ports.put(r.address)
            read(r)
        finally:
            r.close()

    th = threading.Thread(target=run, name=name)
    th.start()
    s = t.connector()
    addr = ports.get(timeout=10)
    s.connect(addr)
    wait_until(lambda: s.is_connected(addr), message="connection")
    return th, s, addr


def test_backpressure_bounded_then_resumes_with_nothing_lost_or_duplicated():
    hwm, size, buf = 8, 10_000, 65536
    t = ZmqTransport(bind_host=HOST, hwm=hwm, sndbuf=buf, rcvbuf=buf, linger_ms=200)
    resume = threading.Event()
    stop = threading.Event()
    received: list[bytes] = []

    def read(r) -> None:  # only once resumed
        resume.wait(30)
        while not stop.is_set():
            m = r.recv(0.05)
            if m is not None:
                received.append(m)

    th, s, addr = _reader_and_sender(t, read, "test-zmq-reader")
    try:
        payload = b"p" * (size - 8)
        count = {"accepted": 0, "streak": 0}

        def offer() -> bool:
            if s.try_send(addr, b"%08d" % count["accepted"] + payload):
                count["accepted"] += 1
                count["streak"] = 0
                assert count["accepted"] < 1000, "try_send never refused: memory is not bounded"
                return True
            count["streak"] += 1
            return False

        # Offer until refused 50 times in a row over a while: the receiver's owner is not reading.
        wait_until(lambda: not offer() and count["streak"] >= 50, interval=0.002, message="refusals")
        accepted = count["accepted"]
        # hwm on each side plus what the kernel buffers (Linux doubles SO_SNDBUF/SO_RCVBUF).
        assert accepted <= 2 * hwm + 4 * buf // size + 8, f"{accepted} payloads accepted by a receiver not reading"
        resume.set()
        for _ in range(100):
            wait_until(offer, interval=0.001, message="try_send accepting again")
        more = count["accepted"] - accepted
        total = accepted + more
        wait_until(lambda: len(received) >= total, message=lambda: f"{total} messages, got {len(received)}")
        stop.set()
        th.join(10)
        assert [int(m[:8]) for m in received] == list(range(total))  # exactly once, in order
    finally:
        resume.set()
        stop.set()
        th.join(10)
        s.close()
        t.close()


def test_a_receiver_that_reads_slowly_for_seconds_keeps_its_link_and_the_order():
    # A busy worker reads its links slowly for seconds (a long checkpoint alignment), so a
    # sender's data waits for seconds in the socket buffers. ZeroMQ's heartbeats travel behind
    # that data: with them the sender took such a link for dead after their 6 s timeout and
    # made it again, and the receiver got the two connections' payloads interleaved. TCP
    # keepalive is answered by the kernel whatever the reader does.
    buf = 1 << 20  # Linux doubles it: ~4 MB between the two ends, ~10 s at the reader's pace
    t = ZmqTransport(bind_host=HOST, hwm=4, linger_ms=200, sndbuf=buf, rcvbuf=buf)
    stop = threading.Event()
    received: list[bytes] = []
    slow_until = time.monotonic() + 9.0

    def read(r) -> None:  # a payload every 50 ms for 9 s, then all it can
        while not stop.is_set():
            m = r.recv(0.05)
            if m is not None:
                received.append(m)
                if time.monotonic() < slow_until:
                    time.sleep(0.05)

    th, s, addr = _reader_and_sender(t, read, "test-zmq-slow-reader")
    try:
        sent = 0
        while time.monotonic() < slow_until:  # offered all through the slow reading
            if s.try_send(addr, b"%08d" % sent + b"p" * 20_000):
                sent += 1
            else:
                time.sleep(0.005)
        assert s.is_connected(addr), "the link was taken for dead while its reader was slow"
        wait_until(lambda: len(received) >= sent, timeout=30,
                   message=lambda: f"{sent} messages, got {len(received)}")
        assert [int(m[:8]) for m in received] == list(range(sent))  # nothing lost, none twice, in order
    finally:
        stop.set()
        th.join(10)
        s.close()
        t.close()


_CHILD = """
import sys
from executor.transport import ZmqTransport
t = ZmqTransport(bind_host=sys.argv[1])
r = t.bind((sys.argv[1], int(sys.argv[2])))
print("bound", r.address[1], flush=True)
while True:
    m = r.recv(0.5)
    if m is not None:
        print(m.decode(), flush=True)
"""


class _Child:
    """A receiver process; its stdout lines are collected by a reader thread."""

    def __init__(self, port: int):
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, HOST, str(port)], cwd=REPO,
                                     stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": REPO})
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, name=f"test-child-out-{self.proc.pid}")
        self._reader.start()
        bound = wait_until(lambda: next((x for x in self.lines if x.startswith("bound ")), None)
                           or self.proc.poll() is not None, message="child receiver bound")
        assert isinstance(bound, str), f"child exited with {self.proc.returncode}"
        self.port = int(bound.split()[1])

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def messages(self) -> list[str]:
        return [x for x in self.lines if not x.startswith("bound ")]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL, by this child's pid
        self.proc.wait(10)
        self._reader.join(10)
        self.proc.stdout.close()


@pytest.mark.cluster  # starts a process
def test_receiver_killed_and_restarted_on_the_same_port_is_reached_by_the_same_sender(transport):
    child = _Child(0)
    addr = (HOST, child.port)
    s = transport.connector()
    children = [child]
    try:
        s.connect(addr)
        wait_until(lambda: s.is_connected(addr), message="connection to the first receiver")
        for i in range(10):
            _send(s, addr, b"before-%d" % i)
        wait_until(lambda: len(child.messages()) == 10, message=lambda: f"10 messages: {child.messages()}")
        assert child.messages() == ["before-%d" % i for i in range(10)]

        child.kill()
        wait_until(lambda: not s.is_connected(addr), message="the sender to see the receiver die")
        refused = [s.try_send(addr, b"down-%d" % i) for i in range(500)]
        assert not any(refused)  # refused rather than queued for a dead peer

        child = _Child(addr[1])
        children.append(child)
        wait_until(lambda: s.is_connected(addr), message="reconnection to the restarted receiver")
        for i in range(10):
            _send(s, addr, b"after-%d" % i)
        wait_until(lambda: len(child.messages()) == 10, message=lambda: f"10 messages: {child.messages()}")
        assert child.messages() == ["after-%d" % i for i in range(10)]  # nothing from the outage
    finally:
        s.close()
        for c in children:
            c.kill()


def test_is_connected_false_before_the_peer_exists(transport):
    port = _free_port(transport)
    addr = (HOST, port)
    s = transport.connector()
    r = None
    try:
        assert not s.is_connected(addr)  # not even asked to connect
        s.connect(addr)
        s.connect(addr)  # idempotent
        assert not s.is_connected(addr)
        assert not s.try_send(addr, b"nobody there")
        r = transport.bind(addr)
        wait_until(lambda: s.is_connected(addr), message="connection once the peer bound")
        _send(s, addr, b"hello")
        assert _recv_n(r, 1) == [b"hello"]  # the refused message was never queued
        assert r.recv(0) is None
        s.disconnect(addr)
        assert not s.is_connected(addr)
        assert not s.try_send(addr, b"after disconnect")
    finally:
        s.close()
        if r is not None:
            r.close()


def test_bind_on_a_taken_port_names_host_and_port(transport):
    r = transport.bind((HOST, 0))
    try:
        with pytest.raises(BindError) as info:
            transport.bind((HOST, r.address[1]))
        assert f"{HOST}:{r.address[1]}" in str(info.value)
        assert "address already in use" in str(info.value)
    finally:
        r.close()


def test_close_releases_the_port(transport):
    port = _free_port(transport)
    for _ in range(20):  # zmq closes listeners asynchronously: close() must wait for it
        r = transport.bind((HOST, port))
        assert r.address == (HOST, port)
        r.close()
        r.close()  # idempotent


def test_bad_addresses_and_options_are_refused(transport):
    s = transport.connector()
    try:
        for bad in ("tcp://127.0.0.1:1", (HOST,), (HOST, 0), (HOST, 70000), ("", 1), (HOST, "1")):
            with pytest.raises(TransportError, match="host, port"):
                s.connect(bad)
        assert not s.try_send((HOST, 1), b"x")  # never connected
    finally:
        s.close()
    with pytest.raises(TransportError, match="wildcard"):
        ZmqTransport(bind_host="0.0.0.0")
    with pytest.raises(TransportError, match="hwm"):
        ZmqTransport(hwm=0)


def test_shared_context_is_left_open(transport):
    ctx = zmq.Context()
    try:
        t = ZmqTransport(ctx, bind_host=HOST)
        r = t.bind((HOST, 0))
        r.close()
        t.close()
        assert not ctx.closed
    finally:
        ctx.term()


def test_an_absent_or_full_peer_does_not_refuse_another(transport):
    absent = (HOST, _free_port(transport))
    full, live = transport.bind((HOST, 0)), transport.bind((HOST, 0))
    s = transport.connector()
    try:
        for addr in (absent, full.address, live.address):
            s.connect(addr)
        wait_until(lambda: s.is_connected(full.address) and s.is_connected(live.address), message="connections")
        filled = {"n": 0, "streak": 0}

        def fill() -> bool:  # `full` is never read: offer until it refuses 20 times in a row
            while s.try_send(full.address, b"x" * 1000):
                filled["n"] += 1
                filled["streak"] = 0
                assert filled["n"] < 100_000, "a peer that never reads kept accepting"
            filled["streak"] += 1
            return filled["streak"] >= 20

        wait_until(fill, interval=0.001, message="the unread peer to refuse")
        assert not s.try_send(absent, b"a")
        _send(s, live.address, b"b")
        assert _recv_n(live, 1) == [b"b"]
    finally:
        s.close()
        full.close()
        live.close()
