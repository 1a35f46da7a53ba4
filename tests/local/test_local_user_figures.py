"""`storm-py local`'s status and summary count the user's tuples only (issue 47, item 3): a
spout that emitted exactly 200 was reported "emitted 223" (its `$checkpoint` tuples), a bolt that
emits nothing "emitted 23", and tick tuples counted as executed. Storm's UI keeps system streams
and components apart (sys=0); LocalCluster.component_stats(name, include_sys=False) is what the
CLI prints."""

from __future__ import annotations

import threading

import pytest
from testutil import wait_until

from daemons.local import LocalCluster
from executor.api import BaseStatefulBolt, BaseStatefulSpout, TopologyBuilder

pytestmark = pytest.mark.timeout(120)

N = 200


class Upto(BaseStatefulSpout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state
        self.next = state.get("next", 1)

    def pre_prepare(self, txid):
        self.state.put("next", self.next)

    def next_tuple(self):
        if self.next <= N:
            self.collector.emit([self.next], msg_id=self.next)
            self.next += 1


class Sum(BaseStatefulBolt):
    """Emits nothing; gets tick tuples (its component config) and checkpoint tuples."""

    def __init__(self):
        self.done = threading.Event()

    def __deepcopy__(self, memo):
        return self

    def declare_output_fields(self, declarer):
        declarer.declare(["sum"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        if tup.is_tick():
            return
        total = self.state.get("sum", 0) + tup.values[0]
        self.state.put("sum", total)
        if total == N * (N + 1) // 2:
            self.done.set()


def test_the_users_figures_leave_out_system_tuples_and_components():
    bolt = Sum()
    b = TopologyBuilder()
    b.set_spout("numbers", Upto())
    b.set_bolt("sum", bolt).shuffle_grouping("numbers").add_configuration("topology.tick.tuple.freq.secs", 1)
    conf = {"topology.state.exactly.once": True, "topology.state.checkpoint.interval.ms": 100}
    with LocalCluster() as cluster:
        cluster.submit_topology("figures", conf, b.create_topology())
        wait_until(bolt.done.is_set, 60, "every number summed")
        # a few checkpoints and ticks more, so that system tuples are in the figures for sure
        wait_until(lambda: cluster.component_stats("figures")["numbers"].get("acked", 0) >= N
                   and cluster.component_stats("figures")["sum"].get("executed", 0) > N + 2, 60,
                   lambda: f"the numbers acked and ticks executed: {cluster.component_stats('figures')}")
        everything = cluster.component_stats("figures")
        users = cluster.component_stats("figures", include_sys=False)
        cluster.kill_topology("figures", wait_secs=0)
    assert everything["numbers"]["emitted"] > N and everything["sum"]["emitted"] > 0  # $checkpoint tuples
    assert users["numbers"]["emitted"] == N and users["numbers"]["acked"] == N
    assert users["sum"]["emitted"] == 0 and users["sum"]["executed"] == N  # no ticks, no checkpoints
    assert set(users) == {"numbers", "sum"}  # no $checkpointspout, no __acker
