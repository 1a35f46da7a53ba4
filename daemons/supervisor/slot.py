"""One slot (port) of the supervisor as an explicit state machine (pure; Storm 2.x `Slot`).

The daemon owns one SlotState per port and, every `supervisor.monitor.frequency.secs` (and on
an assignment change), gathers plain facts into SlotInputs, calls

    state, actions = step(state, inputs, now, conf)

and executes the actions in order. `step` never blocks: every wait (the shutdown sleep after
SIGTERM, the start timeout, a relaunch back-off, code not yet downloaded) is a state with a
timestamp, so one slot's slow kill never delays another slot. `now` is wall-clock seconds
(time.time()): it is compared with heartbeat times and with launch times recorded before a
supervisor restart.

Driving it (one tick of the daemon's sync-processes, for every slot independently):
1. targets = local_assignments.slot_targets(local, ports, {p: s.assignment for p, s in slots})
2. per slot: code_present for the target's storm id (stormdist/{id} exists); for the slot's
   worker (state.worker_id): its local heartbeat, and process_alive =
   record.process_status(ProcessFacts from psutil) is ProcessStatus.ALIVE; a fresh uuid;
3. step, then execute the actions in order: RecordWorker -> LocalState approved workers;
   LaunchWorker -> mkdir, Popen (own session, output to its log), store record.with_pid(pid,
   its start on the boot clock); SendSigterm/SendSigkill -> signal the recorded pid only if check_process says
   ALIVE; CleanupWorker -> remove its dirs; ForgetWorker -> drop its record; DownloadCode ->
   hand the storm id to the downloader (dedup, retry_due back-off); ReportError -> log/report
   (with death=True: record the worker's death, its exit status and log tail).
4. step again no later than next_wakeup(state) (or every monitor period).
On start: recover_slots(ports, records from LocalState); strays are stepped with
assignment=None until EMPTY; stray_worker_dirs are removed without signalling anything.

Rules (Storm's supervisor.clj and 2.x Slot.java):
- the port's assignment changes or goes away: SIGTERM, wait `shutdown_sleep_secs`, SIGKILL,
  clean up, then prepare the new assignment (EMPTY when none);
- a worker (with its children) over its memory limit is killed with SIGKILL at once, as the
  kernel's OOM killer would (a grace period lets a runaway allocation grow on), and relaunched;
- a worker that exits, stops heartbeating (timed-out), loses its heartbeat, heartbeats for
  something else (disallowed) or never heartbeats within the start timeout is a failure:
  reported once per event, killed the same way, and relaunched with a fresh worker id only
  once the old process is gone, after a back-off that grows with consecutive failures;
- code missing: ask for it (DownloadCode) and wait; the download and its retries are outside;
- after a supervisor restart `recover_slots` rebuilds the slots from the recorded workers: a
  worker whose pid is alive with the recorded start time is adopted, never relaunched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Iterable, Mapping

from cluster_state.records import LocalAssignment, WorkerHeartbeat, memory_kill_reason
from daemons.backoff import backoff_delay

from .worker_state import WorkerRecord, WorkerStatus, classify_worker


class SlotPhase(str, Enum):
    EMPTY = "empty"                                    # no worker, nothing assigned
    WAITING_FOR_CODE = "waiting-for-code"              # assigned, code not downloaded yet
    WAITING_FOR_WORKER_START = "waiting-for-worker-start"  # launched, no valid heartbeat yet
    RUNNING = "running"
    KILL = "kill"                                      # SIGTERM sent; then the port's new assignment
    KILL_AND_RELAUNCH = "kill-and-relaunch"            # SIGTERM sent; then the same assignment again
    WAITING_TO_RELAUNCH = "waiting-to-relaunch"        # back-off after a failed worker


# --- actions: plain values the daemon executes, in order -------------------------------------

@dataclass(frozen=True)
class DownloadCode:
    """Make sure the topology's code gets downloaded (idempotent; the downloader retries)."""
    storm_id: str


@dataclass(frozen=True)
class RecordWorker:
    """Store the record in LocalState's approved workers *before* launching (a restart must
    know every worker that may exist)."""
    record: WorkerRecord


@dataclass(frozen=True)
class LaunchWorker:
    """Create workers/{id}, start the worker in its own session, then store its pid and start
    in its record (WorkerRecord.with_pid). A failed launch is just a dead process."""
    worker_id: str
    port: int
    assignment: LocalAssignment
    # A restart: the same assignment again after this slot's worker for it failed (exited,
    # timed out, never started, over its memory limit). False for a planned launch: a new or
    # changed assignment (a rebalance, a move, a new slot), even one held back by the
    # topology's back-off. SupervisorInfo.worker_restarts counts only restarts.
    restart: bool = False


@dataclass(frozen=True)
class SendSigterm:
    """SIGTERM the recorded pid, unless check_process says it is not our worker any more."""
    worker_id: str


@dataclass(frozen=True)
class SendSigkill:
    """SIGKILL the recorded pid, with the same guard as SendSigterm."""
    worker_id: str


@dataclass(frozen=True)
class CleanupWorker:
    """Remove workers/{id}/heartbeats, workers/{id}/pids and workers/{id} (retry later on error)."""
    worker_id: str


@dataclass(frozen=True)
class ForgetWorker:
    """Remove the worker's record from LocalState's approved workers."""
    worker_id: str


@dataclass(frozen=True)
class ReportError:
    """Log it and report it (e.g. StormClusterState.report_error for the topology)."""
    port: int
    storm_id: str | None
    message: str
    worker_id: str | None = None  # the worker it is about
    # A failure of the worker (it exited, timed out, never started, heartbeats for something
    # else): the daemon records the death (exit status, log tail). False for other reports,
    # e.g. a worker still there long after SIGKILL.
    death: bool = False


Action = DownloadCode | RecordWorker | LaunchWorker | SendSigterm | SendSigkill | CleanupWorker | ForgetWorker \
    | ReportError


# --- configuration, inputs, state ------------------------------------------------------------

@dataclass(frozen=True)
class SlotConfig:
    """Timeouts in seconds; defaults are Storm's."""

    worker_timeout_secs: float = 30.0      # supervisor.worker.timeout.secs
    start_timeout_secs: float = 120.0      # supervisor.worker.start.timeout.secs
    shutdown_sleep_secs: float = 3.0       # supervisor.worker.shutdown.sleep.secs
    relaunch_backoff_base_secs: float = 1.0
    relaunch_backoff_max_secs: float = 60.0
    # A process still there this long after SIGTERM survives SIGKILL (stuck in the kernel):
    # reported once (Storm gives up with an exception after 120 s).
    kill_stuck_secs: float = 120.0
    # supervisor.worker.memory.limit.mb: a worker (with its children) over it is killed; None: no limit.
    memory_limit_mb: float | None = 2048.0

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> SlotConfig:
        return cls(  # the conf always holds the packaged defaults (cluster_state/defaults.yaml)
            worker_timeout_secs=float(conf["supervisor.worker.timeout.secs"]),
            start_timeout_secs=float(conf["supervisor.worker.start.timeout.secs"]),
            shutdown_sleep_secs=float(conf["supervisor.worker.shutdown.sleep.secs"]),
            memory_limit_mb=None if conf.get("supervisor.worker.memory.limit.mb") is None
            else float(conf["supervisor.worker.memory.limit.mb"]),
        )

    @property
    def first_heartbeat_timeout_secs(self) -> float:
        # Storm: a starting worker gets at least the running worker's timeout.
        return max(self.start_timeout_secs, self.worker_timeout_secs)


@dataclass(frozen=True)
class SlotInputs:
    """Facts the daemon gathers for one slot just before stepping it."""

    # The port's target (local_assignments.slot_targets): None = unassigned.
    assignment: LocalAssignment | None
    # Whether the code of `assignment`'s topology is downloaded.
    code_present: bool = False
    # The local heartbeat of the slot's current worker (workers/{worker_id}/heartbeats), if any.
    heartbeat: WorkerHeartbeat | None = None
    # Whether the slot's current worker process runs: WorkerRecord.process_status(...) is ALIVE
    # (a reused pid or a zombie is not alive); False when the slot has no worker.
    process_alive: bool = False
    # A fresh worker id (uuid) used if this step launches a worker; pass a new one each step.
    new_worker_id: str | None = None
    # No worker of the assignment's topology launches before this time (topology_hold_until):
    # the back-off follows the topology's failures here, not the slot, so that Nimbus moving
    # the executors to another port does not start it over.
    topology_hold_until: float | None = None
    # Resident memory of the slot's current worker process and its children, if known.
    memory_bytes: int | None = None
    # The running worker's topology's own limit (topology.worker.memory.limit.mb), if it sets
    # one: it wins over the supervisor's.
    topology_memory_limit_mb: float | None = None


@dataclass(frozen=True)
class SlotState:
    port: int
    phase: SlotPhase = SlotPhase.EMPTY
    # What the worker runs (or what is being prepared): None only when EMPTY.
    assignment: LocalAssignment | None = None
    worker_id: str | None = None
    launched_at: float | None = None
    running_since: float | None = None
    kill_started_at: float | None = None     # SIGTERM sent
    last_sigkill_at: float | None = None
    stuck_reported: bool = False             # the kill outlasted kill_stuck_secs (reported once)
    failures: int = 0                        # consecutive failed workers, for the back-off
    relaunch_at: float | None = None

    @property
    def has_worker(self) -> bool:
        return self.worker_id is not None


def equivalent(a: LocalAssignment | None, b: LocalAssignment | None) -> bool:
    """Same topology and the same set of executors (order does not matter)."""
    if a is None or b is None:
        return a is b
    return a.storm_id == b.storm_id and set(a.executors) == set(b.executors)


# --- transitions -----------------------------------------------------------------------------

Step = tuple[SlotState, tuple[Action, ...]]


def _no_worker(state: SlotState) -> SlotState:
    return replace(state, worker_id=None, launched_at=None, running_since=None, kill_started_at=None,
                   last_sigkill_at=None, stuck_reported=False, relaunch_at=None)


def _launch(state: SlotState, target: LocalAssignment, inputs: SlotInputs, now: float) -> Step:
    worker_id = inputs.new_worker_id
    if not worker_id:
        raise ValueError(f"slot {state.port}: a launch is due but SlotInputs.new_worker_id is not set")
    new = replace(_no_worker(state), phase=SlotPhase.WAITING_FOR_WORKER_START, assignment=target,
                  worker_id=worker_id, launched_at=now)
    record = WorkerRecord(worker_id, state.port, target, now)
    # `failures` counts this slot's failed workers for `target`; any change of assignment sets it to 0.
    return new, (RecordWorker(record), LaunchWorker(worker_id, state.port, target, restart=state.failures > 0))


def _prepare(state: SlotState, target: LocalAssignment | None, inputs: SlotInputs, now: float) -> Step:
    """No worker runs: go for `target` (nothing, launch, or wait for its code)."""
    state = _no_worker(state)
    if target is None:
        return replace(state, phase=SlotPhase.EMPTY, assignment=None, failures=0), ()
    if inputs.code_present:
        hold = inputs.topology_hold_until
        if hold is not None and now < hold:
            return replace(state, phase=SlotPhase.WAITING_TO_RELAUNCH, assignment=target, relaunch_at=hold), ()
        return _launch(state, target, inputs, now)
    return (replace(state, phase=SlotPhase.WAITING_FOR_CODE, assignment=target),
            (DownloadCode(target.storm_id),))


def _worker_gone(state: SlotState, inputs: SlotInputs, now: float, conf: SlotConfig, relaunch: bool) -> Step:
    """The worker's process is gone: clean up after it, then relaunch or move on."""
    done: tuple[Action, ...] = (CleanupWorker(state.worker_id), ForgetWorker(state.worker_id))
    if relaunch and equivalent(inputs.assignment, state.assignment):
        delay = backoff_delay(state.failures, conf.relaunch_backoff_base_secs, conf.relaunch_backoff_max_secs,
                              free_retries=1)
        if delay > 0:
            waiting = replace(_no_worker(state), phase=SlotPhase.WAITING_TO_RELAUNCH, relaunch_at=now + delay)
            return waiting, done
        new, actions = _prepare(state, state.assignment, inputs, now)
        return new, done + actions
    new, actions = _prepare(replace(state, failures=0), inputs.assignment, inputs, now)
    return new, done + actions


def _start_kill(state: SlotState, inputs: SlotInputs, now: float, conf: SlotConfig, relaunch: bool,
                report: str | None = None, at_once: bool = False) -> Step:
    """SIGTERM the worker (if it still runs; SIGKILL `at_once`) and wait for it in KILL /
    KILL_AND_RELAUNCH."""
    actions: tuple[Action, ...] = ()
    if report is not None:
        state = replace(state, failures=state.failures + 1)
        actions = (ReportError(state.port, state.assignment.storm_id, report, state.worker_id, death=True),)
    if not inputs.process_alive:
        new, more = _worker_gone(state, inputs, now, conf, relaunch)
        return new, actions + more
    if not relaunch and inputs.assignment is not None and not inputs.code_present:
        # Fetch the next topology's code while the old worker shuts down (Storm does too).
        actions += (DownloadCode(inputs.assignment.storm_id),)
    phase = SlotPhase.KILL_AND_RELAUNCH if relaunch else SlotPhase.KILL
    new = replace(state, phase=phase, kill_started_at=now, last_sigkill_at=now if at_once else None,
                  stuck_reported=False, running_since=None)
    return new, actions + ((SendSigkill if at_once else SendSigterm)(state.worker_id),)


def _killing(state: SlotState, inputs: SlotInputs, now: float, conf: SlotConfig) -> Step:
    relaunch = state.phase is SlotPhase.KILL_AND_RELAUNCH
    if not inputs.process_alive:
        return _worker_gone(state, inputs, now, conf, relaunch)
    since = now - state.kill_started_at
    actions: tuple[Action, ...] = ()
    if since >= conf.kill_stuck_secs and not state.stuck_reported:
        # Stuck in the kernel: say so once, keep trying, and never launch a second worker
        # beside it (it may still hold the port).
        storm_id = state.assignment.storm_id if state.assignment else None
        message = (f"worker {state.worker_id} on port {state.port} still runs {since:.0f}s after SIGTERM "
                   "and SIGKILL; the slot waits for it to go")
        state, actions = replace(state, stuck_reported=True), (ReportError(state.port, storm_id, message,
                                                                           state.worker_id),)
    if since >= conf.shutdown_sleep_secs and (
            state.last_sigkill_at is None or now - state.last_sigkill_at >= conf.shutdown_sleep_secs):
        return replace(state, last_sigkill_at=now), actions + (SendSigkill(state.worker_id),)
    return state, actions


def _describe(state: SlotState, status: WorkerStatus, heartbeat: WorkerHeartbeat | None, now: float) -> str:
    who = f"worker {state.worker_id} on port {state.port}"
    if status is WorkerStatus.DISALLOWED:
        return f"{who} heartbeats for something else ({heartbeat.storm_id} {list(heartbeat.executors)})"
    if heartbeat is None:
        return f"{who} has no heartbeat"
    return f"{who} timed out: last heartbeat {now - heartbeat.time_secs:.0f}s ago"


def memory_limit(conf: SlotConfig, topology_limit_mb: float | None) -> tuple[float | None, str]:
    """A worker's memory limit in MB (None: none) and the key that sets it: its topology's own
    topology.worker.memory.limit.mb wins over the supervisor's."""
    if topology_limit_mb is not None:
        return topology_limit_mb, "topology.worker.memory.limit.mb"
    return conf.memory_limit_mb, "supervisor.worker.memory.limit.mb"


def over_memory_limit(used_bytes: int | None, limit_mb: float | None) -> bool:
    return limit_mb is not None and used_bytes is not None and used_bytes / (1024 * 1024) > limit_mb


def _over_memory(state: SlotState, inputs: SlotInputs, conf: SlotConfig) -> str | None:
    limit, key = memory_limit(conf, inputs.topology_memory_limit_mb)
    if not inputs.process_alive or not over_memory_limit(inputs.memory_bytes, limit):
        return None
    return memory_kill_reason(state.worker_id, state.port, inputs.memory_bytes / (1024 * 1024), key, limit)


def _waiting_for_start(state: SlotState, inputs: SlotInputs, now: float, conf: SlotConfig) -> Step:
    if not equivalent(inputs.assignment, state.assignment):
        return _start_kill(state, inputs, now, conf, relaunch=False)
    if not inputs.process_alive:
        message = f"worker {state.worker_id} on port {state.port} exited before its first heartbeat"
        return _start_kill(state, inputs, now, conf, relaunch=True, report=message)
    if (over := _over_memory(state, inputs, conf)) is not None:
        return _start_kill(state, inputs, now, conf, relaunch=True, report=over, at_once=True)
    limit = conf.first_heartbeat_timeout_secs
    status = classify_worker(inputs.heartbeat, state.worker_id, {state.worker_id}, state.assignment, now,
                             conf.worker_timeout_secs, limit, state.launched_at, port=state.port)
    if status is WorkerStatus.VALID:
        return replace(state, phase=SlotPhase.RUNNING, running_since=now), ()
    if status is WorkerStatus.NOT_STARTED:
        return state, ()
    if status is WorkerStatus.TIMED_OUT and now - state.launched_at < limit:
        return state, ()  # an old heartbeat while starting: wait for a fresh one until the limit
    if inputs.heartbeat is None or status is WorkerStatus.TIMED_OUT:
        message = f"worker {state.worker_id} on port {state.port} failed to start within {limit:g}s"
    else:
        message = _describe(state, status, inputs.heartbeat, now)
    return _start_kill(state, inputs, now, conf, relaunch=True, report=message)


def _running(state: SlotState, inputs: SlotInputs, now: float, conf: SlotConfig) -> Step:
    if not equivalent(inputs.assignment, state.assignment):
        return _start_kill(state, inputs, now, conf, relaunch=False)
    if not inputs.process_alive:
        message = f"worker {state.worker_id} on port {state.port} exited"
        return _start_kill(state, inputs, now, conf, relaunch=True, report=message)
    if (over := _over_memory(state, inputs, conf)) is not None:
        return _start_kill(state, inputs, now, conf, relaunch=True, report=over, at_once=True)
    # No launch grace once running: a vanished heartbeat is a timed-out worker (Storm's HB_NULL).
    status = classify_worker(inputs.heartbeat, state.worker_id, {state.worker_id}, state.assignment, now,
                             conf.worker_timeout_secs, conf.start_timeout_secs, None, port=state.port)
    if status is not WorkerStatus.VALID:
        return _start_kill(state, inputs, now, conf, relaunch=True,
                           report=_describe(state, status, inputs.heartbeat, now))
    if state.failures and now - state.running_since >= conf.worker_timeout_secs:
        return replace(state, failures=0), ()  # stable again: the back-off starts over
    return state, ()


def step(state: SlotState, inputs: SlotInputs, now: float, conf: SlotConfig = SlotConfig()) -> Step:
    """One transition of the slot: (new state, actions to execute in order)."""
    if inputs.new_worker_id is not None and inputs.new_worker_id == state.worker_id:
        raise ValueError(f"slot {state.port}: new_worker_id {inputs.new_worker_id!r} is the current worker's id")
    phase = state.phase
    if phase is SlotPhase.EMPTY:
        if inputs.assignment is None:
            return state, ()
        return _prepare(state, inputs.assignment, inputs, now)
    if phase is SlotPhase.WAITING_FOR_CODE:
        if not equivalent(inputs.assignment, state.assignment):
            return _prepare(replace(state, failures=0), inputs.assignment, inputs, now)
        if inputs.code_present:
            return _prepare(state, state.assignment, inputs, now)
        return state, ()
    if phase is SlotPhase.WAITING_TO_RELAUNCH:
        if not equivalent(inputs.assignment, state.assignment):
            return _prepare(replace(state, failures=0), inputs.assignment, inputs, now)
        if now >= state.relaunch_at:
            return _prepare(state, state.assignment, inputs, now)
        return state, ()
    if phase is SlotPhase.WAITING_FOR_WORKER_START:
        return _waiting_for_start(state, inputs, now, conf)
    if phase is SlotPhase.RUNNING:
        return _running(state, inputs, now, conf)
    if phase in (SlotPhase.KILL, SlotPhase.KILL_AND_RELAUNCH):
        return _killing(state, inputs, now, conf)
    raise ValueError(f"slot {state.port}: unknown phase {phase!r}")


def next_wakeup(state: SlotState, conf: SlotConfig = SlotConfig()) -> float | None:
    """The earliest time a timer (not a new fact) can change this slot: when the daemon should
    step it again at the latest; None when only new facts can (EMPTY, WAITING_FOR_CODE)."""
    phase = state.phase
    if phase is SlotPhase.WAITING_TO_RELAUNCH:
        return state.relaunch_at
    if phase is SlotPhase.WAITING_FOR_WORKER_START:
        return state.launched_at + conf.first_heartbeat_timeout_secs
    if phase is SlotPhase.RUNNING:
        return None  # heartbeat ages are facts: stepped every monitor period
    if phase in (SlotPhase.KILL, SlotPhase.KILL_AND_RELAUNCH):
        if state.last_sigkill_at is None:
            return state.kill_started_at + conf.shutdown_sleep_secs
        return state.last_sigkill_at + conf.shutdown_sleep_secs
    return None


# --- restart and reporting -------------------------------------------------------------------

def recover_slots(slot_ports: Iterable[int], records: Iterable[WorkerRecord]
                  ) -> tuple[dict[int, SlotState], tuple[SlotState, ...]]:
    """Slots rebuilt from LocalState's worker records after a supervisor restart.

    A recorded worker resumes in WAITING_FOR_WORKER_START with its recorded launch time: its
    first step adopts it (RUNNING) when its pid is alive with the recorded start time and its
    heartbeat is valid, keeps its start grace if it had not heartbeated yet, and cleans up and
    relaunches it if its process is gone (or its pid reused). Nothing is relaunched blindly.

    Returns (slots by port, strays): strays are workers recorded for a port that is no longer
    a slot, or older duplicates on one port; the daemon steps each with assignment=None until
    it is EMPTY (which kills and cleans it up) and then drops it."""
    ports = sorted(frozenset(slot_ports))
    slots = {port: SlotState(port) for port in ports}
    strays = []
    for record in sorted(records, key=lambda r: (r.launch_time_secs, r.worker_id), reverse=True):
        state = SlotState(record.port, SlotPhase.WAITING_FOR_WORKER_START, record.assignment, record.worker_id,
                          record.launch_time_secs)
        if record.port in slots and not slots[record.port].has_worker:
            slots[record.port] = state
        else:
            strays.append(state)
    return slots, tuple(strays)


def stray_worker_dirs(worker_dir_ids: Iterable[str], records: Iterable[WorkerRecord]) -> frozenset[str]:
    """Worker dirs with no record: no pid we can trust, so never signalled; only removed."""
    return frozenset(worker_dir_ids) - {r.worker_id for r in records}


def storm_ids_in_use(states: Iterable[SlotState]) -> frozenset[str]:
    """Topologies a slot still runs, starts, kills or waits for (their code must stay)."""
    return frozenset(s.assignment.storm_id for s in states if s.assignment is not None)


def used_ports(states: Iterable[SlotState]) -> tuple[int, ...]:
    """SupervisorInfo.used_ports: ports with an assignment in progress or a worker."""
    return tuple(sorted(s.port for s in states if s.assignment is not None or s.has_worker))


def count_restart(counts: Mapping[tuple[str, int], int], launch: LaunchWorker,
                  in_use: Iterable[str]) -> dict[tuple[str, int], int]:
    """Restarts per (topology, port) after `launch`: one more when it is a restart
    (LaunchWorker.restart), none for a planned launch (a rebalance, a move, a new slot), as
    `storm-py list` counts only deaths. Topologies no longer in use (and not this one) are forgotten."""
    storm_id = launch.assignment.storm_id
    keep = set(in_use) | {storm_id}
    out = {k: n for k, n in counts.items() if k[0] in keep}
    if launch.restart:
        out[(storm_id, launch.port)] = out.get((storm_id, launch.port), 0) + 1
    return out


def worker_restarts(counts: Mapping[tuple[str, int], int]) -> tuple[tuple[str, int, int], ...]:
    """(topology, port, restarts) of each slot with any restart (SupervisorInfo's form)."""
    return tuple((sid, port, n) for (sid, port), n in sorted(counts.items()) if n > 0)
