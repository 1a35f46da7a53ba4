"""The topology bench/swap.py swaps: numbered sentences (a stateful spout, paced at `swap.rate`)
-> split (rule 1: each word once; rule 2: twice) -> a stateful count keyed by word."""

import time

from executor.api import BaseStatefulBolt, BaseStatefulSpout, BasicBolt, TopologyBuilder


class Sentences(BaseStatefulSpout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n", "sentence"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.rate = float(conf.get("swap.rate", 2000)) / len(context.this_component_tasks)
        self.started, self.sent = time.monotonic(), 0

    def init_state(self, state):
        self.state = state
        self.next = state.get("next", 1)

    def next_tuple(self):
        if self.sent >= (time.monotonic() - self.started) * self.rate:
            return
        n, self.next = self.next, self.next + 1
        self.sent += 1
        self.state.put("next", self.next)
        self.collector.emit([n, " ".join(f"w{(n * j) % 101}" for j in (1, 2, 3, 4, 5))], msg_id=n)


class Split(BasicBolt):
    def __init__(self, rule):
        self.rule = rule

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def execute(self, tup, collector):
        for word in tup.values[1].split(" "):
            for _ in range(self.rule):
                collector.emit([word])


class Count(BaseStatefulBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        word = tup.values[0]
        self.state.put(word, self.state.get(word, 0) + 1)


def build(rule):
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences(), 1)
    b.set_bolt("split", Split(rule), 2).shuffle_grouping("sentences")
    b.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    return b.create_topology()


CONFIG = {"topology.workers": 1, "topology.state.exactly.once": True, "topology.state.provider": "redis"}
