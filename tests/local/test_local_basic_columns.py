"""A BasicBolt fed by another worker (LocalCluster's workers exchange packed batches, which the
receiving BasicBolt executes column by column, executor/core/collectors.py): every tuple is
executed with its values, anchored ones are acked after execute, and a FailedException fails
that tuple's tree only; unanchored tuples are executed and never reach the acker."""

from __future__ import annotations

import pytest
from local_helpers import poll

from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from executor.api import BasicBolt, TopologyBuilder
from executor.errors import FailedException

pytestmark = pytest.mark.timeout(120)


class FailThirds(BasicBolt):
    """Two tasks, one per worker: half of what the spout sends crosses workers (the odd numbers,
    by the fields grouping's hash); every third number fails, on both sides."""

    seen: list = []

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def execute(self, tup, collector):
        FailThirds.seen.append(tup[0])
        if tup[0] % 3 == 0:
            raise FailedException(f"{tup[0]} is a multiple of 3")
        collector.emit([tup[0]])


def test_a_basic_bolt_executes_received_columns_acks_and_fails_each_tuple():
    FailThirds.seen = []
    spout = FeederSpout(["n"])
    b = TopologyBuilder()
    b.set_spout("spout", spout)
    b.set_bolt("check", FailThirds(), 2).fields_grouping("spout", ["n"])
    with LocalCluster() as cluster:
        conf = {"topology.workers": 2, "topology.message.timeout.secs": 600}
        cluster.submit_topology("columns", conf, b.create_topology())
        for n in range(60):
            spout.feed([n], msg_id=n)
        for n in range(60, 80):
            spout.feed([n])  # unanchored: executed, never acked or failed
        poll(lambda: len(spout.acked) + len(spout.failed) == 60 and len(FailThirds.seen) == 80,
             message=lambda: f"every tree to complete (acked {sorted(spout.acked)}, failed {sorted(spout.failed)}, "
                             f"executed {len(FailThirds.seen)})")
        assert sorted(spout.acked) == [n for n in range(60) if n % 3]
        assert sorted(spout.failed) == list(range(0, 60, 3))
        assert sorted(FailThirds.seen) == list(range(80))
        assert len(cluster.workers("columns")) == 2  # the bolt's two tasks in two workers: tuples crossed
