"""Components of the numbered word count (importable from the topology file's directory).

numbers -> split -> count -> store. The spout is a durable source of the messages 0..N-1 (see
offsets.py): each message is a fixed sentence of WORDS_PER_MESSAGE words computed from its
number, so the table can be checked against what was sent. Every word occurrence becomes one row
(msg, pos, word, count) in the Spark table; the sink's dedupe fields (msg, pos) identify it, so
a replayed message adds duplicate rows that a dedupe read drops.

With topology.state.exactly.once: true (-c at submit) the spout is a stateful spout (a
RewindableSpout): its position is checkpointed state, a rollback rewinds it, and the table gets
each row once (no duplicates to drop). Its offset file then records what the commits covered.

Read from the topology config (set with -c at submit):
  numbered.messages      N, how many messages the source holds (0..N-1)
  numbered.offset.dir    directory of the committed offsets (one file per spout task)
  numbered.table         the Spark table's directory
  numbered.rate          new messages per second per spout task (0 or unset: as fast as it can)
"""

from __future__ import annotations

import collections
import logging
import time

import numbered_offsets as O

from executor.api import BasicBolt, RewindableSpout, TopologyBuilder
from executor.sinks.spark import SparkSinkBolt

log = logging.getLogger(__name__)

MESSAGES_KEY = "numbered.messages"
OFFSET_DIR_KEY = "numbered.offset.dir"
TABLE_KEY = "numbered.table"
RATE_KEY = "numbered.rate"

VOCABULARY = ("the", "cow", "jumped", "over", "moon", "an", "apple", "a", "day", "keeps", "doctor",
              "away", "four", "score", "and", "seven", "years", "ago", "snow", "white", "dwarfs", "nature")
WORDS_PER_MESSAGE = 3
COMMIT_SECS = 0.2  # how stale a committed offset may be (a replay after a kill starts there)


def word_index(msg: int, pos: int) -> int:
    """The vocabulary index of word `pos` of message `msg` (check_table.py computes it in Spark)."""
    return (msg * 31 + pos * 17) % len(VOCABULARY)


def sentence_of(msg: int) -> str:
    return " ".join(VOCABULARY[word_index(msg, pos)] for pos in range(WORDS_PER_MESSAGE))


def _required(conf, key: str):
    value = conf.get(key)
    if value in (None, ""):
        raise ValueError(f"the numbered word count needs {key} in its topology config (-c {key}=...)")
    return value


class NumberedSpout(RewindableSpout):
    """Like a Kafka spout: resumes from its task's committed offset, commits the lowest
    contiguous acked message, replays failed (and timed-out) ones. Duplicates come only from
    replays: a restarted task re-emits what was emitted but not committed. Exactly once: the
    next message to send is its checkpointed state (init_state rewinds to it), and its acks
    (which then come at each commit) move the offset file on."""

    def declare_output_fields(self, declarer):
        declarer.declare(["msg", "sentence"])

    def open(self, conf, context, collector):
        self.collector = collector
        total = int(_required(conf, MESSAGES_KEY))
        directory = _required(conf, OFFSET_DIR_KEY)
        self.rate = float(conf.get(RATE_KEY) or 0)
        self.index, self.tasks = context.this_task_index, len(context.this_component_tasks)
        count = O.partition_size(total, self.index, self.tasks)
        self.path = O.offset_path(directory, self.index, self.tasks)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        start = O.load(self.path, self.index, self.tasks, count)
        self.count = count
        self.committed = start.committed
        self.next_seq = start.committed     # re-emit everything not committed (Kafka-like)
        self.emitted = start.emitted
        self.acked: set[int] = set()
        self.replay: collections.deque[int] = collections.deque()
        self.tokens, self.tokens_at = 0.0, time.monotonic()
        self.saved = (start.committed, start.emitted)
        self.saved_at = 0.0
        log.info("numbered spout %d/%d resumes at %d of %d (emitted before: %d)", self.index, self.tasks,
                 start.committed, count, start.emitted)
        self._save(force=True)

    def init_state(self, state):
        """Exactly-once, at start and after a rollback: go on after what the last commit holds
        (everything before it is committed, whether or not its acks reached this task)."""
        self.state = state
        self.next_seq = state.get("next", self.committed)
        self.replay.clear()
        self.acked.clear()
        if self.next_seq > self.committed:
            self.committed = self.next_seq
            self._save(force=True)

    def pre_prepare(self, txid):
        self.state.put("next", self.next_seq)

    def next_tuple(self):
        if self.replay:
            seq = self.replay.popleft()
        elif self.next_seq < self.count and self._may_send():
            seq = self.next_seq
            self.next_seq += 1
            self.tokens -= 1
            self.emitted = max(self.emitted, self.next_seq)
        else:
            self._save()
            return
        msg = O.message_number(seq, self.index, self.tasks)
        self.collector.emit([msg, sentence_of(msg)], msg_id=msg)

    def _may_send(self) -> bool:
        """A token bucket holding at most one second of the rate: a spout that was held back
        (back-pressure, max pending) does not burst to catch up."""
        if self.rate <= 0:
            return True
        now = time.monotonic()
        self.tokens = min(self.rate, self.tokens + (now - self.tokens_at) * self.rate)
        self.tokens_at = now
        return self.tokens >= 1

    def ack(self, msg_id):
        seq = O.sequence_of(msg_id, self.index, self.tasks)
        if seq >= self.committed:
            self.acked.add(seq)
            self.committed = O.advance(self.committed, self.acked)
        self._save(force=self.committed == self.count)

    def fail(self, msg_id):
        seq = O.sequence_of(msg_id, self.index, self.tasks)
        if seq >= self.committed and seq not in self.acked:
            self.replay.append(seq)

    def deactivate(self):
        self._save(force=True)

    def close(self):
        self._save(force=True)

    def _save(self, force: bool = False) -> None:
        now = time.monotonic()
        state = (self.committed, self.emitted)
        if state == self.saved or (not force and now - self.saved_at < COMMIT_SECS):
            return
        O.save(self.path, O.Offset(self.index, self.tasks, self.count, self.committed, self.emitted))
        self.saved, self.saved_at = state, now


class SplitNumbered(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["msg", "pos", "word"])

    def execute(self, tup, collector):
        msg, sentence = tup.values
        for pos, word in enumerate(sentence.split()):
            collector.emit([msg, pos, word])


class CountWords(BasicBolt):
    """Running count per word; every occurrence goes on with its message number and position."""

    def declare_output_fields(self, declarer):
        declarer.declare(["msg", "pos", "word", "count"])

    def prepare(self, conf, context):
        self.counts: dict[str, int] = {}

    def execute(self, tup, collector):
        msg, pos, word = tup.values
        count = self.counts[word] = self.counts.get(word, 0) + 1
        collector.emit([msg, pos, word, count])


SINK_OPTIONS = {
    # (msg, pos) is one word occurrence: a replay's rows are dropped by a dedupe read.
    "dedupe_fields": ["msg", "pos"],
    "schema": "msg BIGINT, pos INT, word STRING, count BIGINT",
    "batch_size": 5000,
    "flush_interval_secs": 0.5,
}


def build_topology(spouts: int = 2, sink_options=None):
    builder = TopologyBuilder()
    builder.set_spout("numbers", NumberedSpout(), spouts)
    builder.set_bolt("split", SplitNumbered(), 2).shuffle_grouping("numbers")
    builder.set_bolt("count", CountWords(), 2).fields_grouping("split", ["word"])
    # The table is numbered.table from the config (required: the sink refuses to prepare without).
    builder.set_bolt("store", SparkSinkBolt(None, path_key=TABLE_KEY, **{**SINK_OPTIONS, **(sink_options or {})}),
                     1).shuffle_grouping("count")
    return builder.create_topology()
