"""A spout whose tuples are never acked: it stalls at topology.max.spout.pending."""

import itertools

from executor.api import Bolt, Spout


class CountingSpout(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.ids = itertools.count()

    def next_tuple(self):
        n = next(self.ids)
        self.collector.emit([n], msg_id=n)


class HoldingBolt(Bolt):
    """Keeps every tuple and never acks it (a bolt waiting on something that never comes)."""

    def declare_output_fields(self, declarer):
        declarer.declare([])

    def prepare(self, conf, context, collector):
        self.held = []

    def execute(self, tup):
        self.held.append(tup)
