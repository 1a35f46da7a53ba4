"""Tick tuples configured for one bolt ("ticks") only; "plain" gets none."""
from scenario_parts import IdSpout, Sink

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([]))
b.set_bolt("ticks", Sink()).shuffle_grouping("spout").add_configuration("topology.tick.tuple.freq.secs", 0.2)
b.set_bolt("plain", Sink()).shuffle_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2}
