"""Ten messages, at most three pending, into a bolt that holds them until released."""
from scenario_parts import HoldBolt, IdSpout

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([[i, [i]] for i in range(10)]))
b.set_bolt("h", HoldBolt()).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.max.spout.pending": 3}
