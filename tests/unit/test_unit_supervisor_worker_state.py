"""Worker classification (supervisor.clj's read-allocated-workers) and the pid-reuse guard (pure)."""

import pytest

from cluster_state.records import LocalAssignment, WorkerHeartbeat
from daemons.process_start import ProcessStart
from daemons.supervisor.worker_state import (
    SYSTEM_EXECUTOR_ID,
    ProcessFacts,
    ProcessStatus,
    WorkerRecord,
    WorkerStatus,
    check_process,
    classify_worker,
    matches_assignment,
)

LA = LocalAssignment("t1", ((1, 2), (3, 3)))
BOOT = "7673aee2-d0b6-4cf7-a309-1147e1ada66f"
TIMEOUT, START = 30, 120


def hb(time_secs, storm_id="t1", executors=((3, 3), (1, 2)), port=6700):
    return WorkerHeartbeat(storm_id, executors, port, time_secs, 5)


def classify(heartbeat, now=1000, approved=("w1",), assignment=LA, launched=None, port=None):
    return classify_worker(heartbeat, "w1", set(approved), assignment, now, TIMEOUT, START, launched, port=port)


def test_matches_assignment_ignores_order_and_system_executor():
    assert matches_assignment(hb(0), LA)
    assert matches_assignment(hb(0, executors=((1, 2), SYSTEM_EXECUTOR_ID, (3, 3))), LA)
    assert not matches_assignment(hb(0, executors=((1, 2),)), LA)
    assert not matches_assignment(hb(0, storm_id="t2"), LA)
    assert not matches_assignment(hb(0), None)


def test_valid_fresh_heartbeat():
    assert classify(hb(1000)) is WorkerStatus.VALID
    assert classify(hb(1000 - TIMEOUT)) is WorkerStatus.VALID  # strictly older than the timeout


def test_timed_out_heartbeat():
    assert classify(hb(1000 - TIMEOUT - 1)) is WorkerStatus.TIMED_OUT


def test_not_approved_is_disallowed_even_with_fresh_heartbeat():
    assert classify(hb(1000), approved=()) is WorkerStatus.DISALLOWED


def test_heartbeat_not_matching_the_ports_assignment_is_disallowed():
    assert classify(hb(1000, storm_id="t2")) is WorkerStatus.DISALLOWED
    assert classify(hb(1000, executors=((1, 2),))) is WorkerStatus.DISALLOWED
    assert classify(hb(1000), assignment=None) is WorkerStatus.DISALLOWED  # port now unassigned
    assert classify(hb(1000), port=6701) is WorkerStatus.DISALLOWED  # heartbeat names another port
    assert classify(hb(1000), port=6700) is WorkerStatus.VALID


def test_disallowed_wins_over_timed_out():
    # supervisor.clj's order: disallowed is checked before the heartbeat age
    assert classify(hb(0, storm_id="t2")) is WorkerStatus.DISALLOWED


def test_new_worker_without_heartbeat_gets_the_start_timeout():
    assert classify(None, launched=1000) is WorkerStatus.NOT_STARTED
    assert classify(None, launched=1000 - START + 1) is WorkerStatus.NOT_STARTED
    assert classify(None, launched=1000 - START) is WorkerStatus.TIMED_OUT
    # a stray dir we never launched and that never heartbeated gets no grace
    assert classify(None, approved=(), launched=None) is WorkerStatus.DISALLOWED
    assert classify(None, launched=None) is WorkerStatus.TIMED_OUT


def S(secs, boot=BOOT):
    return ProcessStart(boot, secs)


def test_check_process_alive_dead_reused():
    assert check_process(42, S(500.0), ProcessFacts(True, S(500.0))) is ProcessStatus.ALIVE
    assert check_process(42, S(500.0), ProcessFacts(False)) is ProcessStatus.DEAD
    assert check_process(42, S(500.0), ProcessFacts(True, None)) is ProcessStatus.DEAD  # vanished meanwhile
    assert check_process(42, S(500.0), ProcessFacts(True, S(500.0), zombie=True)) is ProcessStatus.DEAD


def test_a_clock_step_does_not_make_a_worker_another_process():
    """The start is on the boot clock: psutil's wall-clock create time moved by the step (5 s
    here) and the worker was taken for a reused pid, never signalled again."""
    facts = ProcessFacts(True, S(500.0), wall_start=1.7e9 + 5)
    assert check_process(42, S(500.0), facts) is ProcessStatus.ALIVE
    # A record of an older supervisor holds the wall-clock create time: compared within a second.
    assert check_process(42, S(1.7e9 + 4.5, boot=""), facts) is ProcessStatus.ALIVE
    assert check_process(42, S(1.7e9, boot=""), facts) is ProcessStatus.REUSED


def test_reused_pid_is_never_our_worker():
    assert check_process(42, S(500.0), ProcessFacts(True, S(500.01))) is ProcessStatus.REUSED  # a tick later
    assert check_process(42, S(500.0), ProcessFacts(True, S(900.0), zombie=True)) is ProcessStatus.REUSED
    assert check_process(42, S(500.0), ProcessFacts(True, S(500.0, boot="another boot"))) is ProcessStatus.REUSED
    # no recorded start time: cannot tell, so it is never treated as ours
    assert check_process(42, None, ProcessFacts(True, S(500.0))) is ProcessStatus.REUSED
    with pytest.raises(ValueError):
        check_process(0, S(500.0), ProcessFacts(True, S(500.0)))


def test_worker_record_round_trip_and_process_status():
    record = WorkerRecord("w1", 6700, LA, 1000.0)
    assert record.process_status(ProcessFacts(True, S(1.0))) is ProcessStatus.DEAD  # no pid: never launched
    launched = record.with_pid(4242, S(1000.5))
    assert launched.process_status(ProcessFacts(True, S(1000.5))) is ProcessStatus.ALIVE
    assert launched.process_status(ProcessFacts(True, S(2000.0))) is ProcessStatus.REUSED
    assert launched.process_status(None) is ProcessStatus.DEAD
    for r in (record, launched):
        assert WorkerRecord.from_dict(r.to_dict()) == r


def test_a_record_of_an_older_supervisor_keeps_its_wall_clock_start():
    data = WorkerRecord("w1", 6700, LA, 1000.0, 5).to_dict()
    del data["pid_start"]
    data["pid_start_time"] = 999.5
    assert WorkerRecord.from_dict(data).pid_start == S(999.5, boot="")


@pytest.mark.parametrize("damage", [
    {"pid": -1}, {"pid": True}, {"pid": "12"}, {"pid_start_time": "x"}, {"pid_start": 5.0},
    {"pid_start": "no at sign"}, {"launch_time_secs": None},
    {"port": "6700"}, {"worker_id": ""}, {"executors": "nope"},
])
def test_damaged_worker_record_raises(damage):
    data = WorkerRecord("w1", 6700, LA, 1000.0, 5, S(1.0)).to_dict()
    data.update(damage)
    with pytest.raises((TypeError, ValueError)):
        WorkerRecord.from_dict(data)
