"""StormClusterState on both ClusterState implementations."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

import pytest
from cs_helpers import flush_events, make_backend
from zk_fixture import wait_until

import cluster_state
from cluster_state import (
    STATUS_ACTIVE,
    STATUS_INACTIVE,
    Assignment,
    DecodeError,
    ErrorInfo,
    ExecutorBeat,
    InMemoryStore,
    NimbusRegistration,
    NoNodeError,
    StormBase,
    StormClusterState,
    SupervisorInfo,
    WorkerHeartbeat,
    mk_storm_cluster_state,
)
from cluster_state.config import default_config

pytestmark = [pytest.mark.timeout(60), pytest.mark.zk]


@pytest.fixture(params=["memory", "zookeeper"])
def new_state(request):
    """Factory of StormClusterStates sharing one store/server and root."""
    factory, close_all = make_backend(request, request.param)
    states: list[StormClusterState] = []

    def make() -> StormClusterState:
        state = StormClusterState(factory(), owns_cluster_state=True)
        states.append(state)
        return state

    yield make
    for state in states:
        state.disconnect()
    close_all()


def base(name: str = "wc", status: str = STATUS_ACTIVE) -> StormBase:
    return StormBase(name, 1700000000, status, 2, {"spout": 2, "bolt": 4})


def assignment(port: int = 6700) -> Assignment:
    return Assignment(
        "/nimbus/stormdist/wc-1",
        {"sup-1": "host-1"},
        {(1, 1): ("sup-1", port), (2, 3): ("sup-1", port)},
        {(1, 1): 1700000001, (2, 3): 1700000001},
    )


def supervisor(ts: int = 1700000000) -> SupervisorInfo:
    return SupervisorInfo(ts, "host-1", "sup-1", [6700], [6700, 6701], None, 5)


class Calls:
    """A zero-argument StormClusterState callback that counts its calls."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.count += 1


def test_records_and_entry_point_importable_from_package():
    for name in ("StormBase", "Assignment", "SupervisorInfo", "WorkerHeartbeat", "ErrorInfo",
                 "LocalAssignment", "mk_storm_cluster_state", "LocalState", "StormClusterState"):
        assert hasattr(cluster_state, name), name


def test_layout_subtrees_created(new_state):
    state = new_state()
    cs = state.cluster_state
    for subtree in ("assignments", "storms", "supervisors", "workerbeats", "errors"):
        assert cs.exists(f"/{subtree}")


def test_storm_base_lifecycle(new_state):
    nimbus = new_state()
    assert nimbus.active_storms() == []
    nimbus.activate_storm("wc-1", base())
    assert nimbus.active_storms() == ["wc-1"]
    assert nimbus.storm_base("wc-1") == base()
    updated = nimbus.update_storm("wc-1", {"status": STATUS_INACTIVE, "component_executors": {"bolt": 8}})
    assert updated.status == STATUS_INACTIVE
    assert updated.component_executors == {"spout": 2, "bolt": 8}  # merged, as in Storm
    assert nimbus.storm_base("wc-1") == updated
    assert nimbus.update_storm("wc-1", num_workers=3).num_workers == 3
    with pytest.raises(ValueError):
        nimbus.update_storm("wc-1", {"no_such_field": 1})
    with pytest.raises(NoNodeError):
        nimbus.update_storm("missing", {"status": STATUS_ACTIVE})
    nimbus.remove_storm_base("wc-1")
    assert nimbus.storm_base("wc-1") is None
    assert nimbus.active_storms() == []


def test_assignment_info_and_versions(new_state):
    nimbus = new_state()
    assert nimbus.assignment_info("wc-1") is None
    assert nimbus.assignment_info_with_version("wc-1") is None
    assert nimbus.assignment_version("wc-1") is None
    nimbus.set_assignment("wc-1", assignment())
    assert nimbus.assignments() == ["wc-1"]
    assert nimbus.assignment_info("wc-1") == assignment()
    versioned = nimbus.assignment_info_with_version("wc-1")
    assert versioned.assignment == assignment() and versioned.version == 0
    nimbus.set_assignment("wc-1", assignment(6701))
    assert nimbus.assignment_version("wc-1") == 1
    assert nimbus.assignment_info_with_version("wc-1").version == 1


def test_remove_storm_removes_assignment_base_and_heartbeats(new_state):
    nimbus = new_state()
    nimbus.activate_storm("wc-1", base())
    nimbus.set_assignment("wc-1", assignment())
    nimbus.setup_heartbeats("wc-1")
    nimbus.worker_heartbeat("wc-1", "sup-1", 6700, WorkerHeartbeat("wc-1", [(1, 1)], 6700, 1, 1))
    nimbus.report_error("wc-1", "bolt", "host-1", 6700, "boom")
    nimbus.remove_storm("wc-1")
    assert nimbus.assignments() == []
    assert nimbus.active_storms() == []
    assert nimbus.heartbeat_storms() == []
    assert nimbus.error_topologies() == ["wc-1"]  # errors stay until torn down explicitly
    nimbus.teardown_topology_errors("wc-1")
    assert nimbus.error_topologies() == []


def test_assignments_callback_is_one_shot_and_rearmed(new_state):
    supervisor_state, nimbus = new_state(), new_state()
    calls = Calls()
    assert supervisor_state.assignments(calls) == []
    nimbus.set_assignment("wc-1", assignment())
    wait_until(lambda: calls.count == 1, 10, "the assignments callback")
    nimbus.set_assignment("wc-2", assignment())  # not re-registered: no call
    flush_events(supervisor_state.cluster_state, nimbus.cluster_state, base="/storms")
    assert calls.count == 1
    assert supervisor_state.assignments(calls) == ["wc-1", "wc-2"]  # re-register by reading again
    nimbus.remove_storm("wc-1")
    wait_until(lambda: calls.count == 2, 10, "the re-registered callback")


def test_map_callbacks_are_per_id(new_state):
    watcher, nimbus = new_state(), new_state()
    nimbus.set_assignment("a", assignment())
    nimbus.set_assignment("b", assignment())
    calls_a, calls_b, base_calls = Calls(), Calls(), Calls()
    watcher.assignment_info("a", calls_a)
    watcher.assignment_info_with_version("b", calls_b)
    assert watcher.storm_base("a", base_calls) is None
    nimbus.set_assignment("a", assignment(6701))
    wait_until(lambda: calls_a.count == 1, 10, "the callback of assignment a")
    nimbus.activate_storm("a", base())
    wait_until(lambda: base_calls.count == 1, 10, "the storm-base callback (node created)")
    nimbus.set_assignment("a", assignment(6702))
    flush_events(watcher.cluster_state, nimbus.cluster_state, base="/storms")
    assert (calls_a.count, calls_b.count, base_calls.count) == (1, 0, 1)
    watcher.assignment_version("b", calls_b)
    nimbus.remove_storm("b")
    wait_until(lambda: calls_b.count == 1, 10, "the callback of assignment b")


def test_a_newer_callback_replaces_the_older_one(new_state):
    watcher, nimbus = new_state(), new_state()
    first, second = Calls(), Calls()
    watcher.supervisors(first)
    watcher.supervisors(second)
    nimbus.supervisor_heartbeat("sup-1", supervisor())
    wait_until(lambda: second.count == 1, 10, "the newest supervisors callback")
    flush_events(watcher.cluster_state, nimbus.cluster_state, base="/storms")
    assert first.count == 0


def test_supervisor_heartbeat_is_ephemeral(new_state):
    sup, nimbus = new_state(), new_state()
    sup.supervisor_heartbeat("sup-1", supervisor(1))
    sup.supervisor_heartbeat("sup-1", supervisor(2))
    assert nimbus.supervisors() == ["sup-1"]
    assert nimbus.supervisor_info("sup-1") == supervisor(2)
    assert nimbus.all_supervisor_info() == {"sup-1": supervisor(2)}
    calls = Calls()
    nimbus.supervisors(calls)
    sup.disconnect()
    wait_until(lambda: calls.count == 1, 10, "the supervisors callback after the supervisor left")
    assert nimbus.supervisors() == []
    assert nimbus.supervisor_info("sup-1") is None


def test_nimbus_registrations_are_ephemeral_typed_records(new_state):
    nimbus_a, nimbus_b, reader = new_state(), new_state(), new_state()
    assert reader.nimbus_registrations() == {}
    a = NimbusRegistration("127.0.0.2", 6627, 1700000000, "1.0", True)
    b = NimbusRegistration("127.0.0.3", 6627, 1700000050, "1.0", False)
    nimbus_a.register_nimbus(a)
    nimbus_a.register_nimbus(replace(a, is_leader=False))  # rewritten in place
    nimbus_b.register_nimbus(b)
    assert reader.nimbus_registrations() == {"127.0.0.2:6627": replace(a, is_leader=False), "127.0.0.3:6627": b}
    nimbus_a.unregister_nimbus("127.0.0.2:6627")
    nimbus_a.unregister_nimbus("127.0.0.2:6627")  # already gone: nothing to do
    assert list(reader.nimbus_registrations()) == ["127.0.0.3:6627"]
    nimbus_b.disconnect()
    wait_until(lambda: reader.nimbus_registrations() == {}, 15, "the registration to go with its session")
    with pytest.raises(TypeError):
        reader.register_nimbus({"host": "h", "port": 1})


def test_worker_heartbeats_and_executor_beats(new_state):
    worker, nimbus = new_state(), new_state()
    nimbus.setup_heartbeats("wc-1")
    hb = WorkerHeartbeat("wc-1", [(1, 1), (2, 3), (9, 9)], 6700, 1700000100, 42,
                         {(1, 1): {"emitted": 10}, (2, 3): {"emitted": 5}})
    worker.worker_heartbeat("wc-1", "sup-1", 6700, hb)
    assert nimbus.heartbeat_storms() == ["wc-1"]
    assert nimbus.get_worker_heartbeat("wc-1", "sup-1", 6700) == hb
    assert nimbus.get_worker_heartbeat("wc-1", "sup-1", 6701) is None
    beats = nimbus.executor_beats("wc-1", {
        (1, 1): ("sup-1", 6700),
        (2, 3): ("sup-1", 6700),
        (4, 4): ("sup-1", 6700),   # assigned there but not in the heartbeat: no beat
        (5, 5): ("sup-1", 6701),   # no heartbeat on that slot
    })
    assert beats == {
        (1, 1): ExecutorBeat(1700000100, 42, {"emitted": 10}),
        (2, 3): ExecutorBeat(1700000100, 42, {"emitted": 5}),
    }
    worker.remove_worker_heartbeat("wc-1", "sup-1", 6700)
    assert nimbus.get_worker_heartbeat("wc-1", "sup-1", 6700) is None
    nimbus.teardown_heartbeats("wc-1")
    assert nimbus.heartbeat_storms() == []


def test_errors_keep_only_the_newest_ten(new_state):
    worker, nimbus = new_state(), new_state()
    assert nimbus.errors("wc-1", "bolt") == []
    assert nimbus.last_error("wc-1", "bolt") is None
    for i in range(13):
        worker.report_error("wc-1", "bolt", "host-1", 6700, f"error {i}")
    errors = nimbus.errors("wc-1", "bolt")
    assert [e.error for e in errors] == [f"error {i}" for i in range(12, 2, -1)]  # newest first
    assert all(isinstance(e, ErrorInfo) and e.host == "host-1" and e.port == 6700 for e in errors)
    assert len(nimbus.cluster_state.get_children("/errors/wc-1/bolt")) == 10
    assert nimbus.last_error("wc-1", "bolt").error == "error 12"
    assert nimbus.error_topologies() == ["wc-1"]


def test_report_error_formats_exceptions(new_state):
    state = new_state()
    try:
        raise ValueError("bad tuple")
    except ValueError as exc:
        state.report_error("wc-1", "spout", None, None, exc)
    error = state.last_error("wc-1", "spout")
    assert "ValueError: bad tuple" in error.error and "Traceback" in error.error
    assert error.host is None and error.port is None


def test_corrupt_nodes_are_reported_and_skipped(new_state, caplog):
    state = new_state()
    cs = state.cluster_state
    state.supervisor_heartbeat("good", supervisor())
    cs.set_data("/supervisors/bad", b"\xc1 not msgpack")
    with pytest.raises(DecodeError) as info:
        state.supervisor_info("bad")
    assert info.value.path == "/supervisors/bad" and "/supervisors/bad" in str(info.value)
    with caplog.at_level(logging.WARNING, logger="cluster_state.storm"):
        assert state.all_supervisor_info() == {"good": supervisor()}
    assert any("/supervisors/bad" in r.getMessage() for r in caplog.records)

    cs.set_data("/assignments/trunc", cluster_state.codec.encode_record(assignment())[:-4])
    with pytest.raises(DecodeError, match="/assignments/trunc"):
        state.assignment_info("trunc")

    state.report_error("wc-1", "bolt", "h", 1, "kept")
    cs.create_sequential("/errors/wc-1/bolt/e", b"garbage")
    assert [e.error for e in state.errors("wc-1", "bolt")] == ["kept"]
    assert state.last_error("wc-1", "bolt").error == "kept"

    cs.set_data("/workerbeats/wc-1/sup-1-6700", b"\x00\x01")
    assert state.executor_beats("wc-1", {(1, 1): ("sup-1", 6700)}) == {}

    # A record of the wrong type is just as undecodable for the reader.
    cs.set_data("/storms/wrong", cluster_state.codec.encode_record(supervisor()))
    with pytest.raises(DecodeError, match="expected a StormBase"):
        state.storm_base("wrong")


def test_invalid_ids_and_records_rejected(new_state):
    state = new_state()
    with pytest.raises(ValueError):
        state.assignment_info("a/b")
    with pytest.raises(ValueError):
        state.storm_base("..")
    with pytest.raises(TypeError):
        state.set_assignment("x", {"not": "a record"})


def test_callback_failure_is_logged_not_fatal(new_state, caplog):
    watcher, nimbus = new_state(), new_state()
    good = Calls()

    def broken():
        raise RuntimeError("callback bug")

    watcher.assignments(broken)
    watcher.supervisors(good)
    with caplog.at_level(logging.ERROR, logger="cluster_state.storm"):
        nimbus.set_assignment("wc-1", assignment())
        nimbus.supervisor_heartbeat("s", supervisor())
        wait_until(lambda: good.count == 1, 10, "the supervisors callback after a failing one")
    assert any("callback" in r.getMessage() for r in caplog.records)


def test_disconnect_is_idempotent_and_leaves_borrowed_state_open(new_state):
    shared = new_state().cluster_state
    borrowed = mk_storm_cluster_state(default_config(), cluster_state=shared)
    borrowed.disconnect()
    borrowed.disconnect()
    assert shared.exists("/storms")  # still usable


def test_mk_storm_cluster_state_in_memory_shares_store():
    store = InMemoryStore()
    conf = default_config()
    with mk_storm_cluster_state(conf, store=store) as nimbus, mk_storm_cluster_state(conf, store=store) as sup:
        nimbus.set_assignment("wc-1", assignment())
        assert sup.assignment_info("wc-1") == assignment()
        assert "/storm/assignments/wc-1" in store.node_names()
    with pytest.raises(ValueError):
        mk_storm_cluster_state(conf, store=store, cluster_state=object())
