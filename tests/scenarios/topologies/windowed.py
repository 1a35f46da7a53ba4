"""Windowed bolts: numbers 1..N with an event time each (ts = 1000 * n, every 7th one in the
past: out of order, or late) -> a tumbling count window of 10 and an event-time sliding
window (3 s, sliding by 1 s, lag 2 s, late tuples to the "late" stream) -> a sink recording the
late tuples. Each window is recorded ("window": values, start, end, new, expired)."""
from scenario_parts import IdSpout, Recorder, Sink

from executor.api import BaseWindowedBolt, Count, Duration, TopologyBuilder

N = 200
BASE = 1_700_000_000_000


def event_ts(n):
    if n % 7:
        return BASE + 1000 * n
    # out of order: within the lag, or late (maybe, while the first windows fill; past 60 surely)
    return BASE + 1000 * n - (4500 if n <= 60 else 100_000)


class RecordWindows(BaseWindowedBolt):
    def __init__(self):
        super().__init__()

    def declare_output_fields(self, declarer):
        declarer.declare(["sum"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)

    def execute(self, window):
        values = [t.values[0] for t in window.get()]
        self.rec.record("window", values=values, new=[t.values[0] for t in window.get_new()],
                        expired=[t.values[0] for t in window.get_expired()], start=window.start_timestamp,
                        end=window.end_timestamp)
        self.collector.emit([sum(values)])  # anchored to the window's tuples


b = TopologyBuilder()
b.set_spout("numbers", IdSpout([[n, [n, event_ts(n)]] for n in range(1, N + 1)], fields=("n", "ts")))
b.set_bolt("count", RecordWindows().with_tumbling_window(Count(10)), 1).global_grouping("numbers")
b.set_bolt("events", RecordWindows().with_window(Duration(3), Duration(1)).with_timestamp_field("ts")
           .with_lag(Duration(2)).with_watermark_interval(Duration(0.05)).with_late_tuple_stream("late"),
           1).global_grouping("numbers")
b.set_bolt("late", Sink(), 1).global_grouping("events", "late")
b.set_bolt("sums", Sink(), 1).global_grouping("count").global_grouping("events")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.max.spout.pending": 50}
