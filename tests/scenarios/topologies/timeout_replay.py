"""A bolt that never acks a value's first delivery: it times out, fails, and is replayed."""
from scenario_parts import DropFirst, IdSpout

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([["m", ["v"]]], replay=True))
b.set_bolt("drop", DropFirst()).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.message.timeout.secs": 1}
