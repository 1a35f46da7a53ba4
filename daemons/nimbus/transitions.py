"""The topology state machine (Storm's nimbus `state-transitions`) as a pure function.

`transition(state, event, now)` returns `(new_state, actions)`; Nimbus persists the new state
(see `apply_to_base`) and executes the actions in order. `now` is epoch seconds, passed in so a
test drives the machine with a fake clock.

    status       activate  deactivate  kill      rebalance    stop      startup   remove   do-rebalance  stop-timeout
    active       (no-op)   inactive    killed    rebalancing  stopping  (no-op)   ignored  ignored       ignored
    inactive     active    (no-op)     killed    rebalancing  stopping  (no-op)   ignored  ignored       ignored
    killed       ILLEGAL   ILLEGAL     killed    ILLEGAL      ILLEGAL   re-arm    removed  ignored       ignored
    rebalancing  ILLEGAL   ILLEGAL     killed    ILLEGAL      ILLEGAL   re-arm    ignored  prev status   ignored
    stopping     active    ILLEGAL     killed    ILLEGAL      ILLEGAL   re-arm    ignored  ignored       prev status

- kill: status `killed` at once (workers see a non-active status and deactivate their spouts);
  the topology is removed after the wait (default: its `topology.message.timeout.secs`). A
  second kill can only bring the removal forward: Storm's earlier timer still fires, so the
  deadline is the earlier of the two.
- rebalance: status `rebalancing`, remembering the status to return to; after the wait (same
  default) the topology is rescheduled from scratch with the new worker/executor counts and the
  remembered status is restored.
- The deadline is stored as absolute epoch seconds in the storm base, so a restarted Nimbus
  (`Startup`) re-arms the timer for the time that remains and a waiting kill or rebalance
  survives the restart.
- stop (a swap, daemons/nimbus/swaps/; Flink's stop-with-savepoint): status `stopping` (the
  spouts inactive, as for a deactivate) until the deadline, remembering the status to return to.
  `Park` asks the checkpoint spout to start no further checkpoint (the stop's checkpoint has
  committed); `Resume` (the swap gave up) and the deadline's timer return to the remembered
  status, so a swap whose client or Nimbus died never leaves the topology stopped; an activate
  returns to active at once (the swap then gives up too).
- Timer events (`Remove`, `DoRebalance`, `StopTimeout`) never raise: one that finds another status (e.g. the
  rebalance timer of a topology killed meanwhile) is ignored, as Storm ignores it, and one that
  fires before the deadline re-arms itself.
- User events that make no sense in the status raise `IllegalTransitionError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Union

from cluster_state.records import (
    STATUS_ACTIVE,
    STATUS_INACTIVE,
    STATUS_KILLED,
    STATUS_REBALANCING,
    STATUS_STOPPING,
    StormBase,
)
from executor.errors import InvalidTopologyError


class IllegalTransitionError(RuntimeError):
    """An event that the topology's status does not allow (e.g. activating a killed topology)."""

    rpc_kind = "illegal-state"  # reaches an RPC client as IllegalStateError

    def __init__(self, topology: str, status: str, event: str) -> None:
        self.topology = topology
        self.status = status
        self.event = event
        super().__init__(f"topology {topology} is {status}: cannot {event} it")


# ------------------------------------------------------------------ events


# The longest wait a kill or rebalance accepts (a week: beyond any message timeout); nan and inf
# are refused too, as a deadline that never comes would hold Nimbus's timer for every topology.
MAX_WAIT_SECS = 7 * 24 * 3600.0

@dataclass(frozen=True)
class Activate:
    name = "activate"


@dataclass(frozen=True)
class Deactivate:
    """`note`: what the topology is stopped for, shown while it is inactive (`storm-py swap`)."""

    note: str | None = None
    name = "deactivate"


@dataclass(frozen=True)
class Kill:
    """Kill after `wait_secs` (None: the topology's message timeout)."""

    wait_secs: float | None = None
    name = "kill"


@dataclass(frozen=True)
class Rebalance:
    """Reschedule after `wait_secs` with optional new worker and per-component executor counts."""

    wait_secs: float | None = None
    num_workers: int | None = None
    component_executors: Mapping[str, int] | None = None
    name = "rebalance"


@dataclass(frozen=True)
class Stop:
    """Stop at a checkpoint within `wait_secs` (a swap); `note` says why, while it lasts."""

    wait_secs: float
    note: str | None = None
    name = "stop"


@dataclass(frozen=True)
class Park:
    """A stopping topology's checkpoint spout starts no further checkpoint."""

    name = "park"


@dataclass(frozen=True)
class Resume:
    """A stopping topology goes back to the status it had (its swap gave up)."""

    name = "resume"


@dataclass(frozen=True)
class StopTimeout:
    """Timer: a stop's deadline passed."""

    name = "stop-timeout"


@dataclass(frozen=True)
class Startup:
    """Nimbus (re)started and found this topology in ZooKeeper."""

    name = "startup"


@dataclass(frozen=True)
class Remove:
    """Timer: a kill's wait elapsed."""

    name = "remove"


@dataclass(frozen=True)
class DoRebalance:
    """Timer: a rebalance's wait elapsed."""

    name = "do-rebalance"


Event = Union[Activate, Deactivate, Kill, Rebalance, Stop, Park, Resume, Startup, Remove, DoRebalance, StopTimeout]

# ------------------------------------------------------------------ actions


@dataclass(frozen=True)
class SetStatus:
    """Write the new state to `/storms/{id}` (status, pending kill/rebalance, counts)."""

    status: str


@dataclass(frozen=True)
class ScheduleTimer:
    """Deliver `event` to this topology at epoch second `at_secs` (now if already past)."""

    at_secs: float
    event: Event


@dataclass(frozen=True)
class RemoveTopology:
    """Remove the topology's storm base and assignment (its workers then exit)."""


@dataclass(frozen=True)
class Reschedule:
    """Reschedule the topology from scratch with these counts (already in the new state)."""

    num_workers: int
    component_executors: Mapping[str, int]


Action = Union[SetStatus, ScheduleTimer, RemoveTopology, Reschedule]

# ------------------------------------------------------------------ state


@dataclass(frozen=True)
class TopologyState:
    """The part of a StormBase the state machine reads and writes, plus the default wait.

    deadline_secs: when a pending kill/rebalance fires (epoch seconds); None when none is pending.
    prev_status: the status a rebalance returns to.
    rebalance_*: the counts a pending rebalance applies (None: unchanged).
    """

    topology_id: str
    name: str
    status: str
    num_workers: int
    component_executors: Mapping[str, int]
    message_timeout_secs: float
    prev_status: str | None = None
    deadline_secs: float | None = None
    wait_secs: float | None = None
    rebalance_num_workers: int | None = None
    rebalance_executors: Mapping[str, int] | None = field(default=None)
    note: str | None = None   # an inactive or stopping topology's reason (a swap in progress)
    park: bool = False        # stopping: its checkpoint spout starts no further checkpoint


def transition(state: TopologyState, event: Event, now: float) -> tuple[TopologyState | None, tuple[Action, ...]]:
    """Apply `event` at time `now`; the new state is None once the topology is removed.

    Raises IllegalTransitionError for a user event the status forbids and InvalidTopologyError
    for bad kill/rebalance arguments (a negative wait, fewer than one worker or executor).
    """
    _check_arguments(state, event)
    status = state.status
    if isinstance(event, Startup):
        timer = pending_timer(state, now)
        return state, (() if timer is None else (timer,))
    if isinstance(event, (Remove, DoRebalance, StopTimeout)):
        return _on_timer(state, event, now)
    if isinstance(event, Kill):
        return _kill(state, event, now)
    if status == STATUS_STOPPING:
        return _while_stopping(state, event)
    if status in (STATUS_KILLED, STATUS_REBALANCING) or isinstance(event, (Park, Resume)):
        raise IllegalTransitionError(state.name, status, event.name)
    if isinstance(event, Activate):
        return _set(replace(state, note=None), STATUS_ACTIVE)
    if isinstance(event, Stop):
        deadline = now + event.wait_secs
        new = replace(state, status=STATUS_STOPPING, prev_status=status, deadline_secs=deadline,
                      wait_secs=event.wait_secs, note=event.note, park=False)
        return new, (SetStatus(STATUS_STOPPING), ScheduleTimer(deadline, StopTimeout()))
    if isinstance(event, Deactivate):
        return _set(replace(state, note=event.note), STATUS_INACTIVE)
    if isinstance(event, Rebalance):
        deadline = now + _wait(state, event.wait_secs)
        new = replace(state, status=STATUS_REBALANCING, prev_status=status, deadline_secs=deadline,
                      wait_secs=_wait(state, event.wait_secs), rebalance_num_workers=event.num_workers,
                      rebalance_executors=None if event.component_executors is None
                      else dict(event.component_executors))
        return new, (SetStatus(STATUS_REBALANCING), ScheduleTimer(deadline, DoRebalance()))
    raise TypeError(f"not a topology event: {event!r}")


_TIMERS = {STATUS_KILLED: Remove, STATUS_REBALANCING: DoRebalance, STATUS_STOPPING: StopTimeout}


def pending_timer(state: TopologyState, now: float) -> ScheduleTimer | None:
    """The timer a killed, rebalancing or stopping topology waits for (what a restarted Nimbus re-arms)."""
    timer = _TIMERS.get(state.status)
    if timer is None:
        return None
    # A base written without a deadline (by hand, or by an older Nimbus) waits the default again.
    at = state.deadline_secs if state.deadline_secs is not None else now + state.message_timeout_secs
    return ScheduleTimer(at, timer())


def _while_stopping(state: TopologyState, event: Event) -> tuple[TopologyState, tuple[Action, ...]]:
    if isinstance(event, Park):
        return (state, ()) if state.park else (replace(state, park=True), (SetStatus(STATUS_STOPPING),))
    if isinstance(event, (Resume, Activate)):
        back = STATUS_ACTIVE if isinstance(event, Activate) else (state.prev_status or STATUS_ACTIVE)
        return _back_from_stopping(state, back)
    raise IllegalTransitionError(state.name, STATUS_STOPPING, event.name)


def _back_from_stopping(state: TopologyState, status: str) -> tuple[TopologyState, tuple[Action, ...]]:
    new = replace(state, status=status, prev_status=None, deadline_secs=None, wait_secs=None, note=None, park=False)
    return new, (SetStatus(status),)


def _check_arguments(state: TopologyState, event: Event) -> None:
    wait = getattr(event, "wait_secs", None)
    if wait is not None and wait < 0:
        raise InvalidTopologyError(f"{event.name} {state.name}: wait must be >= 0 seconds, got {wait}")
    if isinstance(event, Rebalance):
        if event.num_workers is not None and event.num_workers <= 0:
            raise InvalidTopologyError(
                f"rebalance {state.name}: number of workers must be greater than 0, got {event.num_workers}")
        for comp, count in (event.component_executors or {}).items():
            if count <= 0:
                raise InvalidTopologyError(
                    f"rebalance {state.name}: number of executors of {comp} must be greater than 0, got {count}")


def _wait(state: TopologyState, wait_secs: float | None) -> float:
    return state.message_timeout_secs if wait_secs is None else wait_secs


def _set(state: TopologyState, status: str) -> tuple[TopologyState, tuple[Action, ...]]:
    if state.status == status:
        return state, ()  # activating an active topology is a no-op in Storm, not an error
    return replace(state, status=status), (SetStatus(status),)


def _kill(state: TopologyState, event: Kill, now: float) -> tuple[TopologyState, tuple[Action, ...]]:
    wait = _wait(state, event.wait_secs)
    deadline = now + wait
    if state.status == STATUS_KILLED and state.deadline_secs is not None:
        deadline = min(deadline, state.deadline_secs)  # the earlier timer still fires first
    new = replace(state, status=STATUS_KILLED, prev_status=None, deadline_secs=deadline, wait_secs=wait,
                  rebalance_num_workers=None, rebalance_executors=None)
    return new, (SetStatus(STATUS_KILLED), ScheduleTimer(deadline, Remove()))


def _on_timer(state: TopologyState, event: Remove | DoRebalance | StopTimeout,
              now: float) -> tuple[TopologyState | None, tuple[Action, ...]]:
    if _TIMERS.get(state.status) is not type(event):
        return state, ()  # a stale timer (e.g. the topology was killed while rebalancing)
    if state.deadline_secs is not None and now < state.deadline_secs:
        return state, (ScheduleTimer(state.deadline_secs, event),)  # fired early: wait on
    if isinstance(event, Remove):
        return None, (RemoveTopology(),)
    if isinstance(event, StopTimeout):
        return _back_from_stopping(state, state.prev_status or STATUS_ACTIVE)
    executors = dict(state.component_executors)
    executors.update(state.rebalance_executors or {})  # Storm merges the overrides into the old map
    workers = state.rebalance_num_workers or state.num_workers
    restored = state.prev_status or STATUS_ACTIVE
    new = replace(state, status=restored, num_workers=workers, component_executors=executors,
                  prev_status=None, deadline_secs=None, wait_secs=None, rebalance_num_workers=None,
                  rebalance_executors=None)
    return new, (Reschedule(workers, executors), SetStatus(restored))


# ------------------------------------------------------------------ StormBase mapping

_ACTION_KILL = "kill"
_ACTION_REBALANCE = "rebalance"
_ACTION_STOP = "stop"
_ACTIONS = {STATUS_KILLED: _ACTION_KILL, STATUS_REBALANCING: _ACTION_REBALANCE, STATUS_STOPPING: _ACTION_STOP}


def state_from_base(topology_id: str, base: StormBase, message_timeout_secs: float) -> TopologyState:
    """The state machine's view of `/storms/{id}`; `message_timeout_secs` comes from the topology conf."""
    opts: Mapping[str, Any] = base.topology_action_options or {}
    executors = opts.get("component_executors")
    return TopologyState(
        topology_id=topology_id, name=base.storm_name, status=base.status, num_workers=base.num_workers,
        component_executors=dict(base.component_executors), message_timeout_secs=message_timeout_secs,
        prev_status=base.prev_status if base.status in (STATUS_REBALANCING, STATUS_STOPPING) else None,
        deadline_secs=opts.get("deadline_secs"), wait_secs=opts.get("wait_secs"),
        rebalance_num_workers=opts.get("num_workers"),
        rebalance_executors=None if executors is None else dict(executors),
        note=base.inactive_note, park=bool(opts.get("park")) if base.status == STATUS_STOPPING else False)


def apply_to_base(base: StormBase, state: TopologyState) -> StormBase:
    """`base` updated with the state's status, pending action and counts (what SetStatus writes)."""
    opts: dict[str, Any] | None = None
    if state.status in _ACTIONS:
        opts = {"action": _ACTIONS[state.status], "deadline_secs": state.deadline_secs, "wait_secs": state.wait_secs}
        if state.status == STATUS_REBALANCING:
            opts["num_workers"] = state.rebalance_num_workers
            opts["component_executors"] = (None if state.rebalance_executors is None
                                           else dict(state.rebalance_executors))
        if state.status == STATUS_STOPPING:
            opts["park"] = state.park
            if state.note:
                opts["note"] = state.note
    elif state.status == STATUS_INACTIVE and state.note:
        opts = {"note": state.note}
    return replace(base, status=state.status, prev_status=state.prev_status, num_workers=state.num_workers,
                   component_executors=dict(state.component_executors), topology_action_options=opts)
