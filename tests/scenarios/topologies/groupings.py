"""Every grouping from one spout (60 messages (key, n), 5 keys); each consumer task records what
it got. direct_sink gets its tuples from a router bolt's direct stream."""
from scenario_parts import IdSpout, ModuloGrouping, Router, Sink

from executor.api import TopologyBuilder

b = TopologyBuilder()
b.set_spout("src", IdSpout([[n, [f"k{n % 5}", n]] for n in range(60)], fields=["key", "n"]))
b.set_bolt("shuffle", Sink(), 3).shuffle_grouping("src")
b.set_bolt("fields", Sink(), 3).fields_grouping("src", ["key"])
b.set_bolt("all", Sink(), 3).all_grouping("src")
b.set_bolt("global", Sink(), 3).global_grouping("src")
b.set_bolt("none", Sink(), 2).none_grouping("src")
b.set_bolt("local", Sink(), 2).local_or_shuffle_grouping("src")
b.set_bolt("pkg", Sink(), 3).partial_key_grouping("src", ["key"])
b.set_bolt("custom", Sink(), 3).custom_grouping("src", ModuloGrouping())
b.set_bolt("router", Router("direct_sink")).shuffle_grouping("src")
b.set_bolt("direct_sink", Sink(), 3).direct_grouping("router", stream="direct")
topology = b.create_topology()
# Plain shuffles (each of its tasks gets a share); the locality-aware default, which keeps the
# tuples in the spout's worker, is tested in tests/worker/test_worker_groupings.py.
config = {"topology.workers": 2, "topology.disable.loadaware.messaging": True}
