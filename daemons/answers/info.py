"""`topology_info`'s answer: each component's all-time figures, executors and last error (the
CLI's and the test harnesses' summary), derived from topology_details' by `info_from_details`
(pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from daemons.answers.details import ComponentError, TopologyDetails, records_by_component
from daemons.answers.wire import WireMap, fixed
from executor.stats import component_figures
from executor.stats_windows import ALL_TIME

WHERE = "topology_info"


@dataclass(frozen=True, kw_only=True)
class ExecutorPlace:
    executor: tuple[int, int]
    host: str | None
    port: int | None
    alive: bool

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> ExecutorPlace:
        w = WireMap(wire, where)
        return cls(executor=fixed(w.req("executor"), f"{where}.executor", 2), host=w.req("host"),
                   port=w.req("port"), alive=w.req("alive"))

    def to_wire(self) -> dict[str, Any]:
        return {"executor": list(self.executor), "host": self.host, "port": self.port, "alive": self.alive}


@dataclass(frozen=True, kw_only=True)
class ComponentInfo:
    """One component. `figures` are executor/stats.py's component_figures (all time, system
    streams included; "executed" and "complete_latency_ms" always there); on the wire they sit
    beside the other keys."""

    id: str
    kind: str
    tasks: int
    figures: Mapping[str, Any]
    executors: tuple[ExecutorPlace, ...]
    last_error: ComponentError | None = None

    _KEYS = ("id", "kind", "tasks", "executors", "last_error")

    @classmethod
    def from_wire(cls, wire: Any, where: str) -> ComponentInfo:
        w = WireMap(wire, where)
        error = w.opt("last_error")
        return cls(id=w.req("id"), kind=w.req("kind"), tasks=w.req("tasks"),
                   figures={k: v for k, v in w.data.items() if k not in cls._KEYS},
                   executors=w.seq("executors", ExecutorPlace.from_wire),
                   last_error=None if error is None else ComponentError.from_wire(error, f"{where}.last_error"))

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "tasks": self.tasks, "kind": self.kind, **self.figures,
                "executors": [e.to_wire() for e in self.executors],
                "last_error": None if self.last_error is None else self.last_error.to_wire()}


@dataclass(frozen=True, kw_only=True)
class TopologyInfo:
    name: str
    id: str
    status: str
    uptime_secs: int
    num_workers: int
    components: tuple[ComponentInfo, ...]

    @classmethod
    def from_wire(cls, wire: Any) -> TopologyInfo:
        w = WireMap(wire, WHERE)
        return cls(name=w.req("name"), id=w.req("id"), status=w.req("status"), uptime_secs=w.req("uptime_secs"),
                   num_workers=w.req("num_workers"), components=w.seq("components", ComponentInfo.from_wire))

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "id": self.id, "status": self.status, "uptime_secs": self.uptime_secs,
                "num_workers": self.num_workers, "components": [c.to_wire() for c in self.components]}


def info_from_details(details: TopologyDetails) -> TopologyInfo:
    """The records merged per component, all time, system streams included."""
    records = records_by_component(details)
    components = []
    for comp in details.components:
        figures = component_figures(records[comp.id], ALL_TIME, True)
        figures.pop("kind", None)       # the record's; the component's own is kept
        figures.pop("executors", None)  # a count here; the answer lists them
        figures.setdefault("executed", 0)
        figures.setdefault("complete_latency_ms", None)
        errors = details.errors.get(comp.id) or ()
        components.append(ComponentInfo(
            id=comp.id, kind=comp.kind, tasks=comp.tasks, figures=figures,
            executors=tuple(ExecutorPlace(executor=e.executor, host=e.host, port=e.port, alive=e.alive)
                            for e in details.executors if e.component == comp.id),
            last_error=errors[0] if errors else None))
    slots = {(e.node, e.port) for e in details.executors if e.node is not None}
    return TopologyInfo(name=details.name, id=details.id, status=details.status, uptime_secs=details.uptime_secs,
                        num_workers=len(slots), components=tuple(components))
