"""Storm's exclamation topology: words -> "word!!!" -> "word!!!!!!".

Run it with `storm-py local examples/exclamation/topology.py --duration 5`.
"""

from exclamation_components import ExclamationBolt, TestWordSpout

from executor.api import TopologyBuilder

builder = TopologyBuilder()
builder.set_spout("word", TestWordSpout(), 2)
builder.set_bolt("exclaim1", ExclamationBolt(), 3).shuffle_grouping("word")
builder.set_bolt("exclaim2", ExclamationBolt(), 2).shuffle_grouping("exclaim1")

topology = builder.create_topology()
config = {"topology.workers": 2, "topology.max.spout.pending": 1000}
