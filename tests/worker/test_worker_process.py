"""Worker processes on a real ZooKeeper over real ZeroMQ, started by the test (no supervisor)."""

from __future__ import annotations

import signal

import pytest
from testutil import wait_until
from worker_helpers import Rig, acked_ids, count_topology, expected_counts, free_ports, read_counts

from executor.stats import component_totals
from executor.stats_record import from_wire

pytestmark = [pytest.mark.timeout(120), pytest.mark.zk, pytest.mark.cluster]


@pytest.fixture
def rig(zk_conf, tmp_path):
    r = Rig(zk_conf, tmp_path, free_ports(3))
    yield r
    r.close()


def test_word_count_across_two_worker_processes_is_exact(rig, tmp_path):
    total = 2000
    topo, out = count_topology(tmp_path, total)
    storm_id = rig.submit(topo, "wc", {"topology.workers": 2, "topology.max.spout.pending": 200,
                                       "topology.worker.gc.thresholds": [20000, 5, 5]})
    ports = rig.slots(storm_id)
    assert len(ports) == 2
    for p in ports:
        rig.start_worker(storm_id, p)
    rig.wait_heartbeats(ports)
    # The topology's collector settings reach each worker process.
    for p in ports:
        wait_until(lambda p=p: "garbage collector thresholds [20000, 5, 5]" in rig.log(p), timeout=10,
                   message=lambda p=p: f"worker {p} to apply topology.worker.gc.thresholds\n{rig.log(p)}")
    expected = expected_counts(total)
    wait_until(lambda: read_counts(out) == expected, timeout=60,
               message=lambda: f"exact counts (have {sum(read_counts(out).values())} of {sum(expected.values())} words)"
                               f"\n{rig.log(ports[0])}")
    # Heartbeats advance, locally and in ZooKeeper with per-executor stats.
    first = {p: rig.heartbeat(p).time_secs for p in ports}
    wait_until(lambda: all(rig.heartbeat(p).time_secs > first[p] for p in ports), timeout=10,
               message="local heartbeats to advance")
    # The ZooKeeper heartbeat is written on a timer of its own: the one read just after the
    # counts came out may predate them (the whole run can take less than its period), so wait
    # for one that carries the bolts' work.
    seen: list = []

    def zk_records():
        beat = rig.cluster.get_worker_heartbeat(storm_id, "sup-1", ports[0])
        records = {ex: from_wire(s) for ex, s in beat.executor_stats.items()} if beat is not None else {}
        counted = [component_totals([r]) for r in records.values() if r.kind == "bolt"]
        seen[:] = [records, counted]
        return records if any(c["executed"] > 0 and c["acked"] > 0 for c in counted) else None

    records = wait_until(zk_records, timeout=15, interval=0.2,
                         message=lambda: f"a ZooKeeper heartbeat with the bolts' executed and acked counts: {seen}")
    assert {rec.kind for rec in records.values()} >= {"spout", "bolt"}
    for p in ports:
        assert rig.stop_worker(p) == 0


def test_an_executor_error_makes_the_worker_exit_non_zero_with_the_error_in_zookeeper(rig, tmp_path):
    topo, _out = count_topology(tmp_path, 10)
    comp = next(topo.glob("wc_components_*.py"))
    text = comp.read_text()
    assert "w = tup.values[0]" in text
    comp.write_text(text.replace("w = tup.values[0]", 'raise ValueError("boom in count")'))
    storm_id = rig.submit(topo, "boom", {"topology.workers": 1})
    (port,) = rig.slots(storm_id)
    proc = rig.start_worker(storm_id, port)
    wait_until(lambda: proc.poll() is not None, timeout=60, message="the worker to exit")
    assert proc.returncode != 0
    err = rig.cluster.last_error(storm_id, "count")
    assert err is not None and "boom in count" in err.error
    rig.stop_worker(port)


def test_a_package_whose_topology_differs_from_its_manifest_is_refused(rig, tmp_path):
    topo, _out = count_topology(tmp_path, 10)
    storm_id = rig.submit(topo, "drift", {"topology.workers": 1})
    code = rig.install_code(storm_id)
    (code / "topology.py").write_text((code / "topology.py").read_text().replace(
        'b.set_bolt("count", Count', 'b.set_bolt("counter", Count'))
    (port,) = rig.slots(storm_id)
    proc = rig.start_worker(storm_id, port)
    wait_until(lambda: proc.poll() is not None, timeout=60, message="the worker to refuse to start")
    assert proc.returncode != 0
    err = rig.cluster.last_error(storm_id, "worker")
    assert err is not None and "differs from its package manifest" in err.error and "count" in err.error
    rig.stop_worker(port)


def test_sigterm_exits_cleanly_and_fast(rig, tmp_path):
    topo, _out = count_topology(tmp_path, 10**9)
    storm_id = rig.submit(topo, "term", {"topology.workers": 1, "topology.max.spout.pending": 100})
    (port,) = rig.slots(storm_id)
    rig.start_worker(storm_id, port)
    rig.wait_heartbeats([port])
    assert rig.stop_worker(port, signal.SIGTERM, timeout=10) == 0


def test_sigkill_of_a_worker_and_a_restart_on_the_same_port_loses_nothing(rig, tmp_path):
    total = 3000
    topo, out = count_topology(tmp_path, total)
    storm_id = rig.submit(topo, "crash", {"topology.workers": 2, "topology.max.spout.pending": 100,
                                          "topology.message.timeout.secs": 3})
    ports = rig.slots(storm_id)
    for p in ports:
        rig.start_worker(storm_id, p)
    rig.wait_heartbeats(ports)
    wait_until(lambda: len(acked_ids(out)) > 200, timeout=60, message="acks before the kill")
    victim = ports[1]
    rig.stop_worker(victim, signal.SIGKILL)
    rig.start_worker(storm_id, victim)  # a new process on the same port; its peer reconnects by itself
    wait_until(lambda: acked_ids(out) >= set(range(total)), timeout=90,
               message=lambda: f"every message acked ({len(acked_ids(out) & set(range(total)))} of {total})"
                               f"\n{rig.log(ports[0])[-2000:]}")
    # At least once: every word counted at least as often as it was sent by a surviving counter
    # is not checkable after a counter's memory died, but no message went unacknowledged.
    for p in ports:
        assert rig.stop_worker(p) == 0


@pytest.mark.slow
def test_an_assignment_change_moving_executors_to_a_third_worker_is_followed_without_a_restart(rig, tmp_path):
    from dataclasses import replace

    total = 3000
    topo, out = count_topology(tmp_path, total)
    storm_id = rig.submit(topo, "move", {"topology.workers": 2, "topology.max.spout.pending": 100,
                                         "topology.message.timeout.secs": 5})
    ports = rig.slots(storm_id)
    third = next(p for p in rig.ports if p not in ports)
    for p in ports:
        rig.start_worker(storm_id, p)
    rig.wait_heartbeats(ports)
    wait_until(lambda: len(acked_ids(out)) > 200, timeout=60, message="acks before the move")
    stay, moved = ports
    a = rig.cluster.assignment_info(storm_id)
    enp = {ex: (("sup-1", third) if slot == ("sup-1", moved) else slot) for ex, slot in a.executor_node_port.items()}
    rig.cluster.set_assignment(storm_id, replace(a, executor_node_port=enp))
    rig.start_worker(storm_id, third)
    rig.wait_heartbeats([stay, third])
    assert rig.stop_worker(moved) == 0  # what its supervisor would do with a worker no longer assigned
    first = rig.procs[stay].pid
    wait_until(lambda: acked_ids(out) >= set(range(total)), timeout=90,
               message=lambda: f"every message acked ({len(acked_ids(out) & set(range(total)))} of {total})")
    assert rig.procs[stay].pid == first and rig.procs[stay].poll() is None  # followed, not restarted
    for p in (stay, third):
        assert rig.stop_worker(p) == 0
