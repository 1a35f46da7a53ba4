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
from executor.api import BasicBolt, TopologyBuilder

sys.path.insert(0, str(ROOT / "examples" / "word_count"))
from word_count_components import (  # noqa: E402
    SENTENCES,
    CountBolt,
    RandomSentenceSpout,
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


def sentences_of(seed: int) -> Counter:
    """The words RandomSentenceSpout emits with this seed and limit."""
    rng, out = random.Random(seed), Counter()
    for _ in range(N):
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
