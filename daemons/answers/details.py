"""`topology_details`' answer: everything the UI shows about one topology (its base, conf,
components with their subscriptions, each executor with its slot, liveness and raw stats
record, each component's newest errors, the worker deaths and restarts its supervisors saw).
Built by daemons/nimbus/summaries.py; read by daemons/reports/, `/metrics` and `monitor`.
The stats records stay raw here (executor/stats_record.py's wire form): `executor_records`
decodes them, and a reader merges them per window and stream (executor/stats.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from daemons.answers.wire import WireMap, fixed, parts
from executor.stats_record import ExecutorStats, decode_records

WHERE = "topology_details"


@dataclass(frozen=True, kw_only=True)
class Subscription:
    """What a component reads: a stream of another, with its grouping's kind."""

    component: str
    stream: str
    grouping: str
    fields: tuple[str, ...] | None = None       # a fields grouping's fields

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> Subscription:
        w = WireMap(wire, where)
        fields = w.opt("fields")
        return cls(component=w.req("component"), stream=w.req("stream"), grouping=w.req("grouping"),
                   fields=None if fields is None else tuple(str(f) for f in fields))

    def to_wire(self) -> dict[str, Any]:
        return {"component": self.component, "stream": self.stream, "grouping": self.grouping,
                **({} if self.fields is None else {"fields": list(self.fields)})}


@dataclass(frozen=True, kw_only=True)
class ComponentEntry:
    id: str
    kind: str                                   # "spout", "bolt", or "acker" (a system component)
    tasks: int
    inputs: tuple[Subscription, ...] = ()
    stateful: bool = False                      # its tasks keep state (what a savepoint holds)
    window: Mapping[str, Any] | None = None     # a windowed bolt's window settings (topology.bolts.* keys)

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> ComponentEntry:
        w = WireMap(wire, where)
        return cls(id=w.req("id"), kind=w.req("kind"), tasks=w.req("tasks"),
                   inputs=w.seq("inputs", Subscription.from_wire, required=False),
                   stateful=bool(w.opt("stateful")), window=w.opt("window"))

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "tasks": self.tasks, "inputs": [i.to_wire() for i in self.inputs],
                **({"stateful": True} if self.stateful else {}), **({"window": dict(self.window)} if self.window else {})}


@dataclass(frozen=True, kw_only=True)
class ExecutorEntry:
    """One executor: its slot (node, host, port: None while unassigned), whether its heartbeat
    is there, and its raw stats record (None without one)."""

    executor: tuple[int, int]                   # its first and last task
    component: str
    start_time_secs: int | None
    alive: bool
    stats: Any
    node: str | None = None
    host: str | None = None
    port: int | None = None
    uptime_secs: int | None = None
    pid: int | None = None                      # its worker's process id, from the heartbeat

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> ExecutorEntry:
        w = WireMap(wire, where)
        return cls(executor=fixed(w.req("executor"), f"{where}.executor", 2), component=w.req("component"),
                   node=w.opt("node"), host=w.opt("host"), port=w.opt("port"),
                   start_time_secs=w.req("start_time_secs"), alive=w.req("alive"),
                   uptime_secs=w.opt("uptime_secs"), stats=w.req("stats"), pid=w.opt("pid"))

    def to_wire(self) -> dict[str, Any]:
        return {"executor": list(self.executor), "component": self.component, "node": self.node, "host": self.host,
                "port": self.port, "start_time_secs": self.start_time_secs, "alive": self.alive,
                "uptime_secs": self.uptime_secs, "stats": self.stats, "pid": self.pid}


@dataclass(frozen=True, kw_only=True)
class ComponentError:
    """An error a component reported (report_error, or its death)."""

    error: str
    time_secs: int
    host: str | None = None
    port: int | None = None

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> ComponentError:
        w = WireMap(wire, where)
        return cls(error=w.req("error"), time_secs=w.req("time_secs"), host=w.opt("host"), port=w.opt("port"))

    def to_wire(self) -> dict[str, Any]:
        return {"error": self.error, "time_secs": self.time_secs, "host": self.host, "port": self.port}


@dataclass(frozen=True, kw_only=True)
class SupervisorAddress:
    """Where a supervisor running the topology is: its host and its logviewer's port."""

    host: str | None = None
    logviewer_port: int | None = None
    logviewer_https: bool = False  # the logviewer serves HTTPS only (on logviewer_port)

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> SupervisorAddress:
        w = WireMap(wire, where)
        return cls(host=w.opt("host"), logviewer_port=w.opt("logviewer_port"),
                   logviewer_https=bool(w.opt("logviewer_https")))

    def to_wire(self) -> dict[str, Any]:
        # logviewer_https only when set: the wire of a plain cluster is as before
        return {"host": self.host, "logviewer_port": self.logviewer_port,
                **({"logviewer_https": True} if self.logviewer_https else {})}


@dataclass(frozen=True, kw_only=True)
class WorkerDeathEntry:
    """The latest worker death on a slot, as its supervisor recorded it."""

    supervisor: str
    host: str
    port: int
    time_secs: int
    reason: str
    exit_code: int | None = None
    signal: str | None = None
    error_line: str | None = None
    log_tail: str | None = None

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> WorkerDeathEntry:
        w = WireMap(wire, where)
        return cls(supervisor=w.req("supervisor"), host=w.req("host"), port=w.req("port"),
                   time_secs=w.req("time_secs"), reason=w.req("reason"), exit_code=w.opt("exit_code"),
                   signal=w.opt("signal"), error_line=w.opt("error_line"), log_tail=w.opt("log_tail"))

    def to_wire(self) -> dict[str, Any]:
        return {"supervisor": self.supervisor, "host": self.host, "port": self.port, "time_secs": self.time_secs,
                "reason": self.reason, "exit_code": self.exit_code, "signal": self.signal,
                "error_line": self.error_line, "log_tail": self.log_tail}


@dataclass(frozen=True, kw_only=True)
class TopologyDetails:
    """The answer. `conf` is the topology's (no secrets), a plain map."""

    id: str
    name: str
    status: str
    launch_time_secs: int
    uptime_secs: int
    requested_workers: int
    now_secs: int
    conf: Mapping[str, Any]
    components: tuple[ComponentEntry, ...]
    executors: tuple[ExecutorEntry, ...]
    owner: str = ""
    supervisors: Mapping[str, SupervisorAddress] = field(default_factory=dict)   # by supervisor id
    worker_restarts: tuple[tuple[str, int, int], ...] = ()                      # (supervisor id, port, restarts)
    worker_deaths: tuple[WorkerDeathEntry, ...] = ()                            # newest first
    errors: Mapping[str, tuple[ComponentError, ...]] = field(default_factory=dict)  # newest first
    note: str | None = None                     # why it is inactive, when a command said (a swap in progress)

    @classmethod
    def from_wire(cls, wire: Any) -> TopologyDetails:
        w = WireMap(wire, WHERE)
        return cls(id=w.req("id"), name=w.req("name"), status=w.req("status"), owner=w.opt("owner", ""),
                   supervisors=w.table("supervisors", SupervisorAddress.from_wire, required=False),
                   worker_restarts=w.seq("worker_restarts", lambda r, at: fixed(r, at, 3), required=False),
                   worker_deaths=w.seq("worker_deaths", WorkerDeathEntry.from_wire, required=False),
                   launch_time_secs=w.req("launch_time_secs"), uptime_secs=w.req("uptime_secs"),
                   requested_workers=w.req("requested_workers"), now_secs=w.req("now_secs"), conf=w.mapping("conf"),
                   components=w.seq("components", ComponentEntry.from_wire),
                   executors=w.seq("executors", ExecutorEntry.from_wire),
                   errors=w.table("errors", lambda errs, at: parts(errs, at, ComponentError.from_wire),
                                  required=False), note=w.opt("note"))

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "status": self.status, "owner": self.owner,
                "supervisors": {sid: s.to_wire() for sid, s in self.supervisors.items()},
                "worker_restarts": [list(r) for r in self.worker_restarts],
                "worker_deaths": [d.to_wire() for d in self.worker_deaths],
                "launch_time_secs": self.launch_time_secs, "uptime_secs": self.uptime_secs,
                "requested_workers": self.requested_workers, "now_secs": self.now_secs, "conf": dict(self.conf),
                "components": [c.to_wire() for c in self.components],
                "executors": [e.to_wire() for e in self.executors],
                "errors": {comp: [e.to_wire() for e in errs] for comp, errs in self.errors.items()},
                **({"note": self.note} if self.note else {})}


def executor_records(details: TopologyDetails) -> dict[tuple[int, int], ExecutorStats]:
    """The executors' stats records, decoded (a garbage one is left out with a warning)."""
    return decode_records(details.id, {e.executor: e.stats for e in details.executors})


def records_by_component(details: TopologyDetails,
                         records: Mapping[tuple[int, int], ExecutorStats] | None = None) -> dict[str, list[ExecutorStats]]:
    """The stats records (decoded here unless given) per component, every component present
    ([] when none reported)."""
    if records is None:
        records = executor_records(details)
    out: dict[str, list[ExecutorStats]] = {c.id: [] for c in details.components}
    for e in details.executors:
        rec = records.get(e.executor)
        if rec is not None:
            out.setdefault(e.component, []).append(rec)
    return out
