"""The supervisor slot state machine (pure), with a fake clock and a fake world of processes.

Scenarios follow Storm 2.x SlotTest (empty->launch, relaunch after a heartbeat timeout,
reschedule, running->empty) and issue 10 (start timeout with back-off, code not yet downloaded,
restart adoption, reused pid, no kill loops)."""

import itertools
import random

import pytest

from cluster_state.records import LocalAssignment, WorkerHeartbeat
from daemons.backoff import backoff_delay, retry_due
from daemons.supervisor.slot import (
    CleanupWorker,
    DownloadCode,
    ForgetWorker,
    LaunchWorker,
    RecordWorker,
    ReportError,
    SendSigkill,
    SendSigterm,
    SlotConfig,
    SlotInputs,
    SlotPhase,
    SlotState,
    equivalent,
    next_wakeup,
    recover_slots,
    step,
    storm_ids_in_use,
    stray_worker_dirs,
    used_ports,
)
from daemons.supervisor.worker_state import WorkerRecord

PORT = 6700
CONF = SlotConfig(worker_timeout_secs=5, start_timeout_secs=20, shutdown_sleep_secs=2,
                  relaunch_backoff_base_secs=1, relaunch_backoff_max_secs=8, kill_stuck_secs=30)
A = LocalAssignment("t1", ((1, 1), (2, 2)))
B = LocalAssignment("t2", ((1, 1),))
A_REBALANCED = LocalAssignment("t1", ((1, 1),))
T0 = 1000.0


def kinds(actions):
    return [type(a).__name__ for a in actions]


class World:
    """Fake processes, heartbeats, code and LocalState records, driven by the daemon's loop."""

    def __init__(self, state=None, conf=CONF):
        self.now = T0
        self.conf = conf
        self.state = state or SlotState(PORT)
        self.alive: set[str] = set()
        self.beats: dict[str, WorkerHeartbeat] = {}
        self.code = {"t1", "t2"}
        self.records: dict[str, WorkerRecord] = {}
        self.dirs: set[str] = set()
        self.ignores_sigterm: set[str] = set()
        self.unkillable: set[str] = set()
        self.launched: list[str] = []
        self.signals: list[tuple[str, str, float]] = []
        self.errors: list[str] = []
        self._ids = (f"w{i}" for i in itertools.count(1))

    def beat(self, worker_id=None, storm_id=None, executors=None, port=PORT):
        worker_id = worker_id or self.state.worker_id
        la = self.state.assignment
        self.beats[worker_id] = WorkerHeartbeat(storm_id or la.storm_id, executors or la.executors, port,
                                                int(self.now), 1)

    def tick(self, assignment, dt=0.0):
        self.now += dt
        wid = self.state.worker_id
        inputs = SlotInputs(assignment, assignment is not None and assignment.storm_id in self.code,
                            self.beats.get(wid), wid in self.alive, next(self._ids))
        self.state, actions = step(self.state, inputs, self.now, self.conf)
        for action in actions:
            self.apply(action)
        return actions

    def apply(self, action):
        if isinstance(action, RecordWorker):
            self.records[action.record.worker_id] = action.record
        elif isinstance(action, LaunchWorker):
            assert action.worker_id in self.records, "recorded as approved before it is launched"
            assert not self.alive, "never two workers on one slot"
            assert action.worker_id not in self.launched, "a fresh worker id per launch"
            self.launched.append(action.worker_id)
            self.alive.add(action.worker_id)
            self.dirs.add(action.worker_id)
        elif isinstance(action, SendSigterm):
            assert action.worker_id in self.alive, "only a running worker is signalled"
            self.signals.append(("TERM", action.worker_id, self.now))
            if action.worker_id not in self.ignores_sigterm | self.unkillable:
                self.alive.discard(action.worker_id)
        elif isinstance(action, SendSigkill):
            assert action.worker_id in self.alive
            self.signals.append(("KILL", action.worker_id, self.now))
            if action.worker_id not in self.unkillable:
                self.alive.discard(action.worker_id)
        elif isinstance(action, CleanupWorker):
            self.dirs.discard(action.worker_id)
            self.beats.pop(action.worker_id, None)
        elif isinstance(action, ForgetWorker):
            self.records.pop(action.worker_id)
        elif isinstance(action, ReportError):
            self.errors.append(action.message)
        elif isinstance(action, DownloadCode):
            pass
        else:
            raise AssertionError(action)

    def run_worker(self, assignment=A):
        """Empty -> launched -> first heartbeat -> RUNNING."""
        self.tick(assignment)
        self.tick(assignment, dt=1)
        self.beat()
        self.tick(assignment)
        assert self.state.phase is SlotPhase.RUNNING
        return self.state.worker_id


# --- EMPTY and WAITING_FOR_CODE ---------------------------------------------------------------

def test_empty_to_empty():
    w = World()
    assert w.tick(None) == () and w.tick(None, dt=100) == ()
    assert w.state == SlotState(PORT)


def test_empty_launches_with_fresh_id_recorded_first():
    w = World()
    actions = w.tick(A)
    assert kinds(actions) == ["RecordWorker", "LaunchWorker"]
    record, launch = actions[0].record, actions[1]
    assert record == WorkerRecord(launch.worker_id, PORT, A, T0)
    assert (launch.port, launch.assignment) == (PORT, A)
    assert w.state.phase is SlotPhase.WAITING_FOR_WORKER_START
    assert (w.state.assignment, w.state.worker_id, w.state.launched_at) == (A, launch.worker_id, T0)


def test_code_not_downloaded_yet_waits_then_launches():
    w = World()
    w.code = set()
    assert w.tick(A) == (DownloadCode("t1"),)
    assert w.state.phase is SlotPhase.WAITING_FOR_CODE
    assert w.tick(A, dt=5) == ()  # asked once; the downloader retries on its own
    w.code = {"t1"}
    assert kinds(w.tick(A, dt=1)) == ["RecordWorker", "LaunchWorker"]
    assert w.state.phase is SlotPhase.WAITING_FOR_WORKER_START


def test_waiting_for_code_follows_assignment_changes():
    w = World()
    w.code = set()
    w.tick(A)
    assert w.tick(B) == (DownloadCode("t2"),) and w.state.assignment == B
    assert w.tick(None) == () and w.state == SlotState(PORT)


def test_launch_needs_a_worker_id():
    with pytest.raises(ValueError, match="new_worker_id"):
        step(SlotState(PORT), SlotInputs(A, code_present=True), T0, CONF)


def test_launch_refuses_the_current_worker_id():
    state = SlotState(PORT, SlotPhase.WAITING_TO_RELAUNCH, A, relaunch_at=T0)
    assert step(state, SlotInputs(A, True, new_worker_id="w9"), T0, CONF)[0].worker_id == "w9"
    state = SlotState(PORT, SlotPhase.RUNNING, A, "w1", T0, T0)
    with pytest.raises(ValueError, match="current worker"):
        step(state, SlotInputs(A, True, process_alive=False, new_worker_id="w1"), T0, CONF)


# --- WAITING_FOR_WORKER_START ------------------------------------------------------------------

def test_worker_start_then_running_and_no_kills_while_it_heartbeats():
    w = World()
    wid = w.run_worker()
    for _ in range(20):
        w.beat()
        assert w.tick(A, dt=3) == ()
    assert w.state.phase is SlotPhase.RUNNING and w.launched == [wid] and w.signals == []


def test_start_timeout_kills_reports_and_relaunches():
    w = World()
    w.tick(A)
    first = w.state.worker_id
    assert w.tick(A, dt=CONF.start_timeout_secs - 1) == ()  # still within the start timeout
    actions = w.tick(A, dt=1)
    assert kinds(actions) == ["ReportError", "SendSigterm"]
    assert "failed to start within 20s" in actions[0].message and first in actions[0].message
    assert w.state.phase is SlotPhase.KILL_AND_RELAUNCH
    assert kinds(w.tick(A, dt=0.1)) == ["CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]
    assert w.state.phase is SlotPhase.WAITING_FOR_WORKER_START and w.state.worker_id != first
    assert w.state.failures == 1 and first not in w.records and first not in w.dirs


def test_stale_heartbeat_while_starting_waits_for_a_fresh_one():
    w = World()
    w.tick(A)
    w.beat()
    assert w.tick(A, dt=CONF.worker_timeout_secs + 3) == ()
    assert w.state.phase is SlotPhase.WAITING_FOR_WORKER_START
    w.beat()
    w.tick(A)
    assert w.state.phase is SlotPhase.RUNNING


def test_worker_exiting_before_first_heartbeat_is_a_failure():
    w = World()
    w.tick(A)
    w.alive.clear()
    actions = w.tick(A, dt=1)
    assert kinds(actions) == ["ReportError", "CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]
    assert "exited before its first heartbeat" in actions[0].message
    assert w.signals == []  # a dead process is never signalled


def test_heartbeat_for_other_executors_while_starting_is_disallowed():
    w = World()
    w.tick(A)
    w.beat(executors=((9, 9),))
    actions = w.tick(A, dt=1)
    assert kinds(actions)[:2] == ["ReportError", "SendSigterm"]
    assert "heartbeats for something else" in actions[0].message


def test_assignment_change_while_starting_kills_without_failure():
    w = World()
    w.tick(A)
    old = w.state.worker_id
    assert w.tick(B, dt=1) == (SendSigterm(old),) and w.state.phase is SlotPhase.KILL
    actions = w.tick(B, dt=0.1)
    assert kinds(actions) == ["CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]
    assert actions[-1].assignment == B and w.state.failures == 0 and old not in w.records


# --- RUNNING -----------------------------------------------------------------------------------

def test_relaunch_after_heartbeat_timeout_once():
    """SlotTest.testRelaunch: old heartbeat -> SIGTERM -> SIGKILL after the sleep -> relaunch."""
    w = World()
    old = w.run_worker()
    w.ignores_sigterm.add(old)
    actions = w.tick(A, dt=CONF.worker_timeout_secs + 1)
    assert kinds(actions) == ["ReportError", "SendSigterm"] and "timed out" in actions[0].message
    assert w.state.phase is SlotPhase.KILL_AND_RELAUNCH
    # while the worker shuts down: nothing, however often we look (no kill loop, no relaunch)
    for _ in range(3):
        assert w.tick(A, dt=0.5) == ()
    assert w.tick(A, dt=0.5) == (SendSigkill(old),)  # shutdown sleep (2 s) over
    actions = w.tick(A, dt=0.1)
    assert kinds(actions) == ["CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]
    new = w.state.worker_id
    assert new != old and w.state.phase is SlotPhase.WAITING_FOR_WORKER_START
    w.beat()
    w.tick(A, dt=1)
    assert w.state.phase is SlotPhase.RUNNING
    assert w.launched == [old, new] and [s[0] for s in w.signals] == ["TERM", "KILL"]
    assert len(w.errors) == 1


def test_sigkill_repeated_only_every_shutdown_sleep():
    w = World()
    old = w.run_worker()
    w.unkillable.add(old)
    w.tick(None)
    assert w.state.phase is SlotPhase.KILL
    sent = []
    for _ in range(20):
        sent += w.tick(None, dt=0.5)
    kill_times = [t for kind, _, t in w.signals if kind == "KILL"]
    assert sent and all(isinstance(a, SendSigkill) for a in sent)
    assert all(b - a >= CONF.shutdown_sleep_secs for a, b in zip(kill_times, kill_times[1:]))


def test_process_that_survives_sigkill_is_reported_once_and_never_doubled():
    w = World()
    old = w.run_worker()
    w.unkillable.add(old)
    w.tick(A, dt=CONF.worker_timeout_secs + 1)  # timed out
    assert len(w.errors) == 1
    for _ in range(3 * int(CONF.kill_stuck_secs)):
        w.tick(A, dt=1)
        assert w.state.phase is SlotPhase.KILL_AND_RELAUNCH
    assert len(w.errors) == 2 and "waits for it to go" in w.errors[1]
    assert w.launched == [old]
    w.unkillable.clear()
    w.tick(A, dt=CONF.shutdown_sleep_secs)  # the next SIGKILL works
    assert kinds(w.tick(A, dt=0.1)) == ["CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]


def test_reschedule_kills_then_launches_new_assignment():
    """SlotTest.testReschedule."""
    w = World()
    old = w.run_worker()
    w.ignores_sigterm.add(old)
    assert w.tick(B, dt=1) == (SendSigterm(old),)  # a reschedule is not a failure: no error
    assert w.state.phase is SlotPhase.KILL
    assert w.tick(B, dt=CONF.shutdown_sleep_secs) == (SendSigkill(old),)
    actions = w.tick(B, dt=0.1)
    assert kinds(actions) == ["CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]
    assert actions[-1].assignment == B and w.errors == []
    w.beat()
    w.tick(B, dt=1)
    assert w.state.phase is SlotPhase.RUNNING and w.state.assignment == B


def test_rebalance_of_same_topology_is_an_assignment_change():
    w = World()
    w.run_worker()
    assert kinds(w.tick(A_REBALANCED)) == ["SendSigterm"]
    launch = w.tick(A_REBALANCED, dt=0.1)[-1]
    assert isinstance(launch, LaunchWorker) and launch.assignment == A_REBALANCED


def test_reordered_executors_are_the_same_assignment():
    w = World()
    w.run_worker()
    w.beat()
    assert w.tick(LocalAssignment("t1", ((2, 2), (1, 1))), dt=1) == ()
    assert equivalent(A, LocalAssignment("t1", ((2, 2), (1, 1)))) and not equivalent(A, None)
    assert equivalent(None, None) and not equivalent(A, B)


def test_reschedule_to_topology_without_code_waits_for_it():
    w = World()
    w.run_worker()
    w.code = {"t1"}
    assert kinds(w.tick(B, dt=1)) == ["DownloadCode", "SendSigterm"]  # fetched while the old one stops
    actions = w.tick(B, dt=0.1)
    assert kinds(actions) == ["CleanupWorker", "ForgetWorker", "DownloadCode"]
    assert w.state.phase is SlotPhase.WAITING_FOR_CODE


def test_running_to_empty_kills_and_cleans_up():
    """SlotTest.testRunningToEmpty."""
    w = World()
    old = w.run_worker()
    w.ignores_sigterm.add(old)
    assert w.tick(None) == (SendSigterm(old),)
    assert w.tick(None, dt=1) == ()
    assert w.tick(None, dt=1) == (SendSigkill(old),)
    assert w.tick(None, dt=0.1) == (CleanupWorker(old), ForgetWorker(old))
    assert w.state == SlotState(PORT) and not w.dirs and not w.records
    assert w.tick(None, dt=10) == ()


def test_unassigned_while_waiting_to_relaunch_relaunches_nothing():
    w = World()
    w.run_worker()
    w.alive.clear()
    w.tick(A, dt=1)  # first failure: relaunched at once
    w.alive.clear()
    w.tick(A, dt=1)  # second: back-off
    assert w.state.phase is SlotPhase.WAITING_TO_RELAUNCH
    assert w.tick(None) == () and w.state == SlotState(PORT)


def test_worker_exit_is_reported_and_relaunched():
    w = World()
    old = w.run_worker()
    w.alive.clear()
    actions = w.tick(A, dt=1)
    assert kinds(actions) == ["ReportError", "CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]
    assert f"worker {old} on port {PORT} exited" == actions[0].message


def test_vanished_heartbeat_while_running_is_timed_out():
    w = World()
    w.run_worker()
    w.beats.clear()
    actions = w.tick(A, dt=1)
    assert kinds(actions) == ["ReportError", "SendSigterm"]
    assert "no heartbeat" in actions[0].message


def test_running_worker_heartbeating_for_another_port_is_disallowed():
    w = World()
    w.run_worker()
    w.beat(port=PORT + 1)
    assert kinds(w.tick(A, dt=1))[:2] == ["ReportError", "SendSigterm"]


# --- back-off ------------------------------------------------------------------------------------

def test_worker_that_keeps_failing_to_start_backs_off_and_reports_each_failure():
    w = World()
    w.tick(A)
    waits = []
    for _ in range(7):
        assert kinds(w.tick(A, dt=CONF.first_heartbeat_timeout_secs)) == ["ReportError", "SendSigterm"]
        w.tick(A, dt=0.25)  # it obeyed SIGTERM: cleaned up, then relaunched or backing off
        if w.state.phase is SlotPhase.WAITING_TO_RELAUNCH:
            waits.append(w.state.relaunch_at - w.now)
            assert w.tick(A, dt=waits[-1] - 0.25) == ()
            assert kinds(w.tick(A, dt=0.25)) == ["RecordWorker", "LaunchWorker"]
        else:
            waits.append(0)
    assert waits == [0, 1, 2, 4, 8, 8, 8]
    assert len(w.errors) == 7 and len(w.launched) == 8


def test_failures_forgotten_once_the_worker_runs_stably():
    w = World()
    w.run_worker()
    w.alive.clear()
    w.tick(A, dt=1)
    assert w.state.failures == 1
    w.beat()
    w.tick(A, dt=1)
    assert w.state.phase is SlotPhase.RUNNING and w.state.failures == 1
    w.beat()
    w.tick(A, dt=CONF.worker_timeout_secs)
    assert w.state.failures == 0


def test_assignment_change_during_backoff_starts_over():
    w = World()
    w.run_worker()
    for _ in range(2):
        w.alive.clear()
        w.tick(A, dt=1)
    assert w.state.phase is SlotPhase.WAITING_TO_RELAUNCH
    actions = w.tick(B)
    assert kinds(actions) == ["RecordWorker", "LaunchWorker"] and actions[-1].assignment == B
    assert w.state.failures == 0


def test_backoff_helpers():
    assert [backoff_delay(n) for n in range(5)] == [0, 1, 2, 4, 8]
    assert backoff_delay(100, base_secs=1, max_secs=60) == 60
    assert backoff_delay(1, free_retries=1) == 0 and backoff_delay(2, free_retries=1) == 1
    assert retry_due(0, None, 0)
    assert not retry_due(3, 100.0, 103.9) and retry_due(3, 100.0, 104.0)


# --- restart -------------------------------------------------------------------------------------

def recovered_world(record, alive):
    slots, strays = recover_slots([PORT, PORT + 1], [record])
    assert strays == () and slots[PORT + 1] == SlotState(PORT + 1)
    w = World(slots[PORT])
    if alive:
        w.alive.add(record.worker_id)
    return w


def test_restart_adopts_running_worker():
    record = WorkerRecord("old", PORT, A, T0 - 3600, 4242, T0 - 3600)
    w = recovered_world(record, alive=True)
    w.beat("old")
    assert w.tick(A) == ()
    assert w.state.phase is SlotPhase.RUNNING and w.state.worker_id == "old"
    w.beat("old")
    assert w.tick(A, dt=3) == () and w.launched == [] and w.signals == []


def test_restart_keeps_start_grace_of_worker_launched_just_before():
    w = recovered_world(WorkerRecord("new", PORT, A, T0 - 1, 4242, T0 - 1), alive=True)
    assert w.tick(A) == () and w.state.phase is SlotPhase.WAITING_FOR_WORKER_START
    w.beat("new")
    w.tick(A, dt=1)
    assert w.state.phase is SlotPhase.RUNNING and w.launched == []


def test_restart_with_dead_or_reused_pid_cleans_up_without_signalling_and_relaunches():
    # the daemon computed process_alive=False: the pid is gone or now another process's
    w = recovered_world(WorkerRecord("old", PORT, A, T0 - 3600, 4242, T0 - 3600), alive=False)
    w.records["old"] = WorkerRecord("old", PORT, A, T0 - 3600, 4242, T0 - 3600)
    actions = w.tick(A)
    assert kinds(actions) == ["ReportError", "CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]
    assert w.signals == []


def test_restart_with_stale_worker_and_changed_assignment_kills_it():
    w = recovered_world(WorkerRecord("old", PORT, A, T0 - 3600, 4242, T0 - 3600), alive=True)
    w.records["old"] = WorkerRecord("old", PORT, A, T0 - 3600)
    w.beat("old")
    assert kinds(w.tick(B)) == ["SendSigterm"]
    assert kinds(w.tick(B, dt=0.1)) == ["CleanupWorker", "ForgetWorker", "RecordWorker", "LaunchWorker"]


def test_recover_slots_strays():
    r_old = WorkerRecord("a", PORT, A, T0 - 10)
    r_new = WorkerRecord("b", PORT, A, T0 - 5)
    r_gone_port = WorkerRecord("c", 7000, B, T0)
    slots, strays = recover_slots([PORT], [r_old, r_gone_port, r_new])
    assert slots[PORT].worker_id == "b"
    assert sorted(s.worker_id for s in strays) == ["a", "c"]
    # a stray is stepped with no assignment until EMPTY: killed and cleaned up
    w = World(next(s for s in strays if s.worker_id == "c"))
    w.alive.add("c")
    w.records["c"] = r_gone_port
    assert kinds(w.tick(None)) == ["SendSigterm"]
    assert kinds(w.tick(None, dt=0.1)) == ["CleanupWorker", "ForgetWorker"]
    assert w.state.phase is SlotPhase.EMPTY
    assert recover_slots([PORT], []) == ({PORT: SlotState(PORT)}, ())


def test_stray_dirs_storm_ids_and_used_ports():
    assert stray_worker_dirs({"a", "b", "x"}, [WorkerRecord("a", PORT, A, T0)]) == {"b", "x"}
    states = [SlotState(6700), SlotState(6701, SlotPhase.RUNNING, A, "w1", T0, T0),
              SlotState(6702, SlotPhase.WAITING_FOR_CODE, B), SlotState(6703, SlotPhase.KILL, A, "w2", T0)]
    assert storm_ids_in_use(states) == {"t1", "t2"}
    assert used_ports(states) == (6701, 6702, 6703)


# --- independence, timers, config --------------------------------------------------------------------

def test_one_slots_slow_kill_does_not_delay_another():
    slow, fresh = World(), World(SlotState(PORT + 1))
    old = slow.run_worker()
    slow.unkillable.add(old)
    slow.tick(None)
    assert slow.state.phase is SlotPhase.KILL
    actions = fresh.tick(B)  # same tick: the other slot launches at once
    assert kinds(actions) == ["RecordWorker", "LaunchWorker"]


def test_next_wakeup():
    assert next_wakeup(SlotState(PORT), CONF) is None
    assert next_wakeup(SlotState(PORT, SlotPhase.WAITING_TO_RELAUNCH, A, relaunch_at=5.0), CONF) == 5.0
    assert next_wakeup(SlotState(PORT, SlotPhase.WAITING_FOR_WORKER_START, A, "w", 10.0), CONF) == 30.0
    assert next_wakeup(SlotState(PORT, SlotPhase.RUNNING, A, "w", 10.0, 10.0), CONF) is None
    killing = SlotState(PORT, SlotPhase.KILL, A, "w", 10.0, kill_started_at=20.0)
    assert next_wakeup(killing, CONF) == 22.0
    assert next_wakeup(SlotState(PORT, SlotPhase.KILL, A, "w", 10.0, kill_started_at=20.0,
                                 last_sigkill_at=22.0), CONF) == 24.0


def test_config_from_storm_conf():
    conf = SlotConfig.from_conf({"supervisor.worker.timeout.secs": 3, "supervisor.worker.start.timeout.secs": 6,
                                 "supervisor.worker.shutdown.sleep.secs": 1})
    assert (conf.worker_timeout_secs, conf.start_timeout_secs, conf.shutdown_sleep_secs) == (3, 6, 1)
    from cluster_state.config import default_config

    assert SlotConfig.from_conf(default_config()) == SlotConfig()  # the dataclass mirrors the packaged defaults
    assert SlotConfig().first_heartbeat_timeout_secs == 120
    assert SlotConfig(worker_timeout_secs=200).first_heartbeat_timeout_secs == 200


# --- randomised invariants ----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(30))
def test_random_walk_invariants(seed):
    """Whatever happens, a slot never runs two workers, never reuses an id, never signals a dead
    process (World.apply asserts these), records before launching and cleans up everything."""
    rng = random.Random(seed)
    w = World()
    targets = [A, B, A_REBALANCED, None]
    target = rng.choice(targets)
    for _ in range(300):
        event = rng.random()
        wid = w.state.worker_id
        if event < 0.05:
            target = rng.choice(targets)
        elif event < 0.08 and wid in w.alive:
            w.alive.discard(wid)  # the worker crashes
        elif event < 0.10 and wid:
            w.ignores_sigterm.add(wid)
        elif event < 0.12:
            w.code = set(rng.sample(["t1", "t2"], rng.randint(0, 2)))
        elif wid in w.alive and event < 0.8:
            w.beat()
        w.tick(target, dt=rng.choice([0.1, 0.5, 1, 3, 7]))
        live = [x for x in w.launched if x in w.alive]
        assert len(live) <= 1
        assert set(w.records) <= {w.state.worker_id} and w.dirs <= {w.state.worker_id}
        if w.state.phase in (SlotPhase.EMPTY, SlotPhase.WAITING_FOR_CODE, SlotPhase.WAITING_TO_RELAUNCH):
            assert w.state.worker_id is None and not w.alive
        if w.state.phase is SlotPhase.EMPTY:
            assert w.state.assignment is None
    # settle: unassign and let every kill finish
    for _ in range(10):
        w.tick(None, dt=CONF.shutdown_sleep_secs)
    assert w.state == SlotState(PORT) and not w.alive and not w.records and not w.dirs


def test_failure_reports_are_deaths_naming_the_worker_and_a_stuck_kill_is_not():
    reports = []
    # RUNNING, exits
    w = World()
    wid = w.run_worker()
    w.alive.clear()
    reports.append((wid, w.tick(A, dt=1)[0], "exited"))
    # RUNNING, heartbeat too old
    w = World()
    wid = w.run_worker()
    reports.append((wid, w.tick(A, dt=CONF.worker_timeout_secs + 1)[0], "timed out"))
    # starting, exits; starting, never heartbeats; starting, heartbeats for something else
    w = World()
    w.tick(A)
    wid = w.state.worker_id
    w.alive.clear()
    reports.append((wid, w.tick(A, dt=1)[0], "exited before its first heartbeat"))
    w = World()
    w.tick(A)
    reports.append((w.state.worker_id, w.tick(A, dt=CONF.first_heartbeat_timeout_secs)[0], "failed to start"))
    w = World()
    w.tick(A)
    w.beat(executors=((9, 9),))
    reports.append((w.state.worker_id, w.tick(A, dt=1)[0], "heartbeats for something else"))
    for wid, report, text in reports:
        assert isinstance(report, ReportError) and text in report.message
        assert report.death and report.worker_id == wid and report.storm_id == "t1" and report.port == PORT
    # A kill that outlasts kill_stuck_secs is reported, but it is no death of a worker.
    w = World()
    old = w.run_worker()
    w.unkillable.add(old)
    w.tick(None)
    stuck = [a for _ in range(int(CONF.kill_stuck_secs) + 1) for a in w.tick(None, dt=1)
             if isinstance(a, ReportError)]
    assert len(stuck) == 1 and "waits for it to go" in stuck[0].message
    assert not stuck[0].death and stuck[0].worker_id == old
    # Nor is a kill for an assignment change (no report at all).
    w = World()
    w.run_worker()
    assert not any(isinstance(a, ReportError) for a in w.tick(B, dt=1))


def test_worker_restarts_count_relaunches_per_topology_and_port():
    from daemons.supervisor.slot import count_restart, worker_restarts

    def launch(storm_id, port, restart):
        return LaunchWorker("w", port, LocalAssignment(storm_id, ((1, 1),)), restart=restart)

    counts = count_restart({}, launch("a-1", 6700, False), in_use=())
    assert worker_restarts(counts) == ()  # a first launch is no restart
    counts = count_restart(counts, launch("a-1", 6700, True), in_use={"a-1"})
    counts = count_restart(counts, launch("a-1", 6700, True), in_use={"a-1"})
    counts = count_restart(counts, launch("b-2", 6701, False), in_use={"a-1"})
    counts = count_restart(counts, launch("b-2", 6701, True), in_use={"a-1"})
    assert worker_restarts(counts) == (("a-1", 6700, 2), ("b-2", 6701, 1))
    counts = count_restart(counts, launch("b-2", 6701, True), in_use={"b-2"})  # a-1 is gone: forgotten
    assert worker_restarts(counts) == (("b-2", 6701, 2),)


def test_a_rebalance_or_a_new_assignment_is_no_restart_and_a_death_is_one():
    """Issue: after `storm-py rebalance` the UI said "restarted 1 time(s)" while `storm-py list`
    (deaths only) said 0: the slot's relaunch for its changed assignment was counted as a restart."""
    from daemons.supervisor.slot import count_restart, worker_restarts

    launches: list[LaunchWorker] = []

    def tick(w, assignment, dt=0.0):
        actions = w.tick(assignment, dt)
        launches.extend(a for a in actions if isinstance(a, LaunchWorker))
        return actions

    def restarts():
        counts = {}
        for launch in launches:
            counts = count_restart(counts, launch, in_use={"t1", "t2"})
        return worker_restarts(counts)

    w = World()
    tick(w, A)
    w.beat()
    tick(w, A, dt=1)
    assert w.state.phase is SlotPhase.RUNNING and restarts() == ()
    tick(w, A_REBALANCED, dt=1)  # rebalance: SIGTERM, then the new assignment on the same port
    tick(w, A_REBALANCED, dt=0.1)
    assert [la.assignment for la in launches] == [A, A_REBALANCED] and not launches[-1].restart
    assert restarts() == () and w.errors == []
    w.beat()
    tick(w, A_REBALANCED, dt=1)
    tick(w, B, dt=1)  # another topology moves onto the slot: no restart either
    tick(w, B, dt=0.1)
    assert launches[-1].assignment == B and restarts() == ()
    w.beat()
    tick(w, B, dt=1)
    w.alive.clear()  # the worker dies: relaunched for the same assignment, a restart
    actions = tick(w, B, dt=1)
    assert kinds(actions)[0] == "ReportError" and launches[-1].restart and launches[-1].assignment == B
    assert restarts() == (("t2", PORT, 1),)


def test_a_relaunch_after_the_back_off_or_a_code_refetch_is_a_restart():
    w = World()
    w.tick(A)
    w.alive.clear()
    first = w.tick(A, dt=1)  # exited before its first heartbeat: the free retry
    assert [a.restart for a in first if isinstance(a, LaunchWorker)] == [True]
    w.alive.clear()
    w.tick(A, dt=1)  # again: back-off
    assert w.state.phase is SlotPhase.WAITING_TO_RELAUNCH
    w.code = set()  # the supervisor found the code damaged and removed it
    w.tick(A, dt=CONF.relaunch_backoff_max_secs)
    assert w.state.phase is SlotPhase.WAITING_FOR_CODE
    w.code = {"t1"}
    launched = [a for a in w.tick(A, dt=1) if isinstance(a, LaunchWorker)]
    assert len(launched) == 1 and launched[0].restart
    # a new slot of a topology in back-off elsewhere is no restart of this slot
    state, actions = step(SlotState(PORT), SlotInputs(A, True, None, False, "w9", topology_hold_until=T0 + 8),
                          T0, CONF)
    state, actions = step(state, SlotInputs(A, True, None, False, "w9"), T0 + 8, CONF)
    assert [a.restart for a in actions if isinstance(a, LaunchWorker)] == [False]


# --- the topology's back-off, across slots ------------------------------------------------------

def test_topology_hold_follows_the_topologys_deaths_not_the_slot():
    from daemons.supervisor.deaths import topology_hold_until

    assert topology_hold_until((), T0) is None
    assert topology_hold_until((T0,), T0) is None  # one free retry, as a slot's own back-off
    assert topology_hold_until((T0 - 2, T0), T0) == T0 + 1
    assert topology_hold_until((T0 - 3, T0 - 2, T0), T0) == T0 + 2
    deaths = tuple(T0 - i for i in range(20))
    assert topology_hold_until(deaths, T0, max_secs=60) == T0 + 60
    # deaths older than the memory are forgotten: a topology stable for 10 minutes starts over
    assert topology_hold_until(deaths, T0 + 700, max_secs=60) is None


def test_remember_and_count_recent_deaths():
    from daemons.supervisor.deaths import deaths_within, recent_deaths, remember_death

    times = ()
    for t in (0, 100, 400, 650):
        times = remember_death(times, T0 + t)
    assert times == (T0 + 100, T0 + 400, T0 + 650)  # 600 s of memory
    assert deaths_within(times, T0 + 650) == 2  # the last 300 s
    assert recent_deaths({"t1": times, "t2": (T0,)}, T0 + 650) == (("t1", 2),)


def test_a_new_slot_of_a_failing_topology_waits_for_its_back_off():
    # Nimbus moved the executors of a crash-looping topology here: the launch waits.
    from daemons.supervisor.slot import SlotPhase

    state = SlotState(PORT)
    inputs = SlotInputs(A, True, None, False, "w1", topology_hold_until=T0 + 8)
    state, actions = step(state, inputs, T0, CONF)
    assert state.phase is SlotPhase.WAITING_TO_RELAUNCH and state.relaunch_at == T0 + 8 and not actions
    state, actions = step(state, inputs, T0 + 5, CONF)
    assert state.phase is SlotPhase.WAITING_TO_RELAUNCH and not actions
    state, actions = step(state, inputs, T0 + 8, CONF)
    assert "LaunchWorker" in kinds(actions)
    # a worker waiting for its code waits for the back-off too once the code is there
    state, _ = step(SlotState(PORT), SlotInputs(A, False, None, False, "w2", topology_hold_until=T0 + 8), T0, CONF)
    assert state.phase is SlotPhase.WAITING_FOR_CODE
    state, actions = step(state, SlotInputs(A, True, None, False, "w3", topology_hold_until=T0 + 8), T0 + 1, CONF)
    assert state.phase is SlotPhase.WAITING_TO_RELAUNCH and not actions


def _running(conf) -> "World":
    """A slot whose worker started, heartbeats and runs."""
    w = World(conf=conf)
    w.tick(A)
    w.beat()
    w.alive.add(w.state.worker_id)
    w.tick(A, 1)
    return w


def test_a_worker_over_its_memory_limit_is_killed_and_the_reason_recorded():
    from dataclasses import replace as dc_replace

    from daemons.supervisor.slot import SlotPhase

    conf = dc_replace(CONF, memory_limit_mb=100)
    w = _running(conf)
    assert w.state.phase is SlotPhase.RUNNING
    wid = w.state.worker_id
    inputs = SlotInputs(A, True, w.beats[wid], True, "wx", memory_bytes=99 * 1024 * 1024)
    state, actions = step(w.state, inputs, w.now + 1, conf)
    assert state.phase is SlotPhase.RUNNING and not actions
    inputs = SlotInputs(A, True, w.beats[wid], True, "wy", memory_bytes=150 * 1024 * 1024)
    state, actions = step(w.state, inputs, w.now + 1, conf)
    # SIGKILL at once, as the kernel's OOM killer would: a grace period lets it allocate on
    assert state.phase is SlotPhase.KILL_AND_RELAUNCH and kinds(actions) == ["ReportError", "SendSigkill"]
    assert actions[0].death and actions[0].message == (
        f"worker {wid} on port {PORT} used 150 MB of memory, over supervisor.worker.memory.limit.mb (100 MB): killed")
    # gone: relaunched as any failed worker
    w.alive.discard(wid)
    gone, _actions = step(state, SlotInputs(A, True, None, False, "wz"), w.now + 2, conf)
    assert gone.phase in (SlotPhase.WAITING_TO_RELAUNCH, SlotPhase.WAITING_FOR_WORKER_START), gone.phase
    # no limit configured: never
    state, actions = step(w.state, inputs, w.now + 1, dc_replace(CONF, memory_limit_mb=None))
    assert state.phase is SlotPhase.RUNNING and not actions


def test_a_topologys_own_memory_limit_wins_and_is_named():
    from dataclasses import replace as dc_replace

    from daemons.supervisor.slot import SlotPhase

    conf = dc_replace(CONF, memory_limit_mb=4096)
    w = _running(conf)
    wid = w.state.worker_id
    inputs = SlotInputs(A, True, w.beats[wid], True, "wy", memory_bytes=150 * 1024 * 1024, topology_memory_limit_mb=100)
    state, actions = step(w.state, inputs, w.now + 1, conf)
    assert state.phase is SlotPhase.KILL_AND_RELAUNCH
    assert "over topology.worker.memory.limit.mb (100 MB)" in actions[0].message
    inputs = SlotInputs(A, True, w.beats[wid], True, "wz", memory_bytes=150 * 1024 * 1024, topology_memory_limit_mb=200)
    state, actions = step(w.state, inputs, w.now + 1, conf)
    assert state.phase is SlotPhase.RUNNING and not actions
