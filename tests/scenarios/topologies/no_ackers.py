"""No acker executors: a message counts as acked when emitted; the bolt holds it forever."""
from scenario_parts import HoldBolt, IdSpout

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([[7, [1]]]))
b.set_bolt("h", HoldBolt()).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.acker.executors": 0}
