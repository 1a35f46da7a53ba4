"""Components of the word-count example (importable by the topology file's directory)."""

from __future__ import annotations

import itertools
import random

from executor.api import BasicBolt, Spout

SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


class RandomSentenceSpout(Spout):
    """Emits random sentences with message ids and replays the ones that fail."""

    def __init__(self, sentences=None, limit=None, seed=None):
        self.sentences = list(sentences or SENTENCES)
        self.limit = limit
        self.seed = seed

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])

    def open(self, conf, context, collector):
        self.collector = collector
        self.rng = random.Random(self.seed)
        self.ids = itertools.count()
        self.in_flight = {}
        self.replay = []
        self.emitted = 0

    def next_tuple(self):
        if self.replay:
            msg_id = self.replay.pop()
            self.collector.emit([self.in_flight[msg_id]], msg_id=msg_id)
            return
        if self.limit is not None and self.emitted >= self.limit:
            return
        sentence = self.rng.choice(self.sentences)
        msg_id = next(self.ids)
        self.in_flight[msg_id] = sentence
        self.emitted += 1
        self.collector.emit([sentence], msg_id=msg_id)

    def ack(self, msg_id):
        self.in_flight.pop(msg_id, None)

    def fail(self, msg_id):
        if msg_id in self.in_flight:
            self.replay.append(msg_id)


class SplitSentenceBolt(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def execute(self, tup, collector):
        for word in tup.values[0].split():
            collector.emit([word])


class CountBolt(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])

    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup, collector):
        word = tup.values[0]
        n = self.counts.get(word, 0) + 1
        self.counts[word] = n
        collector.emit([word, n])
