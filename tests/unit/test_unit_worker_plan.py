"""The worker's build step as pure functions: executor plans and routing from plain values."""

from __future__ import annotations

import pytest

from cluster_state.config import default_config
from executor.api import Bolt, Spout, TopologyBuilder
from executor.layout import compute_layout
from executor.worker_plan import plan_executors, plan_routing, task_addresses, thread_groups


class S(Spout):
    def declare_output_fields(self, d):
        d.declare(["x"])

    def next_tuple(self):
        pass


class B(Bolt):
    def declare_output_fields(self, d):
        d.declare(["x"])

    def execute(self, tup):
        pass


def _layout():
    b = TopologyBuilder()
    b.set_spout("s", S())
    b.set_bolt("b", B(), 2).set_num_tasks(4).shuffle_grouping("s").add_configuration(
        "topology.tick.tuple.freq.secs", 2)
    topo = b.create_topology()
    conf = {**default_config(), "topology.acker.executors": 1}
    return topo.structure, conf, compute_layout(topo, conf, 2)


def test_plans_carry_kind_conf_ticks_and_tasks():
    structure, conf, layout = _layout()
    plans = {p.component_id: p for p in plan_executors(structure, conf, layout, layout.executors["b"][:1]
                                                       + layout.executors["s"] + layout.executors["__acker"])}
    b, s, a = plans["b"], plans["s"], plans["__acker"]
    assert (b.kind, s.kind, a.kind) == ("bolt", "spout", "acker")
    assert b.tasks == (2, 3) and b.tick_secs == 2 and b.tick_tasks == (2, 3)
    assert b.conf["topology.tick.tuple.freq.secs"] == 2 and s.conf.get("topology.tick.tuple.freq.secs") is None
    assert s.tick_secs == conf["topology.message.timeout.secs"] and s.tick_tasks == s.tasks[:1]
    assert not any(p.on_cycle for p in plans.values())


def test_an_executor_that_is_not_a_component_range_is_refused():
    structure, conf, layout = _layout()
    with pytest.raises(ValueError, match="not a task range"):
        plan_executors(structure, conf, layout, [(1, 3)])


def test_routing_splits_local_and_remote_and_ignores_unplaced_tasks():
    _s, _c, layout = _layout()
    mine = layout.executors["b"][:1]
    slots = {ex: ("n1", 6700) for ex in mine}
    slots.update({ex: ("n2", 6701) for ex in layout.executors["b"][1:] + layout.executors["s"]})
    addresses = task_addresses(slots, lambda slot: ("host-" + slot[0], slot[1]))
    routing = plan_routing(layout, mine, addresses, ("host-n1", 6700))
    assert routing.local_tasks == {2, 3}
    assert set(routing.remote) == {4, 5, 6} and routing.destinations == (("host-n2", 6701),)
    assert 1 not in routing.remote  # the acker task is placed nowhere in this assignment


def test_thread_groups_put_dedicated_components_on_their_own_threads():
    b = TopologyBuilder()
    b.set_spout("s", S())
    b.set_bolt("b", B(), 2).shuffle_grouping("s").add_configuration("topology.executor.thread.mode", "dedicated")
    topo = b.create_topology()
    conf = {**default_config(), "topology.acker.executors": 1}
    layout = compute_layout(topo, conf, 1)
    plans = plan_executors(topo.structure, conf, layout, [e for es in layout.executors.values() for e in es])
    shared, dedicated = thread_groups(plans)
    assert sorted(plans[i].component_id for i in dedicated) == ["b", "b"]
    assert sorted(plans[i].component_id for i in shared) == ["__acker", "s"]
    every = plan_executors(topo.structure, {**conf, "topology.executor.thread.mode": "dedicated"}, layout,
                           [e for es in layout.executors.values() for e in es])
    assert thread_groups(every) == ((), tuple(range(len(every))))
