"""The supervisor going away and coming back: stopped or SIGKILLed, its workers keep running and
are re-adopted (same pids, nothing launched twice); a recorded pid that now belongs to another
process is never signalled; a ZooKeeper restart kills nothing and the supervisor re-registers."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from supervisor_env import (
    Env,
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
from testutil import wait_until
from zk_fixture import zk_conf_for

from cluster_state import local_layout
from cluster_state.errors import ClusterStateError
from cluster_state.local_state import LS_APPROVED_WORKERS, LS_ID, LocalState
from cluster_state.records import LocalAssignment
from daemons.process_start import ProcessStart, process_start
from daemons.supervisor.worker_state import WorkerRecord

pytestmark = [pytest.mark.timeout(150), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]




def _fresh_heartbeats_after(conf, moment: float, ports) -> bool:
    workers = running_workers(conf)
    return sorted(workers) == sorted(ports) and all(
        _hb_time(conf, wid) > moment for wid, _ in workers.values())


def _hb_time(conf, wid) -> float:
    from cluster_state.worker_beats import read_worker_heartbeat

    hb = read_worker_heartbeat(conf, wid)
    return hb.time_secs if hb else 0


def test_stopping_the_supervisor_leaves_workers_running_and_a_restart_adopts_them(env):
    ports = free_ports(2)
    conf = env.conf("sup", ports)
    sup = env.supervisor(conf)
    sid = env.topology()
    env.assign(sid, [(sup.supervisor_id, ports[0]), (sup.supervisor_id, ports[1])])
    wait_until(lambda: slots_running(sup, ports), 60, "two RUNNING slots")
    before = heartbeating_on(conf, ports)
    sup.stop()
    stopped_at = time.time()
    wait_until(lambda: _fresh_heartbeats_after(conf, stopped_at + 1, ports), 20,
               "the workers to keep heartbeating without their supervisor")
    again = env.supervisor(conf)
    assert again.supervisor_id == sup.supervisor_id
    wait_until(lambda: slots_running(again, ports), 30, "the workers adopted (RUNNING)")
    rounds(again, 3)
    wait_running_workers(conf, before, "the same workers, readopted", diagnostics=env.diagnostics)
    assert again.launches == 0


def test_sigkill_of_the_supervisor_process_leaves_workers_running_and_a_restart_readopts_the_same_pids(env):
    ports = free_ports(2)
    conf = env.conf("sup", ports)
    proc = env.supervisor_process(conf)
    sup_id = wait_until(lambda: supervisor_id_on_disk(conf), 30, "the supervisor id on disk")
    sid = env.topology()
    env.assign(sid, [(sup_id, ports[0]), (sup_id, ports[1])])
    wait_until(lambda: sorted(running_workers(conf)) == ports, 60, "two heartbeating workers")
    before = running_workers(conf)
    worker_dirs = sorted(p.name for p in local_layout.worker_root(conf).iterdir())
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    killed_at = time.time()
    wait_until(lambda: _fresh_heartbeats_after(conf, killed_at + 1, ports), 20,
               "the workers to keep heartbeating after the supervisor's SIGKILL")
    restarted = env.supervisor_process(conf)

    def registered_with_both_ports():
        info = env.cluster.supervisor_info(sup_id)
        if info is not None and info.time_secs > killed_at + 1 and sorted(info.used_ports) == ports:
            return info
        return None

    first = wait_until(registered_with_both_ports, 30, "the restarted supervisor's heartbeat with both ports")
    wait_until(lambda: env.cluster.supervisor_info(sup_id).time_secs >= first.time_secs + 3, 20,
               "a few more supervisor heartbeats (several sync-processes rounds)")
    assert restarted.poll() is None
    wait_running_workers(conf, before, "the same workers, readopted", diagnostics=env.diagnostics)
    assert sorted(p.name for p in local_layout.worker_root(conf).iterdir()) == worker_dirs  # nothing launched
    assert sorted(records_on_disk(conf)) == sorted(wid for wid, _ in before.values())


def test_a_recorded_pid_now_owned_by_another_process_is_never_signalled(env):
    ports = free_ports(1)
    conf = env.conf("sup", ports)
    sid = env.topology()
    # A process that is not our worker holds the recorded pid (as after a reboot or pid reuse).
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        state = LocalState(local_layout.supervisor_localstate(conf))
        state.put(LS_ID, "sup-stale")
        # The worker it records started an hour before the process that holds its pid now.
        started = ProcessStart(process_start(other.pid).boot, process_start(other.pid).secs - 3600)
        stale = WorkerRecord("stale-worker", ports[0], LocalAssignment(sid, [(1, 1)]), time.time() - 3600,
                             other.pid, started)
        state.put(LS_APPROVED_WORKERS, {stale.worker_id: stale.to_dict()})
        local_layout.worker_pids(conf, stale.worker_id).mkdir(parents=True)
        (local_layout.worker_pids(conf, stale.worker_id) / str(other.pid)).touch()
        env.assign(sid, [("sup-stale", ports[0])])
        sup = env.supervisor(conf)
        assert sup.supervisor_id == "sup-stale"
        wait_until(lambda: slots_running(sup, ports), 60, "a fresh worker RUNNING on the port")
        rounds(sup, 2)
        assert other.poll() is None  # never signalled
        assert not local_layout.worker_root(conf, stale.worker_id).exists()
        assert sup.slot_states()[ports[0]].worker_id != stale.worker_id
    finally:
        other.kill()
        other.wait(10)


def test_zookeeper_restart_while_workers_run_kills_nothing_and_the_supervisor_re_registers(
        zk_server_factory, tmp_path):
    server = zk_server_factory()  # our own server, to stop and start again
    env = Env(zk_conf_for(server, "/storm-supervisor-test"), tmp_path)
    try:
        ports = free_ports(2)
        sup = env.supervisor(env.conf("sup", ports))
        sid = env.topology()
        env.assign(sid, [(sup.supervisor_id, ports[0]), (sup.supervisor_id, ports[1])])
        wait_until(lambda: slots_running(sup, ports), 60, "two RUNNING slots")
        before = heartbeating_on(sup.conf, ports)
        server.stop()
        rounds(sup, 5)
        down_for = time.time()
        wait_until(lambda: _fresh_heartbeats_after(sup.conf, down_for, ports), 20, "workers heartbeating")
        wait_running_workers(sup.conf, before, "the same workers while ZooKeeper is down", diagnostics=env.diagnostics)
        assert slots_running(sup, ports)
        server.start()
        # ZooKeeper is coming back: reads may fail until the client has reconnected.
        wait_until(lambda: (info := env.cluster.supervisor_info(sup.supervisor_id)) is not None
                   and info.time_secs > down_for, 60, "the supervisor registered again",
                   tolerate=(ClusterStateError,))
        rounds(sup, 3)
        wait_running_workers(sup.conf, before, "the same workers after ZooKeeper came back", diagnostics=env.diagnostics)
        assert sup.launches == 2
        assert all(pid_alive(pid) for _, pid in before.values())
    finally:
        env.close()
