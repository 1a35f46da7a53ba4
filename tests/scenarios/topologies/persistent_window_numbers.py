"""A persistent window under faults: numbers 1..N (paced, replayed when they fail) -> a
BaseStatefulWindowedBolt with tumbling 0.5 s windows, persistent with at most 50 tuples in
memory (the rest in its state) -> a sink. Each window is recorded ("window": values), so the
test can tell that every number reached a window even though the window's worker died: a
number is acked once a commit holds it in the state, so one acked before the death and not yet
windowed is never replayed; only the restored window brings it back."""
from scenario_parts import NumberSpout, RecordStatefulWindows, Sink

from executor.api import Duration, TopologyBuilder

N = 3000


b = TopologyBuilder()
b.set_spout("numbers", NumberSpout(N), 1)
b.set_bolt("window", RecordStatefulWindows().with_tumbling_window(Duration(0.5)).with_max_events_in_memory(50),
           1).global_grouping("numbers")
b.set_bolt("counts", Sink(), 1).global_grouping("window")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.max.spout.pending": 200}
