"""Components of the exclamation example."""

import itertools
import random

from executor.api import Bolt, Spout

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


class TestWordSpout(Spout):
    """Emits random words with message ids (like Storm's TestWordSpout, but reliable)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.ids = itertools.count()
        self.rng = random.Random()

    def next_tuple(self):
        self.collector.emit([self.rng.choice(WORDS)], msg_id=next(self.ids))


class ExclamationBolt(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit([tup.values[0] + "!!!"], anchors=tup)
        self.collector.ack(tup)
