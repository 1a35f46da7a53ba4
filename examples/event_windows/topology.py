"""Per-key event-time windows with late data: sensor readings carry the time they were taken,
arrive out of order (and some very late), and are averaged per sensor over 10 s windows sliding
by 5 s of *event* time. Readings up to 2 s out of order still land in their window; later ones
go to the `late` stream and are printed.

    storm-py local examples/event_windows/topology.py --duration 20
"""

import random
import time

from executor.api import BaseWindowedBolt, Bolt, Duration, Spout, TopologyBuilder

SENSORS = ["s1", "s2", "s3"]


class ReadingSpout(Spout):
    """Readings (sensor, value, ts in ms): mostly in order, some up to 1.5 s behind, one in 50 taken
    30 s ago (late); about 200 a second."""

    def declare_output_fields(self, declarer):
        declarer.declare(["sensor", "value", "ts"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.rng = random.Random(7)
        self.n = 0
        self.next_at = time.monotonic()

    def next_tuple(self):
        if time.monotonic() < self.next_at:
            return
        self.next_at += 0.005
        self.n += 1
        now = int(time.time() * 1000)
        delay = 30_000 if self.n % 50 == 0 else self.rng.choice([0, 0, 0, 500, 1500])
        self.collector.emit([self.rng.choice(SENSORS), round(self.rng.gauss(20, 3), 2), now - delay],
                            msg_id=self.n)


class AverageBolt(BaseWindowedBolt):
    """Mean value per window of one sensor's readings (fields-grouped, so a task sees whole sensors)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["sensor", "window_end", "readings", "mean"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, window):
        by_sensor = {}
        for t in window.get():
            by_sensor.setdefault(t.values[0], []).append(t.values[1])
        for sensor, values in sorted(by_sensor.items()):
            self.collector.emit([sensor, window.end_timestamp, len(values), round(sum(values) / len(values), 2)])


class PrintBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup.source_stream == "late":
            sensor, value, ts = tup.values[0]
            print(f"late reading: {sensor} {value} taken {time.time() - ts / 1000:.0f}s ago", flush=True)
        else:
            sensor, end, n, mean = tup.values
            print(f"{sensor} window ending {time.strftime('%H:%M:%S', time.localtime(end / 1000))}: "
                  f"{n} readings, mean {mean}", flush=True)
        self.collector.ack(tup)


builder = TopologyBuilder()
builder.set_spout("readings", ReadingSpout())
averages = AverageBolt().with_window(Duration(10), Duration(5)).with_timestamp_field("ts") \
    .with_lag(Duration(2)).with_watermark_interval(Duration(0.5)).with_late_tuple_stream("late")
builder.set_bolt("average", averages, 2).fields_grouping("readings", ["sensor"])
builder.set_bolt("print", PrintBolt()).shuffle_grouping("average").shuffle_grouping("average", "late")
topology = builder.create_topology()
config = {"topology.workers": 1, "topology.max.spout.pending": 10000}
