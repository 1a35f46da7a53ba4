"""A persistent window's tuples in the bolt's state (executor/windowing/persistent.py): at most
max_in_memory kept as Tuples, the rest read back from the state; with Redis, the state lets go
of the committed copies too (KeyValueState.forget), so memory stays bounded."""

from __future__ import annotations

import pytest

from executor.state.memory import InMemoryKeyValueState
from executor.tuple import Tuple
from executor.windowing.persistent import KEY, LazyTuples, WindowStore


def fields_of(comp, stream):
    return ["n"]


def tup(n: int) -> Tuple:
    return Tuple([n], 7, "default", "numbers", ["n"], None)


def test_at_most_max_in_memory_and_the_rest_read_back():
    state = InMemoryKeyValueState("t/window-1")
    store = WindowStore(state, 5, fields_of)
    for n in range(20):
        store.add(n, tup(n))
        assert len(store) <= 5
    window = LazyTuples(list(range(20)), store)
    assert [t.values[0] for t in window] == list(range(20))
    assert window[3].source_component == "numbers" and window[3].values == [3]
    assert len(store) <= 5
    store.remove(3)
    assert state.get([KEY, 3]) is None
    with pytest.raises(KeyError, match="window tuple 3"):
        store.get(3)


def test_a_restored_store_reads_every_tuple_from_the_state():
    state = InMemoryKeyValueState("t/window-1")
    store = WindowStore(state, 100, fields_of)
    for n in range(10):
        store.add(n, tup(n))
    state.prepare_commit(1)
    state.commit(1)
    again = WindowStore(state, 100, fields_of)
    assert len(again) == 0
    assert [again.get(n).values for n in range(10)] == [[n] for n in range(10)]


@pytest.mark.redis
def test_with_redis_the_state_lets_go_of_what_the_store_does_not_keep(redis_server):
    from executor.state.provider import open_state

    conf = {**redis_server.conf(key_prefix="window-store-test")}
    state = open_state(conf, "t/window-2")
    try:
        store = WindowStore(state, 5, fields_of)
        for n in range(100):
            store.add(n, tup(n))
        state.prepare_commit(1)
        state.commit(1)
        held = [k for k in state._cache if isinstance(k, bytes)]  # the window's keys are lists: bytes inside
        assert len(held) <= 5, len(held)
        assert [store.get(n).values[0] for n in (0, 50, 99)] == [0, 50, 99]  # read back from Redis
        for n in range(50):
            store.remove(n)
        state.prepare_commit(2)
        state.commit(2)
        assert state.get([KEY, 10]) is None and store.get(60).values == [60]
    finally:
        state.close()


def _topology(bolt):
    from executor.api import TopologyBuilder
    from executor.components import Spout

    class Numbers(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(["n"])

        def next_tuple(self):
            pass

    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("window", bolt).global_grouping("numbers")
    return b.create_topology().structure


def test_submit_refuses_a_persistent_window_on_a_plain_windowed_bolt_and_a_checkpoint_after_the_timeout():
    from executor.api import BaseStatefulWindowedBolt, BaseWindowedBolt, Count
    from executor.errors import InvalidTopologyError
    from executor.submit_rules import check_topology

    class Plain(BaseWindowedBolt):
        def execute(self, window):
            pass

    class Stateful(BaseStatefulWindowedBolt):
        def execute(self, window):
            pass

    conf = {"topology.message.timeout.secs": 30, "topology.state.checkpoint.interval.ms": 1000}
    with pytest.raises(InvalidTopologyError, match=r"'window'.*max.events.in.memory.*BaseStatefulWindowedBolt"):
        check_topology(_topology(Plain().with_window(Count(10)).with_max_events_in_memory(5)), conf)
    # a persistent window acks at the commit, not when its tuples leave: a window longer than the
    # message timeout is fine, a checkpoint interval that is not is not
    persistent = Stateful().with_window(Count(100_000)).with_persistence()
    check_topology(_topology(persistent), {**conf, "topology.max.spout.pending": 1000})
    with pytest.raises(InvalidTopologyError, match="'window'.*checkpoint.interval.ms"):
        check_topology(_topology(persistent), {**conf, "topology.state.checkpoint.interval.ms": 30_000})


def test_in_exactly_once_mode_a_window_is_state_so_no_timeout_or_max_pending_bounds_it():
    from executor.api import BaseWindowedBolt, Count, Duration
    from executor.errors import InvalidTopologyError
    from executor.submit_rules import check_windowed
    from executor.worker_plan import component_conf

    class Plain(BaseWindowedBolt):
        def execute(self, window):
            pass

    conf = {"topology.message.timeout.secs": 30, "topology.max.spout.pending": 1000}
    long_window = _topology(Plain().with_window(Duration(60_000)))
    big_window = _topology(Plain().with_window(Count(5000)))
    for structure, key in ((long_window, "message.timeout"), (big_window, "max.spout.pending")):
        with pytest.raises(InvalidTopologyError, match=key):
            check_windowed(structure, "window", component_conf(conf, structure, "window"))
        # its tuples are neither timed out nor pending while it holds them: they are checkpointed
        eo = {**conf, "topology.state.exactly.once": True}
        check_windowed(structure, "window", component_conf(eo, structure, "window"))
