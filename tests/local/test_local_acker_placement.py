"""Acks stay in the worker of the spout that emitted the tuple tree: a spout draws its roots so
that acker_tasks[root % n] is an acker of its own worker when one runs there (executor/spout.py),
so init and ack-to-spout never cross workers."""

from __future__ import annotations

from local_helpers import poll

from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from executor.api import BasicBolt, TopologyBuilder


class Echo(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def execute(self, tup, collector):
        collector.emit([tup[0]])


def test_each_spout_uses_the_acker_of_its_own_worker():
    spout = FeederSpout(["n"])
    b = TopologyBuilder()
    b.set_spout("spout", spout, 2)
    b.set_bolt("echo", Echo(), 2).shuffle_grouping("spout")
    conf = {"topology.workers": 2, "topology.acker.executors": 2}
    with LocalCluster() as cluster:
        cluster.submit_topology("placement", conf, b.create_topology())
        for i in range(400):
            spout.feed([i], msg_id=i)
        poll(lambda: len(spout.acked) == 400, message=lambda: f"400 acks, got {len(spout.acked)}")
        workers = cluster.workers("placement")
        assert len(workers) == 2
        for w in workers:
            by_kind = {}
            for ex in w.executors:
                by_kind.setdefault(ex.kind, []).append(ex)
            assert len(by_kind["acker"]) == 1, [ex.name for ex in w.executors]
            spout_acks = sum(ex.acked for ex in by_kind.get("spout", []))
            # Every root this worker's spouts emitted was acked by its own acker, and no other.
            assert by_kind["acker"][0].acked == spout_acks
        assert sum(ex.acked for w in workers for ex in w.executors if ex.kind == "spout") == 400
