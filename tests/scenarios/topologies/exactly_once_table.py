"""Exactly-once into the Spark table: a BaseStatefulSpout emitting 1..N (paced by numbers.rate)
-> a relay (2 tasks) -> SparkSinkBolt (2 tasks) writing the table named by `numbers.table`. In
exactly-once mode the sink publishes each checkpoint's rows at its COMMIT, once: the raw table
holds every number exactly once, whatever was killed meanwhile."""
from scenario_parts import CountingSpout, Relay

from executor.api import TopologyBuilder
from executor.sinks.spark import SparkSinkBolt

N = 3000

b = TopologyBuilder()
b.set_spout("numbers", CountingSpout(N), 1)
b.set_bolt("relay", Relay(), 2).shuffle_grouping("numbers")
b.set_bolt("store", SparkSinkBolt(None, path_key="numbers.table", batch_size=1000), 2).shuffle_grouping("relay")
topology = b.create_topology()
config = {"topology.workers": 2, "topology.state.checkpoint.interval.ms": 300, "topology.state.exactly.once": True}
