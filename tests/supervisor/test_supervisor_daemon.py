"""The supervisor daemon on a real ZooKeeper with real worker processes, ported from Storm's
supervisor_test and SlotTest: launching one worker per assigned port, relaunching a worker that
stops heartbeating, killing on unassignment, two supervisors side by side, its own heartbeat while
workers fail, conflicting assignments, and code downloads that fail at first."""

from __future__ import annotations

import os
import signal
import time

import pytest
import yaml
from supervisor_env import (
    failing_command,
    free_ports,
    heartbeating_on,
    pid_alive,
    records_on_disk,
    rounds,
    running_workers,
    slots_running,
    supervisor_id_on_disk,
    wait_running_workers,
)
from testutil import one_error_line, storm_py, wait_until

from cluster_state import local_layout
from daemons.supervisor.slot import SlotPhase

pytestmark = [pytest.mark.timeout(120), pytest.mark.zk, pytest.mark.cluster]





def replaced(sup, port: int, old_wid: str) -> bool:
    """A worker other than `old_wid` heartbeats on `port` (one read: the worker may exit between two)."""
    worker = running_workers(sup.conf).get(port)
    return worker is not None and worker[0] != old_wid

@pytest.mark.slow
def test_three_ports_get_one_worker_each_and_no_kills_while_they_heartbeat(env):
    ports = free_ports(4)
    sup = env.supervisor(env.conf("sup", ports))
    sid = env.topology()
    env.assign(sid, [(sup.supervisor_id, ports[0]), (sup.supervisor_id, ports[1]), (sup.supervisor_id, ports[2])])
    wait_until(lambda: len(running_workers(sup.conf)) == 3, 60, "three heartbeating workers")
    wait_until(lambda: slots_running(sup, ports[:3]), 30, "three RUNNING slots")
    before = heartbeating_on(sup.conf, ports[:3])
    assert len({pid for _, pid in before.values()}) == 3
    rounds(sup, 4)
    wait_running_workers(sup.conf, before, "the same workers, untouched", diagnostics=env.diagnostics)
    assert sup.launches == 3
    assert sup.slot_states()[ports[3]].phase is SlotPhase.EMPTY
    assert (local_layout.supervisor_stormdist(sup.conf, sid) / "stormconf.json").is_file()
    # Each worker got its own dir with its pid file.
    for wid, pid in before.values():
        assert (local_layout.worker_pids(sup.conf, wid) / str(pid)).exists()


@pytest.mark.slow
def test_a_worker_whose_heartbeat_stops_is_killed_and_relaunched_once(env):
    ports = free_ports(2)
    sup = env.supervisor(env.conf("sup", ports))
    sid = env.topology()
    env.assign(sid, [(sup.supervisor_id, ports[0]), (sup.supervisor_id, ports[1])])
    wait_until(lambda: slots_running(sup, ports), 60, "two RUNNING slots")
    before = heartbeating_on(sup.conf, ports)
    stuck_wid, stuck_pid = before[ports[0]]
    os.kill(stuck_pid, signal.SIGSTOP)  # alive but silent: only its heartbeat stops
    try:
        wait_until(lambda: not pid_alive(stuck_pid), 60, "the silent worker to be killed")
    finally:
        if pid_alive(stuck_pid):
            os.kill(stuck_pid, signal.SIGKILL)
    wait_until(lambda: replaced(sup, ports[0], stuck_wid),
               60, "a replacement worker heartbeating")
    wait_until(lambda: slots_running(sup, ports), 30, "both slots RUNNING again")
    rounds(sup, 3)
    # the other slot was never touched
    wait_until(lambda: running_workers(sup.conf).get(ports[1]) == before[ports[1]], 30,
               lambda: f"the other slot's worker {before[ports[1]]}, heartbeating: {running_workers(sup.conf)}",
               interval=0.2)
    assert sup.launches == 3  # two, plus exactly one relaunch
    # the killed worker's directory goes once the slot's cleanup ran (retried until it can)
    wait_until(lambda: not local_layout.worker_root(sup.conf, stuck_wid).exists(), 30,
               f"the killed worker {stuck_wid}'s directory removed")


def _damage_and_kill(env, damage):
    """A running worker; `damage(code_dir)` harms its installed code, the worker is SIGKILLed,
    and a replacement heartbeats: (the supervisor, the code dir)."""
    ports = free_ports(1)
    sup = env.supervisor(env.conf("sup", ports))
    sid = env.topology()
    env.assign(sid, [(sup.supervisor_id, ports[0])])
    wait_until(lambda: slots_running(sup, ports), 60, "the slot RUNNING")
    wid, pid = running_workers(sup.conf)[ports[0]]
    code_dir = local_layout.supervisor_stormdist(sup.conf, sid)
    damage(code_dir)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: replaced(sup, ports[0], wid), 60, "a replacement worker heartbeating on code fetched again")
    return sup, code_dir


def test_damaged_code_is_fetched_again_not_restarted_on(env):
    # Code edited or truncated under supervisor/stormdist: every relaunch used to die on it.
    good = {}

    def damage(code_dir):
        good["topology.py"] = (code_dir / "topology.py").read_bytes()
        (code_dir / "topology.py").write_text("raise SystemExit('damaged')\n")

    sup, code_dir = _damage_and_kill(env, damage)
    assert (code_dir / "topology.py").read_bytes() == good["topology.py"]
    assert sup.launches == 2  # no relaunch on the damaged code


def test_code_that_lost_its_topology_conf_is_fetched_again(env):
    # stormconf.json is not in the package's manifest (Nimbus sends it beside the package): a code
    # dir without it used to pass as present, and every relaunch died on "no code for topology".
    sup, code_dir = _damage_and_kill(env, lambda d: (d / "stormconf.json").unlink())
    assert (code_dir / "stormconf.json").is_file()
    assert sup.launches == 2  # no launch on the code without its conf


@pytest.mark.slow
def test_unassigning_kills_the_worker_and_removes_its_dirs_and_code(env):
    ports = free_ports(1)
    sup = env.supervisor(env.conf("sup", ports))
    sid = env.topology()
    env.assign(sid, [(sup.supervisor_id, ports[0])])
    wait_until(lambda: slots_running(sup, ports), 60, "the slot RUNNING")
    wid, pid = running_workers(sup.conf)[ports[0]]
    env.unassign(sid)
    wait_until(lambda: not pid_alive(pid), 30, "the worker to exit")
    wait_until(lambda: sup.slot_states()[ports[0]].phase is SlotPhase.EMPTY, 30, "the slot EMPTY")
    assert not local_layout.worker_root(sup.conf, wid).exists()
    assert records_on_disk(sup.conf) == {}
    wait_until(lambda: not local_layout.supervisor_stormdist(sup.conf, sid).exists(), 30, "the code removed")


def test_two_supervisors_two_topologies_and_a_kill_leaves_the_other_topology_alone(env):
    ports_a, ports_b = free_ports(2), free_ports(2)
    sup_a = env.supervisor(env.conf("sup-a", ports_a))
    sup_b = env.supervisor(env.conf("sup-b", ports_b))
    t1, t2 = env.topology("one"), env.topology("two")
    env.assign(t1, [(sup_a.supervisor_id, ports_a[0]), (sup_b.supervisor_id, ports_b[0])])
    env.assign(t2, [(sup_a.supervisor_id, ports_a[1]), (sup_b.supervisor_id, ports_b[1])])
    wait_until(lambda: slots_running(sup_a, ports_a) and slots_running(sup_b, ports_b), 60, "four RUNNING slots")
    keep_a, keep_b = running_workers(sup_a.conf)[ports_a[1]], running_workers(sup_b.conf)[ports_b[1]]
    gone = [running_workers(sup_a.conf)[ports_a[0]][1], running_workers(sup_b.conf)[ports_b[0]][1]]
    env.unassign(t1)  # what Nimbus does once a kill's wait is over
    wait_until(lambda: not any(pid_alive(p) for p in gone), 30, "topology one's workers to exit")
    rounds(sup_a, 2)
    wait_running_workers(sup_a.conf, {ports_a[1]: keep_a}, "supervisor a: topology two's worker only", diagnostics=env.diagnostics)
    wait_running_workers(sup_b.conf, {ports_b[1]: keep_b}, "supervisor b: topology two's worker only", diagnostics=env.diagnostics)
    assert sup_a.launches == sup_b.launches == 2


def test_supervisor_heartbeat_stays_fresh_with_its_ports_while_workers_fail_to_start(env):
    ports = free_ports(2)
    sup = env.supervisor(env.conf("sup", ports), worker_command=failing_command)
    sid = env.topology()
    env.assign(sid, [(sup.supervisor_id, ports[0])])
    wait_until(lambda: sup.launches >= 3, 60, "the failing worker to be relaunched twice")
    first = env.cluster.supervisor_info(sup.supervisor_id)
    assert first.meta == tuple(ports) and first.hostname == "127.0.0.1"
    assert first.assignment_id == sup.supervisor_id
    wait_until(lambda: env.cluster.supervisor_info(sup.supervisor_id).time_secs > first.time_secs, 10,
               "a newer supervisor heartbeat")
    assert abs(env.cluster.supervisor_info(sup.supervisor_id).time_secs - time.time()) < 5
    assert ports[0] in env.cluster.supervisor_info(sup.supervisor_id).used_ports
    assert sup.status.value == "running"


@pytest.mark.slow
def test_conflicting_assignments_do_not_crash_it_and_resolve_after_a_rebalance(env):
    ports = free_ports(3)
    sup = env.supervisor(env.conf("sup", ports))
    me = sup.supervisor_id
    t1, t2 = env.topology("one"), env.topology("two")
    env.assign(t1, [(me, ports[0]), (me, ports[1])])
    env.assign(t2, [(me, ports[0])])  # port 0 claimed twice
    wait_until(lambda: slots_running(sup, [ports[1]]), 60, "the unconflicted slot RUNNING")
    # Port 0 is left alone: whatever it ran when the conflict appeared (topology one's worker,
    # if the supervisor saw that assignment first, or nothing) stays as it is.
    rounds(sup, 2)
    held = sup.slot_states()[ports[0]]
    rounds(sup, 3)
    assert sup.slot_states()[ports[0]] == held
    assert held.assignment is None or held.assignment.storm_id == t1
    assert sup.status.value == "running"
    env.assign(t2, [(me, ports[2])])  # the rebalance moves topology two away
    wait_until(lambda: slots_running(sup, ports), 60, "all three slots RUNNING")
    states = sup.slot_states()
    assert (states[ports[0]].assignment.storm_id, states[ports[2]].assignment.storm_id) == (t1, t2)


def test_a_failed_code_download_is_retried(env):
    ports = free_ports(1)
    sup = env.supervisor(env.conf("sup", ports))
    sid = env.topology(install=False)  # Nimbus does not have the code yet
    env.assign(sid, [(sup.supervisor_id, ports[0])])
    wait_until(lambda: sup._retries.failures(sid) >= 2, 30, "two failed download attempts")
    assert sup.slot_states()[ports[0]].phase is SlotPhase.WAITING_FOR_CODE
    assert not local_layout.supervisor_stormdist(sup.conf, sid).exists()
    assert not any(local_layout.supervisor_tmp(sup.conf).iterdir())  # nothing half-downloaded left
    # published, so that `storm-py list` says why no worker starts
    info = wait_until(lambda: (i := env.cluster.supervisor_info(sup.supervisor_id)).code_failures and i, 30,
                      "the download failure in the supervisor's heartbeat")
    ((failed_id, _when, why),) = info.code_failures
    assert failed_id == sid and why.startswith("cannot fetch the code from Nimbus (attempt "), why
    env.install(sid)
    wait_until(lambda: slots_running(sup, ports), 90, "the worker RUNNING once the code could be fetched")
    assert sup.launches == 1
    wait_until(lambda: env.cluster.supervisor_info(sup.supervisor_id).code_failures == (), 30,
               "the failure gone once the code is here")


def test_a_second_supervisor_on_the_same_local_dir_is_refused_in_one_line(env, tmp_path):
    conf = env.conf("shared", free_ports(1))
    first = env.supervisor(conf)
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "storm.yaml").write_text(yaml.safe_dump(conf))
    out = storm_py("supervisor", conf_dir=conf_dir, timeout=60)
    line = one_error_line(out, str(conf["storm.local.dir"]), f"pid {os.getpid()}", code=1)
    assert "in use by another supervisor" in line and "give each supervisor its own storm.local.dir" in line
    # the first one runs on, under its own id; once it stops, the directory can be used again
    assert first.supervisor_id == supervisor_id_on_disk(conf)
    first.stop()
    env.supervisors.remove(first)
    second = env.supervisor(conf)
    assert second.supervisor_id == first.supervisor_id
