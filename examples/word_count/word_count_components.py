"""Components of the word-count example (importable from the topology file's directory).

sentences -> split -> count -> store. The count bolt (a stateful windowed bolt) keeps running
counts in its checkpointed state and, once per window, emits (run, word, count) for every word it
saw in the window, anchored to the inputs that contributed to it; the SparkSinkBolt acks those
rows only once they are committed to the table. So a sentence is acked only when its counts are
in the table and in a committed checkpoint (at-least-once), while the table gets one row per word
per window rather than one per occurrence.
"""

from __future__ import annotations

import itertools
import os
import random
import tempfile
import uuid

from executor.api import BaseStatefulWindowedBolt, BasicBolt, Duration, Spout, TopologyBuilder
from executor.sinks.spark import SparkSinkBolt

SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]

# Where the example writes by default; top_words.py reads the same place. The topology config
# key wins (`-c wordcount.table=PATH`): on a cluster it reaches every worker, while the
# environment variable is the one of the process that imports this module (there, the worker
# started by a supervisor).
TABLE = os.environ.get("STORM_PY_WORD_COUNT_TABLE") or os.path.join(tempfile.gettempdir(),
                                                                    "storm-py-word-count")
TABLE_KEY = "wordcount.table"


LIMIT_KEY = "wordcount.sentences"  # stop after this many sentences (default: never)
SEED_KEY = "wordcount.seed"        # the random sentences' seed (default: a new one each run)


class RandomSentenceSpout(Spout):
    """Emits random sentences with message ids and replays the ones that fail. The topology
    config can bound a run (`-c wordcount.sentences=N`) and make it repeatable
    (`-c wordcount.seed=S`); the constructor's arguments win over them."""

    def __init__(self, sentences=None, limit=None, seed=None):
        self.sentences = list(sentences or SENTENCES)
        self.limit = limit
        self.seed = seed

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])

    def open(self, conf, context, collector):
        self.collector = collector
        if self.limit is None and conf.get(LIMIT_KEY) is not None:
            self.limit = _non_negative_int(conf, LIMIT_KEY)
        if self.seed is None and conf.get(SEED_KEY) is not None:
            self.seed = _non_negative_int(conf, SEED_KEY)
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


def _non_negative_int(conf, key: str) -> int:
    v = conf[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"topology config {key} must be an int >= 0, got {v!r}")
    return v


class SplitSentenceBolt(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def execute(self, tup, collector):
        for word in tup.values[0].split():
            collector.emit([word])


class CountBolt(BaseStatefulWindowedBolt):
    """Running count per word in its state, updated once per tumbling window: for every word of
    the window it emits (run, word, count) anchored to the window's tuples of that word. The
    counts and the window's own contents are checkpointed: with a durable state provider
    (topology.state.provider: redis) they survive a worker's death, a rebalance and a restart of
    the topology under the same name; with the default (memory) a restarted task starts a new run."""

    def __init__(self, window_secs: float = 0.5):
        super().__init__()
        self.with_tumbling_window(Duration(window_secs))

    def declare_output_fields(self, declarer):
        declarer.declare(["run", "word", "count"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.fresh_run = f"{conf.get('storm.id') or 'run'}-{context.this_task_id}-{uuid.uuid4().hex[:8]}"

    def init_state(self, state):
        self.state = state
        # The run a count belongs to is the state's: a state that lives on (redis) keeps adding
        # to its run, a fresh one (a restarted task's memory state) starts another.
        self.run = state.get(RUN_KEY)
        if self.run is None:
            self.run = self.fresh_run
            state.put(RUN_KEY, self.run)

    def execute(self, window):
        by_word: dict[str, list] = {}
        for t in window.get():
            by_word.setdefault(t.values[0], []).append(t)
        state = self.state
        for word, inputs in by_word.items():
            count = state.get(word, 0) + len(inputs)
            state.put(word, count)
            # The row completes its inputs' trees only once the sink has committed it.
            self.collector.emit([self.run, word, count], anchors=inputs)


RUN_KEY = "$run"


def build_topology(table: str = TABLE, spout=None, sink_options=None):
    """sentences -> split -> count -> store (the Spark sink at `table`)."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout if spout is not None else RandomSentenceSpout(), 1)
    builder.set_bolt("split", SplitSentenceBolt(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", CountBolt(), 2).fields_grouping("split", ["word"])
    # (run, word, count) identifies a count: a replayed one is dropped when the table is read.
    options = {"dedupe_fields": ["run", "word", "count"], "flush_interval_secs": 0.5, **(sink_options or {})}
    builder.set_bolt("store", SparkSinkBolt(table, path_key=TABLE_KEY, **options), 1).shuffle_grouping("count")
    return builder.create_topology()


def top_words(df, n: int = 10) -> list[tuple[str, int]]:
    """The n most frequent words of a table read with read_table: each run's last count of a
    word is its total in that run; runs add up."""
    from pyspark.sql import functions as F

    per_run = df.groupBy("run", "word").agg(F.max("count").alias("count"))
    totals = per_run.groupBy("word").agg(F.sum("count").alias("count"))
    return [(r["word"], int(r["count"])) for r in totals.orderBy(F.desc("count"), "word").limit(n).collect()]
