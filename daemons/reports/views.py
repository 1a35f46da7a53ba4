"""Storm's REST API answers from what Nimbus returns (pure: its typed answers in, JSON-ready data
out).

Every answer carries every field of Storm's own UI fixtures with the same JSON types (Storm's
`UIHelpers.java` builds the same shapes); what storm-py has no notion of (a resource-aware
scheduler's memory and CPU, profiling, an event logger) is 0, 0.0, false, "" or [] as Storm
shows it when the feature is off. Input: Nimbus's `cluster_info` and `topology_details`
answers (daemons/answers/); the stats merge is executor/stats.py's, per window and stream.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from daemons.answers.cluster import ClusterInfo, NimbusRow, SupervisorRow, TopologyProblem
from daemons.answers.details import (
    ComponentEntry,
    ExecutorEntry,
    SupervisorAddress,
    TopologyDetails,
    executor_records,
    records_by_component,
)
from daemons.reports import formats as fmt
from daemons.reports.layout import layout as layered_layout
from executor import stats as st
from executor.checkpoint.barrier_mode import barrier_only
from executor.checkpoint.protocol import (
    ALIGNMENT,
    ALIGNMENT_BOUNDS_MS,
    ALIGNMENT_BUCKET,
    ALIGNMENT_COUNT,
    ALIGNMENT_MAX,
    ALIGNMENT_SUM,
    CHECKPOINT_COMPONENT,
    percentile_bound,
)
from executor.checkpoint.stall import checkpoint_stall as stall_line
from executor.layout import ACKER_COMPONENT
from executor.package import masked
from executor.savepoints import SAVEPOINT_KEY
from executor.stats_record import ExecutorStats
from executor.stats_windows import ALL_TIME, WINDOW_NAMES, window_pretty
from executor.tuple import is_system_id

_NO_RESOURCES = {"requestedMemOnHeap": 0.0, "requestedMemOffHeap": 0.0, "requestedTotalMem": 0.0,
                 "requestedCpu": 0.0, "assignedMemOnHeap": 0.0, "assignedMemOffHeap": 0.0,
                 "assignedTotalMem": 0.0, "assignedCpu": 0.0}


# ---------------------------------------------------------------- cluster
def cluster_summary(info: ClusterInfo, user: str = "") -> dict:
    sups = info.supervisors
    topos = info.topologies
    total = sum(s.slots for s in sups)
    used = sum(s.used for s in sups)
    return {
        "stormVersion": fmt.storm_version(info.nimbus_version), "nimbusUptime": fmt.pretty_uptime(info.nimbus_uptime_secs),
        "nimbusUptimeSeconds": int(info.nimbus_uptime_secs), "supervisors": len(sups),
        "topologies": len(topos), "slotsTotal": total, "slotsUsed": used, "slotsFree": total - used,
        "executorsTotal": sum(t.num_executors for t in topos), "tasksTotal": sum(t.num_tasks for t in topos),
        "schedulerDisplayResource": False, "totalMem": 0.0, "totalCpu": 0.0, "availMem": 0.0, "availCpu": 0.0,
        "memAssignedPercentUtil": 0.0, "cpuAssignedPercentUtil": 0.0, "user": user,
        "bugtracker-url": "", "central-log-url": "",
    }


def nimbus_summary(info: ClusterInfo, host: str, port: int, logviewer_port: int | None,
                   logviewer_https: bool = False) -> dict:
    """Storm's /api/v1/nimbus/summary: every registered Nimbus ("Leader" / "Not a Leader"); the
    one the UI talks to, as the leader, when Nimbus lists none (LocalCluster). `logviewer_https`:
    the logviewers serve HTTPS only (on `logviewer_port`)."""
    scheme = "https" if logviewer_https else "http"
    rows = info.nimbuses or [NimbusRow(host=host, port=int(port), status="Leader", is_leader=True,
                                       uptime_secs=info.nimbus_uptime_secs, version=info.nimbus_version)]
    return {"nimbuses": [{
        "host": n.host, "port": int(n.port), "status": n.status,
        "nimbusUpTime": fmt.pretty_uptime(n.uptime_secs),
        "nimbusUpTimeSeconds": int(n.uptime_secs),
        "nimbusLogLink": f"{scheme}://{n.host}:{logviewer_port}/daemonlog?file=nimbus.log" if logviewer_port else "",
        "version": fmt.storm_version(n.version), "isLeader": bool(n.is_leader)} for n in rows]}


def _supervisor(s: SupervisorRow) -> dict:
    return {"id": s.id, "host": s.host, "uptime": fmt.pretty_uptime(s.uptime_secs),
            "uptimeSeconds": int(s.uptime_secs), "slotsTotal": int(s.slots), "slotsUsed": int(s.used),
            "totalMem": 0.0, "usedMem": 0.0, "totalCpu": 0.0, "usedCpu": 0.0,
            "version": fmt.storm_version(s.version), "blacklisted": False}


def supervisor_summary(info: ClusterInfo) -> dict:
    return {"supervisors": [_supervisor(s) for s in info.supervisors], "schedulerDisplayResource": False}


def find_supervisors(info: ClusterInfo, sup_id: str | None, host: str | None) -> list[SupervisorRow]:
    return [s for s in info.supervisors
            if (sup_id is not None and s.id == sup_id) or (host is not None and s.host == host)]


def supervisor_detail(sup: SupervisorRow, topologies: Iterable[TopologyDetails]) -> dict:
    """A supervisor and the workers it runs; `topologies`: topology_details of the topologies
    that have a slot on it."""
    out = _supervisor(sup)
    out.update({"availMem": 0.0, "availCpu": 0.0, "totalGenericResources": {}, "usedGenericResources": {},
                "availGenericResources": {}, "schedulerDisplayResource": False})
    out["workers"] = [w for details in topologies for w in workers(details) if w["supervisorId"] == sup.id]
    # Beyond Storm's answer: every slot, free or not, with the worker restarts seen on it.
    used = {w["port"]: w for w in out["workers"]}
    restarts: dict[int, int] = {}
    for _tid, port, n in sup.worker_restarts:
        restarts[int(port)] = restarts.get(int(port), 0) + int(n)
    out["slots"] = [{"port": int(p), "used": int(p) in used,
                     "topologyId": used[int(p)]["topologyId"] if int(p) in used else "",
                     "topologyName": used[int(p)]["topologyName"] if int(p) in used else "",
                     "restarts": restarts.get(int(p), 0)} for p in sup.ports]
    return out


# ---------------------------------------------------------------- topologies
def topology_summary(info: ClusterInfo) -> dict:
    return {"topologies": [{
        "id": t.id, "encodedId": fmt.encoded(t.id), "name": t.name, "status": fmt.ui_status(t.status),
        "uptime": fmt.pretty_uptime(t.uptime_secs), "uptimeSeconds": int(t.uptime_secs),
        "tasksTotal": int(t.num_tasks), "workersTotal": int(t.num_workers),
        "executorsTotal": int(t.num_executors), "replicationCount": 1, **_NO_RESOURCES,
        "owner": t.owner, "schedulerInfo": "",
        # storm-py's additions (Nimbus's health.py decides them): what `storm-py list` shows
        "workersLive": int(t.live_workers or 0), "workerRestarts5m": int(t.recent_restarts),
        "lastError": _problem(t.last_error)} for t in info.topologies],
        "schedulerDisplayResource": False}


def _problem(problem: TopologyProblem | None) -> dict | None:
    if problem is None:
        return None
    return {"error": problem.error, "errorTime": int(problem.time_secs),
            "component": problem.component or "", "errorHost": problem.host or "",
            "errorPort": problem.port if problem.port is not None else ""}


@dataclass(frozen=True)
class _Topo:
    """topology_details with its records decoded and grouped once."""

    details: TopologyDetails
    by_executor: dict[tuple[int, int], ExecutorStats]
    records: dict[str, list[ExecutorStats]]            # component -> its executors' records
    executors: dict[str, list[ExecutorEntry]]          # component -> its executors

    @classmethod
    def of(cls, details: TopologyDetails) -> _Topo:
        by_executor = executor_records(details)
        executors: dict[str, list[ExecutorEntry]] = {c.id: [] for c in details.components}
        for e in details.executors:
            executors.setdefault(e.component, []).append(e)
        return cls(details, by_executor, records_by_component(details, by_executor), executors)

    def component_records(self, comp: str) -> list[ExecutorStats]:
        return self.records.get(comp, [])

    def executors_of(self, comp: str) -> list[ExecutorEntry]:
        return self.executors.get(comp, [])

    def component(self, comp: str) -> ComponentEntry | None:
        return next((c for c in self.details.components if c.id == comp), None)

    def shown(self, include_sys: bool) -> list[ComponentEntry]:
        return [c for c in self.details.components if include_sys or not is_system_id(c.id)]


def _worker_link(details: TopologyDetails, e: ExecutorEntry) -> str:
    """The log link of the worker running executor `e` (its supervisor's logviewer)."""
    return _log_link(details.supervisors.get(e.node or ""), e.host, details.id, e.port)


def workers(details: TopologyDetails) -> list[dict]:
    """One entry per slot the topology's executors are assigned to."""
    slots: dict[tuple[str, int], list[ExecutorEntry]] = {}
    for e in details.executors:
        if e.node is not None:
            slots.setdefault((e.node, e.port), []).append(e)
    out = []
    for (node, port), execs in sorted(slots.items()):
        uptime = max((e.uptime_secs for e in execs if e.uptime_secs is not None), default=0)
        num_tasks: dict[str, int] = {}
        for e in execs:
            num_tasks[e.component] = num_tasks.get(e.component, 0) + e.executor[1] - e.executor[0] + 1
        out.append({"host": execs[0].host, "port": int(port), "supervisorId": node,
                    "topologyId": details.id, "topologyName": details.name, "owner": details.owner,
                    "uptime": fmt.pretty_uptime(uptime), "uptimeSeconds": int(uptime),
                    "executorsTotal": len(execs), "assignedMemOnHeap": 0.0, "assignedMemOffHeap": 0.0,
                    "assignedCpu": 0.0, "workerLogLink": _worker_link(details, execs[0]), "componentNumTasks": num_tasks,
                    "alive": all(e.alive for e in execs),
                    # storm-py's: the worker's process id on its host (py-spy, ps; null before a heartbeat)
                    "pid": next((e.pid for e in execs if e.pid is not None), None)})
    return out


def _last_error(topo: _Topo, comp: str) -> dict:
    errors = topo.details.errors.get(comp) or ()
    if not errors:
        return {"errorHost": "", "errorPort": "", "errorWorkerLogLink": "", "errorLapsedSecs": None, "lastError": ""}
    e = errors[0]
    link = _log_link(_supervisor_of_host(topo, e.host), e.host, topo.details.id, e.port)
    return {"errorHost": e.host or "", "errorPort": "" if e.port is None else str(e.port),
            "errorWorkerLogLink": link, "errorLapsedSecs": max(0, int(topo.details.now_secs - e.time_secs)),
            "lastError": e.error}


def _supervisor_of_host(topo: _Topo, host: str | None) -> SupervisorAddress | None:
    for sup in topo.details.supervisors.values():
        if sup.host == host:
            return sup
    return None


def _log_link(sup: SupervisorAddress | None, host: str | None, storm_id: str, port: int | None) -> str:
    """A worker's log link through the logviewer of its supervisor (none: no link)."""
    if sup is None:
        return ""
    return fmt.log_link(host, sup.logviewer_port, storm_id, port, https=sup.logviewer_https)


RATE_WINDOW = st.CAPACITY_WINDOW  # per-second figures are over the last 10 minutes, as capacity


def rates(records: Iterable[ExecutorStats], metrics: Iterable[str], include_sys: bool) -> dict[str, float]:
    """Beyond Storm's answer: tuples a second of each metric (emitted, acked, executed) over the
    last 10 minutes (less while the executor is younger), summed over the executors; each
    executor's is `per_second` (storm-py monitor's throughput) of its count in the window."""
    metrics = list(metrics)
    out = dict.fromkeys(metrics, 0.0)
    for rec in records:
        secs = rec.window(RATE_WINDOW)[0]
        f = st.component_figures([rec], RATE_WINDOW, include_sys)
        for m in metrics:
            out[m] += fmt.per_second(f.get(m, 0), secs)
    return {f"{m}PerSec": round(v, 3) for m, v in out.items()}


def _spout_row(topo: _Topo, comp: ComponentEntry, window: str, include_sys: bool) -> dict:
    f = st.component_figures(topo.component_records(comp.id), window, include_sys)
    return {"spoutId": comp.id, "encodedSpoutId": fmt.encoded(comp.id),
            "executors": len(topo.executors_of(comp.id)), "tasks": int(comp.tasks),
            "emitted": f["emitted"], "transferred": f["transferred"],
            "completeLatency": fmt.fixed3(f.get("complete_latency_ms")), "acked": f["acked"], "failed": f["failed"],
            **_last_error(topo, comp.id),
            "timeouts": f.get("timeouts", 0), "pending": f.get("pending", 0), "active": f.get("active", True),
            "backpressure": f["backpressure"], "skippedMs": f.get("skipped_ms", {}),
            "queuePopulation": f["queue_population"], "queueCapacity": f["queue_capacity"],
            **rates(topo.component_records(comp.id), (st.EMITTED, st.ACKED), include_sys)}


def _bolt_row(topo: _Topo, comp: ComponentEntry, window: str, include_sys: bool) -> dict:
    f = st.component_figures(topo.component_records(comp.id), window, include_sys)
    return {"boltId": comp.id, "encodedBoltId": fmt.encoded(comp.id),
            "executors": len(topo.executors_of(comp.id)), "tasks": int(comp.tasks),
            "emitted": f["emitted"], "transferred": f["transferred"], "capacity": fmt.fixed3(f.get("capacity")),
            "executeLatency": fmt.fixed3(f.get("execute_latency_ms")), "executed": f.get("executed", 0),
            "processLatency": fmt.fixed3(f.get("process_latency_ms")), "acked": f["acked"], "failed": f["failed"],
            **_last_error(topo, comp.id),
            "backpressure": f["backpressure"], "queuePopulation": f["queue_population"],
            "queueCapacity": f["queue_capacity"],
            **rates(topo.component_records(comp.id), (st.EMITTED, st.EXECUTED, st.ACKED), include_sys)}


def _topology_stats(topo: _Topo, include_sys: bool) -> list[dict]:
    """Storm's topology figures per window: emitted/transferred over every shown component,
    acked/failed/complete latency of the spouts."""
    shown = [r for c in topo.shown(include_sys) for r in topo.component_records(c.id)]
    spouts = [r for c in topo.details.components if c.kind == "spout" for r in topo.component_records(c.id)]
    out = []
    for window in WINDOW_NAMES:
        everyone = st.component_figures(shown, window, include_sys)
        spout = st.component_figures(spouts, window, include_sys)
        out.append({"windowPretty": window_pretty(window), "window": window, "emitted": everyone["emitted"],
                    "transferred": everyone["transferred"],
                    "completeLatency": fmt.fixed3(spout.get("complete_latency_ms")),
                    "acked": spout["acked"], "failed": spout["failed"]})
    return out


def topology_detail(details: TopologyDetails, window: str = ALL_TIME, include_sys: bool = False) -> dict:
    topo = _Topo.of(details)
    conf = details.conf
    shown = topo.shown(include_sys)
    ws = workers(details)
    return {
        "id": details.id, "encodedId": fmt.encoded(details.id), "name": details.name,
        "status": fmt.ui_status(details.status), "uptime": fmt.pretty_uptime(details.uptime_secs),
        "uptimeSeconds": int(details.uptime_secs),
        "tasksTotal": sum(int(c.tasks) for c in details.components), "workersTotal": len(ws),
        "executorsTotal": len(details.executors),
        "msgTimeout": int(conf.get("topology.message.timeout.secs", 30)), "windowHint": window_pretty(window),
        "window": window, "debug": bool(conf.get("topology.debug", False)), "samplingPct": 0,
        "schedulerDisplayResource": False, "replicationCount": 1,
        "requestedMemOnHeap": 0.0, "requestedCpu": 0.0, "assignedMemOnHeap": 0.0, "assignedCpu": 0.0,
        "requestedMemOffHeap": 0.0, "requestedTotalMem": 0.0, "assignedMemOffHeap": 0.0, "assignedTotalMem": 0.0,
        "owner": details.owner, "requestedWorkers": int(details.requested_workers),
        "topologyStats": _topology_stats(topo, include_sys),
        "spouts": [_spout_row(topo, c, window, include_sys) for c in shown if c.kind == "spout"],
        "bolts": [_bolt_row(topo, c, window, include_sys) for c in shown if c.kind != "spout"],
        "configuration": masked(conf), "workers": ws,
        "workerRestarts": [{"supervisorId": sid, "port": port, "restarts": n}
                           for sid, port, n in details.worker_restarts],
        "diagnosis": diagnose(topo),
        "checkpoints": _checkpoints(topo, time.time()),
        "windows": _windows(topo),
    }


def windows(details: TopologyDetails) -> list[dict]:
    """The windowed bolts of a topology (/metrics), as the topology page shows them."""
    return _windows(_Topo.of(details)) or []


def _windows(topo: _Topo) -> list[dict] | None:
    """Beyond Storm's answer: per windowed bolt (executor/windowing/), the tuples its windows hold
    now and the late tuples it has had (its executors' sums); None for a topology without one."""
    out = []
    for c in topo.details.components:
        recs = [r for r in topo.component_records(c.id) if "window_events" in r.extra]
        if recs:
            out.append({"componentId": c.id,
                        "eventsInWindow": int(sum(r.extra.get("window_events") or 0 for r in recs)),
                        "lateTuples": int(sum(r.extra.get("window_late_tuples") or 0 for r in recs)),
                        # a persistent window: those of its tuples held in memory (the rest in its state)
                        "eventsInMemory": (int(sum(r.extra.get("window_events_in_memory") or 0 for r in recs))
                                           if any("window_events_in_memory" in r.extra for r in recs) else None)})
    return out or None


def checkpoints(details: TopologyDetails, now: float) -> dict | None:
    """The checkpoints of a topology with state (/metrics), as the topology page shows them."""
    return _checkpoints(_Topo.of(details), now)


def _checkpoints(topo: _Topo, now: float) -> dict | None:
    """Beyond Storm's answer: the checkpoint spout's last commit of a topology with state
    (executor/checkpoint/), None for one without. The age is on the workers' clock."""
    if topo.component(CHECKPOINT_COMPONENT) is None:
        return None
    extra = next((r.extra for r in topo.component_records(CHECKPOINT_COMPONENT) if r.extra), {})
    at = extra.get("last_committed_at")

    def ms(key):
        v = extra.get(key)
        return None if v is None else round(float(v), 3)

    # Alignment: the bolts' barrier alignment, the longest of their last ones and of their
    # recent ones (executor/checkpoint/forwarder.py).
    aligned = [r.extra for c in topo.details.components if c.kind == "bolt"
               for r in topo.component_records(c.id) if ALIGNMENT in r.extra]
    return {"lastCommittedTxid": extra.get("last_committed_txid"),
            "alignmentMs": round(max(float(e[ALIGNMENT]) for e in aligned), 3) if aligned else None,
            "alignmentMaxMs": round(max(float(e.get(ALIGNMENT_MAX, 0)) for e in aligned), 3) if aligned else None,
            **_alignment_histogram(aligned),
            "lastCommitAgeSecs": None if at is None else round(max(0.0, now - at), 1),
            "commits": int(extra.get("commits") or 0), "commitLatencyMs": ms("commit_latency_ms"),
            "commitLatencyMaxMs": ms("commit_latency_max_ms"), "rollbacks": int(extra.get("rollbacks") or 0),
            "recovering": bool(extra.get("recovering", True)),
            # the savepoint it started from (storm-py swap, jar submit --from-savepoint)
            "startedFromSavepoint": topo.details.conf.get(SAVEPOINT_KEY)}


def _alignment_histogram(aligned: list[dict]) -> dict:
    """Every alignment of the bolts' running executors since they started, in cumulative buckets
    (executor/checkpoint/protocol.py ALIGNMENT_BOUNDS_MS), and their 99th percentile's bucket."""
    counts = [sum(int(e.get(f"{ALIGNMENT_BUCKET}{b}", 0)) for e in aligned) for b in ALIGNMENT_BOUNDS_MS]
    total = sum(int(e.get(ALIGNMENT_COUNT, 0)) for e in aligned)
    p99 = percentile_bound(counts, total, 0.99)
    return {"alignments": total, "alignmentSumMs": round(sum(float(e.get(ALIGNMENT_SUM, 0)) for e in aligned), 3),
            "alignmentBucketsMs": {str(b): n for b, n in zip(ALIGNMENT_BOUNDS_MS, counts)},
            "alignmentP99Ms": None if p99 is None or p99 == float("inf") else p99}


def checkpoint_stall(topo: _Topo) -> str | None:
    """A topology with state whose checkpoints stopped committing, and why, in words; None when
    they commit (or before the checkpoint spout reported): executor/checkpoint/stall.py."""
    d = topo.details
    if d.status != "active" or topo.component(CHECKPOINT_COMPONENT) is None:
        return None
    extra = next((r.extra for r in topo.component_records(CHECKPOINT_COMPONENT) if r.extra), None)
    if not extra:
        return None
    return stall_line(d.name, d.conf, float(d.launch_time_secs), d.now_secs, extra)


def diagnosis(details: TopologyDetails) -> list[str]:
    """Why the topology's spouts are not emitting, in words (what `storm-py monitor` prints)."""
    return diagnose(_Topo.of(details))


def monitor_reading(details: TopologyDetails, components: Iterable[str], stream: str,
                 metric: str) -> tuple[int, list[str]]:
    """What `storm-py monitor` prints: the all-time `metric` (emitted or transferred) of `stream`
    summed over the components' executors, and the diagnosis (records decoded once)."""
    topo = _Topo.of(details)
    recs = [r for c in components for r in topo.component_records(c)]
    return int(st.output_streams(recs, ALL_TIME, True).get(stream, {}).get(metric, 0)), diagnose(topo)


# ---------------------------------------------------------------- components
def component_detail(details: TopologyDetails, comp_id: str, window: str = ALL_TIME,
                     include_sys: bool = False) -> dict | None:
    """None when the topology has no such component."""
    topo = _Topo.of(details)
    comp = topo.component(comp_id)
    if comp is None:
        return None
    kind = "spout" if comp.kind == "spout" else "bolt"
    recs = topo.component_records(comp_id)
    execs = topo.executors_of(comp_id)
    include_sys = counts_system_streams(comp_id, include_sys)
    out: dict[str, Any] = {
        "id": comp_id, "encodedId": fmt.encoded(comp_id), "topologyId": details.id,
        "encodedTopologyId": fmt.encoded(details.id), "name": details.name, "componentType": kind,
        "topologyStatus": fmt.ui_status(details.status), "executors": len(execs), "tasks": int(comp.tasks),
        "windowHint": window_pretty(window), "window": window,
        "debug": bool(details.conf.get("topology.debug", False)), "samplingPct": 0, "eventLoggerCount": 0,
        "profilingAndDebuggingCapable": False, "profileActionEnabled": False, "profilerActive": [],
        "schedulerDisplayResource": False, "requestedMemOnHeap": 0.0, "requestedMemOffHeap": 0.0,
        "requestedCpu": 0.0, "user": details.owner,
    }
    outputs = st.output_streams(recs, window, include_sys)
    if kind == "spout":
        out["spoutSummary"] = [_spout_window(recs, w, include_sys) for w in WINDOW_NAMES]
        out["outputStats"] = [{"stream": s, "emitted": f["emitted"], "transferred": f["transferred"],
                               "completeLatency": fmt.fixed3(f["complete_latency_ms"]), "acked": f["acked"],
                               "failed": f["failed"]} for s, f in sorted(outputs.items())]
        out["boltStats"], out["inputStats"] = [], []
    else:
        out["boltStats"] = [_bolt_window(recs, w, include_sys) for w in WINDOW_NAMES]
        out["inputStats"] = [{"component": c, "encodedComponent": fmt.encoded(c), "stream": s,
                              "executeLatency": fmt.fixed3(f["execute_latency_ms"]),
                              "processLatency": fmt.fixed3(f["process_latency_ms"]), "executed": f["executed"],
                              "acked": f["acked"], "failed": f["failed"]}
                             for (c, s), f in sorted(st.input_streams(recs, window, include_sys).items())]
        out["outputStats"] = [{"stream": s, "emitted": f["emitted"], "transferred": f["transferred"]}
                              for s, f in sorted(outputs.items())]
        out["spoutSummary"] = []
    out["executorStats"] = [_executor_row(topo, e, kind, window, include_sys) for e in execs]
    errors = details.errors.get(comp_id) or ()
    out["componentErrors"] = [{
        "errorTime": int(e.time_secs) * 1000, "errorHost": e.host or "",
        "errorPort": "" if e.port is None else str(e.port), "error": e.error,
        "errorLapsedSecs": max(0, int(details.now_secs - e.time_secs)),
        "errorWorkerLogLink": _log_link(_supervisor_of_host(topo, e.host), e.host, details.id, e.port)}
        for e in errors]
    out["deadWorkers"] = dead_workers(topo, {(e.node, e.port) for e in execs})
    return out


def counts_system_streams(component_id: str, include_sys: bool) -> bool:
    """Whether a component's figures count system streams: a system component (the acker) works
    on them only, so its figures do, as its capacity does, or it would show capacity with nothing
    executed or acked (its page, /metrics)."""
    return include_sys or is_system_id(component_id)


def dead_workers(topo: _Topo, slots: set[tuple[Any, Any]]) -> list[dict]:
    """Beyond Storm's answer: the workers that died on these (supervisor, port) slots, newest
    first, with what the supervisor recorded (reason, exit code or signal, the error line and
    the last lines of the log at that moment: the relaunched worker appends to the same file)."""
    out = []
    for d in topo.details.worker_deaths:
        if (d.supervisor, d.port) not in slots:
            continue
        out.append({"host": d.host, "port": int(d.port), "supervisorId": d.supervisor,
                    "timeSecs": int(d.time_secs), "lapsedSecs": max(0, int(topo.details.now_secs - d.time_secs)),
                    "reason": d.reason, "exitCode": d.exit_code, "signal": d.signal or "",
                    "errorLine": d.error_line or "", "logTail": d.log_tail or "",
                    "workerLogLink": _log_link(topo.details.supervisors.get(d.supervisor), d.host,
                                               topo.details.id, d.port)})
    return out


def _spout_window(recs, window: str, include_sys: bool) -> dict:
    f = st.component_figures(recs, window, include_sys)
    return {"windowPretty": window_pretty(window), "window": window, "emitted": f["emitted"],
            "transferred": f["transferred"], "completeLatency": fmt.fixed3(f.get("complete_latency_ms")),
            "acked": f["acked"], "failed": f["failed"]}


def _bolt_window(recs, window: str, include_sys: bool) -> dict:
    f = st.component_figures(recs, window, include_sys)
    return {"windowPretty": window_pretty(window), "window": window, "emitted": f["emitted"],
            "transferred": f["transferred"], "executeLatency": fmt.fixed3(f.get("execute_latency_ms")),
            "executed": f.get("executed", 0), "processLatency": fmt.fixed3(f.get("process_latency_ms")),
            "acked": f["acked"], "failed": f["failed"], "capacity": fmt.fixed3(f.get("capacity"))}


def _executor_row(topo: _Topo, e: ExecutorEntry, kind: str, window: str, include_sys: bool) -> dict:
    rec = topo.by_executor.get(e.executor)
    name = fmt.executor_name(e.executor)
    uptime = e.uptime_secs or 0
    row = {"id": name, "encodedId": fmt.encoded(name), "uptime": fmt.pretty_uptime(uptime),
           "uptimeSeconds": int(uptime), "host": e.host or "", "port": int(e.port or 0),
           "workerLogLink": _worker_link(topo.details, e), "alive": bool(e.alive)}
    if kind == "spout":
        w = _spout_window([rec] if rec else [], window, include_sys)
    else:
        w = _bolt_window([rec] if rec else [], window, include_sys)
    w.pop("windowPretty")
    w.pop("window")
    row.update(w)
    return row


# ---------------------------------------------------------------- the graph
_UNSAFE_STREAM = re.compile(r"[^A-Za-z0-9_-]")


def visualization(details: TopologyDetails, window: str = ALL_TIME, include_sys: bool = False) -> dict:
    """Storm's visualization answer: per component its type, capacity, latency, where its
    executors run and what it subscribes to (with the acker's streams when sys=1)."""
    topo = _Topo.of(details)
    out = {}
    culprits = holding_back(details.components, topo.component_records)
    spouts = [c.id for c in details.components if c.kind == "spout"]
    bolts = [c.id for c in details.components if c.kind == "bolt"]
    for comp in topo.shown(include_sys):
        cid = comp.id
        f = st.component_figures(topo.component_records(cid), window, True)
        inputs = [(i.component, i.stream, i.grouping) for i in comp.inputs]
        if cid == ACKER_COMPONENT:
            inputs = [(s, "__ack_init", "fields") for s in spouts] + \
                     [(b, s, "fields") for b in bolts for s in ("__ack_ack", "__ack_fail")]
        kind = "spout" if comp.kind == "spout" else "bolt"
        latency = f.get("complete_latency_ms") if kind == "spout" else f.get("execute_latency_ms")
        out[cid] = {
            ":type": kind, ":capacity": float(round(f.get("capacity", 0.0), 3)), ":latency": fmt.fixed3(latency),
            # the consumer whose full queue holds its producers back: the page reddens the edges
            # into it (the executor's own flag means its output is blocked, i.e. downstream)
            ":backpressure": cid in culprits,
            ":stats": [{":host": e.host or "", ":port": int(e.port or 0),
                        ":uptime_secs": int(e.uptime_secs or 0)} for e in topo.executors_of(cid)],
            ":inputs": [{":component": c, ":stream": s, ":sani-stream": _UNSAFE_STREAM.sub("_", s),
                         ":grouping": g} for c, s, g in inputs],
        }
    # Beyond Storm's answer: where the page draws each node (a layered layout, daemons/reports/layout.py).
    positions = layered_layout(out, [(i[":component"], cid) for cid, node in out.items() for i in node[":inputs"]])
    for cid, (layer, row) in positions.items():
        out[cid][":layer"], out[cid][":row"] = layer, row
    return out


def topology_workers(details: TopologyDetails, default_logviewer_port: int) -> dict:
    """Storm's topology-workers answer: the host:port of every worker and the logviewer port."""
    ports = {s.logviewer_port for s in details.supervisors.values()} - {None}
    hp = sorted({(e.host, int(e.port)) for e in details.executors if e.host})
    return {"hostPortList": [{"host": h, "port": p} for h, p in hp],
            "logviewerPort": int(ports.pop()) if len(ports) == 1 else int(default_logviewer_port)}


# ---------------------------------------------------------------- why is it stuck
def diagnose(topo: _Topo) -> list[str]:
    """Plain-words reasons a spout is not emitting or the topology cannot run; [] when none."""
    d = topo.details
    name = d.name
    out: list[str] = []
    if d.status == "inactive" and d.note:
        out.append(f"spouts are inactive: topology {name}: {d.note}")
    elif d.status == "inactive":
        out.append(f"spouts are inactive: topology {name} is deactivated (storm-py activate {name} resumes it)")
    elif d.status in ("killed", "rebalancing"):
        out.append(f"topology {name} is {d.status}: its spouts are deactivated until that finishes")
    unassigned: dict[str, int] = {}
    dead: dict[str, set[str]] = {}
    for e in d.executors:
        if e.node is None:
            unassigned[e.component] = unassigned.get(e.component, 0) + 1
        elif not e.alive:
            dead.setdefault(e.component, set()).add(f"{e.host}:{e.port}")
    for comp, n in sorted(unassigned.items()):
        out.append(f"{n} executor(s) of {comp} have no slot: no supervisor offers a free slot")
    for comp, where in sorted(dead.items()):
        out.append(f"executors of {comp} have no live worker (assigned to {', '.join(sorted(where))})")
    for sid, port, n in d.worker_restarts:
        out.append(f"the worker on {sid} port {port} restarted {n} time(s) since its supervisor started "
                   f"(storm-py list's RESTARTS(5m): the last 5 minutes): see its log and lastError")
    stalled = checkpoint_stall(topo)
    if stalled is not None:
        out.append(stalled)
    max_pending = d.conf.get("topology.max.spout.pending")
    culprits = holding_back(d.components, topo.component_records)
    congested = [c.id for c in d.components if c.id in culprits]
    for comp in d.components:
        if comp.kind != "spout":
            continue
        recs = topo.component_records(comp.id)
        if not recs or d.status != "active":
            continue
        pending = sum(r.pending for r in recs)
        bound = _pending_bound(max_pending, recs, d.conf)
        if bound is not None and pending >= bound[0]:
            out.append(f"spout {comp.id} is at max pending: {pending} {_pending_words(d.conf)[0]} ({bound[1]})")
        if any(r.backpressure for r in recs):
            culprit = ", ".join(congested) if congested else "a downstream bolt"
            out.append(f"spout {comp.id} is held by back-pressure from {culprit}")
        out += _mostly_waiting(comp.id, recs, _pending_words(d.conf)[1])
    for comp in congested:
        recs = topo.component_records(comp)
        held = culprits[comp]
        out.append(f"bolt {comp} is saturated: its receive queue holds {sum(r.queue_population for r in recs)} "
                   f"of {sum(r.queue_capacity for r in recs)}"
                   + (f" (it holds back {', '.join(held)}, whose output waits for it)" if held else ""))
    return out


def _pending_bound(max_pending, recs: list[ExecutorStats], conf) -> tuple[int, str] | None:
    """A spout's max pending over its executors and where it comes from: the key, or else the
    bounds its executors learned (executor/pending_bound.py; None unless every one reports one)."""
    if max_pending:
        return int(max_pending) * len(recs), f"topology.max.spout.pending = {max_pending} per executor"
    bounds = [r.extra.get(st.PENDING_BOUND) for r in recs]
    if not bounds or not all(isinstance(b, (int, float)) for b in bounds):
        return None
    learned, target = int(sum(bounds)), conf.get("topology.spout.pending.latency.ms")
    return learned, (f"a bound of {learned} learned to keep the complete latency near "
                     f"topology.spout.pending.latency.ms" + ("" if target is None else f" = {target}")
                     + "; topology.max.spout.pending, when set, is the bound instead")


def _pending_words(conf) -> tuple[str, str]:
    """What a spout's pending tuples wait for: the next checkpoint in exactly-once mode (what
    max spout pending counts there: tuples no barrier has followed yet), else acks. (A count's words, the waiting's words.)"""
    if barrier_only(conf):
        return "tuples wait for the next checkpoint", "its tuples wait for the next checkpoint"
    return "tuple trees wait for acks", "its tuples wait for acks"


def _mostly_waiting(spout: str, recs: list[ExecutorStats], pending_words: str, window: str = "600",
                    share: float = 0.5) -> list[str]:
    """A spout that spent most of the last window not calling next_tuple, and why."""
    secs = max((r.window(window)[0] for r in recs), default=0.0)
    if secs <= 0:
        return []
    skipped = st.by_key(st.add_counters(r.window(window)[1] for r in recs), st.SKIPPED_MS)
    out = []
    waiting = {st.SKIP_MAX_PENDING: f"at max pending ({pending_words})", st.SKIP_BACKPRESSURE: "held by back-pressure"}
    for reason, words in waiting.items():
        fraction = skipped.get(reason, 0.0) / (secs * 1000.0 * len(recs))
        if fraction >= share:
            out.append(f"spout {spout} was {words} {fraction:.0%} of the last {window_pretty(window)}")
    return out


def _fill(recs: list[ExecutorStats]) -> float:
    """How full the fullest receive queue of a component is (0..1)."""
    return max((r.queue_population / r.queue_capacity for r in recs if r.queue_capacity), default=0.0)


def holding_back(components: Sequence[ComponentEntry],
                 records_of: Callable[[str], list[ExecutorStats]]) -> dict[str, list[str]]:
    """The components whose receive queues hold the topology back -> the producers they hold
    back (pure). An executor's back-pressure flag says that its OWN output is blocked
    (executor/base.py sets it on the producer), so the culprit is downstream of it: among its
    consumers, those with a queue at least 90% full, else the fullest of those not blocked
    themselves (a blocked consumer only passes on what holds it back further down, where its
    own flag leads). A queue that full is a culprit by itself too."""
    consumers: dict[str, list[str]] = {}
    for comp in components:
        for i in comp.inputs:
            consumers.setdefault(i.component, []).append(comp.id)
    fill = {c.id: _fill(records_of(c.id)) for c in components}
    out: dict[str, list[str]] = {c.id: [] for c in components if c.kind != "spout" and fill[c.id] >= 0.9}
    blocked = {c.id for c in components if any(r.backpressure for r in records_of(c.id))}
    for comp in components:
        if comp.id not in blocked:
            continue
        downstream = sorted(set(consumers.get(comp.id, ())))
        full = [c for c in downstream if c in out]
        free = [c for c in downstream if c not in blocked]
        if not full and free:
            top = max(fill[c] for c in free)
            full = [c for c in free if fill[c] == top] if top > 0 else free
        for c in full:
            held = out.setdefault(c, [])
            if comp.id not in held:
                held.append(comp.id)
    return out
