"""The REST API's pure parts: Storm's formats, the answers built from Nimbus's data (against
Storm's own UI fixtures), the stalled-topology diagnosis and the Prometheus families."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from ui_shape import PROMETHEUS_FAMILIES, assert_shape, shape_problems

from daemons.answers.cluster import ClusterInfo
from daemons.answers.details import TopologyDetails
from daemons.answers.info import TopologyInfo, info_from_details
from daemons.cli_monitor import monitor_line
from daemons.reports import formats as fmt
from daemons.reports import views
from daemons.ui import metrics
from executor.checkpoint.protocol import ALIGNMENT_BOUNDS_MS, alignment_buckets
from executor.stats_record import ExecutorStats, to_wire

pytestmark = pytest.mark.timeout(30)

WINDOWS = ("600", "10800", "86400", ":all-time")


def _windows(counters: dict, secs: float = 600.0) -> dict:
    return {w: (secs, dict(counters)) for w in WINDOWS}


def spout_record(emitted=100, acked=90, failed=3, pending=5, **kw) -> list:
    counters = {"emitted|default": emitted, "transferred|default": emitted, "emitted|__ack_init": emitted,
                "acked|default": acked, "failed|default": failed, "timeouts|default": 1,
                "complete_ms_sum|default": 9.0 * acked, "complete_count|default": acked}
    counters.update(kw.pop("extra", {}))
    return to_wire(ExecutorStats("spout", "spout", 60, _windows(counters), pending=pending, **kw))


def bolt_record(component="split", executed=90, execute_ms=45.0, **kw) -> list:
    counters = {"emitted|default": 4 * executed, "transferred|default": 4 * executed,
                "executed|spout:default": executed, "acked|spout:default": executed,
                "execute_ms_sum|spout:default": execute_ms, "execute_count|spout:default": executed}
    kw = {"queue_population": 2, "queue_capacity": 1024, **kw}
    return to_wire(ExecutorStats(component, "bolt", 60, _windows(counters), **kw))


def details_wire(status="active", spout=None, split=None, conf=None, unassigned=False, alive=True, errors=None,
                 restarts=()) -> dict:
    """topology_details' answer as it comes off the wire."""
    ex = [
        {"executor": [1, 1], "component": "__acker", "stats": to_wire(ExecutorStats("__acker", "acker", 60, {}))},
        {"executor": [2, 2], "component": "spout", "stats": spout if spout is not None else spout_record()},
        {"executor": [3, 3], "component": "split", "stats": split if split is not None else bolt_record()},
        {"executor": [4, 4], "component": "split", "stats": bolt_record()},
    ]
    for e in ex:
        e.update({"node": "sup-1", "host": "h1", "port": 6700, "start_time_secs": 1000, "alive": alive,
                  "uptime_secs": 60 if alive else None, "pid": 4242 if alive else None})
        if not alive:
            e["stats"] = None
    if unassigned:
        ex[3].update(node=None, host=None, port=None, alive=False, uptime_secs=None, stats=None, pid=None)
    return {
        "id": "wc-1-1000", "name": "wc", "status": status, "owner": "", "launch_time_secs": 1000,
        "uptime_secs": 65, "requested_workers": 1, "now_secs": 1065,
        "conf": {"topology.workers": 1, "topology.eventlogger.executors": 0, "topology.message.timeout.secs": 30,
                 "topology.debug": False, **(conf or {})},
        "components": [
            {"id": "__acker", "kind": "acker", "tasks": 1, "inputs": []},
            {"id": "spout", "kind": "spout", "tasks": 1, "inputs": []},
            {"id": "split", "kind": "bolt", "tasks": 2,
             "inputs": [{"component": "spout", "stream": "default", "grouping": "shuffle"}]},
        ],
        "executors": ex,
        "errors": errors or {"spout": [], "split": []},
        "supervisors": {"sup-1": {"host": "h1", "logviewer_port": 8000}},
        "worker_restarts": [list(r) for r in restarts],
    }


def details(**kw) -> TopologyDetails:
    return TopologyDetails.from_wire(details_wire(**kw))


def cluster_info_wire() -> dict:
    return {"nimbus_uptime_secs": 3725, "nimbus_version": "0.1.0",
            "supervisors": [{"id": "sup-1", "host": "h1", "slots": 4, "used": 1, "ports": [6700, 6701, 6702, 6703],
                             "uptime_secs": 100, "version": "0.1.0", "logviewer_port": 8000,
                             "worker_restarts": []}],
            "topologies": [{"name": "wc", "id": "wc-1-1000", "status": "active", "num_tasks": 4, "num_workers": 1,
                            "num_executors": 4, "uptime_secs": 65, "owner": "", "requested_workers": 1,
                            "slots": [["sup-1", 6700]]}]}


def cluster_info() -> ClusterInfo:
    return ClusterInfo.from_wire(cluster_info_wire())


# ---------------------------------------------------------------- formats
def test_formats_are_storms():
    assert fmt.pretty_uptime(0) == "0s"
    assert fmt.pretty_uptime(233) == "3m 53s"
    assert fmt.pretty_uptime(106210) == "1d 5h 30m 10s"
    assert fmt.pretty_uptime(3600) == "1h 0m 0s"
    assert fmt.fixed3(None) == "0.000" and fmt.fixed3(4.8) == "4.800"
    assert fmt.executor_name((2, 2)) == "[2, 2]" and fmt.encoded("[2, 2]") == "%5B2%2C+2%5D"
    assert fmt.storm_version("0.1.0") == "0.1.0" and fmt.storm_version("2.1") == "2.1.0"
    assert fmt.storm_version(None) == "0.0.0" and fmt.storm_version("unknown") == "0.0.0"
    assert len(fmt.storm_version("7").split(".")) >= 3
    assert fmt.log_link("h1", 8000, "wc-1-1000", 6700) == "http://h1:8000/log?file=wc-1-1000%2F6700%2Fworker.log"
    assert fmt.log_link("h1", None, "wc-1-1000", 6700) == ""


# ---------------------------------------------------------------- shapes and values
def test_every_answer_has_the_fixture_shape():
    info = cluster_info()
    d = details()
    assert_shape("cluster-summary", views.cluster_summary(info))
    assert_shape("nimbus-summary", views.nimbus_summary(info, "h0", 6627, 8000))
    assert_shape("supervisor-summary", views.supervisor_summary(info))
    assert_shape("supervisor-detail", views.supervisor_detail(info.supervisors[0], [d]))
    assert_shape("topology-summary", views.topology_summary(info))
    assert_shape("topology-detail", views.topology_detail(d))
    assert_shape("component-detail", views.component_detail(d, "split"))
    assert_shape("topology-visualization", views.visualization(d, include_sys=True))


def test_the_shape_check_catches_a_wrong_type_and_a_missing_field():
    assert shape_problems({"a": 1, "b": {"c": "x"}}, {"a": 1.0, "b": {}}) == \
        ["a: expected int, got float 1.0", "b.c: missing"]
    assert shape_problems({"l": [{"x": "1"}]}, {"l": [{"x": "1"}, {"x": 2}]}) == ["l[1].x: expected str, got int 2"]
    assert shape_problems({"n": None}, {"n": 5}) == []


def test_topology_figures_per_window_and_sys():
    d = details()
    answer = views.topology_detail(d)
    assert [w["window"] for w in answer["topologyStats"]] == list(WINDOWS)
    assert [w["windowPretty"] for w in answer["topologyStats"]] == ["10m 0s", "3h 0m 0s", "1d 0h 0m 0s", "All time"]
    all_time = answer["topologyStats"][3]
    # emitted: spout 100 + two split executors 360 each (system streams left out)
    assert all_time["emitted"] == 100 + 2 * 360 and all_time["acked"] == 90 and all_time["failed"] == 3
    assert all_time["completeLatency"] == "9.000"
    assert [b["boltId"] for b in answer["bolts"]] == ["split"]
    split = answer["bolts"][0]
    assert split["executed"] == 180 and split["executeLatency"] == "0.500" and split["capacity"] == "0.000"
    with_sys = views.topology_detail(d, include_sys=True)
    assert [b["boltId"] for b in with_sys["bolts"]] == ["__acker", "split"]
    assert with_sys["spouts"][0]["emitted"] == 200  # __ack_init counted with sys=1
    assert answer["workers"][0]["componentNumTasks"] == {"__acker": 1, "spout": 1, "split": 2}
    assert answer["workers"][0]["workerLogLink"].startswith("http://h1:8000/log?file=wc-1-1000%2F6700")
    assert answer["workers"][0]["pid"] == 4242  # storm-py's, beside Storm's fields


def test_spouts_and_bolts_have_per_second_rates_as_monitor_computes_them():
    def record(component, kind, secs, counters):
        wins = {**_windows({k: 10 * v for k, v in counters.items()}, 6000.0), "600": (secs, counters)}
        return to_wire(ExecutorStats(component, kind, 60, wins))
    spout = record("spout", "spout", 300.0, {"emitted|default": 3000, "emitted|__ack_init": 3000,
                                              "acked|default": 1500})
    d = details(spout=spout, split=record("split", "bolt", 120.0, {
        "emitted|default": 2400, "executed|spout:default": 600, "acked|spout:default": 600,
        "execute_ms_sum|spout:default": 60.0, "execute_count|spout:default": 600}))
    answer = views.topology_detail(d)
    row = answer["spouts"][0]
    # over the last 10 minutes (the executor's 600 window covers 300 s), system streams left out
    assert (row["emittedPerSec"], row["ackedPerSec"]) == (10.0, 5.0)
    assert row["emitted"] == 30000  # the counts stay the chosen window's (all time)
    split = answer["bolts"][0]
    # two executors, each its own window: 2400/120 s + 360/600 s (bolt_record's figures)
    assert split["emittedPerSec"] == pytest.approx(20.0 + 360 / 600)
    assert split["executedPerSec"] == pytest.approx(5.0 + 90 / 600)
    assert split["ackedPerSec"] == pytest.approx(5.0 + 90 / 600)
    # the same function as storm-py monitor's throughput (thousands a second)
    assert fmt.per_second(3000, 300.0) == 10.0 and fmt.per_second(5, 0.0) == 0.0
    assert monitor_line("wc", "spout", 1, "default", 4000, 40000).endswith("\t40000\t10.000")
    assert_shape("topology-detail", answer)


def test_component_answer_per_stream_and_executor():
    d = details()
    bolt = views.component_detail(d, "split", window="600")
    assert bolt["componentType"] == "bolt" and bolt["executors"] == 2 and bolt["window"] == "600"
    assert bolt["inputStats"] == [{"component": "spout", "encodedComponent": "spout", "stream": "default",
                                   "executeLatency": "0.500", "processLatency": "0.500", "executed": 180,
                                   "acked": 180, "failed": 0}]
    assert bolt["outputStats"] == [{"stream": "default", "emitted": 720, "transferred": 720}]
    assert [e["id"] for e in bolt["executorStats"]] == ["[3, 3]", "[4, 4]"]
    spout = views.component_detail(d, "spout")
    assert spout["componentType"] == "spout" and len(spout["spoutSummary"]) == 4
    assert spout["outputStats"][0]["completeLatency"] == "9.000"
    assert views.component_detail(d, "nope") is None


def test_the_ackers_page_counts_the_system_streams_it_works_on_as_its_capacity_does():
    acker = {"executed|spout:__ack_init": 300, "execute_ms_sum|spout:__ack_init": 60_000.0,
             "execute_count|spout:__ack_init": 300, "emitted|__ack_ack": 300, "transferred|__ack_ack": 300}
    wire = details_wire()
    wire["executors"][0]["stats"] = to_wire(ExecutorStats("__acker", "acker", 60, _windows(acker)))
    page = views.component_detail(TopologyDetails.from_wire(wire), "__acker")
    ten_min = next(b for b in page["boltStats"] if b["window"] == "600")
    assert ten_min["executed"] == 300 and float(ten_min["capacity"]) > 0, ten_min
    assert page["outputStats"] == [{"stream": "__ack_ack", "emitted": 300, "transferred": 300}]


def test_log_links_of_a_logviewer_serving_https_only_are_https():
    from daemons.https_server import served_port

    wire = details_wire(errors={"split": [{"error": "boom", "time_secs": 1060, "host": "h1", "port": 6700}]})
    https_only = {"logviewer.port": 8000, "logviewer.https.port": 8443, "logviewer.disable.http.binding": True}
    port, https = served_port(https_only, "logviewer")
    assert (port, https) == (8443, True) and served_port({"logviewer.port": 8000}, "logviewer") == (8000, False)
    wire["supervisors"] = {"sup-1": {"host": "h1", "logviewer_port": port, "logviewer_https": https}}
    d = TopologyDetails.from_wire(wire)
    assert views.workers(d)[0]["workerLogLink"].startswith("https://h1:8443/log?file=wc-1-1000%2F6700")
    assert views.component_detail(d, "split")["componentErrors"][0]["errorWorkerLogLink"].startswith("https://h1:8443/")
    assert views.nimbus_summary(cluster_info(), "h1", 6627, 8443, True)["nimbuses"][0]["nimbusLogLink"].startswith(
        "https://h1:8443/daemonlog")


def test_errors_show_as_storm_shows_them():
    d = details(errors={"split": [{"error": "boom", "time_secs": 1060, "host": "h1", "port": 6700}], "spout": []})
    bolt = next(b for b in views.topology_detail(d)["bolts"] if b["boltId"] == "split")
    assert bolt["lastError"] == "boom" and bolt["errorHost"] == "h1" and bolt["errorPort"] == "6700"
    assert bolt["errorLapsedSecs"] == 5 and "6700%2Fworker.log" in bolt["errorWorkerLogLink"]
    comp = views.component_detail(d, "split")
    assert comp["componentErrors"][0]["errorTime"] == 1060 * 1000


def test_a_garbage_stats_record_is_left_out_not_an_error():
    d = details(split=["garbage"])
    answer = views.topology_detail(d)
    assert next(b for b in answer["bolts"] if b["boltId"] == "split")["executed"] == 90  # the other executor


def test_visualization_has_subscriptions_and_the_ackers_streams():
    vis = views.visualization(details(), include_sys=True)
    assert vis["split"][":inputs"] == [{":component": "spout", ":stream": "default", ":sani-stream": "default",
                                        ":grouping": "shuffle"}]
    acker_streams = {(i[":component"], i[":stream"]) for i in vis["__acker"][":inputs"]}
    assert ("spout", "__ack_init") in acker_streams and ("split", "__ack_ack") in acker_streams
    assert "__acker" not in views.visualization(details())


def test_nimbus_topology_info_is_the_same_merge_of_the_same_details():
    d = details(errors={"split": [{"error": "boom", "time_secs": 1060, "host": "h1", "port": 6700}], "spout": []})
    info = info_from_details(d).to_wire()
    assert TopologyInfo.from_wire(info).to_wire() == info
    by_id = {c["id"]: c for c in info["components"]}
    assert (info["name"], info["num_workers"]) == ("wc", 1)
    assert by_id["split"]["executed"] == 180 and by_id["split"]["kind"] == "bolt"
    assert by_id["split"]["last_error"]["error"] == "boom" and by_id["spout"]["last_error"] is None
    assert by_id["spout"]["emitted"] == 200 and by_id["spout"]["complete_latency_ms"] == 9.0  # sys streams in
    assert [e["executor"] for e in by_id["split"]["executors"]] == [[3, 3], [4, 4]]


# ---------------------------------------------------------------- diagnosis
def test_a_healthy_topology_has_no_diagnosis():
    assert views.diagnosis(details()) == []


def test_a_deactivated_topology_says_so():
    assert any("deactivated" in r for r in views.diagnosis(details(status="inactive")))


def test_a_topology_stopped_for_a_swap_says_so():
    wire = {**details_wire(status="inactive"), "note": "swap in progress: its spouts stop at a checkpoint"}
    reasons = views.diagnosis(TopologyDetails.from_wire(wire))
    assert "spouts are inactive: topology wc: swap in progress: its spouts stop at a checkpoint" in reasons
    assert not any("storm-py activate" in r for r in reasons)


def test_max_pending_is_named_with_its_setting():
    reasons = views.diagnosis(details(spout=spout_record(pending=50), conf={"topology.max.spout.pending": 50}))
    assert any("max pending" in r and "topology.max.spout.pending = 50" in r for r in reasons)


def test_a_learned_max_pending_is_named_with_its_bound_and_setting():
    # the key unset: the spout executors report the bound they learned (executor/pending_bound.py)
    def spout_at(pending, bound):
        return to_wire(ExecutorStats("spout", "spout", 60, _windows({}), pending=pending, extra={"pending_bound": bound}))

    def reasons(pending, bound):
        return views.diagnosis(details(spout=spout_at(pending, bound), conf={"topology.spout.pending.latency.ms": 10}))

    assert any(r.startswith("spout spout is at max pending: 250 tuple trees wait for acks (a bound of 250 learned")
               and "topology.spout.pending.latency.ms = 10" in r for r in reasons(250, 250)), reasons(250, 250)
    assert not any("max pending" in r for r in reasons(249, 250))
    assert not any("max pending" in r for r in views.diagnosis(details(spout=spout_record(pending=10**6))))


def test_back_pressure_names_the_saturated_bolt():
    reasons = views.diagnosis(details(spout=spout_record(backpressure=True),
                                      split=bolt_record(queue_population=1024, queue_capacity=1024)))
    assert any("back-pressure from split" in r for r in reasons)


def with_checkpoints(extra: dict, conf: dict | None = None) -> TopologyDetails:
    """`details_wire` with a checkpoint spout reporting `extra` (its gauges)."""
    return TopologyDetails.from_wire(checkpoints_wire(extra, conf))


def checkpoints_wire(extra: dict, conf: dict | None = None) -> dict:
    d = details_wire(conf=conf)
    d["components"].append({"id": "$checkpointspout", "kind": "spout", "tasks": 1, "inputs": []})
    d["executors"].append({"executor": [6, 6], "component": "$checkpointspout", "node": "sup-1", "host": "h1",
                           "port": 6700, "start_time_secs": 1000, "alive": True, "uptime_secs": 60,
                           "stats": to_wire(ExecutorStats("$checkpointspout", "spout", 60, _windows({}),
                                                          extra=extra))})
    d["errors"]["$checkpointspout"] = []
    return d


def test_checkpoints_that_stopped_committing_are_named_with_why():
    # now_secs 1065 (details_wire): a commit 5 s ago is fine, one 60 s ago is a stall
    fresh = {"last_committed_txid": 40, "last_committed_at": 1060.0, "commits": 40, "rollbacks": 1, "recovering": 0}
    assert views.diagnosis(with_checkpoints(fresh)) == []
    stuck = {**fresh, "last_committed_at": 1005.0, "rollbacks": 7, "recovering": 1}
    reasons = views.diagnosis(with_checkpoints(stuck))
    assert any("checkpoints of topology wc have not committed for 60 s (the last was txid 40; 7 rollback(s))" in r
               and "keeps rolling back" in r for r in reasons), reasons
    waiting = {**stuck, "recovering": 0}
    assert any("a checkpoint step is not completing" in r for r in views.diagnosis(with_checkpoints(waiting)))
    never = {"last_committed_txid": None, "last_committed_at": None, "commits": 0, "rollbacks": 3, "recovering": 1}
    assert any("have not committed for 65 s (none yet; 3 rollback(s))" in r
               for r in views.diagnosis(with_checkpoints(never)))
    # a long interval raises the bar: ten intervals
    assert views.diagnosis(with_checkpoints(stuck, {"topology.state.checkpoint.interval.ms": 10_000})) == []


def test_the_checkpoints_table_has_the_bolts_longest_alignment():
    fresh = {"last_committed_txid": 40, "last_committed_at": 1060.0, "commits": 40, "rollbacks": 0, "recovering": 0}
    d = checkpoints_wire(fresh)
    before = views.checkpoints(TopologyDetails.from_wire(d), 1065.0)
    assert before["alignmentMs"] is None and before["alignmentMaxMs"] is None  # no bolt aligned yet
    bolts = [e for e in d["executors"] if e["component"] != "$checkpointspout"
             and any(c["id"] == e["component"] and c["kind"] == "bolt" for c in d["components"])]
    assert len(bolts) >= 2
    for e, (last, most) in zip(bolts, [(2.5, 40.0), (7.25, 12.0)]):
        e["stats"] = to_wire(ExecutorStats(e["component"], "bolt", 60, _windows({}),
                                           extra={"checkpoint_alignment_ms": last, "checkpoint_alignment_max_ms": most}))
    got = views.checkpoints(TopologyDetails.from_wire(d), 1065.0)
    assert (got["alignmentMs"], got["alignmentMaxMs"]) == (7.25, 40.0)


def test_the_checkpoints_table_sums_the_bolts_alignment_buckets_and_reads_their_p99():
    fresh = {"last_committed_txid": 40, "last_committed_at": 1060.0, "commits": 40, "rollbacks": 0, "recovering": 0}
    d = checkpoints_wire(fresh)
    bolts = [e for e in d["executors"] if e["component"] != "$checkpointspout"
             and any(c["id"] == e["component"] and c["kind"] == "bolt" for c in d["components"])]
    # 150 + 50 alignments: 198 within 50 ms, the two others 300 and 3,000 ms
    for e, took in zip(bolts, [[0.5] * 150, [40.0] * 48 + [300.0, 3000.0]]):
        counts = [0] * len(ALIGNMENT_BOUNDS_MS)
        for ms in took:
            alignment_buckets(counts, ms)
        total = len(took)
        extra = {"checkpoint_alignment_ms": 1.0, "checkpoint_alignment_max_ms": 3000.0,
                 "checkpoint_alignment_count": total, "checkpoint_alignment_sum_ms": 10.0,
                 **{f"checkpoint_alignment_le_{b}": n for b, n in zip(ALIGNMENT_BOUNDS_MS, counts)}}
        e["stats"] = to_wire(ExecutorStats(e["component"], "bolt", 60, _windows({}), extra=extra))
    got = views.checkpoints(TopologyDetails.from_wire(d), 1065.0)
    assert got["alignments"] == 200 and got["alignmentSumMs"] == 20.0
    assert got["alignmentBucketsMs"]["50"] == 198 and got["alignmentBucketsMs"]["250"] == 198
    assert got["alignmentBucketsMs"]["500"] == 199 and got["alignmentBucketsMs"]["5000"] == 200
    assert got["alignmentP99Ms"] == 50.0  # 198 of 200 within 50 ms: the 99th percentile's bucket


def with_count(d: dict, count_queue: tuple[int, int]) -> TopologyDetails:
    """`details_wire` with a count bolt fed by split (fields grouping), its receive queue as given."""
    d["components"].append({"id": "count", "kind": "bolt", "tasks": 1,
                            "inputs": [{"component": "split", "stream": "default", "grouping": "fields"}]})
    d["executors"].append({"executor": [5, 5], "component": "count", "node": "sup-1", "host": "h1", "port": 6700,
                           "start_time_secs": 1000, "alive": True, "uptime_secs": 60,
                           "stats": bolt_record("count", queue_population=count_queue[0],
                                                queue_capacity=count_queue[1])})
    d["errors"]["count"] = []
    return TopologyDetails.from_wire(d)


def test_back_pressure_on_a_bolt_blames_its_full_consumer_not_the_bolt():
    # split's own output is blocked (its flag) because count's queue is full; split's queue is empty
    d = with_count(details_wire(spout=spout_record(backpressure=True),
                           split=bolt_record(backpressure=True, queue_population=0, queue_capacity=65536)),
                   count_queue=(60000, 65536))
    reasons = views.diagnosis(d)
    assert not any("bolt split is saturated" in r for r in reasons), reasons
    assert any(r.startswith("bolt count is saturated: its receive queue holds 60000 of 65536") and "split" in r
               for r in reasons), reasons
    assert any("spout spout is held by back-pressure from count" in r for r in reasons), reasons
    graph = views.visualization(d)
    assert graph["count"][":backpressure"] and not graph["split"][":backpressure"]  # the edge into count is red


def test_back_pressure_with_no_queue_seen_full_names_the_fullest_consumer():
    d = with_count(details_wire(split=bolt_record(backpressure=True, queue_population=0, queue_capacity=65536)),
                   count_queue=(1200, 65536))  # sampled between bursts: not 90% full
    reasons = views.diagnosis(d)
    assert any(r.startswith("bolt count is saturated") and "holds back split" in r for r in reasons), reasons
    assert not any("bolt split" in r for r in reasons), reasons


def test_a_spout_mostly_waiting_at_max_pending_over_the_window():
    waited = spout_record(extra={"skipped_ms|max_pending": 500_000})
    assert any("at max pending" in r and "83%" in r for r in views.diagnosis(details(spout=waited)))


def test_executors_without_slot_or_live_worker_and_restarting_workers():
    assert any("have no slot" in r for r in views.diagnosis(details(unassigned=True)))
    assert any("no live worker" in r and "h1:6700" in r for r in views.diagnosis(details(alive=False)))
    assert any("restarted 4 time(s)" in r for r in views.diagnosis(details(restarts=[("sup-1", 6700, 4)])))


# ---------------------------------------------------------------- Prometheus
def _parsed(fams) -> dict:
    registry = CollectorRegistry(auto_describe=False)

    class Fixed:
        def collect(self):
            return fams

    registry.register(Fixed())
    text = generate_latest(registry).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_have_every_family_with_its_labels():
    fams = _parsed(metrics.families(cluster_info(), [details(restarts=[("sup-1", 6700, 2)])]))
    for name in PROMETHEUS_FAMILIES:
        assert name in fams, name
    emitted = {(s.labels["component"], s.labels["stream"]): s.value for s in fams["storm_component_emitted"].samples
               if s.name.endswith("_total")}
    assert emitted[("split", "default")] == 720 and ("spout", "__ack_init") not in emitted
    status = fams["storm_topology_status"].samples[0]
    assert status.labels == {"topology": "wc", "status": "ACTIVE"} and status.value == 1
    restarts = [s for s in fams["storm_worker_restarts"].samples if s.name.endswith("_total")]
    assert restarts[0].labels == {"topology": "wc", "host": "h1", "port": "6700"} and restarts[0].value == 2


def test_metrics_of_the_acker_count_what_it_did_as_its_capacity_does():
    # The acker's inputs are all system streams (__ack_init, __ack_ack as one): its executed,
    # acked and latency must count them, as its capacity (time executing / window) does.
    counters = {"executed|__system:__ack": 3000, "acked|__system:__ack": 3000,
                "execute_count|__system:__ack": 3000, "execute_ms_sum|__system:__ack": 52_200.0}
    acker = to_wire(ExecutorStats("__acker", "acker", 600, _windows(counters)))
    d = details_wire()
    d["executors"][0]["stats"] = acker
    fams = _parsed(metrics.families(cluster_info(), [TopologyDetails.from_wire(d)]))

    def value(family):
        return next(s.value for s in fams[family].samples
                    if s.labels.get("component") == "__acker" and not s.name.endswith("_created"))
    assert value("storm_component_capacity") == pytest.approx(0.087)
    assert value("storm_component_executed") == 3000 and value("storm_component_acked") == 3000
    assert value("storm_component_execute_latency_ms") == pytest.approx(17.4)
    # capacity = executed x execute latency / window
    assert value("storm_component_capacity") == pytest.approx(
        value("storm_component_executed") * value("storm_component_execute_latency_ms") / 600_000)
    # An ordinary bolt's figures still leave system streams out.
    emitted = {(s.labels["component"], s.labels["stream"]) for s in fams["storm_component_emitted"].samples}
    assert ("spout", "__ack_init") not in emitted


def test_metrics_when_nimbus_is_down_say_only_that():
    fams = _parsed(metrics.families(None, []))
    assert list(fams) == ["storm_nimbus_up"] and fams["storm_nimbus_up"].samples[0].value == 0


def test_visualization_places_each_node_in_a_layer():
    vis = views.visualization(details(), include_sys=True)
    assert (vis["spout"][":layer"], vis["spout"][":row"]) == (0, 0)
    assert vis["split"][":layer"] == 1 and vis["__acker"][":layer"] == 2


def test_supervisor_detail_lists_every_slot_with_its_restarts():
    sup = replace(cluster_info().supervisors[0], worker_restarts=(("wc-1-1000", 6700, 3),))
    slots = views.supervisor_detail(sup, [details()])["slots"]
    assert [s["port"] for s in slots] == [6700, 6701, 6702, 6703]
    assert slots[0] == {"port": 6700, "used": True, "topologyId": "wc-1-1000", "topologyName": "wc", "restarts": 3}
    assert slots[1] == {"port": 6701, "used": False, "topologyId": "", "topologyName": "", "restarts": 0}


def test_component_answer_shows_the_workers_that_died_on_its_slots():
    d = details_wire()
    death = {"supervisor": "sup-1", "host": "h1", "port": 6700, "time_secs": 1060, "reason": "worker w1 on port 6700 exited",
             "exit_code": None, "signal": "SIGKILL", "error_line": "", "log_tail": "last words\n"}
    elsewhere = dict(death, port=6701)
    d["worker_deaths"] = [death, elsewhere]
    dead = views.component_detail(TopologyDetails.from_wire(d), "split")["deadWorkers"]
    assert dead == [{"host": "h1", "port": 6700, "supervisorId": "sup-1", "timeSecs": 1060, "lapsedSecs": 5,
                     "reason": "worker w1 on port 6700 exited", "exitCode": None, "signal": "SIGKILL",
                     "errorLine": "", "logTail": "last words\n",
                     "workerLogLink": "http://h1:8000/log?file=wc-1-1000%2F6700%2Fworker.log"}]
    assert views.component_detail(details(), "split")["deadWorkers"] == []


def _with_checkpoints(extra: dict | None) -> TopologyDetails:
    d = details_wire()
    d["components"].append({"id": "$checkpointspout", "kind": "spout", "tasks": 1, "inputs": []})
    rec = ExecutorStats("$checkpointspout", "spout", 60, _windows({"emitted|$checkpoint": 40}), extra=extra or {})
    d["executors"].append({"executor": [5, 5], "component": "$checkpointspout", "stats": to_wire(rec), "node": "sup-1",
                           "host": "h1", "port": 6700, "start_time_secs": 1000, "alive": True, "uptime_secs": 60})
    return TopologyDetails.from_wire(d)


def test_checkpoints_of_a_topology_with_state_on_the_page_and_in_metrics():
    import time

    d = _with_checkpoints({"last_committed_txid": 41, "last_committed_at": time.time() - 2.0, "commits": 42,
                           "commit_latency_ms": 12.5, "commit_latency_max_ms": 80.0, "rollbacks": 1,
                           "recovering": 0})
    t = views.topology_detail(d)
    cp = t["checkpoints"]
    assert cp["lastCommittedTxid"] == 41 and cp["commits"] == 42 and cp["rollbacks"] == 1
    assert 1.0 <= cp["lastCommitAgeSecs"] < 60 and cp["commitLatencyMs"] == 12.5 and cp["recovering"] is False
    # a system component: hidden unless sys=1, as the acker
    assert [s["spoutId"] for s in t["spouts"]] == ["spout"]
    assert "$checkpointspout" in [s["spoutId"] for s in views.topology_detail(d, include_sys=True)["spouts"]]
    fams = _parsed(metrics.families(cluster_info(), [d]))
    assert [s.value for s in fams["storm_checkpoint_last_committed_txid"].samples] == [41]
    assert [s.value for s in fams["storm_checkpoint_rollbacks"].samples if s.name.endswith("_total")] == [1]


def test_checkpoints_before_the_first_commit_and_without_state():
    cp = views.topology_detail(_with_checkpoints(None))["checkpoints"]
    assert cp["lastCommittedTxid"] is None and cp["lastCommitAgeSecs"] is None and cp["commits"] == 0
    assert cp["startedFromSavepoint"] is None
    swapped = TopologyDetails.from_wire(checkpoints_wire({}, {"topology.state.savepoint": "20261129T120000-tx7"}))
    assert views.topology_detail(swapped)["checkpoints"]["startedFromSavepoint"] == "20261129T120000-tx7"
    assert views.topology_detail(details())["checkpoints"] is None



def test_windowed_bolts_on_the_page_and_in_metrics():
    wire = details_wire()
    # two executors of the windowed bolt "split", their gauges added up
    for ex, (events, late) in zip([e for e in wire["executors"] if e["component"] == "split"], [(30, 2), (12, 5)]):
        rec = ExecutorStats("split", "bolt", 60, _windows({"executed|spout:default": 10}),
                            extra={"window_events": events, "window_late_tuples": late})
        ex["stats"] = to_wire(rec)
    d = TopologyDetails.from_wire(wire)
    t = views.topology_detail(d)
    assert t["windows"] == [{"componentId": "split", "eventsInWindow": 42, "lateTuples": 7, "eventsInMemory": None}]
    fams = _parsed(metrics.families(cluster_info(), [d]))
    assert [(s.labels["component"], s.value) for s in fams["storm_window_events"].samples] == [("split", 42)]
    assert [s.value for s in fams["storm_window_late_tuples"].samples if s.name.endswith("_total")] == [7]
    assert views.topology_detail(details())["windows"] is None
