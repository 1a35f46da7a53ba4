"""Is a worker process still the one we launched, and is it healthy? (pure; Storm's supervisor.clj).

`classify_worker` is supervisor.clj's `read-allocated-workers` for one worker, with the start timeout
of `wait-for-worker-launch` folded in: a worker without a heartbeat is not-started while it is
within `supervisor.worker.start.timeout.secs` of its launch. `check_process` decides whether a
recorded pid is still our worker: the daemon gathers the facts (exists, its start on the boot
clock, zombie; daemons/process_start.py) and a pid now owned by another process is never taken
for the worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import AbstractSet, Any, Mapping

from cluster_state.records import LocalAssignment, WorkerHeartbeat
from daemons.process_start import ProcessStart, same_process

# Storm's Constants.SYSTEM_EXECUTOR_ID: a worker may report it; it is never assigned.
SYSTEM_EXECUTOR_ID = (-1, -1)

class WorkerStatus(str, Enum):
    NOT_STARTED = "not-started"  # no heartbeat yet, still within the start timeout
    DISALLOWED = "disallowed"    # not ours, or running something this port is not assigned
    TIMED_OUT = "timed-out"      # heartbeat too old (or none, past the start timeout)
    VALID = "valid"


def matches_assignment(heartbeat: WorkerHeartbeat, assignment: LocalAssignment | None) -> bool:
    """supervisor.clj's `matches-an-assignment?`: same topology and the same executors (ignoring the
    system executor and order)."""
    if assignment is None or heartbeat.storm_id != assignment.storm_id:
        return False
    return set(heartbeat.executors) - {SYSTEM_EXECUTOR_ID} == set(assignment.executors)


def classify_worker(heartbeat: WorkerHeartbeat | None, worker_id: str, approved_ids: AbstractSet[str],
                    port_assignment: LocalAssignment | None, now: float, worker_timeout_secs: float,
                    start_timeout_secs: float, launch_time_secs: float | None,
                    port: int | None = None) -> WorkerStatus:
    """The state of worker `worker_id`, in the order of supervisor.clj's `read-allocated-workers`.

    - no heartbeat: not-started while `now - launch_time_secs < start_timeout_secs`; past it
      timed-out if we approved the worker, disallowed if not (a stray dir we never launched; with
      no launch time there is no grace at all);
    - not in `approved_ids`, or a heartbeat that does not match `port_assignment` (the local
      assignment of the heartbeat's port; when `port` is given the heartbeat must name it):
      disallowed;
    - `now - heartbeat.time_secs > worker_timeout_secs`: timed-out;
    - otherwise valid.
    """
    approved = worker_id in approved_ids
    if heartbeat is None:
        if launch_time_secs is not None and now - launch_time_secs < start_timeout_secs:
            return WorkerStatus.NOT_STARTED
        return WorkerStatus.TIMED_OUT if approved else WorkerStatus.DISALLOWED
    if not approved or not matches_assignment(heartbeat, port_assignment):
        return WorkerStatus.DISALLOWED
    if port is not None and heartbeat.port != port:
        return WorkerStatus.DISALLOWED
    if now - heartbeat.time_secs > worker_timeout_secs:
        return WorkerStatus.TIMED_OUT
    return WorkerStatus.VALID


class ProcessStatus(str, Enum):
    ALIVE = "alive"    # the recorded pid still runs the process we started
    DEAD = "dead"      # gone, a zombie, or vanished while we looked
    REUSED = "reused"  # the pid now belongs to another process: never signal it


@dataclass(frozen=True)
class ProcessFacts:
    """What the daemon saw of a pid just now (psutil): gathered, not interpreted."""

    exists: bool
    start: ProcessStart | None = None  # process_start(); None when it could not be read
    zombie: bool = False
    wall_start: float | None = None  # psutil's create_time(), for a record of an older supervisor


def check_process(recorded_pid: int, recorded_start: ProcessStart | None, facts: ProcessFacts) -> ProcessStatus:
    """Whether the recorded (pid, start time) is still our worker.

    Without a recorded start time the pid cannot be told from a reused one, so it is REUSED
    whenever it exists: the supervisor never signals a process it cannot identify. A pid whose
    start time cannot be read vanished between the two looks (DEAD). A zombie with our start
    time is our worker, dead but not yet reaped (init reaps re-adopted orphans slowly)."""
    if recorded_pid <= 0:
        raise ValueError(f"not a worker pid: {recorded_pid!r}")
    if not facts.exists or facts.start is None:
        return ProcessStatus.DEAD
    seen = facts.start
    if recorded_start is not None and not recorded_start.boot and facts.wall_start is not None:
        seen = ProcessStart("", facts.wall_start)  # a record with psutil's create time (legacy)
    if recorded_start is None or not same_process(recorded_start, seen):
        return ProcessStatus.REUSED
    return ProcessStatus.DEAD if facts.zombie else ProcessStatus.ALIVE


@dataclass(frozen=True)
class WorkerRecord:
    """What the supervisor keeps in LocalState (`approved-workers`) for a worker it launched:
    enough to re-adopt it after a restart, and to never signal a pid it did not start."""

    worker_id: str
    port: int
    assignment: LocalAssignment
    launch_time_secs: float
    pid: int | None = None
    pid_start: ProcessStart | None = None

    def with_pid(self, pid: int, start: ProcessStart | None) -> WorkerRecord:
        return WorkerRecord(self.worker_id, self.port, self.assignment, self.launch_time_secs, pid, start)

    def process_status(self, facts: ProcessFacts | None) -> ProcessStatus:
        """DEAD when no pid was recorded (the launch never produced a process)."""
        if self.pid is None or facts is None:
            return ProcessStatus.DEAD
        return check_process(self.pid, self.pid_start, facts)

    def to_dict(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "port": self.port, "storm_id": self.assignment.storm_id,
                "executors": [list(e) for e in self.assignment.executors],
                "launch_time_secs": self.launch_time_secs, "pid": self.pid,
                "pid_start": None if self.pid_start is None else self.pid_start.to_text()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerRecord:
        """Raises TypeError/KeyError/ValueError on a damaged entry (the daemon drops it, warned)."""
        pid = data.get("pid")
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0):
            raise ValueError(f"WorkerRecord.pid must be a positive int, got {pid!r}")
        launch = data["launch_time_secs"]
        legacy = data.get("pid_start_time")  # an older supervisor's: psutil's create time
        for what, value, optional in (("pid_start_time", legacy, True), ("launch_time_secs", launch, False)):
            if value is None and optional:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"WorkerRecord.{what} must be a number, got {value!r}")
        port = data["port"]
        if isinstance(port, bool) or not isinstance(port, int):
            raise TypeError(f"WorkerRecord.port must be an int, got {port!r}")
        worker_id = data["worker_id"]
        if not isinstance(worker_id, str) or not worker_id:
            raise TypeError(f"WorkerRecord.worker_id must be a non-empty str, got {worker_id!r}")
        text = data.get("pid_start")
        if text is not None and not isinstance(text, str):
            raise TypeError(f"WorkerRecord.pid_start must be a str, got {text!r}")
        start = ProcessStart.from_text(text) if text is not None else \
            None if legacy is None else ProcessStart("", float(legacy))
        return cls(worker_id, port, LocalAssignment(data["storm_id"], data["executors"]),
                   launch, pid, start)
