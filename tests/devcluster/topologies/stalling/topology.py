"""A topology stalled at max pending: its bolt never acks (for the UI's diagnosis tests)."""

from stalling_components import CountingSpout, HoldingBolt

from executor.api import TopologyBuilder

builder = TopologyBuilder()
builder.set_spout("numbers", CountingSpout(), 1)
builder.set_bolt("holder", HoldingBolt(), 1).shuffle_grouping("numbers")

topology = builder.create_topology()
config = {"topology.workers": 1, "topology.max.spout.pending": 20, "topology.message.timeout.secs": 600}
