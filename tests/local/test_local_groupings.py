"""Every grouping at run time, across two in-process workers, checked through complete_topology."""

import collections

import pytest

from daemons.testing import complete_topology
from executor.api import BasicBolt, Spout, TopologyBuilder

pytestmark = pytest.mark.timeout(60)


class Source(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["key", "n"])
        declarer.declare(["key", "n"], stream="direct", direct=True)


class Router(BasicBolt):
    """Re-emits every input on the direct stream to the task its number selects."""

    def declare_output_fields(self, declarer):
        declarer.declare(["task", "n"], stream="direct", direct=True)

    def prepare(self, conf, context):
        self.targets = context.component_tasks("direct_sink")

    def execute(self, tup, collector):
        task = self.targets[tup.get("n") % len(self.targets)]
        collector.emit_direct(task, [task, tup.get("n")], stream="direct")


class Recorder(BasicBolt):
    """Emits (its task id, the input's values) so the test can see who got what."""

    def declare_output_fields(self, declarer):
        declarer.declare(["task", "values"])

    def prepare(self, conf, context):
        self.task = context.this_task_id

    def execute(self, tup, collector):
        collector.emit([self.task, list(tup.values)])


class ModuloGrouping:
    def prepare(self, context, stream, targets):
        self.targets = sorted(targets)

    def choose_tasks(self, task_id, values):
        return [self.targets[values[1] % len(self.targets)]]


def test_all_groupings_route_as_specified():
    b = TopologyBuilder()
    b.set_spout("src", Source())
    b.set_bolt("shuffle", Recorder(), 3).shuffle_grouping("src")
    b.set_bolt("fields", Recorder(), 3).fields_grouping("src", ["key"])
    b.set_bolt("all", Recorder(), 3).all_grouping("src")
    b.set_bolt("global", Recorder(), 3).global_grouping("src")
    b.set_bolt("none", Recorder(), 2).none_grouping("src")
    b.set_bolt("local", Recorder(), 2).local_or_shuffle_grouping("src")
    b.set_bolt("pkg", Recorder(), 3).partial_key_grouping("src", ["key"])
    b.set_bolt("custom", Recorder(), 3).custom_grouping("src", ModuloGrouping())
    b.set_bolt("router", Router()).shuffle_grouping("src")
    b.set_bolt("direct_sink", Recorder(), 3).direct_grouping("router", stream="direct")
    inputs = [[f"k{i % 5}", i] for i in range(60)]
    result = complete_topology(b.create_topology(), mock_sources={"src": inputs},
                               conf={"topology.workers": 2})
    by = {c: collections.defaultdict(list) for c in
          ["shuffle", "fields", "all", "global", "none", "local", "pkg", "custom", "direct_sink"]}
    for comp in by:
        for task, values in result.tuples(comp):
            by[comp][task].append(values)
    assert sum(len(v) for v in by["shuffle"].values()) == 60 and len(by["shuffle"]) == 3
    assert all(15 <= len(v) <= 25 for v in by["shuffle"].values())
    key_to_task = {}
    for task, vals in by["fields"].items():
        for key, _n in vals:
            assert key_to_task.setdefault(key, task) == task  # one task per key
    assert len(by["all"]) == 3 and all(len(v) == 60 for v in by["all"].values())
    assert list(by["global"]) == [min(by["global"])] and len(by["global"][min(by["global"])]) == 60
    assert sum(len(v) for v in by["none"].values()) == 60
    assert sum(len(v) for v in by["local"].values()) == 60
    for key in {k for k, _ in inputs}:
        assert len({t for t, vals in by["pkg"].items() if any(v[0] == key for v in vals)}) <= 2
    custom_tasks = sorted(by["custom"])
    for task, vals in by["custom"].items():
        assert all(custom_tasks[n % 3] == task for _k, n in vals)
    for task, vals in by["direct_sink"].items():
        assert all(v[0] == task for v in vals)
    assert sum(len(v) for v in by["direct_sink"].values()) == 60
