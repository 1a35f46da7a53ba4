"""`cluster_info`'s answer: every supervisor, every live topology with its health, and (from a
Nimbus serving RPC) every registered Nimbus. Built by daemons/nimbus/summaries.py; read by
`storm-py list`, the UI's summaries and `/metrics`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from daemons.answers.wire import WireMap, fixed

WHERE = "cluster_info"


@dataclass(frozen=True, kw_only=True)
class TopologyProblem:
    """A topology's newest problem (daemons/nimbus/health.py decides which): when, what, where."""

    time_secs: int
    error: str
    component: str | None = None
    host: str | None = None
    port: int | None = None

    @classmethod
    def from_wire(cls, wire: Any, where: str = f"{WHERE}.last_error") -> TopologyProblem:
        w = WireMap(wire, where)
        return cls(time_secs=w.req("time_secs"), error=w.req("error"), component=w.opt("component"),
                   host=w.opt("host"), port=w.opt("port"))

    def to_wire(self) -> dict[str, Any]:
        return {"time_secs": self.time_secs, "error": self.error, "component": self.component,
                "host": self.host, "port": self.port}


@dataclass(frozen=True, kw_only=True)
class TopologyRow:
    """One live topology: its figures, the slots it holds and its health (the health fields may
    be absent from an older Nimbus's answer: None / 0 / None)."""

    name: str
    id: str
    status: str
    num_tasks: int
    num_workers: int
    num_executors: int
    uptime_secs: int
    requested_workers: int
    slots: tuple[tuple[str, int], ...]          # (supervisor id, port)
    owner: str = ""
    live_workers: int | None = None
    recent_restarts: int = 0
    last_error: TopologyProblem | None = None
    checkpoint_stall: str | None = None  # why its checkpoints stopped committing (executor/checkpoint/stall.py)
    savepoint: str | None = None         # the savepoint it started from (`storm-py swap`, topology.state.savepoint)
    note: str | None = None              # why it is inactive, when a command said (a swap in progress)

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> TopologyRow:
        w = WireMap(wire, where)
        problem = w.opt("last_error")
        return cls(name=w.req("name"), id=w.req("id"), status=w.req("status"), num_tasks=w.req("num_tasks"),
                   num_workers=w.req("num_workers"), num_executors=w.req("num_executors"),
                   uptime_secs=w.req("uptime_secs"), owner=w.opt("owner", ""),
                   requested_workers=w.req("requested_workers"),
                   slots=w.seq("slots", lambda s, at: fixed(s, at, 2)),
                   live_workers=w.opt("live_workers"), recent_restarts=w.opt("recent_restarts", 0),
                   last_error=None if problem is None else TopologyProblem.from_wire(problem, f"{where}.last_error"),
                   checkpoint_stall=w.opt("checkpoint_stall"), savepoint=w.opt("savepoint"),
                   note=w.opt("note"))

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.id, "status": self.status, "num_tasks": self.num_tasks,
                "num_workers": self.num_workers, "num_executors": self.num_executors,
                "uptime_secs": self.uptime_secs, "owner": self.owner, "requested_workers": self.requested_workers,
                "slots": [list(s) for s in self.slots], "live_workers": self.live_workers,
                "recent_restarts": self.recent_restarts,
                "last_error": None if self.last_error is None else self.last_error.to_wire(),
                **({"checkpoint_stall": self.checkpoint_stall} if self.checkpoint_stall else {}),
                **({"savepoint": self.savepoint} if self.savepoint else {}),
                **({"note": self.note} if self.note else {})}


@dataclass(frozen=True, kw_only=True)
class SupervisorRow:
    """One registered supervisor: its slots, how many are used, its worker restarts."""

    id: str
    host: str
    slots: int
    used: int
    uptime_secs: int
    ports: tuple[int, ...] = ()
    version: str | None = None
    logviewer_port: int | None = None
    logviewer_https: bool = False
    worker_restarts: tuple[tuple[str, int, int], ...] = ()   # (topology id, port, restarts)

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> SupervisorRow:
        w = WireMap(wire, where)
        return cls(id=w.req("id"), host=w.req("host"), slots=w.req("slots"), used=w.req("used"),
                   ports=tuple(w.opt("ports") or ()), uptime_secs=w.req("uptime_secs"), version=w.opt("version"),
                   logviewer_port=w.opt("logviewer_port"), logviewer_https=bool(w.opt("logviewer_https")),
                   worker_restarts=w.seq("worker_restarts", lambda r, at: fixed(r, at, 3), required=False))

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "host": self.host, "slots": self.slots, "used": self.used, "ports": list(self.ports),
                "uptime_secs": self.uptime_secs, "version": self.version, "logviewer_port": self.logviewer_port,
                **({"logviewer_https": True} if self.logviewer_https else {}), "worker_restarts": [list(r) for r in self.worker_restarts]}


@dataclass(frozen=True, kw_only=True)
class NimbusRow:
    """One registered Nimbus (daemons/nimbus/nimbuses.py): status "Leader" or "Not a Leader"."""

    host: str
    port: int
    is_leader: bool
    status: str
    uptime_secs: int
    version: str | None = None

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> NimbusRow:
        w = WireMap(wire, where)
        return cls(host=w.req("host"), port=w.req("port"), is_leader=w.req("is_leader"), status=w.req("status"),
                   uptime_secs=w.req("uptime_secs"), version=w.opt("version"))

    def to_wire(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "is_leader": self.is_leader, "status": self.status,
                "uptime_secs": self.uptime_secs, "version": self.version}


@dataclass(frozen=True, kw_only=True)
class ClusterInfo:
    """The answer. `nimbuses` is None when Nimbus lists none (LocalCluster's core answers
    without): the key is then absent from the wire, as before."""

    nimbus_uptime_secs: int
    supervisors: tuple[SupervisorRow, ...]
    topologies: tuple[TopologyRow, ...]
    nimbus_version: str | None = None
    now_secs: int | None = None
    nimbuses: tuple[NimbusRow, ...] | None = None

    @classmethod
    def from_wire(cls, wire: Any) -> ClusterInfo:
        w = WireMap(wire, WHERE)
        nimbuses = w.opt("nimbuses")
        return cls(nimbus_uptime_secs=w.req("nimbus_uptime_secs"), nimbus_version=w.opt("nimbus_version"),
                   now_secs=w.opt("now_secs"), supervisors=w.seq("supervisors", SupervisorRow.from_wire),
                   topologies=w.seq("topologies", TopologyRow.from_wire),
                   nimbuses=None if nimbuses is None else w.seq("nimbuses", NimbusRow.from_wire))

    def to_wire(self) -> dict[str, Any]:
        out = {"nimbus_uptime_secs": self.nimbus_uptime_secs, "nimbus_version": self.nimbus_version,
               "now_secs": self.now_secs, "supervisors": [s.to_wire() for s in self.supervisors],
               "topologies": [t.to_wire() for t in self.topologies]}
        if self.nimbuses is not None:
            out["nimbuses"] = [n.to_wire() for n in self.nimbuses]
        return out
