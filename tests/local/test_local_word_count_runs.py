"""The word count example's totals when the topology is killed and submitted again under its name
(issue 35, item 1: "the right totals after rebalance, kill of a worker, and restart"; the killed
worker and the rebalance are tests/devcluster/test_word_count_state.py).

The example's count bolt emits rows (run, word, count) and top_words.py reads a word's total as
the sum over runs of its last (largest) count in each run. With a durable state (redis) a
topology submitted again continues its runs from the last commit; with the default (memory)
each new task starts a run of its own. Either way the totals must be every sentence of both
submissions, each once (no fault here: nothing is replayed). The rows are recorded by a bolt in
place of the Spark sink, so that this runs without Spark."""

from __future__ import annotations

import random
import sys
import threading
from collections import Counter

import pytest
from testutil import ROOT, wait_until

from daemons.local import LocalCluster
from executor.api import BasicBolt, FailedException, TopologyBuilder

sys.path.insert(0, str(ROOT / "examples" / "word_count"))
from word_count_components import (  # noqa: E402
    SENTENCES,
    CountBolt,
    RandomSentenceSpout,
    SentenceSpout,
    SplitSentenceBolt,
)

pytestmark = pytest.mark.timeout(180)

N = 400


class Rows:
    """The count bolt's rows, shared by the recording bolt's copies (not deep-copied)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.rows: list[tuple[str, str, int]] = []

    def __deepcopy__(self, memo):
        return self

    def totals(self) -> Counter:
        """As top_words.py reads the table: each run's largest count of a word, summed over runs."""
        with self.lock:
            rows = list(self.rows)
        per_run: dict[tuple[str, str], int] = {}
        for run, word, count in rows:
            per_run[(run, word)] = max(count, per_run.get((run, word), 0))
        out: Counter = Counter()
        for (_run, word), count in per_run.items():
            out[word] += count
        return out

    def runs(self) -> set[str]:
        with self.lock:
            return {r[0] for r in self.rows}


class RecordRows(BasicBolt):
    def __init__(self, rows: Rows):
        self.rows = rows

    def declare_output_fields(self, declarer):
        pass

    def execute(self, tup, collector):
        with self.rows.lock:
            self.rows.rows.append(tuple(tup.values))


def topology(rows: Rows, seed: int):
    """The example's topology (examples/word_count: build_topology) with the rows recorded."""
    b = TopologyBuilder()
    b.set_spout("sentences", RandomSentenceSpout(limit=N, seed=seed), 1)
    b.set_bolt("split", SplitSentenceBolt(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", CountBolt(window_secs=0.2), 2).fields_grouping("split", ["word"])
    b.set_bolt("store", RecordRows(rows), 1).shuffle_grouping("count")
    return b.create_topology()


def sentences_of(seed: int, n: int = N) -> Counter:
    """The words RandomSentenceSpout (and SentenceSpout) emit with this seed and limit."""
    rng, out = random.Random(seed), Counter()
    for _ in range(n):
        out.update(rng.choice(SENTENCES).split())
    return out


@pytest.mark.parametrize("provider", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
def test_totals_add_up_across_a_kill_and_a_new_submission_under_the_same_name(provider, request):
    conf = {"topology.max.spout.pending": 200, "topology.message.timeout.secs": 30,
            "topology.state.checkpoint.interval.ms": 200}
    if provider == "redis":
        conf.update(request.getfixturevalue("redis_server").conf())
    rows = Rows()
    want = sentences_of(1)
    with LocalCluster() as cluster:
        cluster.submit_topology("wc", conf, topology(rows, seed=1))
        wait_until(lambda: rows.totals() == want, 120,
                   lambda: f"the first submission's words counted: {rows.totals()} vs {dict(want)}", interval=0.1)
        first_runs = rows.runs()
        cluster.kill_topology("wc", wait_secs=3)

        want = want + sentences_of(2)
        cluster.submit_topology("wc", conf, topology(rows, seed=2))
        wait_until(lambda: rows.totals() == want, 120,
                   lambda: f"both submissions' words counted: {rows.totals()} vs {dict(want)}", interval=0.1)
        cluster.kill_topology("wc", wait_secs=0)
    assert rows.totals() == want  # nothing counted twice once both are complete
    if provider == "redis":  # the counts went on in the same runs
        assert rows.runs() == first_runs
    else:  # each new task started a run of its own
        assert rows.runs() > first_runs


class SplitFailingOnce(SplitSentenceBolt):
    """The example's split, failing one sentence once (shared by its copies): in exactly-once
    mode that rolls the whole topology back to the last commit."""

    def __init__(self, at: int):
        self.at = at
        self.seen = [0]
        self.lock = threading.Lock()

    def __deepcopy__(self, memo):
        return self

    def execute(self, tup, collector):
        with self.lock:
            self.seen[0] += 1
            fail = self.seen[0] == self.at
        if fail:
            raise FailedException(f"split fails sentence {self.at} once")
        super().execute(tup, collector)


def test_the_exactly_once_word_count_counts_each_sentence_once_through_a_rollback():
    """The example as it runs (SentenceSpout, exactly once) with a failed sentence half-way: the
    topology rolls back to the last commit, the spout sends the same sentences again from its
    committed position (its random generator's state, put at pre_prepare) and the counts end
    exact; the spout's tuples count as acked once their checkpoint commits."""
    n = 4000
    rows = Rows()
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(limit=n, seed=3, rate=2000), 1)
    b.set_bolt("split", SplitFailingOnce(at=n // 2), 2).shuffle_grouping("sentences")
    b.set_bolt("count", CountBolt(window_secs=0.2), 2).fields_grouping("split", ["word"])
    b.set_bolt("store", RecordRows(rows), 1).shuffle_grouping("count")
    conf = {"topology.state.exactly.once": True, "topology.state.checkpoint.interval.ms": 200}
    want = sentences_of(3, n)
    with LocalCluster() as cluster:
        cluster.submit_topology("wc-eo", conf, b.create_topology())
        wait_until(lambda: rows.totals() == want, 120,
                   lambda: f"every sentence counted: {sorted((want - rows.totals()).items())[:5]} short, "
                           f"{sorted((rows.totals() - want).items())[:5]} over", interval=0.2)
        wait_until(lambda: cluster.component_stats("wc-eo")["sentences"].get("acked", 0) >= n, 60,
                   lambda: f"the spout's {n} sentences acked as committed: {cluster.component_stats('wc-eo')}",
                   interval=0.2)
        stats = cluster.component_stats("wc-eo")["sentences"]
        cluster.kill_topology("wc-eo", wait_secs=0)
    assert rows.totals() == want
    # rolled back and sent again: more emitted than acked, each sentence acked once
    assert stats.get("acked") == n and stats.get("emitted", 0) > n and stats.get("failed", 0) == 0, stats
