"""Storm's acking scenarios on a LocalCluster with FeederSpout (seed 000, 001)."""

import pytest
from local_helpers import AckBolt, HoldBolt, ReplayingSpout, Shared, acker_processed, poll

from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from executor.api import Bolt, TopologyBuilder

pytestmark = pytest.mark.timeout(60)


def _wait_acker_quiet(cluster, name, before, timeout=10.0):
    """Wait until the acker processed something new and then stopped changing: the same count
    on two consecutive polls with the topology idle. Raises (naming the counts) otherwise."""
    poll(lambda: acker_processed(cluster, name) > before, timeout=timeout,
         message=lambda: f"the acker of {name!r} to process the ack (still at {before})")
    seen = []

    def quiet() -> bool:
        seen.append(acker_processed(cluster, name) if cluster.is_idle(name) else None)
        return len(seen) >= 2 and seen[-1] is not None and seen[-1] == seen[-2]

    poll(quiet, timeout=timeout, interval=0.02,
         message=lambda: f"the acker of {name!r} to go quiet (processed counts {seen[-5:]}, None: busy)")


def test_bolt_that_acks_without_emitting():
    feeder = FeederSpout(["value"])
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("ack", AckBolt()).shuffle_grouping("feeder")
    with LocalCluster() as cluster:
        cluster.submit_topology("acks", {}, b.create_topology())
        feeder.feed([1], msg_id="m1")
        feeder.feed([2], msg_id="m2")
        poll(lambda: sorted(feeder.acked) == ["m1", "m2"], message="both acked")
        assert feeder.failed == []


def test_fan_out_completes_only_when_both_branches_are_done():
    feeder = FeederSpout(["value"])
    a, bb = Shared(), Shared()
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("a", HoldBolt(a)).shuffle_grouping("feeder")
    b.set_bolt("b", HoldBolt(bb)).shuffle_grouping("feeder")
    with LocalCluster() as cluster:
        cluster.submit_topology("fanout", {}, b.create_topology())
        feeder.feed([1], msg_id=1)
        poll(lambda: a.held and bb.held, message="both branches to receive the tuple")
        before = acker_processed(cluster, "fanout")
        a.run(lambda c, held: [c.ack(t) for t in held])
        _wait_acker_quiet(cluster, "fanout", before)
        assert feeder.acked == []  # branch b still holds its tuple
        bb.run(lambda c, held: [c.ack(t) for t in held])
        poll(lambda: feeder.acked == [1], message="tree to complete")


def test_aggregator_multi_anchoring_completes_all_roots_only_when_output_acked():
    feeder = FeederSpout(["value"])
    agg, down = Shared(), Shared()
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("agg", HoldBolt(agg, fields=["sum"])).global_grouping("feeder")
    b.set_bolt("down", HoldBolt(down)).shuffle_grouping("agg")
    with LocalCluster() as cluster:
        cluster.submit_topology("agg", {}, b.create_topology())
        for i in range(3):
            feeder.feed([i], msg_id=i)
        poll(lambda: len(agg.held) == 3, message="aggregator to hold three inputs")

        def aggregate(c, held):
            c.emit([sum(t.values[0] for t in held)], anchors=held)
            for t in held:
                c.ack(t)

        before = acker_processed(cluster, "agg")
        agg.run(aggregate)
        poll(lambda: down.held, message="aggregate to arrive downstream")
        _wait_acker_quiet(cluster, "agg", before)
        assert feeder.acked == []
        assert down.seen == [[3]]
        down.run(lambda c, held: [c.ack(t) for t in held])
        poll(lambda: sorted(feeder.acked) == [0, 1, 2], message="all three roots to complete")


def test_anchoring_twice_to_the_same_tuple():
    feeder = FeederSpout(["value"])
    first, down = Shared(), Shared()
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("first", HoldBolt(first)).shuffle_grouping("feeder")
    b.set_bolt("down", HoldBolt(down)).shuffle_grouping("first")
    with LocalCluster() as cluster:
        cluster.submit_topology("twice", {}, b.create_topology())
        feeder.feed(["x"], msg_id="x")
        poll(lambda: first.held, message="first bolt to get the tuple")

        def emit_twice_anchored(c, held):
            t = held[0]
            c.emit(["y"], anchors=[t, t])
            c.ack(t)

        before = acker_processed(cluster, "twice")
        first.run(emit_twice_anchored)
        poll(lambda: down.held, message="child downstream")
        _wait_acker_quiet(cluster, "twice", before)
        assert feeder.acked == []
        down.run(lambda c, held: [c.ack(t) for t in held])
        poll(lambda: feeder.acked == ["x"], message="tree anchored twice to complete")


def test_explicit_fail_reaches_spout_fail_with_the_message_id():
    feeder = FeederSpout(["value"])
    hold = Shared()
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("h", HoldBolt(hold)).shuffle_grouping("feeder")
    with LocalCluster() as cluster:
        cluster.submit_topology("fail", {}, b.create_topology())
        feeder.feed(["a"], msg_id="keep")
        feeder.feed(["b"], msg_id="drop")
        poll(lambda: len(hold.held) == 2, message="both held")

        def ack_a_fail_b(c, held):
            for t in held:
                (c.ack if t.values == ["a"] else c.fail)(t)

        hold.run(ack_a_fail_b)
        poll(lambda: feeder.failed == ["drop"] and feeder.acked == ["keep"], message="ack and fail")


class DropFirstDelivery(Bolt):
    """Never acks the first delivery of a value (so it times out); acks the replay."""

    def __init__(self, shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.seen = set()

    def execute(self, tup):
        v = tup.values[0]
        self.shared.seen.append(v)
        if v in self.seen:
            self.collector.ack(tup)
        else:
            self.seen.add(v)


def test_unacked_tuple_times_out_into_fail_and_the_replay_completes():
    shared, bolt_seen = Shared(), Shared()
    b = TopologyBuilder()
    b.set_spout("spout", ReplayingSpout(shared))
    b.set_bolt("drop", DropFirstDelivery(bolt_seen)).shuffle_grouping("spout")
    timeout = 1
    with LocalCluster() as cluster:
        cluster.submit_topology("timeout", {"topology.message.timeout.secs": timeout}, b.create_topology())
        poll(lambda: ReplayingSpout.count(shared, "open"), message="spout open")
        shared.commands.append(("m", ["v"]))
        poll(lambda: ReplayingSpout.count(shared, "ack"), timeout=15, message="replayed tuple to be acked")
        # Nobody calls fail(): the only way to the spout's fail() is the message timeout. Then
        # the replay is delivered again and acked: fail strictly before ack, once each.
        outcomes = [(e[0], e[1]) for e in shared.events if e[0] in ("fail", "ack")]
        assert outcomes == [("fail", "m"), ("ack", "m")]
        assert bolt_seen.seen == ["v", "v"]


def test_no_ackers_acks_at_emit():
    feeder = FeederSpout(["value"])
    hold = Shared()
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("h", HoldBolt(hold)).shuffle_grouping("feeder")
    with LocalCluster() as cluster:
        cluster.submit_topology("noack", {"topology.acker.executors": 0}, b.create_topology())
        feeder.feed([1], msg_id=7)
        poll(lambda: feeder.acked == [7], message="ack at emit")
        poll(lambda: hold.held, message="tuple delivered")


def test_acking_across_workers_with_serialization():
    feeder = FeederSpout(["word"])
    seen = Shared()
    b = TopologyBuilder()
    b.set_spout("feeder", feeder)
    b.set_bolt("ack", AckBolt(seen), 3).fields_grouping("feeder", ["word"])
    with LocalCluster() as cluster:
        cluster.submit_topology("multi", {"topology.workers": 3}, b.create_topology())
        assert len(cluster.workers("multi")) == 3
        for i in range(200):
            feeder.feed([f"w{i % 17}"], msg_id=i)
        poll(lambda: len(feeder.acked) == 200, timeout=20, message="200 acks across workers")
        assert sorted(feeder.acked) == list(range(200)) and feeder.failed == []


def test_max_spout_pending_is_never_exceeded():
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
