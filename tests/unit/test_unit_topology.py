"""Unit tests for the topology API: builder, declarers, create_topology validation, layout,
topology names, scheduling, Fields and Tuple."""

from __future__ import annotations

import pytest

from daemons.local import validate_topology_name
from executor.api import BasicBolt, Bolt, Fields, InvalidTopologyError, Spout, TopologyBuilder
from executor.components import OutputFieldsDeclarer
from executor.layout import ACKER_COMPONENT, compute_layout, num_ackers
from executor.topology import BoltDeclarer, SpoutDeclarer, StormTopology
from executor.tuple import Tuple, make_tick

# ---------------------------------------------------------------- components


class WordSpout(Spout):
    def __init__(self, fields=("word",), streams=None):
        self.fields = list(fields)
        self.streams = streams or {}

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)
        for stream, (fields, direct) in self.streams.items():
            declarer.declare(fields, stream=stream, direct=direct)


class PassBolt(Bolt):
    def __init__(self, fields=("word", "count"), streams=None, conf=None):
        self.fields = list(fields)
        self.streams = streams or {}
        self.conf = conf

    def declare_output_fields(self, declarer):
        if self.fields:
            declarer.declare(self.fields)
        for stream, (fields, direct) in self.streams.items():
            declarer.declare(fields, stream=stream, direct=direct)

    def execute(self, tup):
        pass

    def get_component_configuration(self):
        return self.conf


class SinkBasic(BasicBolt):
    def execute(self, tup, collector):
        pass


class ExplodingDeclare(Bolt):
    def declare_output_fields(self, declarer):
        raise RuntimeError("kaboom in declare")

    def execute(self, tup):
        pass


def _err(builder) -> str:
    with pytest.raises(InvalidTopologyError) as info:
        builder.create_topology()
    return str(info.value)


# ---------------------------------------------------------------- valid topologies


def test_valid_topology_with_multiple_streams_per_component():
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(streams={"control": (["cmd"], False), "routed": (["word"], True)}), 2)
    b.set_bolt("split", PassBolt(fields=["word"], streams={"errors": (Fields(["error", "where"]), False)}), 3) \
        .shuffle_grouping("words") \
        .all_grouping("words", stream="control")
    b.set_bolt("direct", PassBolt(fields=[]), 2).direct_grouping("words", stream="routed")
    b.set_bolt("count", PassBolt(), 2).fields_grouping("split", ["word"])
    b.set_bolt("errs", SinkBasic()).global_grouping("split", stream="errors") \
        .partial_key_grouping("split", Fields(["word"])) \
        .local_or_shuffle_grouping("count") \
        .none_grouping("words", "control")
    topo = b.create_topology()
    assert isinstance(topo, StormTopology)
    assert set(topo.spouts) == {"words"}
    assert set(topo.bolts) == {"split", "direct", "count", "errs"}
    assert topo.stream_fields("words", "control") == ["cmd"]
    assert topo.stream_fields("split", "errors") == Fields(["error", "where"])
    assert topo.components["words"].streams["routed"].direct is True
    assert topo.components["words"].streams["default"].direct is False
    assert [(c, g.kind) for c, g in topo.consumers("words", "control")] == [("split", "all"), ("errs", "none")]
    assert [(c, g.kind) for c, g in topo.consumers("split", "default")] == [("count", "fields"),
                                                                          ("errs", "partial_key")]
    assert topo.consumers("split", "default")[0][1].fields == Fields(["word"])
    assert topo.consumers("count", "nothing-here") == []


def test_self_subscription_and_cycles_are_allowed():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("a", PassBolt(fields=["word"])).shuffle_grouping("s").shuffle_grouping("b")
    b.set_bolt("b", PassBolt(fields=["word"])).shuffle_grouping("a").shuffle_grouping("b")
    b.create_topology()


def test_custom_grouping_needs_choose_tasks():
    class Good:
        def prepare(self, context, stream, targets):
            pass

        def choose_tasks(self, task, values):
            return []

    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("ok", PassBolt()).custom_grouping("s", Good())
    b.create_topology()

    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("bad", PassBolt()).custom_grouping("s", object())
    msg = _err(b)
    assert "'bad'" in msg and "choose_tasks" in msg


# ---------------------------------------------------------------- chainable declarers


def test_bolt_declarer_methods_are_chainable():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout(streams={"d": (["word"], True)}))
    d = b.set_bolt("x", PassBolt())
    assert isinstance(d, BoltDeclarer)
    calls = [
        lambda: d.shuffle_grouping("s"),
        lambda: d.fields_grouping("s", ["word"]),
        lambda: d.all_grouping("s"),
        lambda: d.global_grouping("s"),
        lambda: d.none_grouping("s"),
        lambda: d.direct_grouping("s", stream="d"),
        lambda: d.local_or_shuffle_grouping("s"),
        lambda: d.partial_key_grouping("s", Fields(["word"])),
        lambda: d.custom_grouping("s", type("G", (), {"choose_tasks": lambda self, t, v: []})()),
        lambda: d.set_num_tasks(2),
        lambda: d.add_configuration("topology.debug", True),
        lambda: d.add_configurations({"topology.max.spout.pending": 5}),
    ]
    for call in calls:
        assert call() is d
    # a full chain in one expression
    assert d.shuffle_grouping("s").set_num_tasks(4).add_configuration("my.key", 1) is d
    topo = b.create_topology()
    spec = topo.components["x"]
    assert spec.num_tasks == 4 and spec.conf["my.key"] == 1 and spec.conf["topology.debug"] is True
    assert len(spec.inputs) == 10


def test_spout_declarer_methods_are_chainable():
    b = TopologyBuilder()
    d = b.set_spout("s", WordSpout(), 2)
    assert isinstance(d, SpoutDeclarer)
    assert d.set_num_tasks(4) is d
    assert d.add_configuration("topology.max.spout.pending", 10) is d
    assert d.add_configurations({"topology.debug": False}) is d
    spec = b.create_topology().components["s"]
    assert spec.tasks == 4 and spec.parallelism == 2
    assert spec.conf == {"topology.max.spout.pending": 10, "topology.debug": False}


def test_component_configuration_is_merged_and_declarer_wins():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("x", PassBolt(conf={"topology.tick.tuple.freq.secs": 5, "topology.debug": True})) \
        .shuffle_grouping("s").add_configuration("topology.tick.tuple.freq.secs", 2)
    spec = b.create_topology().components["x"]
    assert spec.conf == {"topology.tick.tuple.freq.secs": 2, "topology.debug": True}


# ---------------------------------------------------------------- plain lists for Fields


def test_plain_list_accepted_wherever_fields_is():
    d = OutputFieldsDeclarer("c")
    d.declare(["a", "b"])
    d.declare(("x",), stream="t")
    assert d.streams["default"] == (Fields(["a", "b"]), False)
    assert d.streams["t"][0] == ["x"]

    b = TopologyBuilder()
    b.set_spout("s", WordSpout(fields=["word", "n"]))
    b.set_bolt("f", PassBolt()).fields_grouping("s", ["word", "n"])
    b.set_bolt("p", PassBolt()).partial_key_grouping("s", ["n"])
    topo = b.create_topology()
    assert topo.consumers("s", "default")[0][1].fields == Fields(["word", "n"])
    assert isinstance(topo.consumers("s", "default")[1][1].fields, Fields)

    t = Tuple([1, 2, 3], 5, "default", "c", Fields(["a", "b", "c"]), None)
    assert t.select(["c", "a"]) == [3, 1]
    assert t.select(Fields(["b"])) == [2]
    assert Fields(["a", "b"]) == ["a", "b"] and Fields(["a", "b"]) == ("a", "b")
    assert Fields(Fields(["a"])) == Fields(["a"])


def test_fields_select_accepts_plain_list_selector():
    assert Fields(["a", "b", "c"]).select(["c", "a"], [1, 2, 3]) == [3, 1]


def test_fields_rejects_bad_names():
    with pytest.raises(TypeError, match="word"):
        Fields("word")
    with pytest.raises(ValueError, match="duplicate"):
        Fields(["a", "a"])
    with pytest.raises(TypeError):
        Fields(["a", ""])
    with pytest.raises(TypeError):
        Fields(["a", 3])
    with pytest.raises(KeyError, match="nope"):
        Fields(["a"]).index("nope")


def test_fields_basics():
    f = Fields(["a", "b", "c"])
    assert len(f) == 3 and list(f) == ["a", "b", "c"] and f[1] == "b"
    assert "b" in f and "z" not in f
    assert f.index("c") == 2
    assert f.select(Fields(["c", "a"]), [1, 2, 3]) == [3, 1]
    assert f.to_list() == ["a", "b", "c"]
    assert hash(f) == hash(Fields(["a", "b", "c"]))
    assert f != Fields(["a", "b"])


def test_tuple_accessors_and_tick():
    t = Tuple(["hello", 3], 7, "default", "split", Fields(["word", "count"]), {5: 6})
    assert t[0] == "hello" and t.get("count") == 3 and len(t) == 2 and list(t) == ["hello", 3]
    assert t.source_task == 7 and t.source_component == "split" and t.source_stream == "default"
    assert t.fields == ["word", "count"]
    assert not t.is_tick()
    assert t.message_id == {5: 6}
    assert t.ack_val == 0
    with pytest.raises(KeyError, match="nope"):
        t.get("nope")
    tick = make_tick(2)
    assert tick.is_tick() and tick.source_component == "__system" and tick.source_stream == "__tick"
    assert tick.values == [2] and tick.message_id == {}
    # a user stream named like the tick stream from a user component is not a tick
    assert not Tuple([1], 3, "__tick", "user", Fields(["x"]), None).is_tick()


# ---------------------------------------------------------------- validation rules


def test_rejects_subscription_to_unknown_component():
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("count", PassBolt()).shuffle_grouping("wrods")
    msg = _err(b)
    assert "'count'" in msg and "'wrods'" in msg and "unknown component" in msg


def test_rejects_subscription_to_unknown_stream():
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(streams={"other": (["x"], False)}))
    b.set_bolt("count", PassBolt()).shuffle_grouping("words", stream="missing")
    msg = _err(b)
    assert "'count'" in msg and "'missing'" in msg and "'words'" in msg
    assert "default" in msg and "other" in msg  # lists what is declared


def test_rejects_subscription_to_component_without_streams():
    b = TopologyBuilder()
    b.set_spout("words", WordSpout())
    b.set_bolt("sink", PassBolt(fields=[])).shuffle_grouping("words")
    b.set_bolt("after", PassBolt()).shuffle_grouping("sink")
    msg = _err(b)
    assert "'after'" in msg and "'sink'" in msg and "'default'" in msg


@pytest.mark.parametrize("method", ["fields_grouping", "partial_key_grouping"])
def test_rejects_fields_grouping_on_undeclared_field(method):
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(fields=["word", "n"]))
    getattr(b.set_bolt("count", PassBolt()), method)("words", ["wrod"])
    msg = _err(b)
    assert "'count'" in msg and "'wrod'" in msg and "'words'" in msg
    assert "word" in msg and "n" in msg


def test_rejects_fields_grouping_on_field_of_other_stream():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout(fields=["word"], streams={"meta": (["tag"], False)}))
    b.set_bolt("x", PassBolt()).fields_grouping("s", ["tag"])  # 'tag' is only on stream 'meta'
    msg = _err(b)
    assert "'tag'" in msg and "'default'" in msg


def test_rejects_fields_grouping_with_no_fields():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("x", PassBolt()).fields_grouping("s", [])
    msg = _err(b)
    assert "'x'" in msg and "at least one field" in msg


def test_rejects_bad_grouping_fields_at_declaration():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    with pytest.raises(InvalidTopologyError, match="'x'"):
        b.set_bolt("x", PassBolt()).fields_grouping("s", "word")  # a string, not a list


@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_rejects_reserved_component_id(kind):
    b = TopologyBuilder()
    if kind == "spout":
        b.set_spout("__mine", WordSpout())
    else:
        b.set_spout("s", WordSpout())
        b.set_bolt("__acker", PassBolt()).shuffle_grouping("s")
    msg = _err(b)
    assert "'__" in msg and "reserved" in msg


def test_rejects_reserved_stream_id():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout(streams={"__tick": (["x"], False)}))
    msg = _err(b)
    assert "'s'" in msg and "'__tick'" in msg


@pytest.mark.parametrize("second", ["spout", "bolt"])
def test_rejects_duplicate_ids(second):
    b = TopologyBuilder()
    b.set_spout("dup", WordSpout())
    if second == "spout":
        b.set_spout("dup", WordSpout())
    else:
        b.set_bolt("dup", PassBolt()).shuffle_grouping("dup")
    msg = _err(b)
    assert "duplicate" in msg and "'dup'" in msg


def test_rejects_empty_component_id():
    b = TopologyBuilder()
    b.set_spout("", WordSpout())
    assert "non-empty" in _err(b)


@pytest.mark.parametrize("parallelism", [0, -1, 1.5, "2", True])
@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_rejects_bad_parallelism(kind, parallelism):
    b = TopologyBuilder()
    if kind == "spout":
        b.set_spout("culprit", WordSpout(), parallelism)
    else:
        b.set_spout("s", WordSpout())
        b.set_bolt("culprit", PassBolt(), parallelism).shuffle_grouping("s")
    msg = _err(b)
    assert "'culprit'" in msg and "parallelism" in msg


@pytest.mark.parametrize("num_tasks", [0, -1, 2.0, "3"])
def test_rejects_bad_num_tasks(num_tasks):
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("culprit", PassBolt()).shuffle_grouping("s").set_num_tasks(num_tasks)
    msg = _err(b)
    assert "'culprit'" in msg and "tasks" in msg


def test_rejects_bool_num_tasks():
    b = TopologyBuilder()
    b.set_spout("culprit", WordSpout()).set_num_tasks(True)
    with pytest.raises(InvalidTopologyError, match="culprit"):
        b.create_topology()


def test_rejects_direct_grouping_on_non_direct_stream():
    b = TopologyBuilder()
    b.set_spout("src", WordSpout())
    b.set_bolt("target", PassBolt()).direct_grouping("src")
    msg = _err(b)
    assert "'target'" in msg and "'src'" in msg and "'default'" in msg and "direct" in msg


@pytest.mark.parametrize("method,args", [
    ("shuffle_grouping", ()), ("fields_grouping", (["word"],)), ("all_grouping", ()),
    ("global_grouping", ()), ("none_grouping", ()), ("local_or_shuffle_grouping", ()),
    ("partial_key_grouping", (["word"],)),
])
def test_rejects_non_direct_grouping_on_direct_stream(method, args):
    b = TopologyBuilder()
    b.set_spout("src", WordSpout(streams={"routed": (["word"], True)}))
    getattr(b.set_bolt("target", PassBolt()), method)("src", *args, stream="routed")
    msg = _err(b)
    assert "'target'" in msg and "'routed'" in msg and "direct" in msg


def test_rejects_declare_output_fields_raising():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("boom", ExplodingDeclare()).shuffle_grouping("s")
    with pytest.raises(InvalidTopologyError) as info:
        b.create_topology()
    msg = str(info.value)
    assert "'boom'" in msg and "RuntimeError" in msg and "kaboom in declare" in msg
    assert isinstance(info.value.__cause__, RuntimeError)


def test_rejects_stream_declared_twice_and_bad_declared_fields():
    b = TopologyBuilder()
    b.set_spout("twice", WordSpout(streams={"default": (["x"], False)}))
    msg = _err(b)
    assert "'twice'" in msg and "'default'" in msg

    b = TopologyBuilder()
    b.set_spout("badfields", WordSpout(fields=["a", "a"]))
    assert "'badfields'" in _err(b)


def test_rejects_components_without_required_methods():
    b = TopologyBuilder()
    b.set_spout("notaspout", object())
    msg = _err(b)
    assert "'notaspout'" in msg and "next_tuple" in msg

    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("notabolt", WordSpout()).shuffle_grouping("s")
    msg = _err(b)
    assert "'notabolt'" in msg and "execute" in msg


def test_rejects_wrongly_typed_component_config():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout())
    b.set_bolt("cfg", PassBolt()).shuffle_grouping("s").add_configuration("topology.tick.tuple.freq.secs", "often")
    msg = _err(b)
    assert "'cfg'" in msg and "topology.tick.tuple.freq.secs" in msg


# ---------------------------------------------------------------- topology names


@pytest.mark.parametrize("name", ["a/b", "a.b", "a:b", "a\\b", "", "   ", None, 3])
def test_validate_topology_name_rejects(name):
    with pytest.raises(InvalidTopologyError):
        validate_topology_name(name)


@pytest.mark.parametrize("bad", ["/", ".", ":", "\\"])
def test_validate_topology_name_names_the_bad_character(bad):
    with pytest.raises(InvalidTopologyError) as info:
        validate_topology_name(f"word{bad}count")
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("name", ["word-count", "wc_1", "Exclamation Topology", "t\u00e9st", "x" * 128])
def test_validate_topology_name_accepts(name):
    validate_topology_name(name)


@pytest.mark.parametrize("name, says", [("x" * 129, "129 bytes long; names have at most 128"),
                                        ("\u00e9" * 65, "130 bytes long"),
                                        ("word\ncount", "control character")])
def test_validate_topology_name_bounds_length_and_lines(name, says):
    with pytest.raises(InvalidTopologyError, match=says):
        validate_topology_name(name)


# ---------------------------------------------------------------- layout


def _layout_topology():
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(), 2)
    b.set_bolt("count", PassBolt(), 3).fields_grouping("words", ["word"])
    b.set_bolt("exclaim", PassBolt(), 2).shuffle_grouping("words").set_num_tasks(5)
    return b.create_topology()


def test_layout_task_ids_in_component_id_order_with_acker_per_worker():
    layout = compute_layout(_layout_topology(), {"topology.acker.executors": None}, num_workers=2)
    assert layout.component_tasks == {
        ACKER_COMPONENT: [1, 2],
        "count": [3, 4, 5],
        "exclaim": [6, 7, 8, 9, 10],
        "words": [11, 12],
    }
    assert layout.acker_tasks == [1, 2]
    assert layout.task_to_component == {t: c for c, ts in layout.component_tasks.items() for t in ts}
    assert layout.executors["exclaim"] == [(6, 8), (9, 10)]  # set_num_tasks: 5 tasks on 2 executors
    assert layout.executors["count"] == [(3, 3), (4, 4), (5, 5)]
    assert layout.executors[ACKER_COMPONENT] == [(1, 1), (2, 2)]
    execs = layout.all_executors()
    assert [e for _c, e in execs] == sorted(e for _c, e in execs)
    assert len(execs) == 2 + 3 + 2 + 2


def test_layout_acker_defaults_to_one_per_worker_when_key_missing():
    layout = compute_layout(_layout_topology(), {}, num_workers=3)
    assert layout.acker_tasks == [1, 2, 3]


def test_layout_zero_ackers():
    layout = compute_layout(_layout_topology(), {"topology.acker.executors": 0}, num_workers=4)
    assert ACKER_COMPONENT not in layout.component_tasks
    assert ACKER_COMPONENT not in layout.executors
    assert layout.acker_tasks == []
    assert layout.component_tasks["count"] == [1, 2, 3]


def test_layout_explicit_acker_count():
    layout = compute_layout(_layout_topology(), {"topology.acker.executors": 3}, num_workers=1)
    assert layout.acker_tasks == [1, 2, 3]
    assert num_ackers({"topology.acker.executors": None}, 5) == 5
    assert num_ackers({"topology.acker.executors": 2}, 5) == 2
    assert num_ackers({}, 1) == 1


def test_layout_parallelism_overrides_executors_not_tasks():
    topo = _layout_topology()
    layout = compute_layout(topo, {"topology.acker.executors": 0}, 1,
                            parallelism={"exclaim": 5, "count": 1, "words": 9})
    assert layout.executors["exclaim"] == [(4, 4), (5, 5), (6, 6), (7, 7), (8, 8)]
    assert layout.executors["count"] == [(1, 3)]
    assert layout.executors["words"] == [(9, 9), (10, 10)]  # never more executors than tasks
    assert layout.component_tasks["exclaim"] == [4, 5, 6, 7, 8]


def test_layout_executors_never_exceed_tasks():
    b = TopologyBuilder()
    b.set_spout("s", WordSpout(), 5).set_num_tasks(3)
    layout = compute_layout(b.create_topology(), {"topology.acker.executors": 0}, 1)
    assert layout.executors["s"] == [(1, 1), (2, 2), (3, 3)]


def test_layout_max_task_parallelism_caps():
    conf = {"topology.acker.executors": 0, "topology.max.task.parallelism": 2}
    layout = compute_layout(_layout_topology(), conf, 1)
    assert layout.component_tasks == {"count": [1, 2], "exclaim": [3, 4], "words": [5, 6]}
    assert layout.executors["exclaim"] == [(3, 3), (4, 4)]




@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_a_class_where_an_instance_belongs_names_the_component_and_the_fix(kind):
    b = TopologyBuilder()
    b.set_spout("words", WordSpout if kind == "spout" else WordSpout())
    if kind == "bolt":
        b.set_bolt("sink", SinkBasic).shuffle_grouping("words")
    with pytest.raises(InvalidTopologyError) as err:
        b.create_topology()
    cls, comp = ("WordSpout", "words") if kind == "spout" else ("SinkBasic", "sink")
    assert str(err.value) == f"{kind} {comp!r}: got the class {cls}; pass an instance: {cls}()"


# ---------------------------------------------------------------- checkpoint wiring by mode


def _sources_topology(stateful_bolt: bool):
    from executor.api import BaseStatefulBolt, RewindableSpout

    class Source(RewindableSpout):
        def declare_output_fields(self, declarer):
            declarer.declare(["word"])

    class Sum(BaseStatefulBolt):
        def init_state(self, state):
            pass

        def execute(self, tup):
            pass

    b = TopologyBuilder()
    b.set_spout("source", Source())
    b.set_spout("plain", WordSpout())
    b.set_bolt("count", Sum() if stateful_bolt else PassBolt(fields=())).shuffle_grouping("source") \
        .shuffle_grouping("plain")
    return b.create_topology()


@pytest.mark.parametrize("stateful_bolt", [False, True])
def test_a_rewindable_spout_is_wired_as_stateful_only_in_exactly_once_mode(stateful_bolt):
    from executor.checkpoint.protocol import CHECKPOINT_COMPONENT, CHECKPOINT_STREAM
    from executor.structure import Grouping, Subscription
    from executor.topology import for_mode

    topology = _sources_topology(stateful_bolt)
    assert topology.components["source"].conf == {"topology.spouts.rewindable": True}
    # Storm's mode: a plain spout (the checkpoint, if any, comes from the checkpoint spout)
    assert for_mode(topology, {}) is topology
    assert (CHECKPOINT_COMPONENT in topology.components) == stateful_bolt
    once = for_mode(topology, {"topology.state.exactly.once": True})
    source, count = once.components["source"], once.components["count"]
    assert source.conf["topology.spouts.stateful"] and CHECKPOINT_STREAM in source.streams
    cp = [s for s in count.inputs if s.stream == CHECKPOINT_STREAM]
    assert cp == [Subscription("source", CHECKPOINT_STREAM, Grouping("all")),
                  Subscription(CHECKPOINT_COMPONENT, CHECKPOINT_STREAM, Grouping("all"))]
    assert count.inputs[:2] == topology.components["count"].inputs[:2]  # the user's first, in place
    assert CHECKPOINT_COMPONENT in once.objs and CHECKPOINT_COMPONENT in once.components
    again = for_mode(once, {"topology.state.exactly.once": True})
    assert again is once  # idempotent: Nimbus and every worker wire it the same
    from executor.checkpoint.wiring import for_mode as structure_for_mode

    assert structure_for_mode(topology.structure, {"topology.state.exactly.once": True}) == once.structure


def test_exactly_once_names_the_spouts_that_cannot_rewind():
    from executor.submit_rules import check_topology
    from executor.topology import for_mode

    conf = {"topology.state.exactly.once": True}
    topology = for_mode(_sources_topology(True), conf)
    with pytest.raises(InvalidTopologyError, match="RewindableSpout.*not: 'plain'"):
        check_topology(topology.structure, conf)
