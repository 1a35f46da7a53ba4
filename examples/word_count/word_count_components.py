"""Components of the word-count example (importable from the topology file's directory).

sentences -> split -> count -> store. The count bolt (a stateful windowed bolt) keeps running
counts in its checkpointed state and, once per window, emits (run, word, count) for every word it
saw in the window; the table gets one row per word per window rather than one per occurrence.

The example runs exactly once (topology.state.exactly.once: true, docs/topology-guide.md): the
spout's position, the counts and the windows' contents are checkpointed together, the table
shows a checkpoint's rows once it commits, and after any failure the whole topology goes back to
the last commit and the spout sends the same sentences again (SentenceSpout). Built with
RandomSentenceSpout instead, the same bolts run Storm's at-least-once acking: a sentence is acked
once its counts are in the table and in a committed checkpoint, and a replay may count twice.
"""

from __future__ import annotations

import itertools
import os
import random
import tempfile
import time
import uuid

from executor.api import (
    BaseStatefulSpout,
    BaseStatefulWindowedBolt,
    BasicBolt,
    Duration,
    Spout,
    TopologyBuilder,
)
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
RATE_KEY = "wordcount.rate"        # SentenceSpout: at most this many sentences a second (default: no bound)


class _Sentences:
    """What both sentence spouts share: their sentences, the field `sentence`, and a run bounded
    (`-c wordcount.sentences=N`) and made repeatable (`-c wordcount.seed=S`) by the topology
    config, the constructor's arguments winning over it."""

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


class RandomSentenceSpout(_Sentences, Spout):
    """Emits random sentences with message ids and replays the ones that fail. The topology
    config can bound a run (`-c wordcount.sentences=N`) and make it repeatable
    (`-c wordcount.seed=S`); the constructor's arguments win over them."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
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


class SentenceSpout(_Sentences, BaseStatefulSpout):
    """Random sentences, exactly once: how many it sent and its random generator's state are its
    checkpointed state (put at each checkpoint's pre_prepare, not per sentence), so after a
    rollback it sends the very sentences that followed the last commit again, and a topology
    restarted under the same name with a durable state provider goes on where it stopped. The
    same configuration as RandomSentenceSpout: with a seed (`-c wordcount.seed=S`) the sentences
    are those RandomSentenceSpout sends with it; without one, a seed is drawn once and kept in
    the state. `-c wordcount.rate=R` sends at most R sentences a second (to watch a run, or to
    have a fault land in the middle of one)."""

    def __init__(self, sentences=None, limit=None, seed=None, rate=None):
        super().__init__(sentences, limit, seed)
        self.rate = rate

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        if self.rate is None and conf.get(RATE_KEY) is not None:
            self.rate = _non_negative_int(conf, RATE_KEY)
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"{RATE_KEY} must be a number of sentences a second > 0, got {self.rate!r}")

    def init_state(self, state):
        """The first time: from the seed; after a rollback or a restart: from the committed position."""
        self.state = state
        position = state.get(POSITION_KEY)
        if position is None:
            self.rng = random.Random(self.seed if self.seed is not None else random.SystemRandom().getrandbits(64))
            self.emitted = 0
        else:
            self.emitted, (version, internal, gauss) = position
            self.rng = random.Random()
            self.rng.setstate((version, tuple(internal), gauss))
        self.paced_from, self.paced = time.monotonic(), 0

    def pre_prepare(self, txid):
        self.state.put(POSITION_KEY, [self.emitted, list(self.rng.getstate())])

    def next_tuple(self):
        if self.limit is not None and self.emitted >= self.limit:
            return
        if self.rate is not None:
            if self.paced >= (time.monotonic() - self.paced_from) * self.rate:
                return
            self.paced += 1
        self.emitted += 1
        # The message id lets the spout's figures count it as acked once its checkpoint commits.
        self.collector.emit([self.rng.choice(self.sentences)], msg_id=self.emitted)


POSITION_KEY = "position"


def _non_negative_int(conf, key: str) -> int:
    v = conf[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"topology config {key} must be an int >= 0, got {v!r}")
    return v


class SplitSentenceBolt(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def execute(self, tup, collector):
        # one call for the sentence's words (storm-py's emit_many; in Storm, emit each word)
        collector.emit_many([[word] for word in tup.values[0].split()])


class CountBolt(BaseStatefulWindowedBolt):
    """Running count per word in its state, updated once per tumbling window: for every word of
    the window it emits (run, word, count) anchored to the window's tuples of that word. The
    counts and the window's own contents are checkpointed: with a durable state provider
    (topology.state.provider: redis) they survive a worker's death, a rebalance, a restart of the
    topology under the same name and a swap to another parallelism (its state is keyed by word
    alone, so each word's count moves to the task the grouping then gives it); with the default
    (memory) a restarted task starts a new run."""

    def __init__(self, window_secs: float = 0.5):
        super().__init__()
        self.with_tumbling_window(Duration(window_secs))

    def declare_output_fields(self, declarer):
        declarer.declare(["run", "word", "count"])

    def prepare(self, conf, context, collector):
        self.collector = collector
        # The run a word's counts belong to is kept with its count: a state that lives on
        # (redis) keeps adding to it wherever the word goes, a fresh one (a restarted task's
        # memory state) starts another run.
        self.fresh_run = f"{conf.get('storm.id') or 'run'}-{context.this_task_id}-{uuid.uuid4().hex[:8]}"

    def init_state(self, state):
        self.state = state

    def execute(self, window):
        by_word: dict[str, list] = {}
        for t in window.get():
            by_word.setdefault(t.values[0], []).append(t)
        state = self.state
        for word, inputs in by_word.items():
            run, count = state.get(word) or (self.fresh_run, 0)
            count += len(inputs)
            state.put(word, [run, count])
            # The row completes its inputs' trees only once the sink has committed it.
            self.collector.emit([run, word, count], anchors=inputs)


def build_topology(table: str = TABLE, spout=None, sink_options=None, count_tasks: int = 2, spout_tasks: int = 1):
    """sentences -> split -> count -> store (the Spark sink at `table`); the spout by default is
    SentenceSpout, which needs topology.state.exactly.once: true (topology.py sets it)."""
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout if spout is not None else SentenceSpout(), spout_tasks)
    builder.set_bolt("split", SplitSentenceBolt(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", CountBolt(), count_tasks).fields_grouping("split", ["word"])
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


def marker_words(sentences=SENTENCES) -> dict[str, str] | None:
    """Per sentence a word found once in it and in no other (its count is the sentence's), or
    None when some sentence has none."""
    markers = {}
    for sentence in sentences:
        others = {w for o in sentences if o != sentence for w in o.split()}
        words = sentence.split()
        unique = [w for w in words if words.count(w) == 1 and w not in others]
        if not unique:
            return None
        markers[unique[0]] = sentence
    return markers


def sentences_by_topology(df, sentences=SENTENCES) -> list[tuple[str, int]]:
    """(storm id, sentences counted) for every topology run in a table read with read_table,
    from each sentence's marker word; what `storm-py local`'s summary says it acked, in an
    exactly-once run. Empty when the sentences have no marker words."""
    from pyspark.sql import functions as F

    markers = marker_words(sentences)
    if not markers:
        return []
    # a run is "<storm id>-<task id>-<hex>" (CountBolt.fresh_run)
    per_run = (df.where(F.col("word").isin(list(markers))).groupBy("run", "word").agg(F.max("count").alias("count"))
               .withColumn("topology", F.regexp_extract("run", r"^(.*)-[0-9]+-[0-9a-f]+$", 1)))
    totals = per_run.groupBy("topology").agg(F.sum("count").alias("sentences")).orderBy("topology")
    return [(r["topology"], int(r["sentences"])) for r in totals.collect()]
