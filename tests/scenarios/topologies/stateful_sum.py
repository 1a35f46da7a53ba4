"""Numbers 1..N (replayed when they fail) -> a BasicBolt passing them on -> a stateful bolt
summing them (2 tasks, fields-grouped): the checkpoint stream crosses a forwarder. The stateful
bolt records what each PREPARE captured ("prepared": txid, sum, count, numbers seen) and each
COMMIT ("committed": txid), so the test can tell the committed state of every task."""
from scenario_parts import RELAY_FIELDS, NumberSpout, Relay, SumBolt

from executor.api import TopologyBuilder

N = 300


b = TopologyBuilder()
b.set_spout("numbers", NumberSpout(N), 1)
b.set_bolt("relay", Relay(), 2).shuffle_grouping("numbers")
b.set_bolt("sum", SumBolt(), 2).fields_grouping("relay", RELAY_FIELDS)
topology = b.create_topology()
config = {"topology.workers": 2, "topology.state.checkpoint.interval.ms": 200, "topology.max.spout.pending": 50}
