"""Pure pieces of flow control: cycle detection, tuple measurement, the queues' byte bound."""

from __future__ import annotations

import pytest

from executor.graph import cycles, describe_cycle, strongly_connected
from executor.receive_queue import ReceiveQueue
from executor.serialization import check_values, measure_values


@pytest.mark.parametrize("edges, expected", [
    ({"s": ["a"], "a": ["b"], "b": []}, []),
    ({"s": ["a"], "a": ["b"], "b": ["a"]}, [["a", "b"]]),
    ({"a": ["a"]}, [["a"]]),
    ({"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": ["d"]}, [["a", "b", "c"], ["d", "e"]]),
    ({}, []),
])
def test_cycles(edges, expected):
    assert cycles(edges) == expected


def test_strongly_connected_covers_every_node_once():
    edges = {str(i): [str((i * 7 + 3) % 50), str((i + 1) % 50) if i % 5 else "0"] for i in range(50)}
    comps = strongly_connected(edges)
    nodes = [n for c in comps for n in c]
    assert sorted(nodes) == sorted(set(nodes)) == sorted(edges)


def test_long_chain_does_not_recurse():
    edges = {str(i): [str(i + 1)] for i in range(5000)}
    edges["5000"] = ["0"]
    assert len(cycles(edges)[0]) == 5001


@pytest.mark.parametrize("edges, members, text", [
    ({"a": ["b"], "b": ["a"]}, ["a", "b"], "a -> b -> a"),
    ({"a": ["a"]}, ["a"], "a -> a"),
    ({"a": ["b"], "b": ["c", "a"], "c": ["b"]}, ["a", "b", "c"], "a -> b -> a"),
    ({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c"], "a -> b -> c -> a"),
])
def test_describe_cycle_names_a_shortest_cycle(edges, members, text):
    assert describe_cycle(members, edges) == text


def test_measure_values_sizes_and_problems():
    assert measure_values(["abc", 1])[0] is None
    small = measure_values(["a"])[1]
    assert measure_values(["a" * 1001])[1] == small + 1000
    assert measure_values(["\u00e9" * 10])[1] == small - 1 + 20  # UTF-8 bytes, not characters
    assert measure_values([b"x" * 5000])[1] >= 5000
    assert measure_values([[1, 2, 3] * 1000])[1] >= 3000
    assert "64 bits" in measure_values([1 << 70])[0]
    assert "cannot be serialized" in check_values([object()])


def test_queue_byte_bound_applies_to_measured_batches_only():
    q = ReceiveQueue(1000, "q", byte_capacity=100)
    assert q.try_publish([(1, "a")], 80)
    assert not q.try_publish([(1, "b")], 30)  # over the byte bound
    assert q.try_publish([(1, "c")])          # unmeasured: only the count bound
    assert q.nbytes == 80
    out = q.consume()
    assert [b[0][1] for b in out] == ["a", "c"] and q.nbytes == 0
    assert q.try_publish([(1, "big")], 500)   # an empty queue takes any batch
    assert q.is_full()


def test_system_lane_ignores_bounds_and_comes_first():
    q = ReceiveQueue(1, "q")
    assert q.try_publish([(1, "data")])
    assert not q.try_publish([(1, "more")])
    q.publish_force([(1, "tick")])
    assert len(q) == 2
    assert q.consume_system() == [[(1, "tick")]]
    assert q.consume_system() == []
    q.publish_force([(1, "tick2")])
    assert q.consume() == [[(1, "tick2")], [(1, "data")]]
    assert len(q) == 0


