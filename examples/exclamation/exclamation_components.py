"""Components of the exclamation example."""

import itertools
import random
import time

from executor.api import Bolt, Spout

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]
RATE_KEY = "exclamation.rate"  # at most this many words a second per spout task (default: no bound)


class TestWordSpout(Spout):
    """Emits random words with message ids (like Storm's TestWordSpout, but reliable, and as fast
    as the topology takes them unless `-c exclamation.rate=R` paces it: Storm's sleeps 100 ms a
    word, a demo that leaves the machine's cores to the rest)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.ids = itertools.count()
        self.rng = random.Random()
        self.rate = conf.get(RATE_KEY)
        if self.rate is not None and (isinstance(self.rate, bool) or not isinstance(self.rate, (int, float))
                                      or self.rate <= 0):
            raise ValueError(f"topology config {RATE_KEY} must be a number of words a second > 0, got {self.rate!r}")
        self.paced_from, self.paced = time.monotonic(), 0

    def next_tuple(self):
        if self.rate is not None:
            if self.paced >= (time.monotonic() - self.paced_from) * self.rate:
                return  # nothing emitted: the spout's wait strategy idles the executor
            self.paced += 1
        self.collector.emit([self.rng.choice(WORDS)], msg_id=next(self.ids))


class ExclamationBolt(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit([tup.values[0] + "!!!"], anchors=tup)
        self.collector.ack(tup)
