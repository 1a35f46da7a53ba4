"""LocalCluster lifecycle: activation, back-pressure, errors, validation, helpers. (Ticks, acking
and groupings run on LocalCluster and on a dev cluster in tests/scenarios.)"""

import collections
import threading
import time

import pytest
from local_helpers import AckBolt, HoldBolt, ReplayingSpout, Shared, poll

from daemons.local import LocalCluster
from daemons.testing import FeederSpout, complete_topology
from executor.api import (
    AlreadyAliveError,
    BasicBolt,
    Bolt,
    InvalidTopologyError,
    Spout,
    TopologyBuilder,
)
from executor.errors import ComponentError

pytestmark = pytest.mark.timeout(60)


def _simple(spout, bolt=None):
    b = TopologyBuilder()
    b.set_spout("spout", spout)
    b.set_bolt("bolt", bolt or AckBolt()).shuffle_grouping("spout")
    return b.create_topology()


def test_inactive_topology_opens_no_spout_until_activated_and_deactivate_stops_next_tuple():
    shared, hold = Shared(), Shared()
    b = TopologyBuilder()
    b.set_spout("spout", ReplayingSpout(shared))
    b.set_bolt("bolt", HoldBolt(hold)).shuffle_grouping("spout")
    with LocalCluster() as cluster:
        cluster.submit_topology("inactive", {}, b.create_topology(), initial_status="inactive")
        workers = cluster.workers("inactive")
        poll(lambda: all(w.executors_running() for w in workers), message="executor threads to run")
        assert not cluster.is_prepared("inactive") and shared.events == []
        activated_at = time.monotonic()
        cluster.activate("inactive")
        poll(lambda: ReplayingSpout.count(shared, "next_tuple") > 0, message="spout to run after activate")
        # ordering, not timing: nothing of the spout happened before activate() was called
        assert all(e[-1] >= activated_at for e in shared.events)
        kinds = [e[0] for e in shared.events]
        assert kinds.index("open") < kinds.index("activate") < kinds.index("next_tuple")
        shared.commands.append(("m", ["v"]))
        poll(lambda: hold.held, message="the message to reach the bolt")
        cluster.deactivate("inactive")
        poll(lambda: ReplayingSpout.count(shared, "deactivate") == 1, message="deactivate()")
        # While inactive the spout's loop still runs (it takes the ack) but never calls next_tuple.
        hold.run(lambda c, held: [c.ack(t) for t in held])
        poll(lambda: ReplayingSpout.count(shared, "ack") == 1, message="the ack while inactive")
        calls = ReplayingSpout.count(shared, "next_tuple")
        cluster.activate("inactive")
        poll(lambda: ReplayingSpout.count(shared, "next_tuple") > calls, message="next_tuple to resume")
        kinds = [e[0] for e in shared.events]
        second = len(kinds) - 1 - kinds[::-1].index("activate")
        between = kinds[kinds.index("deactivate"):second]
        assert "ack" in between and "next_tuple" not in between, between
        assert kinds.count("activate") == 2 and "next_tuple" in kinds[second:]


class FastSpout(Spout):
    def __init__(self, shared, total):
        self.shared = shared
        self.total = total

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.n = 0

    def next_tuple(self):
        for _ in range(50):  # a burst per call: far faster than the bolt
            if self.n >= self.total:
                return
            self.collector.emit([self.n], msg_id=self.n)
            self.n += 1

    def ack(self, msg_id):
        self.shared.held.append(msg_id)

    def fail(self, msg_id):
        self.shared.seen.append(msg_id)


class SlowBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        time.sleep(0.0002)
        self.collector.ack(tup)


def test_back_pressure_slow_bolt_small_buffer_bounded_memory_nothing_lost():
    shared = Shared()
    total = 3000
    capacity, batch = 64, 8
    conf = {"topology.executor.receive.buffer.size": capacity, "topology.producer.batch.size": batch}
    with LocalCluster() as cluster:
        cluster.submit_topology("bp", conf, _simple(FastSpout(shared, total), SlowBolt()))
        execs = {ex.component_id: ex for w in cluster.workers("bp") for ex in w.executors}
        spout, bolt = execs["spout"], execs["bolt"]
        max_q = max_pe = 0
        deadline = time.monotonic() + 45
        while len(shared.held) < total:
            max_q = max(max_q, len(bolt.queue))
            max_pe = max(max_pe, sum(len(entry[1]) for entry in list(spout.outbox.pending_emits)))
            assert time.monotonic() < deadline, f"only {len(shared.held)} of {total} acked"
            time.sleep(0.002)
        assert sorted(shared.held) == list(range(total))
        assert shared.seen == []  # nothing failed, nothing dropped
        assert max_q <= capacity + batch, max_q
        # the spout stops calling next_tuple while pendingEmits is not empty: what one burst
        # produced at most (50 tuples plus their 50 acker inits, plus a partly filled batch each)
        assert max_pe <= 2 * (50 + batch), max_pe


class Exploding(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        raise ValueError(f"boom on {tup.values[0]}")


def test_user_exception_kills_the_executor_loudly_and_is_recorded():
    feeder = FeederSpout(["v"])
    with LocalCluster() as cluster:
        cluster.submit_topology("boom", {}, _simple(feeder, Exploding()))
        feeder.feed(["x"], msg_id=1)
        died = poll(lambda: cluster.died("boom"), message="executor death")
        err = died[0]
        assert isinstance(err, ComponentError)
        assert err.component_id == "bolt" and err.where == "execute"
        assert "boom on x" in str(err) and "Traceback" in err.trace
        errors = cluster.errors("boom")
        assert errors and errors[0].component_id == "bolt" and "boom on x" in errors[0].error


class BadEmitter(BasicBolt):
    def __init__(self, mode):
        self.mode = mode

    def declare_output_fields(self, declarer):
        declarer.declare(["a", "b"])

    def execute(self, tup, collector):
        if self.mode == "stream":
            collector.emit([1, 2], stream="nope")
        elif self.mode == "arity":
            collector.emit([1])
        else:
            collector.emit([1, object()])


@pytest.mark.parametrize("mode,needle", [("stream", "'nope' is not declared"),
                                         ("arity", "declares 2 fields"),
                                         ("value", "cannot be serialized")])
def test_bad_emit_is_reported_naming_component_and_stream(mode, needle):
    feeder = FeederSpout(["v"])
    with LocalCluster() as cluster:
        cluster.submit_topology("bademit", {}, _simple(feeder, BadEmitter(mode)))
        feeder.feed(["x"], msg_id=1)
        poll(lambda: cluster.died("bademit"), message="executor death")
        errors = [e.error for e in cluster.errors("bademit")]
        assert any(needle in e and "'bolt'" in e for e in errors), errors


def test_submit_rejects_bad_names_and_running_names():
    with LocalCluster() as cluster:
        for bad in ["a/b", "a.b", "a:b", "a\\b", ""]:
            with pytest.raises(InvalidTopologyError):
                cluster.submit_topology(bad, {}, _simple(FeederSpout(["v"])))
        cluster.submit_topology("same", {}, _simple(FeederSpout(["v"])))
        with pytest.raises(AlreadyAliveError, match="same"):
            cluster.submit_topology("same", {}, _simple(FeederSpout(["v"])))
        with pytest.raises(InvalidTopologyError, match="topology.workers"):
            cluster.submit_topology("typed", {"topology.workers": "two"}, _simple(FeederSpout(["v"])))


def test_kill_then_resubmit_under_the_same_name():
    with LocalCluster() as cluster:
        cluster.submit_topology("again", {}, _simple(FeederSpout(["v"])))
        cluster.kill_topology("again")
        feeder = FeederSpout(["v"])
        cluster.submit_topology("again", {}, _simple(feeder))
        feeder.feed([1], msg_id=1)
        poll(lambda: feeder.acked == [1], message="ack after resubmit")


class Split(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def execute(self, tup, collector):
        for w in tup.values[0].split():
            collector.emit([w])


class Count(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])

    def prepare(self, conf, context):
        self.counts = collections.Counter()

    def execute(self, tup, collector):
        w = tup.values[0]
        self.counts[w] += 1
        collector.emit([w, self.counts[w]])


def _word_count():
    b = TopologyBuilder()
    b.set_spout("sentences", FeederSpout(["sentence"]))
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", Count(), 3).fields_grouping("split", ["word"])
    return b.create_topology()


@pytest.mark.parametrize("workers", [1, 3])
def test_complete_topology_word_count_matches_plain_python(workers):
    sentences = [["the cow jumped over the moon"], ["the man went to the store"], ["moon moon"]]
    result = complete_topology(_word_count(), mock_sources={"sentences": sentences},
                               conf={"topology.workers": workers})
    expected = collections.Counter(w for (s,) in sentences for w in s.split())
    final = {}
    for word, count in result.tuples("count"):
        final[word] = max(final.get(word, 0), count)
    assert final == dict(expected)
    assert sorted(result.tuples("sentences")) == sorted(sentences)
    assert len(result.tuples("split")) == sum(expected.values())
    assert sorted(result.acked["sentences"]) == [0, 1, 2]


def test_complete_topology_raises_when_a_component_dies():
    b = TopologyBuilder()
    b.set_spout("s", FeederSpout(["v"]))
    b.set_bolt("x", Exploding()).shuffle_grouping("s")
    with pytest.raises(ComponentError, match="boom"):
        complete_topology(b.create_topology(), mock_sources={"s": [["a"]]}, timeout_secs=20)


def test_rebalance_to_more_workers_keeps_processing():
    shared = Shared()
    b = TopologyBuilder()
    b.set_spout("spout", ReplayingSpout(shared))
    b.set_bolt("h", HoldBolt(Shared()), 2).set_num_tasks(4).shuffle_grouping("spout")
    feeder = FeederSpout(["v"])
    b2 = TopologyBuilder()
    b2.set_spout("f", feeder)
    b2.set_bolt("a", AckBolt(), 2).set_num_tasks(4).shuffle_grouping("f")
    with LocalCluster() as cluster:
        cluster.submit_topology("rb", {}, b2.create_topology())
        feeder.feed([1], msg_id=1)
        poll(lambda: feeder.acked == [1], message="first ack")
        cluster.rebalance("rb", num_workers=2, executors={"a": 4})
        assert len(cluster.workers("rb")) == 2
        assert len(cluster.layout("rb").executors["a"]) == 4
        feeder.feed([2], msg_id=2)
        poll(lambda: feeder.acked == [1, 2], message="ack after rebalance")


def test_context_and_conf_reach_components():
    shared = Shared()
    with LocalCluster() as cluster:
        cluster.submit_topology("ctx", {"my.key": "hello"}, _simple(ReplayingSpout(shared)))
        poll(lambda: shared.conf, message="open")
        assert shared.conf["my.key"] == "hello"
        assert shared.conf["topology.name"] == "ctx"


class TaskRecorder(Bolt):
    def __init__(self, shared):
        self.shared = shared

    def prepare(self, conf, context, collector):
        self.shared.events.append((context.this_component_id, context.this_task_id,
                                   tuple(context.component_tasks("bolt"))))


def test_tasks_are_split_over_executors():
    shared = Shared()
    b = TopologyBuilder()
    b.set_spout("spout", FeederSpout(["v"]))
    b.set_bolt("bolt", TaskRecorder(shared), 3).set_num_tasks(5).shuffle_grouping("spout")
    with LocalCluster() as cluster:
        cluster.submit_topology("split", {}, b.create_topology())
        poll(lambda: len(shared.events) == 5, message="five tasks prepared")
        assert sorted(len(range(s, e + 1)) for s, e in cluster.layout("split").executors["bolt"]) == [1, 2, 2]
        tasks = sorted(e[1] for e in shared.events)
        assert tasks == list(shared.events[0][2])


class Relay(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["v"])

    def execute(self, tup, collector):
        collector.emit([tup.values[0]])


class Mark(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["v", "mark"])

    def execute(self, tup, collector):
        collector.emit([tup.values[0], "seen"])


def test_complete_topology_waits_for_batches_in_flight_between_workers(monkeypatch):
    # Without ackers every spout message counts as done at emit, so only idleness tells when the
    # tuples crossing to the other worker have arrived; the hub holds each delivery a while
    # (as a slow network would) to keep batches between the workers.
    from executor.transport import inprocess

    delivered = []
    real_recv = inprocess._Inbox.recv

    def slow_recv(self, timeout):
        with self.cond:
            if not self.items and not self.closed:
                self.cond.wait(timeout)
            if not self.items:
                return None
        threading.Event().wait(0.2)  # the batch stays in the inbox meanwhile
        item = real_recv(self, 0)
        if item is not None:
            delivered.append(len(item))
        return item

    monkeypatch.setattr(inprocess._Inbox, "recv", slow_recv)
    b = TopologyBuilder()
    b.set_spout("src", FeederSpout(["v"]))
    b.set_bolt("relay", Relay(), 2).shuffle_grouping("src")
    b.set_bolt("mark", Mark(), 2).shuffle_grouping("relay")
    values = [[i] for i in range(20)]
    result = complete_topology(b.create_topology(), mock_sources={"src": values},
                               conf={"topology.workers": 2, "topology.acker.executors": 0,
                                     # plain shuffles: a locality-aware one keeps every tuple local
                                     "topology.disable.loadaware.messaging": True})
    assert delivered, "no batch crossed workers: the test proves nothing"
    assert sorted(result.acked["src"]) == list(range(20))
    assert sorted(result.tuples("relay")) == values
    assert sorted(result.tuples("mark")) == [[i, "seen"] for i in range(20)]
