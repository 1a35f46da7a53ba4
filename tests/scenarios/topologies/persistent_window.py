"""A persistent window (a BaseStatefulWindowedBolt with with_max_events_in_memory, Storm's
withPersistence): numbers 1..N, in order -> a sliding count window of 20 sliding by 10, at most
5 tuples of it in memory (the rest read back from the bolt's state when a window runs) -> a
sink. Each window is recorded ("window": values, new, expired, and how many tuples the window
held in memory), so the test can check the windows and that the bound held."""
from scenario_parts import IdSpout, Recorder, Sink

from executor.api import BaseStatefulWindowedBolt, Count, TopologyBuilder

N = 300
IN_MEMORY = 5


class PersistentWindows(BaseStatefulWindowedBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["sum"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)

    def init_state(self, state):
        self.state = state
        self.rec.record("init")

    def execute(self, window):
        values = [t.values[0] for t in window.get()]
        self.rec.record("window", values=values, new=[t.values[0] for t in window.get_new()],
                        expired=[t.values[0] for t in window.get_expired()])
        self.collector.emit([sum(values)])  # unanchored: the window's tuples are acked once stored


b = TopologyBuilder()
b.set_spout("numbers", IdSpout([[n, [n]] for n in range(1, N + 1)], fields=("n",), replay=True))
b.set_bolt("window", PersistentWindows().with_window(Count(20), Count(10)).with_max_events_in_memory(IN_MEMORY),
           1).global_grouping("numbers")
b.set_bolt("sums", Sink(), 1).global_grouping("window")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.max.spout.pending": 40, "topology.state.checkpoint.interval.ms": 200}
