"""Supervisor local assignments (pure): supervisor.clj's read-assignments with conflicts as values."""

from cluster_state.records import Assignment, LocalAssignment, VersionedAssignment
from daemons.supervisor.local_assignments import (
    IgnoredPort,
    LocalAssignments,
    PortConflict,
    assignments_to_read,
    code_to_download,
    code_to_remove,
    local_assignments,
    new_conflicts,
    read_my_executors,
    refresh_snapshot,
    slot_targets,
    snapshot_assignments,
)

PORTS = (6700, 6701, 6702)


def assignment(placement):
    return Assignment("/code", {"sup1": "host1", "sup2": "host2"}, placement)


def test_executors_grouped_per_port_of_this_supervisor_only():
    a = assignment({(3, 3): ("sup1", 6700), (1, 2): ("sup1", 6700), (4, 4): ("sup1", 6701),
                    (5, 5): ("sup2", 6700)})
    assert read_my_executors("t1", a, "sup1") == {
        6700: LocalAssignment("t1", ((1, 2), (3, 3))),  # sorted: equal placements compare equal
        6701: LocalAssignment("t1", ((4, 4),)),
    }
    assert read_my_executors("t1", a, "sup3") == {}


def test_three_ports_three_local_assignments():
    local = local_assignments({"t1": assignment({(1, 1): ("sup1", 6700), (2, 2): ("sup1", 6701),
                                                 (3, 3): ("sup1", 6702)})}, "sup1", PORTS)
    assert local.by_port == {6700: LocalAssignment("t1", ((1, 1),)), 6701: LocalAssignment("t1", ((2, 2),)),
                             6702: LocalAssignment("t1", ((3, 3),))}
    assert local.conflicts == () and local.ignored == ()
    assert local.storm_ids == {"t1"}


def test_two_topologies_on_distinct_ports():
    local = local_assignments({"t1": assignment({(1, 1): ("sup1", 6700)}),
                               "t2": assignment({(1, 1): ("sup1", 6701), (2, 2): ("sup2", 6700)})},
                              "sup1", PORTS)
    assert local.by_port == {6700: LocalAssignment("t1", ((1, 1),)), 6701: LocalAssignment("t2", ((1, 1),))}
    assert local.storm_ids == {"t1", "t2"}


def test_port_outside_slot_list_ignored_with_reason():
    local = local_assignments({"t1": assignment({(1, 1): ("sup1", 9999), (2, 2): ("sup1", 6700)})},
                              "sup1", PORTS)
    assert local.by_port == {6700: LocalAssignment("t1", ((2, 2),))}
    [ignored] = local.ignored
    assert (ignored.port, ignored.storm_id) == (9999, "t1")
    assert "9999" in ignored.reason and "supervisor.slots.ports" in ignored.reason


def test_port_conflict_reported_as_value_and_port_left_out():
    local = local_assignments({"t2": assignment({(1, 1): ("sup1", 6700), (2, 2): ("sup1", 6701)}),
                               "t1": assignment({(1, 1): ("sup1", 6700)}),
                               "t3": assignment({(7, 7): ("sup1", 6700)})}, "sup1", PORTS)
    assert local.conflicts == (PortConflict(6700, ("t1", "t2", "t3")),)
    assert local.conflicted_ports == {6700}
    assert local.by_port == {6701: LocalAssignment("t2", ((2, 2),))}
    assert "6700" in local.conflicts[0].message() and "t1" in local.conflicts[0].message()
    # t1 and t3 only hold the conflicted port: their code is not needed (but not removed either)
    assert local.storm_ids == {"t2"}
    assert code_to_remove(local, {"t1", "t2", "t3", "old"}) == {"old"}


def test_conflict_reported_once_then_again_after_it_was_resolved():
    conflicted = local_assignments({"t1": assignment({(1, 1): ("sup1", 6700)}),
                                    "t2": assignment({(1, 1): ("sup1", 6700)})}, "sup1", PORTS)
    assert new_conflicts(conflicted, ()) == conflicted.conflicts
    assert new_conflicts(conflicted, conflicted.conflicts) == ()
    resolved = local_assignments({"t1": assignment({(1, 1): ("sup1", 6700)})}, "sup1", PORTS)
    assert resolved.conflicts == ()
    assert new_conflicts(conflicted, resolved.conflicts) == conflicted.conflicts


def test_slot_targets_hold_conflicted_ports_and_unknown_assignments():
    la1, la2 = LocalAssignment("t1", ((1, 1),)), LocalAssignment("t2", ((2, 2),))
    local = LocalAssignments({6701: la2}, (PortConflict(6700, ("t1", "t9")),))
    current = {6700: la1, 6701: la1, 6702: la1}
    assert slot_targets(local, PORTS, current) == {6700: la1, 6701: la2, 6702: None}
    # assignments unknown (ZooKeeper down): every slot keeps what it has
    assert slot_targets(None, PORTS, current) == current
    assert slot_targets(None, PORTS, {}) == {6700: None, 6701: None, 6702: None}


def test_code_to_download_and_remove():
    local = LocalAssignments({6700: LocalAssignment("t1", ()), 6701: LocalAssignment("t2", ())})
    assert code_to_download(local, {"t1", "gone"}) == {"t2"}
    assert code_to_remove(local, {"t1", "gone", "killing"}, in_use={"killing"}) == {"gone"}
    assert code_to_remove(LocalAssignments(), set()) == frozenset()


def test_only_changed_assignments_are_reread():
    a = assignment({(1, 1): ("sup1", 6700)})
    cached = {"t1": VersionedAssignment(a, 3), "t2": VersionedAssignment(a, 1)}
    versions = {"t1": 3, "t2": 2, "t3": 0, "t4": None}
    assert assignments_to_read(versions, cached) == {"t2", "t3"}
    b = assignment({(1, 1): ("sup1", 6701)})
    snap = refresh_snapshot(cached, versions, {"t2": VersionedAssignment(b, 2), "t3": None})
    # t1 kept as cached, t2 replaced, t3 vanished between the two reads, t4 gone
    assert snap == {"t1": cached["t1"], "t2": VersionedAssignment(b, 2)}
    assert snapshot_assignments(snap) == {"t1": a, "t2": b}
    assert refresh_snapshot(cached, {}, {}) == {}


def test_ignored_port_is_a_value():
    assert IgnoredPort(1, "t", "r") == IgnoredPort(1, "t", "r")
