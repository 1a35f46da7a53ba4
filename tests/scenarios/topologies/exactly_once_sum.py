"""Exactly-once state: a BaseStatefulSpout emitting 1..N (its read position in its state) ->
a BasicBolt passing them on -> a stateful bolt summing them (2 tasks). Every number is counted
once in the committed state, even across a worker's death or a state provider outage.
The sum bolt records its PREPAREs and COMMITs as stateful_sum.py does."""
from scenario_parts import RELAY_FIELDS, Paced, Recorder, Relay, SumBolt

from executor.api import BaseStatefulSpout, TopologyBuilder

N = 3000


class CountingSpout(BaseStatefulSpout, Paced):
    """Emits next, next+1, ... up to n (`numbers.n` in the topology config, else N); `next` is
    its state (rewound on a rollback)."""

    def __init__(self, n):
        self.n = n

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.n = int(conf.get("numbers.n", self.n))
        self.pace(conf)

    def init_state(self, state):
        self.state = state
        self.next = state.get("next", 1)
        self.rec.record("init", next=self.next)

    def next_tuple(self):
        if self.next > self.n or not self.may_emit():
            return
        n = self.next
        self.next += 1
        self.state.put("next", self.next)
        self.collector.emit([n], msg_id=n)

    def ack(self, msg_id):
        if msg_id == self.n:
            self.rec.record("ack", id=msg_id)


b = TopologyBuilder()
b.set_spout("numbers", CountingSpout(N), 1)
b.set_bolt("relay", Relay(), 2).shuffle_grouping("numbers")
b.set_bolt("sum", SumBolt(), 2).fields_grouping("relay", RELAY_FIELDS)
topology = b.create_topology()
config = {"topology.workers": 2, "topology.state.checkpoint.interval.ms": 200,
          "topology.max.spout.pending": 100, "topology.state.exactly.once": True}
