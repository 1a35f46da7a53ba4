"""LocalCluster runs the distributed daemons' code: Nimbus's submit, state machine and scheduler,
the supervisor's slots, WorkerProcess as the worker. These check that it does (the effects in its
cluster state, the supervisor restarting a dead worker), not only that the old API still works."""

from __future__ import annotations

import pytest
from local_helpers import Shared, poll

from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from executor.api import Bolt, TopologyBuilder
from executor.errors import InvalidTopologyError, NotAliveError
from executor.lifecycle import Status

pytestmark = pytest.mark.timeout(120)


class Collect(Bolt):
    def __init__(self, shared: Shared, explode_on=None):
        self.shared = shared
        self.explode_on = explode_on

    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup.values[0] == self.explode_on:
            self.explode_on = None  # this copy dies; the relaunched worker gets a fresh copy
            raise ValueError("boom")
        with self.shared.lock:
            self.shared.seen.append(tup.values[0])
        self.collector.ack(tup)


def _topology(feeder, bolt, bolts=2):
    builder = TopologyBuilder()
    builder.set_spout("feed", feeder)
    builder.set_bolt("collect", bolt, bolts).shuffle_grouping("feed")
    return builder.create_topology()


def test_submit_goes_through_nimbus_into_the_cluster_state():
    shared = Shared()
    with LocalCluster() as cluster:
        storm_id = cluster.submit_topology("wc", {"topology.workers": 2}, _topology(FeederSpout(["v"]), Collect(shared)))
        state = cluster.nimbus.core.cluster
        assert state.storm_base(storm_id).storm_name == "wc"
        assignment = state.assignment_info(storm_id)
        assert len(set(assignment.executor_node_port.values())) == 2
        assert {p.port for p in cluster.supervisor.launcher.processes(storm_id)} == \
            {port for _node, port in assignment.executor_node_port.values()}
        [topo] = cluster.nimbus.core.cluster_info().topologies
        assert (topo.name, topo.num_workers) == ("wc", 2)
        cluster.kill_topology("wc")
        assert state.storm_base(storm_id) is None and state.assignment_info(storm_id) is None
        assert cluster.supervisor.launcher.processes(storm_id) == [] or all(
            p.status in (Status.STOPPED, Status.FAILED) for p in cluster.supervisor.launcher.processes(storm_id))


def test_rebalance_is_nimbus_state_machine_and_moves_workers():
    shared = Shared()
    feeder = FeederSpout(["v"])
    with LocalCluster() as cluster:
        storm_id = cluster.submit_topology("rb", {"topology.workers": 3}, _topology(feeder, Collect(shared), bolts=4))
        cluster.rebalance("rb", num_workers=1)
        assignment = cluster.nimbus.core.cluster.assignment_info(storm_id)
        assert len(set(assignment.executor_node_port.values())) == 1
        assert len(cluster.workers("rb")) == 1
        feeder.feed(["after"], msg_id=1)
        poll(lambda: feeder.acked == [1], message="a tuple acked after the rebalance")
        # Arguments the state machine refuses are refused here too, naming the problem.
        with pytest.raises(InvalidTopologyError, match="worker"):
            cluster.rebalance("rb", num_workers=0)
        with pytest.raises(InvalidTopologyError, match="nope"):
            cluster.rebalance("rb", executors={"nope": 1})
        with pytest.raises(NotAliveError):
            cluster.rebalance("missing", num_workers=1)


def test_the_supervisor_restarts_a_worker_whose_executor_died():
    shared = Shared()
    feeder = FeederSpout(["v"])
    with LocalCluster() as cluster:
        storm_id = cluster.submit_topology("phoenix", {"topology.workers": 1, "topology.message.timeout.secs": 3},
                                           _topology(feeder, Collect(shared, explode_on="bad"), bolts=1))
        [first] = cluster.supervisor.launcher.processes(storm_id)
        feeder.feed(["bad"], msg_id="bad")
        poll(lambda: cluster.died("phoenix"), message="the executor to die")
        poll(lambda: first.status is Status.FAILED, message="its worker to stop")
        poll(lambda: any(p is not first and p.status is Status.RUNNING
                         for p in cluster.supervisor.launcher.processes(storm_id)),
             timeout=60, message="the supervisor to launch the worker again")
        feeder.feed(["good"], msg_id="good")
        poll(lambda: "good" in feeder.acked, timeout=60, message="the relaunched worker to process a tuple")
        # The totals include the dead worker's counts: "bad" was emitted by the first worker.
        assert cluster.component_stats("phoenix")["feed"]["emitted"] >= 2


def test_state_changes_reach_the_workers_without_waiting_for_their_poll():
    # With the workers' assignment poll an hour apart, only the storm base watch can tell them.
    shared = Shared()
    feeder = FeederSpout(["v"])
    with LocalCluster({"task.refresh.poll.secs": 3600}) as cluster:
        cluster.submit_topology("watched", {}, _topology(feeder, Collect(shared)), initial_status="inactive")
        cluster.activate("watched")  # waits until every worker's spouts are active
        feeder.feed(["x"], msg_id=1)
        poll(lambda: feeder.acked == [1], message="a tuple acked once activated")
        cluster.deactivate("watched")
        assert all(not w.status.active for w in cluster.workers("watched"))


class DiesInPrepare(Bolt):
    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        raise RuntimeError("cannot prepare")

    def execute(self, tup):
        pass


def test_submit_returns_when_an_executor_dies_at_once_and_the_death_is_reported():
    with LocalCluster() as cluster:
        cluster.submit_topology("doomed", {}, _topology(FeederSpout(["v"]), DiesInPrepare(), bolts=1))
        died = poll(lambda: cluster.died("doomed"), message="the bolt's death")
        assert died[0].component_id == "collect" and "cannot prepare" in str(died[0])
