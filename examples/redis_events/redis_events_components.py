"""Numbered events from a Redis stream, stored exactly once in a Spark table (docs/topology-guide.md,
"Sources"). The stream's entries carry a field `n`; each reaches the table as one row (entry id,
n). The topology runs exactly once (topology.py): after a worker's death it goes back to its last
checkpoint, the spout to its read position then, and the table shows only committed rows, each
once: the raw table (no dedupe view) holds every event once."""

from __future__ import annotations

from executor.api import BasicBolt, RedisStreamSpout, TopologyBuilder
from executor.sinks.spark import SparkSinkBolt

HOST_KEY = "events.redis.host"
PORT_KEY = "events.redis.port"
STREAM_KEY = "events.stream"
TABLE_KEY = "events.table"
STREAM = "events"
GROUP = "summer"


class EventSpout(RedisStreamSpout):
    """The stream spout, its Redis taken from the topology config (events.redis.host/port), so
    one topology file runs against any server: `-c events.redis.port=PORT` at submit."""

    def open(self, conf, context, collector):
        self.host = str(conf.get(HOST_KEY, self.host))
        self.port = int(conf.get(PORT_KEY, self.port))
        super().open(conf, context, collector)


class ToNumber(BasicBolt):
    """[entry id, fields] -> [entry id, n]. An entry without a whole number in `n` is reported
    (naming it) and skipped: the source is not replayed for a value that will never parse."""

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "n"])

    def prepare(self, conf, context):
        self.context = context

    def execute(self, tup, collector):
        entry_id, fields = tup.values
        try:
            n = int(fields["n"])
        except (KeyError, ValueError):
            collector.report_error(ValueError(f"entry {entry_id} has no whole number in field 'n': {fields!r}"))
            return
        collector.emit([entry_id, n])


def build_topology(spouts: int = 2):
    builder = TopologyBuilder()
    builder.set_spout("events", EventSpout(STREAM, GROUP, start="0"), spouts)
    builder.set_bolt("parse", ToNumber(), 2).shuffle_grouping("events")
    # Exactly once: each checkpoint's rows are committed to the table with it.
    builder.set_bolt("store", SparkSinkBolt(None, path_key=TABLE_KEY, schema="id STRING, n BIGINT",
                                            batch_size=5000, flush_interval_secs=0.5), 1).shuffle_grouping("parse")
    return builder.create_topology()
