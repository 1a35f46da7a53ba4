"""Unit tests for daemons/nimbus/scheduler.py: Storm 0.9's nimbus_test scheduling cases, plain values."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from daemons.nimbus.scheduler import (
    SupervisorSlots,
    TopologyRequest,
    bad_slots,
    integer_divided,
    node_hosts,
    schedule,
    sort_slots,
    start_times,
)


def sups(n: int, ports: int = 4, prefix: str = "s", first_port: int = 6700) -> list[SupervisorSlots]:
    return [SupervisorSlots(f"{prefix}{i}", f"host-{prefix}{i}", tuple(range(first_port, first_port + ports)))
            for i in range(1, n + 1)]


def execs(n: int, first: int = 1) -> list[tuple[int, int]]:
    return [(t, t) for t in range(first, first + n)]


def by_slot(assignment) -> dict:
    out: dict = {}
    for ex, slot in assignment.items():
        out.setdefault(slot, []).append(ex)
    return out


def distribution(assignment) -> list[int]:
    return sorted(len(v) for v in by_slot(assignment).values())


def nodes(assignment) -> set[str]:
    return {sid for sid, _port in assignment.values()}


def one(topology: TopologyRequest, supervisors) -> dict:
    return schedule([topology], supervisors)[topology.topology_id]


# ---------------------------------------------------------------- helpers


def test_integer_divided():
    assert integer_divided(9, 4) == {2: 3, 3: 1}
    assert integer_divided(8, 4) == {2: 4}
    assert integer_divided(2, 4) == {0: 2, 1: 2}
    assert integer_divided(5, 0) == {}


def test_bad_slots_keeps_the_slots_that_fit_the_even_split():
    a, b, c = ("n", 1), ("n", 2), ("n", 3)
    slots = {a: [(1, 1)] * 3, b: [(2, 2)] * 3, c: [(3, 3)] * 3}
    # 9 executors over 4 slots: 2, 2, 2, 3 -> one slot of 3 may stay, the other two go.
    assert bad_slots(slots, 9, 4) == [b, c]
    assert bad_slots(slots, 9, 3) == []
    assert bad_slots(slots, 9, 0) == []


def test_sort_slots_interleaves_hosts_most_free_first():
    host_of = {"a": "ha", "b": "hb", "c": "hc"}
    slots = [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("b", 3), ("c", 1)]
    assert sort_slots(slots, host_of) == [("b", 1), ("a", 1), ("c", 1), ("b", 2), ("a", 2), ("b", 3)]


def test_sort_slots_alternates_supervisors_sharing_a_host():
    host_of = {"a": "localhost", "b": "localhost", "c": "other"}
    slots = [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1)]
    ordered = sort_slots(slots, host_of)
    assert ordered == [("a", 1), ("c", 1), ("b", 1), ("a", 2), ("b", 2)]


def test_sort_slots_ignores_input_order():
    host_of = {f"s{i}": f"h{i % 3}" for i in range(6)}
    slots = [(f"s{i}", p) for i in range(6) for p in (1, 2, 3)]
    shuffled = slots[:]
    random.Random(4).shuffle(shuffled)
    assert sort_slots(shuffled, host_of) == sort_slots(slots, host_of)


# ---------------------------------------------------------------- fresh assignments


def test_even_spread_over_two_supervisors():
    # nimbus_test test-assignment in miniature: 2 supervisors x 4 ports, 4 workers.
    result = one(TopologyRequest("t", execs(8), 4), sups(2))
    assert distribution(result) == [2, 2, 2, 2]
    assert Counter(sid for sid, _ in by_slot(result)) == {"s1": 2, "s2": 2}
    assert set(result) == set(execs(8))


def test_consecutive_slots_land_on_different_hosts():
    result = one(TopologyRequest("t", execs(3), 3), sups(3))
    assert nodes(result) == {"s1", "s2", "s3"}


def test_leftovers_are_dealt_round_robin_in_executor_order():
    result = one(TopologyRequest("t", execs(5), 2), sups(2, ports=1))
    assert result == {(1, 1): ("s1", 6700), (2, 2): ("s2", 6700), (3, 3): ("s1", 6700),
                      (4, 4): ("s2", 6700), (5, 5): ("s1", 6700)}


@pytest.mark.parametrize("workers", [1, 2, 3, 5, 8])
def test_topology_workers_n_gets_n_distinct_slots(workers):
    result = one(TopologyRequest("t", execs(20), workers), sups(2))
    assert len(by_slot(result)) == workers
    assert set(result) == set(execs(20))


def test_more_workers_than_slots_uses_every_slot():
    result = one(TopologyRequest("t", execs(42), 7), sups(2, ports=2))
    assert len(by_slot(result)) == 4
    assert distribution(result) == [10, 10, 11, 11]


def test_over_parallelism_assignment():
    # nimbus_test test-over-parallelism-assignment: 42 executors, 7 workers, 2 x 5 slots.
    result = one(TopologyRequest("t", execs(42), 7), sups(2, ports=5))
    assert distribution(result) == [6] * 7


def test_fewer_executors_than_workers():
    # nimbus_test test-zero-executor-or-tasks: 2 executors and 4 workers use 2 slots.
    result = one(TopologyRequest("t", execs(2), 4), sups(2))
    assert distribution(result) == [1, 1]


def test_two_topologies_share_the_cluster_without_sharing_a_slot():
    # nimbus_test test-assignment: 4 x 3 slots; 4 workers, then 20 requested get the 8 left.
    supervisors = sups(4, ports=3)
    t1 = TopologyRequest("mystorm-1-1", execs(6), 4)
    first = schedule([t1], supervisors)
    t1_now = TopologyRequest("mystorm-1-1", execs(6), 4, first["mystorm-1-1"])
    t2 = TopologyRequest("storm2-2-2", execs(30, first=7), 20)
    result = schedule([t1_now, t2], supervisors)
    assert result["mystorm-1-1"] == first["mystorm-1-1"]
    assert len(by_slot(result["storm2-2-2"])) == 8
    assert not set(by_slot(result["mystorm-1-1"])) & set(by_slot(result["storm2-2-2"]))
    assert set(result["storm2-2-2"]) == set(execs(30, first=7))


def test_no_slots_leaves_executors_unassigned():
    assert one(TopologyRequest("t", execs(3), 2), []) == {}
    full = TopologyRequest("a", execs(2), 2)
    taken = schedule([full], sups(1, ports=2))["a"]
    result = schedule([TopologyRequest("a", execs(2), 2, taken), TopologyRequest("b", execs(2), 1)],
                      sups(1, ports=2))
    assert result["b"] == {}
    assert result["a"] == taken


def test_corrupt_input_sharing_a_slot_is_resolved():
    slot = ("s1", 6700)
    a = TopologyRequest("a", execs(2), 1, {(1, 1): slot, (2, 2): slot})
    b = TopologyRequest("b", execs(2, first=3), 1, {(3, 3): slot, (4, 4): slot})
    result = schedule([a, b], sups(1, ports=2))
    assert result["a"] == a.assignment  # the first topology (by id) keeps the slot
    assert set(result["b"].values()) == {("s1", 6701)}


# ---------------------------------------------------------------- stability and reassignment


def test_unchanged_input_gives_an_equal_assignment():
    supervisors = sups(3)
    first = one(TopologyRequest("t", execs(10), 3), supervisors)
    again = one(TopologyRequest("t", execs(10), 3, first), supervisors)
    assert again == first
    assert one(TopologyRequest("t", execs(10), 3, first, frozenset(execs(10))), supervisors) == first


def test_deterministic_whatever_the_input_order():
    supervisors = sups(5, ports=3)
    tops = [TopologyRequest(f"t{i}", execs(7, first=10 * i), 3) for i in range(4)]
    expected = schedule(tops, supervisors)
    rng = random.Random(7)
    for _ in range(5):
        t, s = tops[:], supervisors[:]
        rng.shuffle(t)
        rng.shuffle(s)
        assert schedule(t, s) == expected


def test_executors_of_a_vanished_supervisor_move_and_the_rest_stay():
    supervisors = sups(3, ports=2)
    first = one(TopologyRequest("t", execs(6), 3), supervisors)
    assert nodes(first) == {"s1", "s2", "s3"}
    survivors = [s for s in supervisors if s.supervisor_id != "s2"]
    result = one(TopologyRequest("t", execs(6), 3, first), survivors)
    for ex, slot in first.items():
        if slot[0] != "s2":
            assert result[ex] == slot
        else:
            assert result[ex][0] in {"s1", "s3"}
    assert distribution(result) == [2, 2, 2]


def test_a_port_the_supervisor_no_longer_offers_is_given_up():
    first = one(TopologyRequest("t", execs(4), 2), sups(1, ports=2))
    shrunk = [SupervisorSlots("s1", "host-s1", (6700,)), SupervisorSlots("s9", "host-s9", (6700,))]
    result = one(TopologyRequest("t", execs(4), 2, first), shrunk)
    assert set(by_slot(result)) == {("s1", 6700), ("s9", 6700)}
    assert all(result[ex] == ("s1", 6700) for ex, slot in first.items() if slot == ("s1", 6700))


def test_dead_executors_move_to_another_slot_and_the_rest_stay():
    # nimbus_test test-reassignment: a timed-out worker's executors go elsewhere.
    supervisors = sups(2, ports=5)
    first = one(TopologyRequest("t", execs(2), 2), supervisors)
    ex1, ex2 = execs(2)
    result = one(TopologyRequest("t", execs(2), 2, first, alive=frozenset([ex1])), supervisors)
    assert result[ex1] == first[ex1]
    assert result[ex2] != first[ex2]
    assert result[ex2] != result[ex1]


def test_a_dead_workers_slot_is_offered_to_nobody_in_that_round():
    supervisors = sups(1, ports=3)
    a = one(TopologyRequest("a", execs(2), 1), supervisors)
    dead_slot = a[(1, 1)]
    result = schedule([TopologyRequest("a", execs(2), 1, a, alive=frozenset()),
                       TopologyRequest("b", execs(1, first=5), 1)], supervisors)
    assert dead_slot not in result["a"].values()
    assert dead_slot not in result["b"].values()


def test_partly_dead_slot_is_freed_when_it_breaks_the_even_split():
    supervisors = sups(2, ports=2)
    first = one(TopologyRequest("t", execs(4), 2), supervisors)
    dead = (1, 1)
    mates = [ex for ex, slot in first.items() if slot == first[dead]]
    result = one(TopologyRequest("t", execs(4), 2, first, alive=frozenset(execs(4)) - {dead}), supervisors)
    assert distribution(result) == [2, 2]
    for ex in mates:
        assert result[ex] != first[dead]
    for ex, slot in first.items():
        if slot != first[dead]:
            assert result[ex] == slot


def test_reassignment_to_a_constrained_cluster_packs_into_the_slots_left():
    # nimbus_test test-reassignment-to-constrained-cluster: supervisor "b" dies, 1 worker remains.
    supervisors = [SupervisorSlots("a", "ha", (6700,)), SupervisorSlots("b", "hb", (6700,))]
    first = one(TopologyRequest("t", execs(2), 2), supervisors)
    assert len(by_slot(first)) == 2
    result = one(TopologyRequest("t", execs(2), 2, first), supervisors[:1])
    assert set(result) == set(execs(2))
    assert set(result.values()) == {("a", 6700)}


def test_squeezed_topology_spreads_out_as_slots_appear_and_keeps_what_fits():
    # nimbus_test test-reassign-squeezed-topology (with its start-time checks).
    a = [SupervisorSlots("a", "ha", (6700,))]
    first = one(TopologyRequest("t", execs(9), 4), a)
    assert distribution(first) == [9]
    starts1 = start_times({}, {}, first, now=100)

    b = a + [SupervisorSlots("b", "hb", (6700, 6701))]
    second = one(TopologyRequest("t", execs(9), 4, first), b)
    assert distribution(second) == [3, 3, 3]
    starts2 = start_times(first, starts1, second, now=111)

    c = b + [SupervisorSlots("c", "hc", tuple(range(6700, 6708)))]
    third = one(TopologyRequest("t", execs(9), 4, second), c)
    assert distribution(third) == [2, 2, 2, 3]
    starts3 = start_times(second, starts2, third, now=122)
    common = [slot for slot, exs in by_slot(third).items() if len(exs) == 3]
    assert len(common) == 1
    assert sorted(by_slot(third)[common[0]]) == sorted(by_slot(second)[common[0]])
    for ex, slot in third.items():
        if slot == common[0]:
            assert starts3[ex] == starts2[ex]
        else:
            assert starts3[ex] == 122


def test_squeezed_topology_without_new_slots_stays_put():
    a = [SupervisorSlots("a", "ha", (6700,))]
    first = one(TopologyRequest("t", execs(9), 4), a)
    assert one(TopologyRequest("t", execs(9), 4, first), a) == first


def test_rebalance_from_scratch_spreads_over_new_supervisors():
    # nimbus_test test-rebalance: all three workers on one machine until a rebalance.
    one_node = sups(1, ports=3)
    first = one(TopologyRequest("t", execs(3), 3), one_node)
    three = one_node + sups(2, ports=3, prefix="x")
    assert one(TopologyRequest("t", execs(3), 3, first), three) == first  # nothing to do
    rebalanced = one(TopologyRequest("t", execs(3), 3), three)  # from scratch: no old assignment
    assert distribution(rebalanced) == [1, 1, 1]
    assert len(nodes(rebalanced)) == 3


def test_rebalance_change_parallelism():
    # nimbus_test test-rebalance-change-parallelism: 12 tasks, 6 executors on 4 x 3 slots.
    supervisors = sups(4, ports=3)
    six = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12)]
    assert distribution(one(TopologyRequest("t", six, 3), supervisors)) == [2, 2, 2]
    assert distribution(one(TopologyRequest("t", six, 6), supervisors)) == [1] * 6
    assert distribution(one(TopologyRequest("t", [(1, 12)], 6), supervisors)) == [1]
    eight = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 9), (10, 10), (11, 11), (12, 12)]
    assert distribution(one(TopologyRequest("t", eight, 4), supervisors)) == [2, 2, 2, 2]


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_rebalance_to_fewer_workers(workers):
    supervisors = sups(2)
    assert len(by_slot(one(TopologyRequest("t", execs(12), 4), supervisors))) == 4
    result = one(TopologyRequest("t", execs(12), workers), supervisors)
    assert len(by_slot(result)) == workers
    assert set(result) == set(execs(12))


def test_lowering_num_workers_without_scratch_keeps_the_old_slots():
    # Storm reschedules a rebalance from scratch; a mere lower count does not trigger scheduling.
    supervisors = sups(2)
    first = one(TopologyRequest("t", execs(12), 4), supervisors)
    assert one(TopologyRequest("t", execs(12), 2, first), supervisors) == first


def test_more_workers_take_free_slots_and_keep_even_slots():
    supervisors = sups(2)
    first = one(TopologyRequest("t", execs(8), 2), supervisors)
    result = one(TopologyRequest("t", execs(8), 4, first), supervisors)
    assert distribution(result) == [2, 2, 2, 2]


def test_stale_executors_are_dropped():
    supervisors = sups(1, ports=2)
    first = one(TopologyRequest("t", execs(4), 2), supervisors)
    result = one(TopologyRequest("t", execs(3), 2, first), supervisors)
    assert set(result) == set(execs(3))


def test_request_validation():
    with pytest.raises(ValueError, match="num_workers"):
        TopologyRequest("t", execs(1), -1)
    with pytest.raises(ValueError, match="listed twice"):
        schedule([TopologyRequest("t", execs(1), 1), TopologyRequest("t", execs(1), 1)], sups(1))


def test_random_clusters_keep_the_invariants():
    rng = random.Random(12345)
    for _round in range(60):
        supervisors = [SupervisorSlots(f"s{i}", f"h{rng.randrange(4)}",
                                       tuple(rng.sample(range(6700, 6710), rng.randrange(1, 5))))
                       for i in range(rng.randrange(0, 8))]
        slots = {(s.supervisor_id, p) for s in supervisors for p in s.ports}
        tops, task = [], 1
        for t in range(rng.randrange(1, 5)):
            n = rng.randrange(1, 15)
            tops.append(TopologyRequest(f"t{t}", execs(n, first=task), rng.randrange(1, 6)))
            task += n
        result = schedule(tops, supervisors)
        owners: dict = {}
        for top in tops:
            mine = result[top.topology_id]
            assert set(mine) <= set(top.executors)
            assert len(set(mine.values())) <= top.num_workers
            for slot in mine.values():
                assert slot in slots
                assert owners.setdefault(slot, top.topology_id) == top.topology_id
        if len(slots) >= sum(t.num_workers for t in tops):
            assert all(set(result[t.topology_id]) == set(t.executors) for t in tops)
        again = schedule([TopologyRequest(t.topology_id, t.executors, t.num_workers, result[t.topology_id])
                          for t in tops], supervisors)
        assert again == result


# ---------------------------------------------------------------- start times and hosts


def test_start_times_keep_unmoved_executors_and_stamp_the_rest():
    old = {(1, 1): ("a", 1), (2, 2): ("a", 1), (3, 3): ("b", 1), (4, 4): ("c", 1)}
    old_starts = {(1, 1): 10, (2, 2): 10, (3, 3): 20, (4, 4): 30}
    new = {(1, 1): ("a", 1), (2, 2): ("a", 1), (3, 3): ("b", 1), (4, 4): ("b", 1), (5, 5): ("d", 1)}
    assert start_times(old, old_starts, new, now=99) == {
        (1, 1): 10, (2, 2): 10,  # same slot, same executors
        (3, 3): 99, (4, 4): 99,  # slot b's executor set changed: its worker restarts
        (5, 5): 99,  # new
    }
    assert start_times(old, old_starts, old, now=99) == old_starts
    assert start_times({}, {}, new, now=5) == dict.fromkeys(new, 5)


def test_node_hosts_cover_the_nodes_used():
    supervisors = [SupervisorSlots("a", "ha", (1,)), SupervisorSlots("b", "hb", (1,))]
    assignment = {(1, 1): ("a", 1), (2, 2): ("gone", 1)}
    assert node_hosts(assignment, supervisors, {"gone": "hg", "old": "ho"}) == {"a": "ha", "gone": "hg"}
    assert node_hosts({}, supervisors) == {}
