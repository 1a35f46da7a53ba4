"""The topology as data: plain-dict round trip and the validation rules on data alone."""

from __future__ import annotations

import copy
import json

import msgpack
import pytest

from executor.api import Bolt, InvalidTopologyError, Spout, TopologyBuilder
from executor.layout import compute_layout
from executor.structure import TopologyStructure, validate_structure


class S(Spout):
    def declare_output_fields(self, d):
        d.declare(["word", "n"])
        d.declare(["x"], stream="direct-out", direct=True)

    def next_tuple(self):
        pass


class B(Bolt):
    def declare_output_fields(self, d):
        d.declare(["word", "count"])

    def execute(self, tup):
        pass


class Modulo:
    def choose_tasks(self, task_id, values):
        return [0]


def _topology():
    b = TopologyBuilder()
    b.set_spout("words", S(), 2).add_configuration("topology.max.spout.pending", 10)
    b.set_bolt("count", B(), 3).set_num_tasks(6).fields_grouping("words", ["word"]) \
        .direct_grouping("words", "direct-out")
    b.set_bolt("all", B()).all_grouping("count").custom_grouping("words", Modulo())
    return b.create_topology()


def _doc():
    return _topology().structure.to_dict()


def test_round_trip_through_json_and_msgpack_is_exact():
    topo = _topology()
    doc = topo.structure.to_dict()
    for blob in (json.loads(json.dumps(doc)), msgpack.unpackb(msgpack.packb(doc), strict_map_key=False)):
        again = TopologyStructure.from_dict(blob)
        assert again == topo.structure
        assert again.to_dict() == doc
        validate_structure(again)
    assert doc["components"]["count"]["inputs"][0] == {"source": "words", "stream": "default",
                                                       "grouping": "fields", "fields": ["word"]}
    assert doc["components"]["all"]["inputs"][1]["grouping"] == "custom"


def test_layout_from_data_equals_layout_from_the_live_topology():
    topo = _topology()
    data = TopologyStructure.from_dict(json.loads(json.dumps(topo.structure.to_dict())))
    conf = {"topology.acker.executors": 1}
    assert compute_layout(data, conf, 2) == compute_layout(topo, conf, 2)


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d["components"]["count"]["inputs"][0].update(source="nope"), "unknown component 'nope'"),
    (lambda d: d["components"]["count"]["inputs"][0].update(stream="zzz"), "stream 'zzz'"),
    (lambda d: d["components"]["count"]["inputs"][0].update(fields=["nope"]), "field 'nope'"),
    (lambda d: d["components"]["count"]["inputs"][0].update(grouping="magic"), "unknown grouping 'magic'"),
    (lambda d: d["components"]["count"]["inputs"][1].update(grouping="shuffle"), "declared direct"),
    (lambda d: d["components"]["count"].update(parallelism=0), "'count': parallelism"),
    (lambda d: d["components"]["count"].update(num_tasks=True), "'count': number of tasks"),
    (lambda d: d["components"]["words"].update(inputs=[{"source": "count", "stream": "default",
                                                         "grouping": "shuffle", "fields": None}]),
     "spout 'words' cannot subscribe"),
    (lambda d: d["components"]["words"].update(kind="sprout"), "kind must be spout or bolt"),
    (lambda d: d["components"].update({"__sys": d["components"]["all"]}), "'__sys'"),
    (lambda d: d["components"]["count"]["conf"].update({"topology.max.spout.pending": "ten"}),
     "topology.max.spout.pending"),
    (lambda d: d["components"]["words"]["streams"].update({"__x": {"fields": [], "direct": False}}), "'__x'"),
])
def test_every_rule_applies_to_data(mutate, needle):
    doc = copy.deepcopy(_doc())
    mutate(doc)
    with pytest.raises(InvalidTopologyError, match=None) as err:
        validate_structure(TopologyStructure.from_dict(doc))
    assert needle in str(err.value)


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.update(version=99), "version 99"),
    (lambda d: d.update(components=[]), "components must be a mapping"),
    (lambda d: d["components"]["count"].update(inputs="x"), "components.count.inputs must be a list"),
    (lambda d: d["components"]["count"]["streams"]["default"].update(fields=[1]),
     "components.count.streams.default.fields[0] must be a string"),
    (lambda d: d["components"]["count"]["inputs"][0].pop("source"), "inputs[0].source must be a string"),
])
def test_malformed_documents_name_the_element(mutate, needle):
    doc = copy.deepcopy(_doc())
    mutate(doc)
    with pytest.raises(InvalidTopologyError) as err:
        TopologyStructure.from_dict(doc, source="manifest of x.zip")
    assert "manifest of x.zip" in str(err.value) and needle in str(err.value)
