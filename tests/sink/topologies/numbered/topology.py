"""Numbered rows into a Spark sink table (tests of the table log: several writers, compaction,
a Spark standalone master). -c numbers.table=PATH -c numbers.offset=N -c numbers.count=M."""

from numbers_components import NumbersSpout

from executor.api import TopologyBuilder
from executor.sinks.spark import SparkSinkBolt

builder = TopologyBuilder()
builder.set_spout("numbers", NumbersSpout(), 1)
builder.set_bolt("store", SparkSinkBolt(None, path_key="numbers.table", batch_size=10, flush_interval_secs=0.2,
                                        dedupe_fields=["id"]), 1).shuffle_grouping("numbers")
topology = builder.create_topology()
config = {"topology.workers": 1, "topology.max.spout.pending": 50, "topology.message.timeout.secs": 60,
          "sink.compaction.min.batches": 3}
