"""Tick tuples configured for the whole topology: every bolt gets them."""
from scenario_parts import IdSpout, Sink

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([]))
b.set_bolt("ticks", Sink()).shuffle_grouping("spout")
b.set_bolt("plain", Sink()).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.tick.tuple.freq.secs": 0.2}
