"""Nimbus on a real ZooKeeper, ported from Storm's nimbus_test: submit, validation, kill, activate,
deactivate, rebalance, reassignment of dead executors and vanished supervisors, restart, cleanup.
The core runs with a fake clock; supervisors and worker heartbeats are written by the test."""

from __future__ import annotations

import collections
import time

import msgpack
import pytest
from nimbus_helpers import beat, package, register_supervisor

from cluster_state.factory import mk_storm_cluster_state
from cluster_state.paths import assignment_path
from cluster_state.records import SupervisorInfo, WorkerDeath
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.core import NimbusCore
from daemons.nimbus.transitions import IllegalTransitionError
from daemons.rpc.protocol import UnavailableError
from executor.errors import AlreadyAliveError, InvalidTopologyError, NotAliveError

pytestmark = [pytest.mark.timeout(60), pytest.mark.zk]


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, secs: float) -> None:
        self.now += secs


@pytest.fixture
def env(zk_conf, tmp_path):
    conf = {**zk_conf, "storm.local.dir": str(tmp_path / "local"), "nimbus.task.timeout.secs": 30,
            "nimbus.task.launch.secs": 60, "nimbus.supervisor.timeout.secs": 60}
    cluster = mk_storm_cluster_state(conf)
    clock = Clock()
    made = []

    def nimbus():
        store = CodeStore(tmp_path / "local" / "nimbus")
        store.open()
        core = NimbusCore(conf, cluster, store, clock=clock)
        core.recover()
        made.append(core)
        return core

    class Env:
        pass

    e = Env()
    e.conf, e.cluster, e.clock, e.nimbus, e.root = conf, cluster, clock, nimbus, tmp_path
    yield e
    cluster.disconnect()


def _submit(env, core, name="topo", **kw):
    pkg = package(env.root, **kw)
    return core.submit(name, pkg)


def _slots(assignment):
    return collections.Counter(assignment.executor_node_port.values())


def test_submit_writes_a_storm_base_and_an_even_assignment_over_two_supervisors(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    register_supervisor(env.cluster, "sup-2", "host-b")
    core = env.nimbus()
    storm_id = _submit(env, core, spouts=2, bolts=3, config={"topology.workers": 4})
    assert storm_id.startswith("topo-1-")
    base = env.cluster.storm_base(storm_id)
    assert (base.storm_name, base.status, base.num_workers) == ("topo", "active", 4)
    assert base.component_executors == {"numbers": 2, "pass": 3, "__acker": 4}
    a = env.cluster.assignment_info(storm_id)
    slots = _slots(a)
    assert len(slots) == 4 and sorted(slots.values()) == [2, 2, 2, 3]  # 9 executors over 4 slots
    assert collections.Counter(node for node, _ in slots) == {"sup-1": 2, "sup-2": 2}  # interleaved
    assert a.node_host == {"sup-1": "host-a", "sup-2": "host-b"}
    assert set(a.executor_start_time_secs) == set(a.executor_node_port)
    conf = core.store.read_conf(storm_id)
    assert conf["storm.id"] == storm_id and conf["topology.name"] == "topo"


def test_duplicate_names_bad_names_and_invalid_structures_are_rejected_naming_the_culprit(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    _submit(env, core)
    with pytest.raises(AlreadyAliveError, match="'topo'"):
        _submit(env, core)
    for bad in ("a/b", "a.b", "x:y", ""):
        with pytest.raises(InvalidTopologyError, match="topology name"):
            _submit(env, core, name=bad)

    def unknown_source(d):
        d["components"]["pass"]["inputs"][0]["source"] = "ghost"

    with pytest.raises(InvalidTopologyError, match="bolt 'pass' subscribes to unknown component 'ghost'"):
        core.submit("broken", package(env.root, structure_edit=unknown_source))

    def zero_parallelism(d):
        d["components"]["numbers"]["parallelism"] = 0

    with pytest.raises(InvalidTopologyError, match="'numbers': parallelism"):
        core.submit("broken2", package(env.root, structure_edit=zero_parallelism))
    with pytest.raises(InvalidTopologyError, match="topology.workers"):
        core.submit("broken3", package(env.root, conf={"topology.workers": 0}))
    assert sorted(env.cluster.active_storms()) == [core._id_of("topo")]
    assert core.store.stored_ids() == [core._id_of("topo")]  # nothing of the refused ones kept


def test_kill_with_wait_marks_killed_at_once_and_removes_after_the_wait(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    storm_id = _submit(env, core)
    assert core.kill("topo", 20) == 20  # what the CLI prints
    assert env.cluster.storm_base(storm_id).status == "killed"
    env.clock.advance(5)
    # re-submitting the name meanwhile says it is being killed, and for how long
    with pytest.raises(AlreadyAliveError, match=r"'topo' is being killed \(removed in about 15s\); submit it again"):
        _submit(env, core)
    env.clock.advance(14)
    core.fire_timers()
    assert env.cluster.assignment_info(storm_id) is not None
    env.clock.advance(2)
    core.fire_timers()
    assert env.cluster.storm_base(storm_id) is None and env.cluster.assignment_info(storm_id) is None
    assert core.store.stored_ids() == []
    with pytest.raises(NotAliveError):
        core.kill("topo")
    _submit(env, core)  # the name is free again


def test_activate_and_deactivate_flip_the_status_and_a_killed_topology_cannot_be_activated(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    storm_id = _submit(env, core)
    core.deactivate("topo")
    assert env.cluster.storm_base(storm_id).status == "inactive"
    core.activate("topo")
    assert env.cluster.storm_base(storm_id).status == "active"
    core.kill("topo", 30)
    with pytest.raises(IllegalTransitionError, match="topology topo is killed: cannot activate"):
        core.activate("topo")
    with pytest.raises(NotAliveError, match="'nope'"):
        core.activate("nope")


def test_rebalance_changes_the_worker_count_and_keeps_the_tasks(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    register_supervisor(env.cluster, "sup-2", "host-b")
    core = env.nimbus()
    storm_id = _submit(env, core, spouts=2, bolts=2, bolt_tasks=4, config={"topology.workers": 2})
    before = env.cluster.assignment_info(storm_id)
    tasks = sorted(t for s, e in before.executor_node_port for t in range(s, e + 1))
    assert core.rebalance("topo", 5, num_workers=4, executors={"pass": 4}).seconds_left == 5
    assert env.cluster.storm_base(storm_id).status == "rebalancing"
    with pytest.raises(InvalidTopologyError, match="no component 'ghost'"):
        core.rebalance("topo", 0, executors={"ghost": 2})
    env.clock.advance(6)
    core.fire_timers()
    base = env.cluster.storm_base(storm_id)
    after = env.cluster.assignment_info(storm_id)
    assert base.status == "active" and base.num_workers == 4 and base.component_executors["pass"] == 4
    assert len(set(after.executor_node_port.values())) == 4
    assert sorted(t for s, e in after.executor_node_port for t in range(s, e + 1)) == tasks


def test_executors_of_a_vanished_supervisor_move_and_the_rest_stay(env):
    register_supervisor(env.cluster, "sup-1", "host-a", ports=(6700, 6701))
    register_supervisor(env.cluster, "sup-2", "host-b", ports=(6700, 6701))
    register_supervisor(env.cluster, "sup-3", "host-c", ports=(6700, 6701))
    core = env.nimbus()
    storm_id = _submit(env, core, config={"topology.workers": 2})
    before = env.cluster.assignment_info(storm_id).executor_node_port
    gone = sorted({node for node, _ in before.values()})[0]
    env.cluster.cluster_state.delete_node(f"/supervisors/{gone}")
    core.mk_assignments()
    after = env.cluster.assignment_info(storm_id).executor_node_port
    for ex, slot in before.items():
        if slot[0] == gone:
            assert after[ex][0] != gone
        else:
            assert after[ex] == slot


def test_executors_whose_heartbeats_stop_are_moved_after_the_timeout_not_before(env):
    register_supervisor(env.cluster, "sup-1", "host-a", ports=(6700, 6701))
    register_supervisor(env.cluster, "sup-2", "host-b", ports=(6700, 6701))
    core = env.nimbus()
    storm_id = _submit(env, core, config={"topology.workers": 2})
    a = env.cluster.assignment_info(storm_id)
    dead_slot = sorted(set(a.executor_node_port.values()))[0]
    t = 1
    def supervisors_alive(t):
        register_supervisor(env.cluster, "sup-1", "host-a", ports=(6700, 6701), time_secs=t)
        register_supervisor(env.cluster, "sup-2", "host-b", ports=(6700, 6701), time_secs=t)

    for _ in range(4):  # past the launch grace, heartbeating every 20s
        env.clock.advance(20)
        t += 20
        supervisors_alive(t)
        beat(env.cluster, storm_id, a, t)
        core.mk_assignments()
    assert env.cluster.assignment_info(storm_id) == a
    for _ in range(3):  # the dead slot's heartbeat stops advancing
        env.clock.advance(10)
        t += 10
        supervisors_alive(t)
        beat(env.cluster, storm_id, a, t, skip_slots=[dead_slot])
        core.mk_assignments()
        if env.clock.now - 1_000_080 < 30:
            assert env.cluster.assignment_info(storm_id) == a, "moved before the timeout"
    after = env.cluster.assignment_info(storm_id).executor_node_port
    for ex, slot in a.executor_node_port.items():
        if slot == dead_slot:
            assert after[ex] != dead_slot
        else:
            assert after[ex] == slot


def test_a_restarted_nimbus_keeps_every_assignment_byte_for_byte(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    register_supervisor(env.cluster, "sup-2", "host-b")
    core = env.nimbus()
    ids = [_submit(env, core, name=f"t{i}", config={"topology.workers": 2}) for i in range(2)]
    core.kill("t1", 100)
    raw = {i: env.cluster.cluster_state.get_data(assignment_path(i)) for i in ids}
    versions = {i: env.cluster.assignment_version(i) for i in ids}
    env.clock.advance(30)
    core2 = env.nimbus()  # a new Nimbus on the same ZooKeeper and local dir
    core2.mk_assignments()
    assert {i: env.cluster.cluster_state.get_data(assignment_path(i)) for i in ids} == raw
    assert {i: env.cluster.assignment_version(i) for i in ids} == versions
    env.clock.advance(71)  # the kill's wait survives the restart: 100 s from the kill
    core2.fire_timers()
    assert env.cluster.storm_base(ids[1]) is None and env.cluster.storm_base(ids[0]) is not None


def test_a_topology_whose_code_is_gone_is_kept_as_it_runs_on_restart(env):
    """Issue 21: a Nimbus lacking a topology's code (another Nimbus may have it) destroys nothing."""
    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    storm_id = _submit(env, core)
    raw = env.cluster.cluster_state.get_data(assignment_path(storm_id))
    core.store.remove(storm_id)
    core2 = env.nimbus()
    core2.mk_assignments()
    core2.cleanup()
    assert env.cluster.storm_base(storm_id) is not None
    assert env.cluster.cluster_state.get_data(assignment_path(storm_id)) == raw
    # what needs the code says so; deactivate and kill go on without it (Nimbus's default wait)
    with pytest.raises(UnavailableError, match=f"the code of topology {storm_id} is not on this Nimbus yet"):
        core2.rebalance("topo", 0, num_workers=1)
    core2.deactivate("topo")
    assert env.cluster.storm_base(storm_id).status == "inactive"
    core2.kill("topo", 0)
    core2.fire_timers()
    assert env.cluster.storm_base(storm_id) is None


def test_an_upload_cut_off_midway_leaves_nothing_behind(env):
    core = env.nimbus()
    store = core.store
    upload = store.begin_upload(1000, "0" * 64, 1 << 20)
    store.upload_chunk(upload, 0, b"x" * 400)
    assert list(store.inbox.iterdir())
    assert store.expire_uploads(3600) == []  # not yet expired
    assert store.expire_uploads(5, now=time.time() + 10) == [upload]
    assert list(store.inbox.iterdir()) == [] and store.stored_ids() == []
    upload = store.begin_upload(10, "0" * 64, 1 << 20)
    store.upload_chunk(upload, 0, b"y" * 5)
    env.nimbus()  # a restart empties the inbox too
    assert list(store.inbox.iterdir()) == []


def test_cleanup_removes_heartbeats_errors_and_code_of_topologies_that_are_gone(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    storm_id = _submit(env, core)
    env.cluster.report_error(storm_id, "pass", "host-a", 6700, "boom")
    env.cluster.setup_heartbeats("ghost-1-1")
    core.kill("topo", 0)
    core.fire_timers()
    core.cleanup()
    assert storm_id not in env.cluster.heartbeat_storms() and "ghost-1-1" not in env.cluster.heartbeat_storms()
    assert storm_id not in env.cluster.error_topologies()
    assert core.store.stored_ids() == []


def test_topology_details_lists_the_worker_deaths_its_supervisors_report_newest_first(env):
    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    storm_id = _submit(env, core, config={"topology.workers": 1})
    other = _submit(env, core, name="other", config={"topology.workers": 1})
    assert core.topology_details(storm_id).worker_deaths == ()
    crash = WorkerDeath(storm_id, 6700, 200, "worker w1 on port 6700 exited", exit_code=1,
                        error_line="ValueError: bad", log_tail="Traceback ...\nValueError: bad")
    killed = WorkerDeath(storm_id, 6701, 300, "worker w2 on port 6701 exited", signal="SIGKILL")
    timed_out = WorkerDeath(storm_id, 6702, 250, "worker w3 on port 6702 timed out: last heartbeat 40s ago")
    for sid, host, deaths in (("sup-1", "host-a", (crash, WorkerDeath(other, 6703, 400, "exited"))),
                              ("sup-2", "host-b", (killed, timed_out))):
        env.cluster.supervisor_heartbeat(sid, SupervisorInfo(
            time_secs=1, hostname=host, assignment_id=sid, used_ports=(), meta=(6700, 6701, 6702, 6703),
            scheduler_meta=None, uptime_secs=0, worker_deaths=deaths))
    deaths = core.topology_details(storm_id).to_wire()["worker_deaths"]  # as the RPC sends it
    assert [(d["supervisor"], d["host"], d["port"], d["time_secs"]) for d in deaths] == [
        ("sup-2", "host-b", 6701, 300), ("sup-2", "host-b", 6702, 250), ("sup-1", "host-a", 6700, 200)]
    assert deaths[2] == {
        "supervisor": "sup-1", "host": "host-a", "port": 6700, "time_secs": 200,
        "reason": "worker w1 on port 6700 exited", "exit_code": 1, "signal": None, "error_line": "ValueError: bad",
        "log_tail": "Traceback ...\nValueError: bad"}
    assert (deaths[0]["exit_code"], deaths[0]["signal"]) == (None, "SIGKILL")
    assert msgpack.unpackb(msgpack.packb(deaths)) == deaths  # plain data, string keys
    assert [d.port for d in core.topology_details(other).worker_deaths] == [6703]
    assert core.topology_info(storm_id).id == storm_id  # the summary reads past it


def test_rebalance_says_what_it_caps():
    from daemons.nimbus.rebalance_notes import rebalance_notes
    from executor.structure import ComponentStructure

    comps = {"split": ComponentStructure("split", "bolt", 2, 4, {}, (), {})}
    assert rebalance_notes(comps, {"split": 4}, 2, 4) == []
    notes = rebalance_notes(comps, {"split": 6}, 3, 2)
    assert notes[0].startswith("component 'split' has 4 task(s): it runs 4 executor(s), not 6")
    assert notes[1].startswith("3 workers asked but the registered supervisors offer 2 slot(s)")


def test_daemon_keys_never_reach_a_topologys_conf(env):
    # `-c storm.zookeeper.port=1` at submit used to reach every worker, none of which could then
    # connect; Nimbus's own daemon keys were shipped too. Workers take them from their supervisor.
    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    storm_id = core.submit("topo", package(env.root, config={"supervisor.slots.ports": [1], "my.key": 1}),
                           overrides={"storm.zookeeper.port": 1, "nimbus.seeds": ["elsewhere"],
                                      "storm.local.dir": "/nowhere", "topology.workers": 1, "other.key": 2})
    stored = core.store.read_conf(storm_id)
    assert not [k for k in stored if k.startswith(("storm.zookeeper.", "nimbus.", "supervisor."))
                or k in ("storm.local.dir", "storm.log.dir", "storm.local.hostname")]
    assert stored["my.key"] == 1 and stored["other.key"] == 2 and stored["topology.workers"] == 1
    assert stored["topology.message.timeout.secs"] == core.conf["topology.message.timeout.secs"]


def test_cluster_info_says_how_a_topology_fares_live_workers_restarts_and_the_last_error(env):
    # A topology whose workers crash-loop used to show ACTIVE with its assigned workers.
    core = env.nimbus()
    storm_id = _submit(env, core, config={"topology.workers": 2})
    (top,) = core.cluster_info().topologies
    assert top.live_workers == 0 and top.recent_restarts == 0
    assert top.last_error.error.startswith("no supervisor offers slots: none is registered under ZooKeeper root")

    register_supervisor(env.cluster, "sup-1", "host-a")
    core.mk_assignments()
    assignment = env.cluster.assignment_info(storm_id)
    (top,) = core.cluster_info().topologies
    assert top.num_workers == 2 and top.live_workers == 0 and top.last_error is None
    # one worker heartbeats, the other died twice in the last minutes on a missing module
    slots = sorted(set(assignment.executor_node_port.values()))
    env.clock.advance(5)
    beat(env.cluster, storm_id, assignment, time_secs=int(env.clock()), skip_slots=slots[1:])
    core.mk_assignments()
    death = WorkerDeath(storm_id, slots[1][1], int(env.clock()), f"worker w2 on port {slots[1][1]} exited",
                        exit_code=1, error_line="ModuleNotFoundError: No module named 'nltk'")
    env.cluster.supervisor_heartbeat("sup-1", SupervisorInfo(
        time_secs=2, hostname="host-a", assignment_id="sup-1", used_ports=(), meta=(6700, 6701, 6702, 6703),
        scheduler_meta=None, uptime_secs=0, worker_deaths=(death,), recent_worker_deaths=((storm_id, 2),)))
    (top,) = core.cluster_info().topologies
    assert top.live_workers == 1 and top.recent_restarts == 2
    problem = top.last_error
    assert (problem.host, problem.port, problem.component) == ("host-a", slots[1][1], None)
    assert problem.error.startswith("module 'nltk' is not installed in the workers' Python on this host")
    # a supervisor failing to fetch the code, later, is the newest problem
    env.cluster.supervisor_heartbeat("sup-2", SupervisorInfo(
        time_secs=2, hostname="host-b", assignment_id="sup-2", used_ports=(), meta=(6700,),
        scheduler_meta=None, uptime_secs=0,
        code_failures=((storm_id, int(env.clock()) + 1, "cannot fetch the code from Nimbus (attempt 3): auth"),)))
    (top,) = core.cluster_info().topologies
    assert (top.last_error.host, top.last_error.port) == ("host-b", None)
    assert top.last_error.error == "cannot fetch the code from Nimbus (attempt 3): auth"
    # a component's reported error, newer (written at the real time, after the fake clock's), wins
    env.cluster.report_error(storm_id, "pass", "host-a", slots[0][1], "Traceback ...\nValueError: boom")
    (top,) = core.cluster_info().topologies
    assert (top.last_error.component, top.last_error.error) == ("pass", "ValueError: boom")


def test_a_zookeeper_outage_is_not_held_against_workers_or_supervisors(env, monkeypatch):
    # Nimbus could not read heartbeats during the outage; afterwards it saw stale ones and moved
    # executors of workers that had been processing throughout. Now every clock restarts when
    # the connection comes back, and a supervisor whose node is not back yet keeps its slots.
    register_supervisor(env.cluster, "sup-1", "host-a", ports=(6700, 6701))
    register_supervisor(env.cluster, "sup-2", "host-b", ports=(6700, 6701))
    core = env.nimbus()
    storm_id = _submit(env, core, config={"topology.workers": 2})
    a = env.cluster.assignment_info(storm_id)
    t = 1
    for _ in range(4):  # running, past the launch grace
        env.clock.advance(20)
        t += 20
        for sid, host in (("sup-1", "host-a"), ("sup-2", "host-b")):
            register_supervisor(env.cluster, sid, host, ports=(6700, 6701), time_secs=t)
        beat(env.cluster, storm_id, a, t)
        core.mk_assignments()
    assert env.cluster.assignment_info(storm_id) == a
    # the outage: 90 s without a round; sup-1's session expired, its node not yet re-created
    env.clock.advance(90)
    env.cluster.cluster_state.delete_node("/supervisors/sup-1")
    reconnects = env.cluster.reconnects() + 1
    monkeypatch.setattr(env.cluster, "reconnects", lambda: reconnects)
    core.mk_assignments()
    assert env.cluster.assignment_info(storm_id) == a, "moved for heartbeats missed during the outage"
    env.clock.advance(20)  # still within the timeouts counted from the reconnection
    core.mk_assignments()
    assert env.cluster.assignment_info(storm_id) == a
    # the grace is not forever: sup-1 never comes back, sup-2's workers never heartbeat again
    env.clock.advance(60)
    core.mk_assignments()
    after = env.cluster.assignment_info(storm_id).executor_node_port
    assert not [s for s in after.values() if s[0] == "sup-1"]


def test_a_submit_that_cannot_finish_in_time_leaves_nothing_behind(env, monkeypatch):
    # With ZooKeeper down, a client timed out and the topology started by itself once ZooKeeper
    # came back: a ghost the user believed refused.
    from cluster_state.errors import ClusterStateUnavailableError
    from cluster_state.protocol import ConnectionState
    from daemons.rpc.protocol import UnavailableError

    register_supervisor(env.cluster, "sup-1", "host-a")
    core = env.nimbus()
    with pytest.raises(UnavailableError, match=r"took longer than the client waits \(\d+\.\ds waiting behind Nimbus's "
                                               r"scheduling, \d+\.\ds writing to ZooKeeper: .*\): undone, nothing was submitted"):
        core.submit("late", package(env.root), deadline=time.monotonic() - 1)
    assert env.cluster.active_storms() == [] and core.store.stored_ids() == []
    assert core.cluster_info().topologies == ()

    # ZooKeeper refuses the undo too: nothing is assigned or listed meanwhile, a later round removes it
    real_remove = env.cluster.remove_storm
    monkeypatch.setattr(env.cluster, "remove_storm",
                        lambda storm_id: (_ for _ in ()).throw(ClusterStateUnavailableError("zk down")))
    with pytest.raises(UnavailableError):
        core.submit("ghost", package(env.root), deadline=time.monotonic() - 1)
    (ghost,) = env.cluster.active_storms()
    core.mk_assignments()
    assert env.cluster.assignment_info(ghost) is None and core.cluster_info().topologies == ()
    monkeypatch.setattr(env.cluster, "remove_storm", real_remove)
    core.cleanup()
    assert env.cluster.active_storms() == [] and core.store.stored_ids() == []
    assert core.submit("ghost", package(env.root)).startswith("ghost-")  # the name is free again

    # Nimbus without ZooKeeper refuses at once, naming it
    monkeypatch.setattr(type(env.cluster), "connection_state", property(lambda self: ConnectionState.SUSPENDED))
    with pytest.raises(UnavailableError, match="Nimbus cannot reach ZooKeeper .*'nozk' was not submitted"):
        core.submit("nozk", package(env.root))


def test_a_full_disk_is_named_and_the_partial_upload_removed_at_once(env, monkeypatch):
    # A bare "OSError: [Errno 28]" naming no path; the partial upload stayed in the inbox and
    # made every later submit fail until it expired.
    import os
    import shutil

    from daemons.nimbus.code_store import UploadError

    store = env.nimbus().store
    upload = store.begin_upload(1000, "0" * 64, 1 << 20)
    part = next(store.inbox.iterdir())
    part.unlink()
    os.symlink("/dev/full", part)  # writes fail with ENOSPC, as on a full disk
    with pytest.raises(UploadError, match=r"cannot write .*\.part \(No space left on device\); the package "
                                          r"needs 1000 bytes, \d+ free in .*inbox; the partial upload was removed"):
        store.upload_chunk(upload, 0, b"x" * 400)
    assert list(store.inbox.iterdir()) == []
    with pytest.raises(UploadError, match="no upload"):
        store.upload_chunk(upload, 0, b"x")
    # refused before a byte is written when the space is not there
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10, 10, 0))
    with pytest.raises(UploadError, match=r"not enough disk space for a package of 1000 bytes in Nimbus's "
                                          r"inbox .*inbox: 0 bytes free"):
        store.begin_upload(1000, "0" * 64, 1 << 20)
    assert list(store.inbox.iterdir()) == []
