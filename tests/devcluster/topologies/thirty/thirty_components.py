"""Components of a 30-component topology (the UI graph's readability test): a slow spout and
pass-through bolts."""

import time

from executor.api import BasicBolt, Spout


class SlowSpout(Spout):
    """A tuple every 50 ms: figures move, the CPU stays free for the other tests."""

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0

    def next_tuple(self):
        time.sleep(0.05)
        self.n += 1
        self.collector.emit([self.n], msg_id=self.n)


class Pass(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def execute(self, tup, collector):
        collector.emit([tup.values[0]])
