"""Records stored in ZooKeeper and LocalState: frozen dataclasses with Storm's fields in snake_case.

Constructors normalise their inputs (lists become tuples, executor ids `(start_task, end_task)`
and slots `(node, port)` become tuples, mappings are copied) and reject wrongly typed values,
so a record that round-trips through msgpack compares equal to the original and a corrupt
node cannot produce a half-valid record. Encoding lives in `codec.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# Bumped when a record changes incompatibly; readers refuse newer versions (codec.py).
SCHEMA_VERSION = 1

Executor = tuple[int, int]
Slot = tuple[str, int]

STATUS_ACTIVE = "active"
STATUS_INACTIVE = "inactive"
STATUS_KILLED = "killed"
STATUS_REBALANCING = "rebalancing"
# Stopping at a checkpoint for a swap (daemons/nimbus/transitions.py): spouts inactive, its
# checkpoint spout parks once the checkpoint behind their last tuples committed.
STATUS_STOPPING = "stopping"
TOPOLOGY_STATUSES = (STATUS_ACTIVE, STATUS_INACTIVE, STATUS_KILLED, STATUS_REBALANCING, STATUS_STOPPING)


def _set(obj: object, name: str, value: object) -> None:
    # Frozen dataclasses may only be normalised through object.__setattr__ in __post_init__.
    object.__setattr__(obj, name, value)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__} {value!r}")
    return value


def _rows(value: Any, what: str, columns: tuple[tuple[str, Callable[[Any, str], Any]], ...]) -> tuple:
    """A sequence of fixed-length entries, each column checked by its function."""
    if isinstance(value, (str, bytes, Mapping)):
        raise TypeError(f"{what} must be a sequence, got {value!r}")
    shape = f"({', '.join(name for name, _ in columns)})"
    rows = []
    for entry in value:
        if isinstance(entry, (str, bytes)) or not hasattr(entry, "__len__") or len(entry) != len(columns):
            raise TypeError(f"{what} entries must be {shape}, got {entry!r}")
        rows.append(tuple(check(v, f"{what} {name}") for v, (name, check) in zip(entry, columns)))
    return tuple(rows)


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__} {value!r}")
    return value


def _opt_str(value: Any, what: str) -> str | None:
    return None if value is None else _str(value, what)


def _opt_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


def executor_id(value: Any, what: str = "executor") -> Executor:
    """`(start_task, end_task)` from any 2-sequence of ints."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise TypeError(f"{what} must be a (start_task, end_task) pair, got {value!r}")
    return (_int(value[0], what), _int(value[1], what))


def slot_id(value: Any, what: str = "slot") -> Slot:
    """`(node, port)` from any 2-sequence (str, int)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
        raise TypeError(f"{what} must be a (node, port) pair, got {value!r}")
    return (_str(value[0], what), _int(value[1], what))


def _executors(values: Any, what: str) -> tuple[Executor, ...]:
    if isinstance(values, (str, bytes, Mapping)):
        raise TypeError(f"{what} must be a sequence of executors, got {values!r}")
    return tuple(executor_id(v, what) for v in values)


def _ints(values: Any, what: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes, Mapping)):
        raise TypeError(f"{what} must be a sequence of ints, got {values!r}")
    return tuple(_int(v, what) for v in values)


def _mapping(value: Any, what: str) -> dict:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping, got {type(value).__name__} {value!r}")
    return dict(value)


@dataclass(frozen=True)
class StormBase:
    """`/storms/{topology-id}`: what nimbus knows about a submitted topology."""

    storm_name: str
    launch_time_secs: int
    status: str
    num_workers: int
    component_executors: Mapping[str, int]
    # Status before the current one (e.g. what a rebalance returns to); Storm 1.x keeps it too.
    prev_status: str | None = None
    # Parameters of a pending kill/rebalance, e.g. {"wait_secs": 30, "num_workers": 3}.
    topology_action_options: Mapping[str, Any] | None = None
    owner: str | None = None
    # A directory savepoint asked of the workers ({"dir": the request directory}; storm-py
    # savepoint --dir, executor/savepoints/files.py); None when none is asked.
    savepoint_request: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _str(self.storm_name, "StormBase.storm_name")
        _int(self.launch_time_secs, "StormBase.launch_time_secs")
        for name in ("status", "prev_status"):
            value = getattr(self, name)
            if value is None and name == "prev_status":
                continue
            if value not in TOPOLOGY_STATUSES:
                raise ValueError(f"StormBase.{name} must be one of {TOPOLOGY_STATUSES}, got {value!r}")
        _int(self.num_workers, "StormBase.num_workers")
        executors = _mapping(self.component_executors, "StormBase.component_executors")
        for comp, count in executors.items():
            _str(comp, "StormBase.component_executors key")
            _int(count, "StormBase.component_executors value")
        _set(self, "component_executors", executors)
        if self.topology_action_options is not None:
            _set(self, "topology_action_options",
                 _mapping(self.topology_action_options, "StormBase.topology_action_options"))
        _opt_str(self.owner, "StormBase.owner")
        if self.savepoint_request is not None:
            _set(self, "savepoint_request", _mapping(self.savepoint_request, "StormBase.savepoint_request"))

    @property
    def inactive_note(self) -> str | None:
        """Why an inactive or stopping topology is stopped, when the command that stopped it said (a swap)."""
        return ((self.topology_action_options or {}).get("note")
                if self.status in (STATUS_INACTIVE, STATUS_STOPPING) else None)

    @property
    def parked(self) -> bool:
        """A stopping topology whose checkpoint spout is asked to start no further checkpoint."""
        return self.status == STATUS_STOPPING and bool((self.topology_action_options or {}).get("park"))


@dataclass(frozen=True)
class Assignment:
    """`/assignments/{topology-id}`: where every executor of a topology runs."""

    master_code_dir: str
    node_host: Mapping[str, str]
    executor_node_port: Mapping[Executor, Slot]
    executor_start_time_secs: Mapping[Executor, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _str(self.master_code_dir, "Assignment.master_code_dir")
        hosts = _mapping(self.node_host, "Assignment.node_host")
        for node, host in hosts.items():
            _str(node, "Assignment.node_host key")
            _str(host, "Assignment.node_host value")
        _set(self, "node_host", hosts)
        enp = _mapping(self.executor_node_port, "Assignment.executor_node_port")
        _set(self, "executor_node_port", {
            executor_id(e, "Assignment.executor_node_port key"): slot_id(s, "Assignment.executor_node_port value")
            for e, s in enp.items()
        })
        starts = _mapping(self.executor_start_time_secs, "Assignment.executor_start_time_secs")
        _set(self, "executor_start_time_secs", {
            executor_id(e, "Assignment.executor_start_time_secs key"):
                _int(t, "Assignment.executor_start_time_secs value")
            for e, t in starts.items()
        })


# A worker's death reason when its supervisor killed it for its memory (written by
# daemons/supervisor/slot.py, recognised by daemons/nimbus/health.py: the cause to show first).
_MEMORY_KILL = "MB of memory, over"


def memory_kill_reason(worker_id: str, port: int, used_mb: float, key: str, limit_mb: float) -> str:
    return f"worker {worker_id} on port {port} used {used_mb:.0f} {_MEMORY_KILL} {key} ({limit_mb:g} MB): killed"


def is_memory_kill(reason: str) -> bool:
    return _MEMORY_KILL in reason


@dataclass(frozen=True)
class WorkerDeath:
    """Why a supervisor's worker died (nested in SupervisorInfo.worker_deaths): the slot's report
    and what the supervisor saw of the process and its log at that moment."""

    storm_id: str
    port: int
    time_secs: int
    # The slot's report, e.g. "worker W on port P exited" or "... timed out: last heartbeat 40s ago".
    reason: str
    # The exit status when the process exited by itself; None when unknown (still running when
    # it was killed for a timeout, adopted after a supervisor restart) or killed by a signal.
    exit_code: int | None = None
    # The signal that ended the process ("SIGKILL"), when one did.
    signal: str | None = None
    # The most telling line of log_tail (the last exception line, else the last ERROR line); "" if none.
    error_line: str = ""
    # The last lines of the worker's log at death time (bounded; cut at a line start).
    log_tail: str = ""

    def __post_init__(self) -> None:
        _str(self.storm_id, "WorkerDeath.storm_id")
        _int(self.port, "WorkerDeath.port")
        _int(self.time_secs, "WorkerDeath.time_secs")
        _str(self.reason, "WorkerDeath.reason")
        _opt_int(self.exit_code, "WorkerDeath.exit_code")
        _opt_str(self.signal, "WorkerDeath.signal")
        _str(self.error_line, "WorkerDeath.error_line")
        _str(self.log_tail, "WorkerDeath.log_tail")


@dataclass(frozen=True)
class SupervisorInfo:
    """`/supervisors/{supervisor-id}` (ephemeral): a live supervisor and its slots."""

    time_secs: int
    hostname: str
    assignment_id: str
    used_ports: tuple[int, ...]
    # All slot ports of the supervisor (Storm's `meta`, from supervisor.slots.ports).
    meta: tuple[int, ...]
    scheduler_meta: Mapping[str, Any] | None
    uptime_secs: int
    version: str | None = None
    # Port of the logviewer serving this host's worker logs (the UI's log links), and whether it
    # serves them over HTTPS only (logviewer.disable.http.binding: the port is its HTTPS port).
    logviewer_port: int | None = None
    logviewer_https: bool = False
    # (topology id, port, restarts) for each slot whose worker this supervisor relaunched since
    # it started for the same assignment after the worker failed (slot.LaunchWorker.restart); a
    # planned launch (a rebalance, a changed assignment, a new slot) is no restart.
    worker_restarts: tuple[tuple[str, int, int], ...] = ()
    # The latest death of a worker per (topology, port) this supervisor saw since it started,
    # for topologies it still runs (newest first, bounded: daemons/supervisor/worker_death.py).
    worker_deaths: tuple[WorkerDeath, ...] = ()
    # (topology id, deaths of its workers here in the last few minutes: daemons/supervisor/deaths.py's
    # RECENT_DEATHS_SECS) for each topology with any: `storm-py list`'s restarts.
    recent_worker_deaths: tuple[tuple[str, int], ...] = ()
    # (topology id, time, why) for each topology whose code this supervisor is failing to fetch
    # (a refused secret, a full disk): no worker can start, and `storm-py list` says why.
    code_failures: tuple[tuple[str, int, str], ...] = ()

    def __post_init__(self) -> None:
        _int(self.time_secs, "SupervisorInfo.time_secs")
        _set(self, "code_failures", _rows(self.code_failures, "SupervisorInfo.code_failures",
                                          (("topology", _str), ("time", _int), ("why", _str))))
        _set(self, "recent_worker_deaths", _rows(self.recent_worker_deaths, "SupervisorInfo.recent_worker_deaths",
                                                 (("topology", _str), ("count", _int))))
        _opt_int(self.logviewer_port, "SupervisorInfo.logviewer_port")
        _set(self, "worker_restarts", _rows(self.worker_restarts, "SupervisorInfo.worker_restarts",
                                            (("topology", _str), ("port", _int), ("count", _int))))
        if isinstance(self.worker_deaths, (str, bytes, Mapping)):
            raise TypeError(f"SupervisorInfo.worker_deaths must be a sequence, got {self.worker_deaths!r}")
        deaths = tuple(self.worker_deaths)
        for death in deaths:
            if not isinstance(death, WorkerDeath):
                raise TypeError(f"SupervisorInfo.worker_deaths entries must be WorkerDeath records, "
                                f"got {type(death).__name__} {death!r}")
        _set(self, "worker_deaths", deaths)
        _str(self.hostname, "SupervisorInfo.hostname")
        _str(self.assignment_id, "SupervisorInfo.assignment_id")
        _set(self, "used_ports", _ints(self.used_ports, "SupervisorInfo.used_ports"))
        _set(self, "meta", _ints(self.meta, "SupervisorInfo.meta"))
        if self.scheduler_meta is not None:
            _set(self, "scheduler_meta", _mapping(self.scheduler_meta, "SupervisorInfo.scheduler_meta"))
        _int(self.uptime_secs, "SupervisorInfo.uptime_secs")
        _opt_str(self.version, "SupervisorInfo.version")


def _opt_num(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number, got {type(value).__name__} {value!r}")
    return value


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{what} must be a bool, got {type(value).__name__} {value!r}")
    return value


@dataclass(frozen=True)
class CheckpointMark:
    """Where an executor is in an exactly-once topology's checkpoints, in its worker's heartbeat:
    what Nimbus's decisions read (a stop at a checkpoint, the stalled-checkpoint diagnosis),
    where the stats are for people.

    A stateful spout's: `quiet_since_txid`, the first checkpoint it passed on while its topology
    was not active (None while active): everything it sent is before that checkpoint's barrier.
    The checkpoint spout's: `committed_txid` and `committed_secs` (epoch), the last checkpoint
    committed as its state records it (a restarted spout reports the topology's, not its own
    start), and `parked`: asked to park (a stop), nothing is in progress and nothing starts."""

    quiet_since_txid: int | None = None
    committed_txid: int | None = None
    committed_secs: float | None = None
    parked: bool = False

    def __post_init__(self) -> None:
        _opt_int(self.quiet_since_txid, "CheckpointMark.quiet_since_txid")
        _opt_int(self.committed_txid, "CheckpointMark.committed_txid")
        _opt_num(self.committed_secs, "CheckpointMark.committed_secs")
        _bool(self.parked, "CheckpointMark.parked")


@dataclass(frozen=True)
class WorkerHeartbeat:
    """A worker's heartbeat: in ZooKeeper `/workerbeats/{topology-id}/{node}-{port}` and on local disk."""

    storm_id: str
    executors: tuple[Executor, ...]
    port: int
    time_secs: int
    uptime_secs: int
    # Per-executor stats (plain msgpack values), read back by executor_beats.
    executor_stats: Mapping[Executor, Any] = field(default_factory=dict)
    # Per checkpointed executor (exactly-once topologies), its CheckpointMark.
    checkpoint_marks: Mapping[Executor, CheckpointMark] = field(default_factory=dict)
    # The worker's process id on its host (None: an older worker's heartbeat).
    pid: int | None = None

    def __post_init__(self) -> None:
        _str(self.storm_id, "WorkerHeartbeat.storm_id")
        if self.pid is not None:
            _int(self.pid, "WorkerHeartbeat.pid")
        _set(self, "executors", _executors(self.executors, "WorkerHeartbeat.executors"))
        _int(self.port, "WorkerHeartbeat.port")
        _int(self.time_secs, "WorkerHeartbeat.time_secs")
        _int(self.uptime_secs, "WorkerHeartbeat.uptime_secs")
        stats = _mapping(self.executor_stats, "WorkerHeartbeat.executor_stats")
        _set(self, "executor_stats", {
            executor_id(e, "WorkerHeartbeat.executor_stats key"): v for e, v in stats.items()
        })
        marks = _mapping(self.checkpoint_marks, "WorkerHeartbeat.checkpoint_marks")
        for mark in marks.values():
            if not isinstance(mark, CheckpointMark):
                raise TypeError(f"WorkerHeartbeat.checkpoint_marks values must be CheckpointMarks, got {mark!r}")
        _set(self, "checkpoint_marks", {
            executor_id(e, "WorkerHeartbeat.checkpoint_marks key"): m for e, m in marks.items()
        })


# The errors of a worker as a whole (it refused to start: its package differs from its manifest),
# kept beside its components' under this name.
WORKER_ERRORS = "worker"


@dataclass(frozen=True)
class ErrorInfo:
    """`/errors/{topology-id}/{component-id}/e{seq}`: one error a component reported."""

    error: str
    time_secs: int
    host: str | None = None
    port: int | None = None

    def __post_init__(self) -> None:
        _str(self.error, "ErrorInfo.error")
        _int(self.time_secs, "ErrorInfo.time_secs")
        _opt_str(self.host, "ErrorInfo.host")
        _opt_int(self.port, "ErrorInfo.port")


@dataclass(frozen=True)
class LocalAssignment:
    """What a supervisor runs on one of its ports (kept in its LocalState)."""

    storm_id: str
    executors: tuple[Executor, ...]

    def __post_init__(self) -> None:
        _str(self.storm_id, "LocalAssignment.storm_id")
        _set(self, "executors", _executors(self.executors, "LocalAssignment.executors"))


@dataclass(frozen=True)
class ExecutorBeat:
    """One executor's liveness as nimbus sees it (from its worker's heartbeat); not stored itself."""

    time_secs: int
    uptime_secs: int
    stats: Any = None
    mark: CheckpointMark | None = None
    pid: int | None = None       # its worker's process id


@dataclass(frozen=True)
class VersionedAssignment:
    """An assignment with its ZooKeeper node version (the supervisor's versioned snapshot)."""

    assignment: Assignment
    version: int


@dataclass(frozen=True)
class LogLevel:
    """One logger's entry of a LogConfig (Storm's LogLevel). Levels are Storm's names (DEBUG,
    WARN, ...); the record only checks types, executor/log_levels.py knows the names."""

    target_level: str
    # The level to revert to; None: the level the logger had before (each worker remembers its own).
    reset_level: str | None = None
    timeout_secs: int = 0
    # When the worker reverts the logger (epoch seconds); 0: never.
    timeout_epoch_secs: int = 0

    def __post_init__(self) -> None:
        _str(self.target_level, "LogLevel.target_level")
        _opt_str(self.reset_level, "LogLevel.reset_level")
        _int(self.timeout_secs, "LogLevel.timeout_secs")
        _int(self.timeout_epoch_secs, "LogLevel.timeout_epoch_secs")


@dataclass(frozen=True)
class LogConfig:
    """`/logconfigs/{topology-id}`: the log levels set on a running topology (storm-py
    set_log_level), by logger name (`ROOT`: the root logger)."""

    named_logger_level: Mapping[str, LogLevel] = field(default_factory=dict)

    def __post_init__(self) -> None:
        levels = _mapping(self.named_logger_level, "LogConfig.named_logger_level")
        for name, level in levels.items():
            _str(name, "LogConfig.named_logger_level key")
            if not isinstance(level, LogLevel):
                raise TypeError(f"LogConfig.named_logger_level[{name!r}] must be a LogLevel, "
                                f"got {type(level).__name__} {level!r}")
        _set(self, "named_logger_level", levels)


@dataclass(frozen=True)
class NimbusRegistration:
    """`/nimbuses/{host:port}` (ephemeral): one running Nimbus (Storm's NimbusInfo). Who leads
    is the leader latch's answer; `is_leader` is only what this Nimbus believed when it wrote."""

    host: str
    port: int
    start_time_secs: int
    version: str = ""
    is_leader: bool = False

    def __post_init__(self) -> None:
        _str(self.host, "NimbusRegistration.host")
        _int(self.port, "NimbusRegistration.port")
        _int(self.start_time_secs, "NimbusRegistration.start_time_secs")
        _str(self.version, "NimbusRegistration.version")
        if not isinstance(self.is_leader, bool):
            raise TypeError(f"NimbusRegistration.is_leader must be a bool, got {self.is_leader!r}")

    @property
    def nimbus_id(self) -> str:
        return nimbus_id(self.host, self.port)


def nimbus_id(host: str, port: int) -> str:
    """A Nimbus's name in the registrations, the leader latch and `storm-py list`: host:port."""
    return f"{host}:{port}"


# A swap's steps (daemons/nimbus/swaps/): the first three can be undone (the old code runs on),
# from `saved` on the old topology is gone and the swap goes on until the new code runs.
SWAP_STOPPING = "stopping"      # the old topology's spouts stop; the checkpoint behind them commits
SWAP_PARKING = "parking"        # its checkpoint spout finishes what is under way and starts nothing
SWAP_WRITING = "writing"        # (memory provider) its workers write their state to the directory
SWAP_SAVED = "saved"            # kept as a savepoint; the old topology is killed next
SWAP_KILLED = "killed"          # the savepoint is written as the new code's start, which is submitted
SWAP_DONE = "done"
SWAP_FAILED = "failed"
SWAP_PHASES = (SWAP_STOPPING, SWAP_PARKING, SWAP_WRITING, SWAP_SAVED, SWAP_KILLED, SWAP_DONE, SWAP_FAILED)
SWAP_UNDOABLE = (SWAP_STOPPING, SWAP_PARKING, SWAP_WRITING)
SWAP_ENDED = (SWAP_DONE, SWAP_FAILED)


@dataclass(frozen=True)
class SwapRecord:
    """`/swaps/{name}`: a swap Nimbus runs (daemons/nimbus/swaps/): topology `name` (`old_id`)
    stopped at a checkpoint, kept as savepoint `savepoint`, and the new code (`new_id`, in
    Nimbus's code store since the request, its conf naming the savepoint) started from it.
    Written by the leader at each step, so that a Nimbus that takes over goes on from the last
    one; `deadline_secs` bounds the steps that can be undone."""

    name: str
    old_id: str
    new_id: str
    savepoint: str
    phase: str
    started_secs: float
    deadline_secs: float
    # allow_dropped_state (bool), dir (the memory provider's savepoint directory or None)
    options: Mapping[str, Any] = field(default_factory=dict)
    txid: int | None = None            # the checkpoint the savepoint holds, once known
    request_dir: str | None = None     # memory provider: where the workers write their state
    message: str | None = None         # what happened last (failed: why)
    ended_secs: float | None = None

    def __post_init__(self) -> None:
        for name in ("name", "old_id", "new_id", "savepoint"):
            _str(getattr(self, name), f"SwapRecord.{name}")
        if self.phase not in SWAP_PHASES:
            raise ValueError(f"SwapRecord.phase must be one of {SWAP_PHASES}, got {self.phase!r}")
        _opt_num(self.started_secs, "SwapRecord.started_secs")
        _opt_num(self.deadline_secs, "SwapRecord.deadline_secs")
        _set(self, "options", _mapping(self.options, "SwapRecord.options"))
        _opt_int(self.txid, "SwapRecord.txid")
        _opt_str(self.request_dir, "SwapRecord.request_dir")
        _opt_str(self.message, "SwapRecord.message")
        _opt_num(self.ended_secs, "SwapRecord.ended_secs")


RECORD_TYPES: tuple[type, ...] = (StormBase, Assignment, SupervisorInfo, WorkerHeartbeat, ErrorInfo,
                                  LocalAssignment, LogLevel, LogConfig, WorkerDeath, NimbusRegistration,
                                  CheckpointMark, SwapRecord)
