"""Numbered links (executor/transport/sequenced.py): exactly-once topologies see a payload lost
between two live workers. Over the in-process transport, one sender per thread as in a worker."""

from __future__ import annotations

from executor.transport.inprocess import InProcessHub, InProcessTransport
from executor.transport.sequenced import HEADER_BYTES, LinkGap, SequencedTransport, next_on_link


def test_numbers_that_follow_on_are_no_gap_and_a_skip_or_a_late_start_is():
    last: dict[int, int] = {}
    assert [next_on_link(last, 7, n) for n in range(3)] == [None, None, None]
    gap = next_on_link(last, 7, 5)
    assert isinstance(gap, LinkGap) and (gap.expected, gap.got) == (3, 5) and "3..4" in str(gap)
    assert next_on_link(last, 7, 6) is None  # counting goes on from the skip
    assert next_on_link(last, 9, 0) is None  # a new sender (a restarted worker) starts at 0
    assert next_on_link(last, 11, 4) is not None  # ... else its first payloads were lost


class _DroppingTransport(InProcessTransport):
    """Its senders take payload number `drop` and lose it (a connection that broke)."""

    def __init__(self, drop):
        super().__init__(InProcessHub())
        self.drop = drop

    def connector(self):
        inner, drop = super().connector(), self.drop
        sent = [0]
        real = inner.try_send

        def try_send(address, payload):
            sent[0] += 1
            return True if sent[0] - 1 == drop else real(address, payload)

        inner.try_send = try_send
        return inner


def _link(drop=None):
    gaps: list[LinkGap] = []
    transport = SequencedTransport(_DroppingTransport(drop), gaps.append)
    receiver = transport.bind("w2")
    sender = transport.connector()
    sender.connect("w2")
    return transport, receiver, sender, gaps


def test_payloads_arrive_as_sent_and_a_lost_one_is_reported_once():
    transport, receiver, sender, gaps = _link()
    try:
        for i in range(5):
            assert sender.try_send("w2", b"batch-%d" % i)
        assert [receiver.recv(1.0) for _ in range(5)] == [b"batch-%d" % i for i in range(5)]
        assert gaps == []
    finally:
        sender.close(), receiver.close(), transport.close()

    transport, receiver, sender, gaps = _link(drop=2)
    try:
        for i in range(5):
            assert sender.try_send("w2", b"batch-%d" % i)
        got = [receiver.recv(1.0) for _ in range(4)]
        assert got == [b"batch-0", b"batch-1", b"batch-3", b"batch-4"]
        assert len(gaps) == 1 and (gaps[0].expected, gaps[0].got) == (2, 3)
    finally:
        sender.close(), receiver.close(), transport.close()


def test_a_payload_not_taken_keeps_its_number_for_the_next_try():
    inner = InProcessTransport(InProcessHub())
    transport = SequencedTransport(inner, lambda gap: None)
    sender = transport.connector()
    try:
        assert not sender.try_send("nobody", b"x")  # not bound: refused, not counted
        receiver = inner.bind("nobody")  # the raw payload, header and all
        sender.connect("nobody")
        assert sender.try_send("nobody", b"x")
        raw = receiver.recv(1.0)
        assert int.from_bytes(raw[8:HEADER_BYTES], "little") == 0 and raw[HEADER_BYTES:] == b"x"
        receiver.close()
    finally:
        sender.close(), transport.close()
