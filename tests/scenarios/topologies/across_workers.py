"""200 messages over 17 words, fields-grouped to three bolt tasks spread over three workers."""
from scenario_parts import IdSpout, Sink

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("spout", IdSpout([[i, [f"w{i % 17}"]] for i in range(200)], fields=["word"]))
b.set_bolt("ack", Sink(), 3).fields_grouping("spout", ["word"])
topology = b.create_topology()
config = {"topology.workers": 3}
