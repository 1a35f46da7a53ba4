"""The word count `storm-py swap` is tested on (tests/devcluster/test_swap.py): a stateful spout
emitting numbered sentences 1..`swap.n` (paced at `swap.rate` a second), a split whose rule the
files differ in, a stateful count keyed by word, and the Spark table of (n, word, count): each
row says which sentence it came from and which count of its word it was."""

import time

from executor.api import BaseStatefulBolt, BaseStatefulSpout, BasicBolt
from executor.sinks.spark import SparkSinkBolt


def sentence(n: int) -> str:
    return " ".join(f"w{(n * j) % 13}" for j in (1, 2, 3))


class Sentences(BaseStatefulSpout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n", "sentence"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.last = int(conf.get("swap.n", 3000))
        self.rate = float(conf.get("swap.rate", 300)) / len(context.this_component_tasks)
        self.started = time.monotonic()
        self.sent = 0

    def init_state(self, state):
        self.state = state
        self.next = state.get("next", 1)

    def next_tuple(self):
        if self.next > self.last or self.sent >= (time.monotonic() - self.started) * self.rate:
            return
        n = self.next
        self.next += 1
        self.sent += 1
        self.state.put("next", self.next)
        self.collector.emit([n, sentence(n)], msg_id=n)


class Split(BasicBolt):
    """Rule 1: each word once; rule 2: each word twice (a changed rule the table can tell apart)."""

    def __init__(self, rule: int):
        self.rule = rule

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "word"])

    def execute(self, tup, collector):
        n, text = tup.values
        for word in text.split(" "):
            for _ in range(self.rule):
                collector.emit([n, word])


class Count(BaseStatefulBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["n", "word", "count"])

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        n, word = tup.values
        count = self.state.get(word, 0) + 1
        self.state.put(word, count)
        self.collector.emit([n, word, count], anchors=[tup])
        self.collector.ack(tup)


def build(rule: int, count_tasks: int = 2, count_name: str = "count", split_tasks: int = 2, spout_tasks: int = 1):
    from executor.api import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("sentences", Sentences(), spout_tasks)
    b.set_bolt("split", Split(rule), split_tasks).shuffle_grouping("sentences")
    b.set_bolt(count_name, Count(), count_tasks).fields_grouping("split", ["word"])
    b.set_bolt("table", SparkSinkBolt(None, path_key="swap.table", batch_size=2000), 1).shuffle_grouping(count_name)
    return b.create_topology()


CONFIG = {"topology.workers": 2, "topology.state.exactly.once": True, "topology.state.checkpoint.interval.ms": 300,
          "topology.state.provider": "redis"}
