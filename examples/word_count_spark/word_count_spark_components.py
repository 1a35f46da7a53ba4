"""Components of the word-count-to-Spark example (importable from the topology file's directory).

The spout and the split bolt are those of examples/word_count; the count bolt also emits the
run (the topology's storm id) so that the table can hold many runs; the counts go to a
SparkSinkBolt, which acks them only once they are committed to the table.
"""

from __future__ import annotations

import itertools
import os
import random
import tempfile

from executor.api import BasicBolt, Spout, TopologyBuilder
from executor.sinks.spark import SparkSinkBolt

SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]

# Where the example writes; top_words.py reads the same place.
TABLE = os.environ.get("STORM_PY_WORD_COUNT_TABLE") or os.path.join(tempfile.gettempdir(),
                                                                    "storm-py-word-count")


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
    """Running count per word; emits (run, word, count) for every occurrence."""

    def declare_output_fields(self, declarer):
        declarer.declare(["run", "word", "count"])

    def prepare(self, conf, context):
        self.run = str(conf.get("storm.id") or "run")
        self.counts = {}

    def execute(self, tup, collector):
        word = tup.values[0]
        n = self.counts.get(word, 0) + 1
        self.counts[word] = n
        collector.emit([self.run, word, n])


def build_topology(table: str = TABLE, spout=None, sink_options=None):
    """sentences -> split -> count -> store (the Spark sink at `table`)."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout if spout is not None else RandomSentenceSpout(), 1)
    builder.set_bolt("split", SplitSentenceBolt(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", CountBolt(), 2).fields_grouping("split", ["word"])
    # (run, word, count) identifies a count: a replayed one is dropped when the table is read.
    options = {"dedupe_fields": ["run", "word", "count"], **(sink_options or {})}
    builder.set_bolt("store", SparkSinkBolt(table, **options), 1).shuffle_grouping("count")
    return builder.create_topology()


def top_words(df, n: int = 10) -> list[tuple[str, int]]:
    """The n most frequent words of a table read with read_table: each run's last count of a
    word is its total in that run; runs add up."""
    from pyspark.sql import functions as F

    per_run = df.groupBy("run", "word").agg(F.max("count").alias("count"))
    totals = per_run.groupBy("word").agg(F.sum("count").alias("count"))
    return [(r["word"], int(r["count"])) for r in totals.orderBy(F.desc("count"), "word").limit(n).collect()]
