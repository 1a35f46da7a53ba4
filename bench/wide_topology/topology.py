"""bench/ui.py's topology: 200 executors (a spout of 20, four bolt layers of 44, 4 ackers) on
4 workers, so the REST API's answers are as large as a big Storm topology's."""

from wide_components import PacedSpout, PassBolt

from executor.api import TopologyBuilder

builder = TopologyBuilder()
builder.set_spout("source", PacedSpout(), 20)
previous = "source"
for layer in ("parse", "enrich", "filter", "route"):
    builder.set_bolt(layer, PassBolt(), 44).shuffle_grouping(previous)
    previous = layer

topology = builder.create_topology()
config = {"topology.workers": 4, "topology.acker.executors": 4, "topology.max.spout.pending": 100}
