"""A bolt that acks ["a"] and fails ["b"] once released."""
from scenario_parts import HoldBolt, IdSpout

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([["keep", ["a"]], ["drop", ["b"]]]))
b.set_bolt("h", HoldBolt(fail_values=["b"])).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2}
