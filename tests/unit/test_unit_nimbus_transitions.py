"""Unit tests for daemons/nimbus/transitions.py: every (status, event) pair, timers on a fake clock,
and a kill or rebalance that survives a Nimbus restart through the stored StormBase."""

from __future__ import annotations

import pytest

from cluster_state.codec import decode_record, encode_record
from cluster_state.records import StormBase
from daemons.nimbus.transitions import (
    Activate,
    Deactivate,
    DoRebalance,
    IllegalTransitionError,
    Kill,
    Park,
    Rebalance,
    Remove,
    RemoveTopology,
    Reschedule,
    Resume,
    ScheduleTimer,
    SetStatus,
    Startup,
    Stop,
    StopTimeout,
    TopologyState,
    apply_to_base,
    pending_timer,
    state_from_base,
    transition,
)
from executor.errors import InvalidTopologyError

NOW = 1_700_000_000.0
TIMEOUT = 30


def active(**kw) -> TopologyState:
    fields = dict(topology_id="wc-1-1700000000", name="wc", status="active", num_workers=2,
                  component_executors={"spout": 2, "count": 4}, message_timeout_secs=TIMEOUT)
    fields.update(kw)
    return TopologyState(**fields)


def in_status(status: str) -> TopologyState:
    """A topology in `status`, reached through the machine itself (as Nimbus would)."""
    state = active()
    if status == "inactive":
        state, _ = transition(state, Deactivate(), NOW - 100)
    elif status == "killed":
        state, _ = transition(state, Kill(wait_secs=10), NOW - 5)
    elif status == "rebalancing":
        state, _ = transition(state, Rebalance(wait_secs=10, num_workers=3), NOW - 5)
    assert state.status == status
    return state


# ---------------------------------------------------------------- the full table

STATUSES = ["active", "inactive", "killed", "rebalancing"]


@pytest.mark.parametrize("status", ["active", "inactive"])
def test_activate_and_deactivate_flip_the_status(status):
    state = in_status(status)
    new, actions = transition(state, Activate(), NOW)
    if status == "active":
        assert (new, actions) == (state, ())  # no-op, as in Storm
    else:
        assert new.status == "active" and actions == (SetStatus("active"),)
    new, actions = transition(state, Deactivate(), NOW)
    if status == "inactive":
        assert (new, actions) == (state, ())
    else:
        assert new.status == "inactive" and actions == (SetStatus("inactive"),)


@pytest.mark.parametrize("status", ["killed", "rebalancing"])
@pytest.mark.parametrize("event", [Activate(), Deactivate(), Rebalance(), Rebalance(wait_secs=0, num_workers=1)])
def test_illegal_user_events_name_topology_status_and_event(status, event):
    state = in_status(status)
    with pytest.raises(IllegalTransitionError) as info:
        transition(state, event, NOW)
    err = info.value
    assert (err.topology, err.status, err.event) == ("wc", status, event.name)
    assert "wc" in str(err) and status in str(err) and event.name in str(err)


@pytest.mark.parametrize("status", STATUSES)
def test_kill_from_every_status(status):
    state = in_status(status)
    new, actions = transition(state, Kill(wait_secs=20), NOW)
    deadline = NOW + 20
    if status == "killed":
        deadline = min(deadline, state.deadline_secs)  # the earlier kill's timer still fires
    assert new.status == "killed"
    assert new.deadline_secs == deadline
    assert new.rebalance_num_workers is None and new.prev_status is None
    assert actions == (SetStatus("killed"), ScheduleTimer(deadline, Remove()))


@pytest.mark.parametrize("status", ["active", "inactive"])
def test_rebalance_remembers_the_status_to_return_to(status):
    state = in_status(status)
    new, actions = transition(state, Rebalance(wait_secs=7, num_workers=5, component_executors={"count": 8}), NOW)
    assert new.status == "rebalancing"
    assert new.prev_status == status
    assert new.deadline_secs == NOW + 7
    assert (new.rebalance_num_workers, new.rebalance_executors) == (5, {"count": 8})
    assert new.num_workers == 2  # applied only when the wait is over
    assert actions == (SetStatus("rebalancing"), ScheduleTimer(NOW + 7, DoRebalance()))


@pytest.mark.parametrize("status", STATUSES)
def test_startup(status):
    state = in_status(status)
    new, actions = transition(state, Startup(), NOW)
    assert new == state
    if status == "killed":
        assert actions == (ScheduleTimer(state.deadline_secs, Remove()),)
    elif status == "rebalancing":
        assert actions == (ScheduleTimer(state.deadline_secs, DoRebalance()),)
    else:
        assert actions == ()


@pytest.mark.parametrize("status", STATUSES)
def test_remove_timer(status):
    state = in_status(status)
    new, actions = transition(state, Remove(), NOW + 60)
    if status == "killed":
        assert (new, actions) == (None, (RemoveTopology(),))
    else:
        assert (new, actions) == (state, ())  # a stale timer is ignored, never an error


@pytest.mark.parametrize("status", STATUSES)
def test_do_rebalance_timer(status):
    state = in_status(status)
    new, actions = transition(state, DoRebalance(), NOW + 60)
    if status == "rebalancing":
        assert new.status == "active"
        assert new.num_workers == 3
        assert new.deadline_secs is None and new.prev_status is None and new.rebalance_num_workers is None
        assert actions == (Reschedule(3, {"spout": 2, "count": 4}), SetStatus("active"))
    else:
        assert (new, actions) == (state, ())


# ---------------------------------------------------------------- details


def test_kill_and_rebalance_wait_defaults_to_the_message_timeout():
    new, actions = transition(active(), Kill(), NOW)
    assert new.deadline_secs == NOW + TIMEOUT
    assert actions[-1] == ScheduleTimer(NOW + TIMEOUT, Remove())
    new, actions = transition(active(), Rebalance(), NOW)
    assert actions[-1] == ScheduleTimer(NOW + TIMEOUT, DoRebalance())


def test_kill_with_zero_wait_is_due_at_once():
    new, actions = transition(active(), Kill(wait_secs=0), NOW)
    assert actions == (SetStatus("killed"), ScheduleTimer(NOW, Remove()))
    assert transition(new, Remove(), NOW) == (None, (RemoveTopology(),))


def test_a_second_kill_can_bring_the_removal_forward_but_not_push_it_back():
    killed, _ = transition(active(), Kill(wait_secs=30), NOW)
    later, actions = transition(killed, Kill(wait_secs=100), NOW + 1)
    assert later.deadline_secs == NOW + 30
    sooner, actions = transition(killed, Kill(wait_secs=2), NOW + 1)
    assert sooner.deadline_secs == NOW + 3
    assert actions[-1] == ScheduleTimer(NOW + 3, Remove())


def test_a_timer_that_fires_early_waits_on():
    killed, _ = transition(active(), Kill(wait_secs=30), NOW)
    assert transition(killed, Remove(), NOW + 10) == (killed, (ScheduleTimer(NOW + 30, Remove()),))
    rebal, _ = transition(active(), Rebalance(wait_secs=30), NOW)
    assert transition(rebal, DoRebalance(), NOW + 29.5) == (rebal, (ScheduleTimer(NOW + 30, DoRebalance()),))


def test_rebalance_from_inactive_returns_to_inactive_and_merges_executor_overrides():
    state = in_status("inactive")
    state, _ = transition(state, Rebalance(wait_secs=0, component_executors={"count": 1}), NOW)
    new, actions = transition(state, DoRebalance(), NOW)
    assert new.status == "inactive"
    assert new.num_workers == 2  # unchanged when no count was given
    assert new.component_executors == {"spout": 2, "count": 1}
    assert actions == (Reschedule(2, {"spout": 2, "count": 1}), SetStatus("inactive"))


def test_kill_during_rebalance_wins():
    state, _ = transition(active(), Rebalance(wait_secs=10, num_workers=4), NOW)
    state, _ = transition(state, Kill(wait_secs=60), NOW + 1)
    assert transition(state, DoRebalance(), NOW + 10) == (state, ())  # the rebalance timer is stale now
    assert transition(state, Remove(), NOW + 61) == (None, (RemoveTopology(),))


@pytest.mark.parametrize("event, words", [
    (Kill(wait_secs=-1), "wait"),
    (Rebalance(wait_secs=-5), "wait"),
    (Rebalance(num_workers=0), "workers"),
    (Rebalance(component_executors={"count": 0}), "count"),
])
def test_bad_arguments_are_invalid_topology_errors(event, words):
    with pytest.raises(InvalidTopologyError, match=words) as info:
        transition(active(), event, NOW)
    assert "wc" in str(info.value)


def test_pending_timer_without_a_stored_deadline_waits_the_default_again():
    state = active(status="killed")
    assert pending_timer(state, NOW) == ScheduleTimer(NOW + TIMEOUT, Remove())
    assert pending_timer(active(), NOW) is None


def test_unknown_event_is_a_type_error():
    with pytest.raises(TypeError):
        transition(active(), "activate", NOW)  # type: ignore[arg-type]


# ---------------------------------------------------------------- StormBase and restarts


def base_of(state: TopologyState) -> StormBase:
    return StormBase(state.name, 1_700_000_000, "active", state.num_workers, state.component_executors)


def stored(base: StormBase) -> StormBase:
    """What a restarted Nimbus reads back from ZooKeeper."""
    return decode_record(encode_record(base), "/storms/x", StormBase)


@pytest.mark.parametrize("event", [Deactivate(), Deactivate(note="swap in progress"), Kill(wait_secs=12),
                                   Rebalance(wait_secs=9, num_workers=6, component_executors={"count": 2})])
def test_state_round_trips_through_the_storm_base(event):
    state, _ = transition(active(), event, NOW)
    base = stored(apply_to_base(base_of(active()), state))
    assert base.status == state.status
    assert state_from_base(state.topology_id, base, TIMEOUT) == state


def test_a_deactivate_note_shows_while_inactive_and_goes_with_an_activate_or_a_kill():
    state, actions = transition(active(), Deactivate(note="swap in progress"), NOW)
    assert state.note == "swap in progress" and actions == (SetStatus("inactive"),)
    assert apply_to_base(base_of(active()), state).topology_action_options == {"note": "swap in progress"}
    again, actions = transition(state, Deactivate(), NOW)  # a plain deactivate clears it: nothing to write
    assert again.note is None and actions == ()
    assert transition(state, Activate(), NOW)[0].note is None
    killed, _ = transition(state, Kill(wait_secs=0), NOW)
    assert "note" not in (apply_to_base(base_of(active()), killed).topology_action_options or {})


def test_active_base_has_no_pending_action():
    state, _ = transition(active(), Rebalance(wait_secs=0), NOW)
    state, _ = transition(state, DoRebalance(), NOW)
    base = apply_to_base(base_of(active()), state)
    assert base.topology_action_options is None and base.prev_status is None and base.status == "active"


class FakeNimbus:
    """Just enough of Nimbus to drive the machine: a fake clock, a timer list, a stored base."""

    def __init__(self, state: TopologyState, now: float):
        self.now = now
        self.timeout = state.message_timeout_secs  # from the topology conf, not the base
        self.base: StormBase | None = apply_to_base(base_of(state), state)
        self.timers: list[ScheduleTimer] = []
        self.rescheduled: list[Reschedule] = []

    def state(self) -> TopologyState:
        return state_from_base("wc-1-1700000000", self.base, self.timeout)

    def send(self, event) -> None:
        if self.base is None:
            return  # Storm: an event for a topology that is gone is dropped
        new, actions = transition(self.state(), event, self.now)
        for action in actions:
            if isinstance(action, ScheduleTimer):
                self.timers.append(action)
            elif isinstance(action, Reschedule):
                self.rescheduled.append(action)
            elif isinstance(action, RemoveTopology):
                self.base = None
            elif isinstance(action, SetStatus):
                self.base = stored(apply_to_base(self.base, new))

    def advance(self, secs: float) -> None:
        self.now += secs
        due = sorted((t for t in self.timers if t.at_secs <= self.now), key=lambda t: t.at_secs)
        self.timers = [t for t in self.timers if t.at_secs > self.now]
        for timer in due:
            self.send(timer.event)

    def restart(self) -> None:
        self.timers = []  # timers live in memory only
        self.base = stored(self.base)
        self.send(Startup())


def test_kill_with_wait_on_a_fake_clock():
    # nimbus_test test-kill-storm: killed at once, still there after 18 of 20 s, gone after 21.
    nimbus = FakeNimbus(active(message_timeout_secs=20), NOW)
    nimbus.send(Kill())
    assert nimbus.base.status == "killed"
    nimbus.advance(18)
    assert nimbus.base is not None
    nimbus.advance(3)
    assert nimbus.base is None


def test_a_waiting_kill_survives_a_restart_for_the_remaining_time():
    nimbus = FakeNimbus(active(), NOW)
    nimbus.send(Kill(wait_secs=30))
    nimbus.advance(20)
    nimbus.restart()
    assert [t.at_secs for t in nimbus.timers] == [NOW + 30]  # 10 s left, not 30 again
    nimbus.advance(9)
    assert nimbus.base.status == "killed"
    nimbus.advance(1)
    assert nimbus.base is None


def test_a_kill_whose_time_passed_while_nimbus_was_down_fires_at_once():
    nimbus = FakeNimbus(active(), NOW)
    nimbus.send(Kill(wait_secs=5))
    nimbus.now += 60
    nimbus.restart()
    nimbus.advance(0)
    assert nimbus.base is None


def test_a_waiting_rebalance_survives_a_restart_and_restores_the_status():
    nimbus = FakeNimbus(active(), NOW)
    nimbus.send(Deactivate())
    nimbus.send(Rebalance(wait_secs=30, num_workers=5, component_executors={"count": 6}))
    nimbus.advance(25)
    nimbus.restart()
    nimbus.advance(4)
    assert nimbus.base.status == "rebalancing" and nimbus.rescheduled == []
    nimbus.advance(1)
    assert nimbus.rescheduled == [Reschedule(5, {"spout": 2, "count": 6})]
    assert nimbus.base.status == "inactive"
    assert (nimbus.base.num_workers, nimbus.base.component_executors) == (5, {"spout": 2, "count": 6})
    assert nimbus.base.topology_action_options is None


def test_restart_of_an_active_topology_arms_nothing():
    nimbus = FakeNimbus(active(), NOW)
    before = encode_record(nimbus.base)
    nimbus.restart()
    assert nimbus.timers == [] and encode_record(nimbus.base) == before


def test_rebalance_change_parallelism_on_a_fake_clock():
    # nimbus_test test-rebalance-change-parallelism: nothing happens at 29 s, rescheduled at 32 s.
    nimbus = FakeNimbus(active(), NOW)
    nimbus.send(Rebalance(num_workers=6))
    nimbus.advance(29)
    assert nimbus.rescheduled == []
    nimbus.advance(3)
    assert nimbus.rescheduled == [Reschedule(6, {"spout": 2, "count": 4})]
    assert nimbus.base.status == "active"


# ---------------------------------------------------------------- stop at a checkpoint (a swap)


@pytest.mark.parametrize("status", ["active", "inactive"])
def test_a_stop_parks_and_returns_to_the_status_it_had_when_given_up_or_timed_out(status):
    state = in_status(status)
    stopping, actions = transition(state, Stop(wait_secs=60, note="swap in progress"), NOW)
    assert stopping.status == "stopping" and stopping.prev_status == status and not stopping.park
    assert actions == (SetStatus("stopping"), ScheduleTimer(NOW + 60, StopTimeout()))
    parked, actions = transition(stopping, Park(), NOW + 1)
    assert parked.park and actions == (SetStatus("stopping"),)
    assert transition(parked, Park(), NOW + 2) == (parked, ())
    back, actions = transition(parked, Resume(), NOW + 3)
    assert back.status == status and not back.park and back.deadline_secs is None and back.note is None
    assert transition(parked, StopTimeout(), NOW + 59) == (parked, (ScheduleTimer(NOW + 60, StopTimeout()),))
    timed_out, actions = transition(parked, StopTimeout(), NOW + 60)
    assert timed_out.status == status and actions == (SetStatus(status),)
    assert transition(parked, Activate(), NOW + 3)[0].status == "active"  # the user's word wins


def test_a_stopping_topology_refuses_other_user_events_but_a_kill():
    stopping, _ = transition(active(), Stop(wait_secs=60), NOW)
    for event in (Deactivate(), Rebalance(), Stop(wait_secs=5)):
        with pytest.raises(IllegalTransitionError):
            transition(stopping, event, NOW)
    killed, _ = transition(stopping, Kill(wait_secs=0), NOW)
    assert killed.status == "killed"
    for status in ("killed", "rebalancing"):
        with pytest.raises(IllegalTransitionError):
            transition(in_status(status), Stop(wait_secs=5), NOW)
    with pytest.raises(IllegalTransitionError):
        transition(active(), Park(), NOW)


def test_a_stop_survives_a_nimbus_restart_through_the_storm_base():
    stopping, _ = transition(active(), Stop(wait_secs=60, note="swap"), NOW)
    parked, _ = transition(stopping, Park(), NOW)
    base = StormBase(storm_name="wc", launch_time_secs=int(NOW), status="active", num_workers=2,
                     component_executors={"spout": 2, "count": 4})
    stored = decode_record(encode_record(apply_to_base(base, parked)), "/storms/wc", StormBase)
    assert stored.parked and stored.inactive_note == "swap"
    again = state_from_base(parked.topology_id, stored, TIMEOUT)
    assert again == parked
    assert pending_timer(again, NOW + 10) == ScheduleTimer(NOW + 60, StopTimeout())
