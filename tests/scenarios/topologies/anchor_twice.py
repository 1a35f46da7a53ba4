"""A bolt emitting a child anchored twice to the same input."""
from scenario_parts import HoldBolt, IdSpout

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([["x", ["x"]]]))
b.set_bolt("first", HoldBolt(action="twice")).shuffle_grouping("spout")
b.set_bolt("down", HoldBolt()).shuffle_grouping("first")
topology = b.create_topology()
config = {"topology.workers": 2}
