"""A bolt's acks of one step are XOR-merged per tuple tree before they reach the acker
(executor/base.py): the acker XORs them anyway, so the outcome is the same, with one message
per tree and batch instead of one per tuple. Fails still reach the acker after the acks that
preceded them."""

from __future__ import annotations

from local_helpers import poll

from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from executor.api import BasicBolt, Bolt, TopologyBuilder


class FanOut(BasicBolt):
    """Five anchored children per input, emitted in one execute (so one batch downstream)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "i"])

    def execute(self, tup, collector):
        for i in range(5):
            collector.emit([tup[0], i])


class AckAllButFailOne(Bolt):
    """Acks every child, except that it fails child 3 of the trees whose root value is odd."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup[0] % 2 and tup[1] == 3:
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        pass


def _acker(cluster, name):
    (worker,) = cluster.workers(name)
    return next(ex for ex in worker.executors if ex.kind == "acker")


def test_acks_of_one_tree_in_one_batch_reach_the_acker_as_one_message_and_fails_still_fail():
    spout = FeederSpout(["n"])
    b = TopologyBuilder()
    b.set_spout("spout", spout)
    b.set_bolt("fan", FanOut()).shuffle_grouping("spout")
    b.set_bolt("sink", AckAllButFailOne()).shuffle_grouping("fan")
    with LocalCluster() as cluster:
        # A long timeout: no acker tick (which counts as executed) during the test.
        conf = {"topology.acker.executors": 1, "topology.message.timeout.secs": 600}
        cluster.submit_topology("merge", conf, b.create_topology())
        trees = 40
        for n in range(trees):
            spout.feed([n], msg_id=n)
            # One tree at a time: each tree's five children arrive at the sink as one batch.
            poll(lambda n=n: n in spout.acked or n in spout.failed,
                 message=lambda n=n: f"tree {n} to complete (acked {sorted(spout.acked)}, failed {sorted(spout.failed)})")
        assert sorted(spout.acked) == [n for n in range(trees) if n % 2 == 0]
        assert sorted(spout.failed) == [n for n in range(trees) if n % 2]
        acker = _acker(cluster, "merge")
        # Per even tree: the spout's init, the fan bolt's ack and ONE merged ack of five children.
        # Per odd tree: init, the fan's ack, the merged ack of children 0-2, then the fail (the
        # later children's acks may follow the fail as one more message, or none if the acker
        # already removed the tree: at most two more).
        even, odd = trees // 2, trees // 2
        assert 3 * even + 4 * odd <= acker.executed <= 3 * even + 5 * odd, acker.executed
