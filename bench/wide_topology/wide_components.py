"""Components of bench/ui.py's wide topology: a paced spout and pass-through bolts."""

import time

from executor.api import BasicBolt, Spout


class PacedSpout(Spout):
    """About 50 tuples a second per task: enough to fill the stats, little CPU."""

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector, self.n, self.next_at = collector, 0, 0.0

    def next_tuple(self):
        now = time.monotonic()
        if now < self.next_at:
            time.sleep(0.005)
            return
        self.next_at = now + 0.02
        self.n += 1
        self.collector.emit([self.n], msg_id=self.n)


class PassBolt(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def execute(self, tup, collector):
        collector.emit([tup.values[0]])
