"""Prometheus `/metrics`: the families of docs/ui.md, read from Nimbus at scrape time.

The exposition format is prometheus-client's (`generate_latest` over a registry holding one
custom collector), so the text is exactly what Prometheus parses. Counters are all-time values
with system streams left out, as the REST API shows them by default, except for a system
component (the acker), whose every input is a system stream: its figures count them.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from daemons.answers.cluster import ClusterInfo
from daemons.answers.details import TopologyDetails, records_by_component
from daemons.reports.views import checkpoints, counts_system_streams, windows
from daemons.rpc.calls import NimbusCalls
from daemons.rpc.protocol import REMOTE_ERRORS
from executor import stats as st
from executor.stats_windows import ALL_TIME

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def families(info: ClusterInfo | None, details: Iterable[TopologyDetails]) -> list:
    """The metric families from cluster_info and each topology's topology_details (pure);
    info None: Nimbus did not answer (storm_nimbus_up 0, nothing else)."""
    up = GaugeMetricFamily("storm_nimbus_up", "1 when the UI reached Nimbus for this scrape")
    up.add_metric([], 0 if info is None else 1)
    if info is None:
        return [up]
    status = GaugeMetricFamily("storm_topology_status", "1 per topology, labelled with its status",
                               labels=["topology", "status"])
    workers = GaugeMetricFamily("storm_topology_workers", "Worker slots the topology is assigned",
                                labels=["topology"])
    for t in info.topologies:
        status.add_metric([t.name, t.status.upper()], 1)
        workers.add_metric([t.name], t.num_workers)
    slots = GaugeMetricFamily("storm_supervisor_slots", "Worker slots a supervisor offers",
                              labels=["supervisor", "host"])
    used = GaugeMetricFamily("storm_supervisor_slots_used", "Worker slots in use", labels=["supervisor", "host"])
    for s in info.supervisors:
        slots.add_metric([s.id, s.host], s.slots)
        used.add_metric([s.id, s.host], s.used)
    labels2 = ["topology", "component"]
    labels3 = ["topology", "component", "stream"]
    emitted = CounterMetricFamily("storm_component_emitted", "Tuples emitted (all time)", labels=labels3)
    transferred = CounterMetricFamily("storm_component_transferred", "Tuples transferred (all time)", labels=labels3)
    acked = CounterMetricFamily("storm_component_acked", "Tuples acked (all time)", labels=labels2)
    failed = CounterMetricFamily("storm_component_failed", "Tuples failed (all time)", labels=labels2)
    executed = CounterMetricFamily("storm_component_executed", "Tuples executed by a bolt (all time)",
                                   labels=labels2)
    capacity = GaugeMetricFamily("storm_component_capacity", "Bolt capacity over the last 10 minutes",
                                 labels=labels2)
    complete = GaugeMetricFamily("storm_component_complete_latency_ms", "Spout complete latency (all time)",
                                 labels=labels2)
    execute = GaugeMetricFamily("storm_component_execute_latency_ms", "Bolt execute latency (all time)",
                                labels=labels2)
    backpressure = GaugeMetricFamily("storm_component_backpressure", "1 when an executor's output is held up",
                                     labels=labels2)
    restarts = CounterMetricFamily("storm_worker_restarts", "Worker relaunches by its supervisor after a failure",
                                   labels=["topology", "host", "port"])
    cp_txid = GaugeMetricFamily("storm_checkpoint_last_committed_txid",
                                "The last checkpoint a topology with state committed", labels=["topology"])
    cp_age = GaugeMetricFamily("storm_checkpoint_age_seconds", "Seconds since that commit", labels=["topology"])
    cp_commits = CounterMetricFamily("storm_checkpoint_commits", "Checkpoints committed since the checkpoint "
                                     "spout started", labels=["topology"])
    cp_latency = GaugeMetricFamily("storm_checkpoint_commit_latency_ms",
                                   "Mean checkpoint latency, PREPARE sent to COMMIT done", labels=["topology"])
    cp_rollbacks = CounterMetricFamily("storm_checkpoint_rollbacks", "Rollbacks to the last commit",
                                       labels=["topology"])
    cp_align = GaugeMetricFamily("storm_checkpoint_alignment_ms", "The bolts' longest barrier alignment of "
                                 "their last checkpoint: a PREPARE's first input copy to its last", labels=["topology"])
    cp_align_max = GaugeMetricFamily("storm_checkpoint_alignment_max_ms", "The bolts' longest barrier alignment "
                                     "of their last 60 checkpoints", labels=["topology"])
    cp_align_hist = HistogramMetricFamily("storm_checkpoint_alignment_duration_ms", "The bolts' barrier "
                                          "alignments since their executors started", labels=["topology"])
    win_events = GaugeMetricFamily("storm_window_events", "Tuples a windowed bolt's windows hold now",
                                   labels=labels2)
    win_late = CounterMetricFamily("storm_window_late_tuples", "Tuples a windowed bolt got after its watermark "
                                   "had passed them (event time), since its executors started", labels=labels2)
    hosts = {s.id: s.host for s in info.supervisors}
    for d in details:
        name = d.name
        by_comp = records_by_component(d)
        for comp in d.components:
            cid = comp.id
            recs = by_comp.get(cid, [])
            own_sys = counts_system_streams(cid, False)
            f = st.component_figures(recs, ALL_TIME, own_sys)
            for stream, figs in sorted(st.output_streams(recs, ALL_TIME, own_sys).items()):
                emitted.add_metric([name, cid, stream], figs["emitted"])
                transferred.add_metric([name, cid, stream], figs["transferred"])
            acked.add_metric([name, cid], f["acked"])
            failed.add_metric([name, cid], f["failed"])
            backpressure.add_metric([name, cid], 1 if f["backpressure"] else 0)
            if comp.kind == "spout":
                complete.add_metric([name, cid], f["complete_latency_ms"])
            else:
                executed.add_metric([name, cid], f["executed"])
                capacity.add_metric([name, cid], f["capacity"])
                execute.add_metric([name, cid], f["execute_latency_ms"])
        cp = checkpoints(d, time.time())
        if cp is not None:
            if cp["lastCommittedTxid"] is not None:
                cp_txid.add_metric([name], cp["lastCommittedTxid"])
                cp_age.add_metric([name], cp["lastCommitAgeSecs"])
            cp_commits.add_metric([name], cp["commits"])
            if cp["commitLatencyMs"] is not None:
                cp_latency.add_metric([name], cp["commitLatencyMs"])
            cp_rollbacks.add_metric([name], cp["rollbacks"])
            if cp["alignmentMs"] is not None:
                cp_align.add_metric([name], cp["alignmentMs"])
                cp_align_max.add_metric([name], cp["alignmentMaxMs"])
                buckets = [(b, n) for b, n in cp["alignmentBucketsMs"].items()] + [("+Inf", cp["alignments"])]
                cp_align_hist.add_metric([name], buckets, sum_value=cp["alignmentSumMs"])
        for w in windows(d):
            win_events.add_metric([name, w["componentId"]], w["eventsInWindow"])
            win_late.add_metric([name, w["componentId"]], w["lateTuples"])
        for sid, port, n in d.worker_restarts:
            restarts.add_metric([name, hosts.get(sid, sid), str(port)], n)
    return [up, status, workers, slots, used, emitted, transferred, acked, failed, executed, capacity,
            complete, execute, backpressure, restarts, cp_txid, cp_age, cp_commits, cp_latency, cp_rollbacks,
            cp_align, cp_align_max, cp_align_hist, win_events, win_late]


class _NimbusCollector(Collector):
    def __init__(self, nimbus: NimbusCalls):
        self._nimbus = nimbus

    def collect(self):
        try:
            info = ClusterInfo.from_wire(self._nimbus.call("cluster_info"))
            details = []
            for t in info.topologies:
                try:
                    details.append(TopologyDetails.from_wire(self._nimbus.call("topology_details", name=t.id)))
                except REMOTE_ERRORS as exc:  # killed meanwhile, or Nimbus went away mid-scrape
                    log.info("metrics: topology %s skipped: %s", t.id, exc)
        except REMOTE_ERRORS as exc:
            log.warning("metrics: Nimbus did not answer: %s", exc)
            info, details = None, []
        yield from families(info, details)


def render(nimbus: NimbusCalls) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_NimbusCollector(nimbus))
    return generate_latest(registry)
