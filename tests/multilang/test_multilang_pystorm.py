"""pystorm components, unmodified (pystorm from PyPI), on LocalCluster through ShellSpout and
ShellBolt, with both serializers: a reliable spout whose tuples a bolt fails on purpose (the
replays keep their ids, numbers or strings), auto-anchor and auto-ack, BatchingBolt with tick
tuples, TicklessBatchingBolt, direct emits, need_task_ids both ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from multilang_helpers import COMPONENTS, Shared, SinkBolt
from testutil import wait_until as poll

from daemons.local import LocalCluster
from executor.api import ShellBolt, ShellSpout, TopologyBuilder

pytestmark = [pytest.mark.timeout(120), pytest.mark.cluster]  # subprocess components

SERIALIZERS = ["json", "msgpack"]


def shell(kind, cls: str, serializer: str, outputs):
    return kind(["python3", "features.py", cls, serializer], outputs=outputs, cwd=COMPONENTS)


def records(test_dir: Path, name: str) -> list:
    try:
        lines = (test_dir / name).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines]


def run(builder, conf, until, message):
    with LocalCluster() as cluster:
        cluster.submit_topology("ml", conf, builder.create_topology())
        poll(until, timeout=60, message=message)
        assert cluster.died("ml") == [], "a subprocess was restarted"


def base_conf(serializer, tmp_path, count, **extra):
    return {"topology.multilang.serializer": serializer, "topology.max.spout.pending": 20,
            "test.dir": str(tmp_path), "test.count": count, **extra}


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_a_reliable_spout_sees_its_failed_tuples_replayed_with_the_same_ids(serializer, tmp_path):
    count, string_ids = 40, serializer == "msgpack"
    shared = Shared()
    b = TopologyBuilder()
    b.set_spout("numbers", shell(ShellSpout, "NumberSpout", serializer, ["n"]))
    b.set_bolt("failer", shell(ShellBolt, "FailFirstBolt", serializer, ["n"]), 2).shuffle_grouping("numbers")
    b.set_bolt("pass", shell(ShellBolt, "PassBolt", serializer, ["n"])).shuffle_grouping("failer")
    b.set_bolt("sink", SinkBolt(shared)).shuffle_grouping("pass")
    ids = [f"id-{n}" if string_ids else n for n in range(count)]

    def acked_all():
        return {tup_id for kind, tup_id in records(tmp_path, "spout") if kind == "ack"} >= set(ids)

    run(b, base_conf(serializer, tmp_path, count, **{"test.string_ids": string_ids}), acked_all,
        "every number acked")
    events = records(tmp_path, "spout")
    failed = [tup_id for kind, tup_id in events if kind == "fail"]
    # The ids come back exactly as the spout emitted them (type included), each even one failed
    # once (a bolt may see its replay on the other task: at most twice), then acked once.
    assert sorted(set(failed), key=str) == sorted((i for n, i in enumerate(ids) if n % 2 == 0), key=str)
    assert all(type(i) is (str if string_ids else int) for _k, i in events)
    assert sorted((i for k, i in events if k == "ack"), key=str) == sorted(ids, key=str)
    with shared.lock:
        assert sorted(v for (v,) in shared.seen) == list(range(count))


@pytest.mark.parametrize("serializer", SERIALIZERS)
@pytest.mark.parametrize("batcher", ["SumBatches", "SumTickless"])
def test_batching_bolts_with_and_without_ticks(serializer, batcher, tmp_path):
    count = 60
    shared = Shared()
    b = TopologyBuilder()
    b.set_spout("numbers", shell(ShellSpout, "NumberSpout", serializer, ["n"]))
    bolt = b.set_bolt("batches", shell(ShellBolt, batcher, serializer, ["parity", "sum", "size"])) \
        .shuffle_grouping("numbers")
    if batcher == "SumBatches":
        bolt.add_configuration("topology.tick.tuple.freq.secs", 0.2)
    b.set_bolt("sink", SinkBolt(shared)).shuffle_grouping("batches")

    def summed():
        with shared.lock:
            return sum(size for _p, _s, size in shared.seen) >= count

    run(b, base_conf(serializer, tmp_path, count), summed, "every number in a batch")
    with shared.lock:
        seen = list(shared.seen)
    assert sum(size for _p, _s, size in seen) == count and len(seen) >= 2
    assert sum(s for p, s, _n in seen if p == 0) == sum(range(0, count, 2))
    assert sum(s for p, s, _n in seen if p == 1) == sum(range(1, count, 2))
    acked = [i for kind, i in records(tmp_path, "spout") if kind == "ack"]
    assert sorted(acked) == list(range(count))  # acked through the batches' anchors


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_direct_emits_and_the_task_ids_of_emits(serializer, tmp_path):
    count = 30
    direct, shuffled, defaults = Shared(), Shared(), Shared()
    b = TopologyBuilder()
    b.set_spout("numbers", shell(ShellSpout, "NumberSpout", serializer, ["n"]))
    b.set_bolt("router", shell(ShellBolt, "DirectBolt", serializer,
                               {"direct": {"fields": ["n", "task"], "direct": True},
                                "shuffled": ["n", "task"]})).shuffle_grouping("numbers")
    b.set_bolt("target", SinkTask(direct), 3).direct_grouping("router", "direct")
    b.set_bolt("others", SinkTask(shuffled), 2).shuffle_grouping("router", "shuffled")
    b.set_bolt("storm_style", shell(ShellBolt, "NeedTaskIdsDefault", serializer, ["n"])) \
        .shuffle_grouping("numbers")
    b.set_bolt("after", SinkTask(defaults), 2).shuffle_grouping("storm_style")

    def done():
        with direct.lock, shuffled.lock, defaults.lock:
            return len(direct.seen) >= count and len(shuffled.seen) >= count and len(defaults.seen) >= count

    run(b, {**base_conf(serializer, tmp_path, count), "test.target": "target"}, done, "every emit delivered")
    with direct.lock:
        assert all(task == at for (_n, task, at) in direct.seen)  # each went to the task it named
        assert len({at for (_n, _t, at) in direct.seen}) == 3
    # need_task_ids: the reply names the task each tuple went to
    replies = {n: went for n, went in records(tmp_path, "direct_ids")}
    with shuffled.lock:
        assert all(replies[n] == [at] for n, _task, at in shuffled.seen)
    # ... and absent means true (Storm's default), as components other than pystorm's rely on
    replies = {n: went for n, went in records(tmp_path, "default_ids")}
    with defaults.lock:
        assert sorted(replies) == list(range(count))
        assert all(replies[n] == [at] for (n, at) in defaults.seen)


class SinkTask(SinkBolt):
    """A sink recording its own task id with each input."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.task = context.this_task_id

    def execute(self, tup):
        with self.shared.lock:
            self.shared.seen.append((*tup.values, self.task))
        self.collector.ack(tup)


@pytest.mark.parametrize("serializer", SERIALIZERS)
def test_the_handshake_and_messages_before_the_first_command(serializer, tmp_path):
    shared = Shared()
    b = TopologyBuilder()
    b.set_spout("numbers", shell(ShellSpout, "NumberSpout", serializer, ["n"]))
    b.set_bolt("ctx", shell(ShellBolt, "ContextBolt", serializer, ["n"]), 2).fields_grouping("numbers", ["n"])
    b.set_bolt("sink", SinkBolt(shared)).shuffle_grouping("ctx")

    def done():
        with shared.lock:
            return len(shared.seen) >= 10 + 2

    run(b, base_conf(serializer, tmp_path, 10, **{"test.secret": "x", "nimbus.authentication.secret": "s3"}),
        done, "the numbers and the early emits")
    with shared.lock:
        assert [v for (v,) in shared.seen].count("early") == 2  # one per task, before any tuple
    seen = records(tmp_path, "context")
    assert len(seen) == 2
    tasks = sorted(r["context"]["taskid"] for r in seen)
    for r in seen:
        ctx = r["context"]
        assert ctx["componentid"] == "ctx" and ctx["task->component"][str(ctx["taskid"])] == "ctx"
        assert sorted(int(t) for t, c in ctx["task->component"].items() if c == "ctx") == tasks
        assert ctx["stream->outputfields"] == {"default": ["n"]}
        assert ctx["source->stream->grouping"] == {"numbers": {"default": {"type": "FIELDS", "fields": ["n"]}}}
        assert ctx["stream->target->grouping"] == {"default": {"sink": {"type": "SHUFFLE"}}}
        assert str(r["pid"]) in r["pid_files"]  # the pidDir was writable
        assert r["cwd"] == str(COMPONENTS) and r["count"] == 10
        assert r["secrets"] == []  # the topology conf without its secrets
