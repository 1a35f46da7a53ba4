"""One message to two branches that each hold it until the test releases them."""
from scenario_parts import HoldBolt, IdSpout

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([[1, [1]]]))
b.set_bolt("a", HoldBolt()).shuffle_grouping("spout")
b.set_bolt("b", HoldBolt()).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2}
