"""Word count: random sentences (with message ids, replayed on failure) -> split -> count.

Run it with `storm-py local examples/word_count/topology.py --duration 10`.
"""

from word_count_components import CountBolt, RandomSentenceSpout, SplitSentenceBolt

from executor.api import TopologyBuilder

builder = TopologyBuilder()
builder.set_spout("sentences", RandomSentenceSpout(), 1)
builder.set_bolt("split", SplitSentenceBolt(), 2).shuffle_grouping("sentences")
builder.set_bolt("count", CountBolt(), 2).fields_grouping("split", ["word"])

topology = builder.create_topology()
config = {
    "topology.workers": 1,
    "topology.max.spout.pending": 2000,
    "topology.message.timeout.secs": 30,
}
