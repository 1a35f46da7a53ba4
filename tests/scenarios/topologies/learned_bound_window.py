"""A tumbling count window of 3,000 behind a spout with no topology.max.spout.pending: the bound
the spout learns starts at 1,000 trees (executor/pending_bound.py), and the window acks its
tuples when they leave it (as Storm's: at the next window), so two windows fill only if the
bound grows to what they hold."""
from scenario_parts import IdSpout, Recorder

from executor.api import BaseWindowedBolt, Count, TopologyBuilder

WINDOW = 3000


class RecordSizes(BaseWindowedBolt):
    def prepare(self, conf, context, collector):
        self.rec = Recorder(conf, context)

    def execute(self, window):
        self.rec.record("window", size=len(window.get()))


b = TopologyBuilder()
b.set_spout("spout", IdSpout([[i, [i]] for i in range(2 * WINDOW)]))
b.set_bolt("window", RecordSizes().with_tumbling_window(Count(WINDOW)), 1).global_grouping("spout")
topology = b.create_topology()
config = {"topology.workers": 2}
