"""A bolt that acks every input and emits nothing."""
from scenario_parts import IdSpout, Sink

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([["m1", [1]], ["m2", [2]]]))
b.set_bolt("ack", Sink()).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2}
