"""A persistent window (a BaseStatefulWindowedBolt with with_max_events_in_memory, Storm's
withPersistence): numbers 1..N, in order -> a sliding count window of 20 sliding by 10, at most
5 tuples of it in memory (the rest read back from the bolt's state when a window runs) -> a
sink. Each window is recorded ("window": values, new, expired), so the test can check them."""
from scenario_parts import IdSpout, RecordStatefulWindows, Sink

from executor.api import Count, TopologyBuilder

N = 300
IN_MEMORY = 5


b = TopologyBuilder()
b.set_spout("numbers", IdSpout([[n, [n]] for n in range(1, N + 1)], fields=("n",), replay=True))
b.set_bolt("window", RecordStatefulWindows().with_window(Count(20), Count(10)).with_max_events_in_memory(IN_MEMORY),
           1).global_grouping("numbers")
b.set_bolt("sums", Sink(), 1).global_grouping("window")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.max.spout.pending": 40, "topology.state.checkpoint.interval.ms": 200}
