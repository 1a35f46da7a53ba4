"""Exactly-once with a bolt that holds tuples: a BaseStatefulSpout emits 1..N and stops -> a
sliding count window (100 numbers, sliding by 10; a windowed bolt without state of its own)
emits the sum of each window's 10 new numbers -> a stateful sum (2 tasks). The window holds its
last 100 numbers for ever once the spout stopped; checkpoints go on committing regardless, and
the committed sum holds every number once."""
from scenario_parts import RELAY_FIELDS, CountingSpout, NewSums, SumBolt

from executor.api import Count, TopologyBuilder

N = 2000

b = TopologyBuilder()
b.set_spout("numbers", CountingSpout(N), 1)
b.set_bolt("window", NewSums().with_window(Count(100), Count(10)), 1).global_grouping("numbers")
b.set_bolt("sum", SumBolt(), 2).fields_grouping("window", RELAY_FIELDS)
topology = b.create_topology()
config = {"topology.workers": 2, "topology.state.checkpoint.interval.ms": 200,
          "topology.max.spout.pending": 500, "topology.state.exactly.once": True}
