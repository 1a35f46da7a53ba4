"""Exactly-once state: a BaseStatefulSpout emitting 1..N (its read position in its state) ->
a BasicBolt passing them on -> a stateful bolt summing them (2 tasks). Every number is counted
once in the committed state, even across a worker's death or a state provider outage.
The sum bolt records its PREPAREs and COMMITs as stateful_sum.py does."""
from scenario_parts import RELAY_FIELDS, CountingSpout, Relay, SumBolt

from executor.api import TopologyBuilder

N = 3000

b = TopologyBuilder()
b.set_spout("numbers", CountingSpout(N), 1)
b.set_bolt("relay", Relay(), 2).shuffle_grouping("numbers")
b.set_bolt("sum", SumBolt(), 2).fields_grouping("relay", RELAY_FIELDS)
topology = b.create_topology()
config = {"topology.workers": 2, "topology.state.checkpoint.interval.ms": 200,
          "topology.max.spout.pending": 100, "topology.state.exactly.once": True}
