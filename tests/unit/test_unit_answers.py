"""Nimbus's answers typed (daemons/answers/): the wire shape other processes read stays as it
was, and a malformed answer names what it misses."""

from __future__ import annotations

from dataclasses import replace

import msgpack
import pytest
from test_unit_ui_views import cluster_info_wire, details_wire

from daemons.answers.cluster import ClusterInfo, NimbusRow
from daemons.answers.details import TopologyDetails
from daemons.answers.wire import AnswerError

pytestmark = pytest.mark.timeout(30)

DEATH = {"supervisor": "sup-1", "host": "h1", "port": 6700, "time_secs": 1060, "reason": "exited",
         "exit_code": 1, "signal": None, "error_line": "ValueError: x", "log_tail": "Traceback ..."}


def test_topology_details_reads_and_writes_the_same_wire_form():
    wire = {**details_wire(restarts=[("sup-1", 6700, 2)], errors={
        "split": [{"error": "boom", "time_secs": 1060, "host": "h1", "port": 6700}], "spout": []}),
        "worker_deaths": [DEATH]}
    d = TopologyDetails.from_wire(wire)
    assert d.executors[1].executor == (2, 2) and d.components[2].inputs[0].component == "spout"
    assert d.errors["split"][0].port == 6700 and d.worker_deaths[0].error_line == "ValueError: x"
    assert d.supervisors["sup-1"].logviewer_port == 8000 and d.worker_restarts == (("sup-1", 6700, 2),)
    assert d.to_wire() == wire
    assert msgpack.unpackb(msgpack.packb(d.to_wire())) == wire  # plain data, string keys


def test_cluster_info_reads_and_writes_the_same_wire_form():
    wire = cluster_info_wire()
    wire["now_secs"] = 1065
    wire["topologies"][0].update(live_workers=1, recent_restarts=2, last_error={
        "time_secs": 1060, "error": "boom", "component": "split", "host": "h1", "port": 6700})
    info = ClusterInfo.from_wire(wire)
    assert info.topologies[0].slots == (("sup-1", 6700),) and info.topologies[0].last_error.component == "split"
    assert info.nimbuses is None and "nimbuses" not in info.to_wire()
    assert info.to_wire() == wire
    row = NimbusRow(host="h0", port=6627, is_leader=True, status="Leader", uptime_secs=5, version="1.0")
    listed = replace(info, nimbuses=(row,)).to_wire()
    assert listed["nimbuses"] == [{"host": "h0", "port": 6627, "is_leader": True, "status": "Leader",
                                   "uptime_secs": 5, "version": "1.0"}]
    assert ClusterInfo.from_wire(listed).nimbuses == (row,)


def test_an_older_answer_without_the_optional_keys_reads_with_their_defaults():
    wire = cluster_info_wire()  # no health figures, no now_secs
    t = ClusterInfo.from_wire(wire).topologies[0]
    assert (t.live_workers, t.recent_restarts, t.last_error) == (None, 0, None)
    d = details_wire()
    for key in ("owner", "supervisors", "worker_restarts", "errors"):
        del d[key]
    got = TopologyDetails.from_wire(d)
    assert (got.owner, got.supervisors, got.worker_restarts, got.worker_deaths, got.errors) == ("", {}, (), (), {})


def test_a_missing_key_is_named_with_where_it_was_looked_for():
    wire = cluster_info_wire()
    del wire["topologies"]
    with pytest.raises(AnswerError, match=r"^cluster_info: no key 'topologies' \(it has nimbus_uptime_secs, "):
        ClusterInfo.from_wire(wire)
    d = details_wire()
    del d["executors"][1]["alive"]
    with pytest.raises(AnswerError, match=r"^topology_details\.executors\[1\]: no key 'alive'"):
        TopologyDetails.from_wire(d)
    d = details_wire()
    d["errors"]["split"] = [{"time_secs": 1}]
    with pytest.raises(AnswerError, match=r"^topology_details\.errors\['split'\]\[0\]: no key 'error'"):
        TopologyDetails.from_wire(d)


def test_a_part_of_the_wrong_form_is_named():
    with pytest.raises(AnswerError, match="^cluster_info: expected a map, got list"):
        ClusterInfo.from_wire([])
    d = details_wire()
    d["executors"] = {"1": {}}
    with pytest.raises(AnswerError, match=r"^topology_details\.executors: expected a list, got dict"):
        TopologyDetails.from_wire(d)
    d = details_wire()
    d["executors"][0]["executor"] = [1]
    with pytest.raises(AnswerError, match=r"^topology_details\.executors\[0\]\.executor: expected a list of 2"):
        TopologyDetails.from_wire(d)
