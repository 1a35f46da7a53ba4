"""Flow control under load: stream cycles, timeouts while back-pressured, byte-bounded queues, the
spout executor's pending map under max spout pending. These inspect in-process executors, so
they stay local; tests/scenarios checks the behaviour on both LocalCluster and a dev cluster."""

from __future__ import annotations

import logging
import threading

import pytest
from local_helpers import HoldBolt, ReplayingSpout, Shared, poll

from daemons.local import LocalCluster
from executor.api import Bolt, Spout, TopologyBuilder

pytestmark = pytest.mark.timeout(90)


class NumberSpout(Spout):
    """Emits msg ids 0..total-1 once each, replays failed ones, records acks and fails."""

    def __init__(self, shared: Shared, total: int, payload_bytes: int = 0):
        self.shared = shared
        self.total = total
        self.payload_bytes = payload_bytes

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "round", "payload"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.next = 0
        self.replay: list[int] = []
        self.shared.acked = set()
        self.shared.failed = 0

    def next_tuple(self):
        if self.replay:
            n = self.replay.pop()
        elif self.next < self.total:
            n = self.next
            self.next += 1
        else:
            return
        self.collector.emit([n, 0, b"x" * self.payload_bytes], msg_id=n)

    def ack(self, msg_id):
        with self.shared.lock:
            self.shared.acked.add(msg_id)

    def fail(self, msg_id):
        with self.shared.lock:
            self.shared.failed += 1
        self.replay.append(msg_id)


class RetryBolt(Bolt):
    """Sends each tuple round the cycle (to 'again') until it has gone round `rounds` times."""

    def __init__(self, rounds: int):
        self.rounds = rounds

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "round", "payload"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        n, rnd, payload = tup.values
        if rnd < self.rounds:
            self.collector.emit([n, rnd + 1, payload], anchors=tup)
        self.collector.ack(tup)


class PassBolt(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["n", "round", "payload"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit(list(tup.values), anchors=tup)
        self.collector.ack(tup)


def _cycle_topology(shared, total, rounds=2):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(shared, total))
    b.set_bolt("retry", RetryBolt(rounds), 2).shuffle_grouping("numbers").shuffle_grouping("again")
    b.set_bolt("again", PassBolt(), 2).shuffle_grouping("retry")
    return b.create_topology()


def test_cycle_is_accepted_with_a_warning_naming_it(caplog):
    with caplog.at_level(logging.WARNING, logger="executor.topology"):
        topo = _cycle_topology(Shared(), 1)
    assert topo.cycles == ["again -> retry -> again"]
    assert any("again -> retry -> again" in r.getMessage() and "topology.max.spout.pending" in r.getMessage()
               for r in caplog.records)


def test_bounded_cycle_completes_under_back_pressure_with_max_spout_pending():
    # Queues far smaller than the trees in flight: every queue on the cycle fills. Storm deadlocks
    # here; with max spout pending the executors on the cycle keep consuming and it completes.
    shared = Shared()
    total = 3000
    conf = {"topology.executor.receive.buffer.size": 16, "topology.producer.batch.size": 4,
            "topology.max.spout.pending": 500, "topology.message.timeout.secs": 60}
    with LocalCluster() as cluster:
        cluster.submit_topology("cycle", conf, _cycle_topology(shared, total))
        poll(lambda: len(getattr(shared, "acked", ())) == total, timeout=60,
             message=lambda: f"every message acked (acked {len(getattr(shared, 'acked', ()))} of {total}, "
                             f"failed {getattr(shared, 'failed', 0)}, stats {cluster.component_stats('cycle')})")
        assert cluster.died("cycle") == []
        # Nothing timed out: the cycle never stalled long enough for a 60 s timeout.
        assert shared.failed == 0


class GateBolt(Bolt):
    """Blocks in execute until the test opens the gate, then acks everything."""

    def __init__(self, shared: Shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.shared.gate.wait(60)
        self.collector.ack(tup)


class TickCountingPass(PassBolt):
    def __init__(self, shared: Shared):
        self.shared = shared

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 0.1}

    def execute(self, tup):
        if tup.is_tick():
            with self.shared.lock:
                self.shared.ticks += 1
            return
        super().execute(tup)


# Looks inside the in-process executor (its pending emits); the same behaviour seen from the
# components, on LocalCluster and on a dev cluster: tests/scenarios/test_ticks.py.
def test_back_pressured_executors_keep_processing_ticks_and_timeouts_fire():
    shared = Shared()
    shared.gate = threading.Event()
    shared.ticks = 0
    total = 400
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(shared, total))
    b.set_bolt("pass", TickCountingPass(shared)).shuffle_grouping("numbers")
    b.set_bolt("gate", GateBolt(shared)).shuffle_grouping("pass")
    conf = {"topology.executor.receive.buffer.size": 8, "topology.producer.batch.size": 2,
            "topology.message.timeout.secs": 1}
    with LocalCluster() as cluster:
        try:
            cluster.submit_topology("bp-timeouts", conf, b.create_topology())
            execs = {ex.component_id: ex for w in cluster.workers("bp-timeouts") for ex in w.executors}
            poll(lambda: execs["pass"].outbox.pending_emits, timeout=20, message="the pass bolt to be back-pressured")
            ticks = shared.ticks
            # While 'pass' stays blocked on the gate's full queue it still executes its ticks...
            poll(lambda: shared.ticks >= ticks + 3, timeout=20,
                 message=lambda: f"ticks while back-pressured (saw {shared.ticks - ticks})")
            # (its pending emits flicker empty whenever the gate's queue takes a batch: poll)
            poll(lambda: execs["pass"].outbox.pending_emits, timeout=20,
                 message="the pass bolt still back-pressured after its ticks")
            # ...and the spout's message timeouts fire (rotation on its own system ticks).
            poll(lambda: shared.failed > 0, timeout=20, message="a timeout while back-pressured")
        finally:
            shared.gate.set()
        # Once the gate opens everything drains, and replays make every message acked.
        poll(lambda: len(shared.acked) == total, timeout=60,
             message=lambda: f"all acked after the gate opened ({len(shared.acked)} of {total})")
        assert cluster.died("bp-timeouts") == []


class SlowBigBolt(Bolt):
    def __init__(self, shared: Shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.shared.gate.wait(0.02)  # slow consumer
        self.collector.ack(tup)


def test_queues_are_bounded_in_bytes_for_large_tuples():
    shared = Shared()
    shared.gate = threading.Event()
    total = 150
    tuple_bytes = 256 * 1024
    byte_bound = 1024 * 1024
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(shared, total, payload_bytes=tuple_bytes))
    # The bolt waits in execute: on a thread of its own, so that the spout fills its queue meanwhile
    # (on the shared thread the spout would only run between the bolt's batches).
    b.set_bolt("slow", SlowBigBolt(shared)).shuffle_grouping("numbers").add_configuration(
        "topology.executor.thread.mode", "dedicated")
    conf = {"topology.executor.receive.buffer.bytes": byte_bound, "topology.message.timeout.secs": 60}
    with LocalCluster() as cluster:
        cluster.submit_topology("bytes", conf, b.create_topology())
        execs = {ex.component_id: ex for w in cluster.workers("bytes") for ex in w.executors}
        slow = execs["slow"]
        most = 0

        def done():
            nonlocal most
            most = max(most, slow.queue.nbytes)
            return len(getattr(shared, "acked", ())) == total

        poll(done, timeout=60, interval=0.005,
             message=lambda: f"all acked ({len(getattr(shared, 'acked', ()))} of {total})")
        # The count bound alone (32768 entries) would have let all 150 tuples (~38 MB) queue up.
        # An empty queue takes any one batch; after that the byte bound holds.
        assert 0 < most <= byte_bound + 2 * (tuple_bytes + 1024), most
        assert cluster.died("bytes") == []


def test_spout_executor_pending_map_never_exceeds_max_spout_pending():
    # The executor's own counters (emitted, its pending map) at every step; what the spout sees
    # (acks, emits) is tests/scenarios/test_acking.py::test_max_spout_pending_is_never_exceeded.
    shared, hold = Shared(), Shared()
    limit = 3
    b = TopologyBuilder()
    b.set_spout("spout", ReplayingSpout(shared))
    b.set_bolt("h", HoldBolt(hold)).shuffle_grouping("spout")
    with LocalCluster() as cluster:
        cluster.submit_topology("msp", {"topology.max.spout.pending": limit}, b.create_topology())
        for i in range(10):
            shared.commands.append((i, [i]))
        poll(lambda: len(hold.held) == limit, message="limit reached")
        spout_ex = [ex for w in cluster.workers("msp") for ex in w.executors if ex.component_id == "spout"][0]
        # The spout keeps looping while at the limit (it goes on to process the acks below) but
        # emits nothing more: at every step, emitted - acked stays within the limit.
        assert spout_ex.emitted == limit and spout_ex.pending.size() == limit
        acked = 0
        while acked < 10:
            held_now = len(hold.held)
            assert held_now - acked <= limit
            assert spout_ex.emitted - ReplayingSpout.count(shared, "ack") <= limit
            hold.run(lambda c, held, k=acked, n=held_now: [c.ack(t) for t in held[k:n]])
            poll(lambda n=held_now: ReplayingSpout.count(shared, "ack") >= n, message="acks")
            acked = held_now
            assert spout_ex.pending.size() <= limit
            assert spout_ex.emitted - ReplayingSpout.count(shared, "ack") <= limit
            if acked < 10:
                poll(lambda a=acked: len(hold.held) > a, message="spout to refill up to the limit")
        assert len(hold.held) == 10
