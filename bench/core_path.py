"""The per-tuple floor of the word count, without threads, queues or sockets: the split's BasicBolt
loop, its emits through the outbox (fields grouping to two count tasks), the batches of one count
task packed and decoded as if they crossed workers (the other's handed over as objects, as within
a worker), then the count's BasicBolt loop over both. Prints one JSON line: sentences/s, microseconds
per sentence and per word, and which core ran (STORM_PY_PURE=1 for the pure twin).

For instruction counts, which do not drift with the machine's speed, run it under callgrind at two
sizes and take the difference (what the start-up costs cancels out):

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python3 bench/core_path.py --n 20000
    (the "Collected" line of callgrind's summary; repeat with --n 40000; (I2 - I1) / 20000)

With --acked each sentence arrives in a tuple tree (an anchor, as from a tracked spout emit), the
split's emits are anchored to it (the BasicBolt's rule) and both bolts ack into an acker's queue:
what acking adds to the per-tuple path (the acker's own ledger is not run).

usage: python3 bench/core_path.py [--n SENTENCES] [--repeat R] [--emit-many] [--acked]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import string
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from executor.core import core_status  # noqa: E402
from executor.core.collectors import BasicOutputCollector, run_basic_batch  # noqa: E402
from executor.core.outbox import Outbox  # noqa: E402
from executor.grouping import FieldsGrouper  # noqa: E402
from executor.routing import StreamOut  # noqa: E402
from executor.serialization import decode_batch, pack_batch  # noqa: E402
from executor.tuple import DEFAULT_STREAM, Fields, Tuple  # noqa: E402

WORD = Fields(["word"])
SENTENCE = Fields(["sentence"])


def sentences(n_distinct: int = 10_000) -> list[str]:
    """The peers' workload: a 1,000-word vocabulary, 8-12 words a sentence."""
    rng = random.Random(1234)
    vocab, seen = [], set()
    while len(vocab) < 1000:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    rng = random.Random(42)
    return [" ".join(rng.choices(vocab, k=rng.randint(8, 12))) for _ in range(n_distinct)]


class _Queue:
    def __init__(self):
        self.batches = []

    def try_publish(self, batch, nbytes=0, producer=None):
        self.batches.append(batch)
        return True


class _Split:
    def execute(self, tup, collector):
        for word in tup.values[0].split():
            collector.emit([word])


class _SplitMany:
    """The split with emit_many: one call per sentence."""

    def execute(self, tup, collector):
        collector.emit_many([[word] for word in tup.values[0].split()])


class _Count:
    def __init__(self):
        self.counts = {}

    def execute(self, tup, collector):
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1


class _Executor:
    """What a collector asks of its executor, and nothing more."""

    def __init__(self, outbox, routes):
        self.outbox = outbox
        self.acked_in, self.failed_in = {}, {}
        self.w = type("W", (), {"routes": routes})()
        self.queue = None

    def report_error(self, task, exc):
        raise exc


def _collector(outbox, task, routes):
    from executor.core.collectors import OutputCollector

    return BasicOutputCollector(OutputCollector(_Executor(outbox, {task: routes}), task))


ACKER = 99


def run(texts: list[str], n: int, emit_many: bool = False, acked: bool = False) -> dict:
    local, remote, acks = _Queue(), _Queue(), _Queue()
    ackers = [ACKER] if acked else []
    # split task 1 -> count tasks 10 (this worker) and 11 (the other one); the acker task 99 here
    outbox = Outbox("split", [local, remote, acks], {10: 0, 11: 1, ACKER: 2}, batch_size=100,
                    max_tuple_bytes=1 << 20, acker_tasks=ackers, local_tasks={1, 10, ACKER}, first_task=1,
                    listener=None, report_error=lambda task, exc: None)
    routes = {DEFAULT_STREAM: StreamOut("split", DEFAULT_STREAM, WORD, False,
                                        [FieldsGrouper([10, 11], WORD, WORD)], frozenset())}
    split_basic = _collector(outbox, 1, routes)
    count_box = Outbox("count", [acks], {ACKER: 0}, batch_size=100, max_tuple_bytes=1 << 20,
                       acker_tasks=ackers, local_tasks={10, ACKER}, first_task=10, listener=None,
                       report_error=lambda task, exc: None)
    count_basic = _collector(count_box, 10, {})
    split, count = (_SplitMany() if emit_many else _Split()), _Count()
    resolve = {(1, DEFAULT_STREAM): ("split", WORD)}.__getitem__
    m = len(texts)
    words = 0
    t0 = time.perf_counter()
    for start in range(0, n, 100):  # sentences arrive 100 at a time, as a batch from the spout
        batch = [(1, Tuple([texts[(start + i) % m]], 0, DEFAULT_STREAM, "spout", SENTENCE,
                           {start + i: 7 * (start + i) + 1} if acked else None))
                 for i in range(min(100, n - start))]
        run_basic_batch(split_basic, split, batch)
        outbox.flush()
        for b in local.batches:
            words += len(b)
            run_basic_batch(count_basic, count, b)
        for b in remote.batches:
            columns, _controls = decode_batch(pack_batch(b), lambda src, stream: resolve((src, stream)))
            for column in columns:
                words += len(column)
                run_basic_batch(count_basic, count, column)
        count_box.flush()
        local.batches.clear()
        remote.batches.clear()
        acks.batches.clear()
    secs = time.perf_counter() - t0
    return {"bench": "core_path", "sentences": n, "words": words, "secs": round(secs, 3),
            "sentences_per_s": round(n / secs), "us_per_sentence": round(secs / n * 1e6, 3),
            "us_per_word": round(secs / words * 1e6, 3), "core": core_status()["core"], "emit_many": emit_many,
            "acked": acked, "python": platform.python_version()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--emit-many", action="store_true", help="the split emits a sentence's words in one emit_many call")
    ap.add_argument("--acked", action="store_true", help="sentences in tuple trees, emits anchored, inputs acked")
    args = ap.parse_args()
    gc.set_threshold(10000, 10, 10)  # as a worker process (topology.worker.gc.thresholds)
    texts = sentences()
    for _ in range(args.repeat):
        print(json.dumps(run(texts, args.n, args.emit_many, args.acked)), flush=True)


if __name__ == "__main__":
    main()
