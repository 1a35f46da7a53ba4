"""Three messages into one aggregator (global grouping) whose sum is anchored to all three."""
from scenario_parts import HoldBolt, IdSpout

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([[i, [i]] for i in range(3)]))
b.set_bolt("agg", HoldBolt(action="aggregate", fields=["sum"])).global_grouping("spout")
b.set_bolt("down", HoldBolt()).shuffle_grouping("agg")
topology = b.create_topology()
config = {"topology.workers": 2}
