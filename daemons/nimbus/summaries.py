"""Nimbus's reports as pure views over one snapshot of what it read (Storm's getClusterInfo and
getTopologyInfo): `cluster_summary` (what `storm-py list`, the UI's summaries and `/metrics`
start from) and `topology_details` (the UI's topology and component pages, `monitor`). NimbusCore
only gathers the facts (its in-memory state under its lock, then the ZooKeeper reads); the
answers (daemons/answers/) are built here, and a topology's health is decided in one place
(`topology_health`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from cluster_state.records import Assignment, ErrorInfo, StormBase, SupervisorInfo, is_memory_kill
from daemons.answers.cluster import ClusterInfo, SupervisorRow, TopologyProblem, TopologyRow
from daemons.answers.details import (
    ComponentEntry,
    ComponentError,
    ExecutorEntry,
    Subscription,
    SupervisorAddress,
    TopologyDetails,
    WorkerDeathEntry,
)
from daemons.nimbus import health
from daemons.nimbus.liveness import Seen
from executor.checkpoint.stall import checkpoint_stall
from executor.checkpoint.wiring import STATEFUL_BOLT, STATEFUL_SPOUT
from executor.layout import TopologyLayout
from executor.savepoints import SAVEPOINT_KEY
from executor.structure import ComponentStructure
from executor.windowing.spec import WINDOW_KEYS, is_window_conf


@dataclass(frozen=True)
class TopologyFacts:
    """One live topology as Nimbus read it for a summary."""

    storm_id: str
    base: StormBase
    assignment: Assignment | None
    # The newest error of each component (and of its workers as a whole: WORKER_ERRORS).
    last_errors: Mapping[str, ErrorInfo] = field(default_factory=dict)
    # Nimbus's liveness cache of the topology's executors (daemons/nimbus/liveness.py).
    seen: Mapping[Any, Seen] = field(default_factory=dict)
    # A topology with state: its conf, and its checkpoint spout's last reported figures.
    conf: Mapping[str, Any] | None = None
    checkpoint_figures: Mapping[str, Any] | None = None

    @property
    def executor_node_port(self) -> Mapping:
        return {} if self.assignment is None else self.assignment.executor_node_port


@dataclass(frozen=True)
class HealthSettings:
    task_timeout_secs: float   # nimbus.task.timeout.secs
    zk_root: str               # storm.zookeeper.root (named when no supervisor is registered)


@dataclass(frozen=True)
class TopologyHealth:
    live_workers: int
    recent_restarts: int
    last_error: TopologyProblem | None


def topology_health(t: TopologyFacts, sups: Mapping[str, SupervisorInfo], now: float,
                    settings: HealthSettings) -> TopologyHealth:
    """Live workers (slots with an executor whose heartbeat advanced within the task timeout),
    worker restarts in the last minutes and the newest problem (daemons/nimbus/health.py)."""
    enp = t.executor_node_port
    mine = [(info, d) for info in sups.values() for d in info.worker_deaths if d.storm_id == t.storm_id]
    last_death = {(sid, d.port): d.time_secs for sid, info in sups.items() for d in info.worker_deaths
                  if d.storm_id == t.storm_id}
    live = health.live_workers(enp, t.seen, last_death, now, settings.task_timeout_secs)
    restarts = sum(n for info in sups.values() for sid, n in info.recent_worker_deaths if sid == t.storm_id)
    errors = {comp: [(e.time_secs, e.error, e.host, e.port)] for comp, e in t.last_errors.items()}
    deaths = [(d.time_secs, d.error_line, d.reason, d.port, info.hostname, d.exit_code, d.signal)
              for info, d in mine]
    # a supervisor that cannot fetch the code starts no worker: its failure is the problem
    deaths += [(at, "", why, None, info.hostname, None, None)
               for info in sups.values() for sid, at, why in info.code_failures if sid == t.storm_id]
    cause = health.newest_problem(errors, [d for d in deaths if d[1] or is_memory_kill(d[2])])
    problem = health.crash_loop_problem(health.newest_problem(errors, deaths), restarts, live, cause)
    unassigned = sum(t.base.component_executors.values()) - len(enp) if t.base.component_executors else 0
    problem = health.no_slots_problem(unassigned, len(sups), settings.zk_root, int(now)) or problem
    return TopologyHealth(live, restarts, None if problem is None else problem.to_answer())


def _stall(t: TopologyFacts, now: float) -> str | None:
    """Why its checkpoints stopped committing (executor/checkpoint/stall.py), for an active topology."""
    if t.conf is None or not t.checkpoint_figures or t.base.status != "active":
        return None
    return checkpoint_stall(t.base.storm_name, t.conf, t.base.launch_time_secs, now, t.checkpoint_figures)


def cluster_summary(topologies: Sequence[TopologyFacts], sups: Mapping[str, SupervisorInfo], now: float,
                    nimbus_started_at: float, version: str, settings: HealthSettings) -> ClusterInfo:
    """cluster_info's answer: the supervisors with their used slots and every topology's
    figures and health."""
    used: dict[str, set[int]] = {}
    rows = []
    for t in sorted(topologies, key=lambda t: t.storm_id):
        enp = t.executor_node_port
        slots = set(enp.values())
        for node, port in slots:
            used.setdefault(node, set()).add(port)
        base = t.base
        h = topology_health(t, sups, now, settings)
        rows.append(TopologyRow(
            name=base.storm_name, id=t.storm_id, status=base.status, num_tasks=sum(e - s + 1 for s, e in enp),
            num_workers=len(slots), num_executors=len(enp), uptime_secs=int(now - base.launch_time_secs),
            owner=base.owner or "", requested_workers=base.num_workers, slots=tuple(sorted(slots)),
            live_workers=h.live_workers, recent_restarts=h.recent_restarts, last_error=h.last_error,
            checkpoint_stall=_stall(t, now), savepoint=(t.conf or {}).get(SAVEPOINT_KEY), note=base.inactive_note))
    supervisors = tuple(SupervisorRow(
        id=sid, host=info.hostname, slots=len(info.meta), used=len(used.get(sid, ())), ports=tuple(info.meta),
        uptime_secs=info.uptime_secs, version=info.version or "", logviewer_port=info.logviewer_port,
        logviewer_https=info.logviewer_https,
        worker_restarts=tuple(tuple(r) for r in info.worker_restarts)) for sid, info in sorted(sups.items()))
    return ClusterInfo(nimbus_uptime_secs=int(now - nimbus_started_at), nimbus_version=version, now_secs=int(now),
                       supervisors=supervisors, topologies=tuple(rows))


@dataclass(frozen=True)
class DetailFacts:
    """One topology as Nimbus read it for topology_details."""

    storm_id: str
    base: StormBase
    conf: Mapping[str, Any]
    specs: Mapping[str, ComponentStructure]         # the user's components (ackers have none)
    layout: TopologyLayout
    assignment: Assignment | None
    beats: Mapping[Any, Any]                    # executor -> its newest ExecutorBeat
    errors: Mapping[str, Sequence[ErrorInfo]]   # component -> newest errors, newest first


def topology_details(f: DetailFacts, sups: Mapping[str, SupervisorInfo], now: float) -> TopologyDetails:
    """topology_details' answer."""
    a = f.assignment
    enp = {} if a is None else a.executor_node_port
    hosts = {} if a is None else a.node_host
    starts = {} if a is None else a.executor_start_time_secs
    components, executors = [], []
    for comp in sorted(f.layout.executors):
        spec = f.specs.get(comp)
        components.append(ComponentEntry(
            id=comp, kind="acker" if spec is None else spec.kind, tasks=len(f.layout.component_tasks[comp]),
            inputs=() if spec is None else tuple(
                Subscription(component=sub.source, stream=sub.stream, grouping=sub.grouping.kind,
                             fields=None if sub.grouping.fields is None else tuple(sub.grouping.fields.to_list()))
                for sub in spec.inputs),
            stateful=spec is not None and bool(spec.conf.get(STATEFUL_BOLT) or spec.conf.get(STATEFUL_SPOUT)),
            window=None if spec is None or not is_window_conf(spec.conf) else
            {k: spec.conf[k] for k in WINDOW_KEYS if spec.conf.get(k) is not None}))
        for ex in f.layout.executors[comp]:
            node, port = enp.get(ex, (None, None))
            beat = f.beats.get(ex)
            executors.append(ExecutorEntry(
                executor=tuple(ex), component=comp, node=node, host=hosts.get(node, node) if node else None,
                port=port, start_time_secs=starts.get(ex), alive=beat is not None,
                uptime_secs=None if beat is None else beat.uptime_secs, stats=None if beat is None else beat.stats,
                pid=None if beat is None else beat.pid))
    errors = {comp: tuple(ComponentError(error=e.error, time_secs=e.time_secs, host=e.host, port=e.port) for e in errs)
              for comp, errs in f.errors.items()}
    nodes = {n for n, _p in enp.values()}
    supervisors = {sid: SupervisorAddress(host=info.hostname, logviewer_port=info.logviewer_port,
                                         logviewer_https=info.logviewer_https)
                   for sid, info in sups.items() if sid in nodes}
    restarts = tuple((sid, port, n) for sid, info in sorted(sups.items())
                     for tid, port, n in info.worker_restarts if tid == f.storm_id)
    deaths = sorted((WorkerDeathEntry(supervisor=sid, host=info.hostname, port=d.port, time_secs=d.time_secs,
                                      reason=d.reason, exit_code=d.exit_code, signal=d.signal,
                                      error_line=d.error_line, log_tail=d.log_tail)
                     for sid, info in sups.items() for d in info.worker_deaths if d.storm_id == f.storm_id),
                    key=lambda d: (-d.time_secs, d.supervisor, d.port))
    base = f.base
    return TopologyDetails(
        id=f.storm_id, name=base.storm_name, status=base.status, owner=base.owner or "", supervisors=supervisors,
        worker_restarts=restarts, worker_deaths=tuple(deaths), launch_time_secs=base.launch_time_secs,
        uptime_secs=int(now - base.launch_time_secs), requested_workers=base.num_workers, now_secs=int(now),
        conf=dict(f.conf), components=tuple(components), executors=tuple(executors), errors=errors,
        note=base.inactive_note)
