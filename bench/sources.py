"""The word count read from a real source against the built-in spout, acked, in one sitting.

The topologies are the same apart from the spout: spout -> split -> count (parallelism 1 each,
one worker, a LocalCluster in this process, topology.max.spout.pending 2000, ackers on):
  builtin  the word count's own spout (examples/word_count: RandomSentenceSpout, which keeps
           each sentence in flight to replay it on failure) over the peers' sentences
           (bench/scaling.py's list)
  cycling  a spout cycling the same list with ids and nothing kept for replay (a lower bound
           of a spout's cost, not a reliable source: reported, not the goal's reference)
  redis    RedisStreamSpout over a stream pre-filled with the same sentences (field `s`),
           read as a fresh consumer group per run from the start; XACK on ack
The Redis server is the one `storm-py dev-cluster --redis` runs (cluster_state/redisserver.py:
append-only file, appendfsync always) on this machine's other core. Throughput is counted at the
count bolt (words/s over the window / the mean words of the sentences); runs alternate
builtin/cycling/redis `--repeat` times and the summary gives the ratios of the medians (the goal,
>= 0.8, is redis over builtin).
One JSON line per run, then a summary line; redis-server's CPU seconds per second are reported.

usage: python3 bench/sources.py [--seconds 10] [--warmup 5] [--repeat 2] [--entries N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core_path import sentences  # noqa: E402  (the peers' workload, as bench/core_path.py makes it)

from cluster_state.redisserver import RedisServer  # noqa: E402
from daemons.local import LocalCluster  # noqa: E402
from executor.api import BasicBolt, RedisStreamSpout, Spout, TopologyBuilder  # noqa: E402

sys.path.insert(0, str(ROOT / "examples" / "word_count"))
from word_count_components import RandomSentenceSpout  # noqa: E402

N_SENTENCES = 10_000
KINDS = ("builtin", "cycling", "redis")


SENTENCES = sentences(N_SENTENCES)
MEAN_WORDS = sum(len(s.split()) for s in SENTENCES) / len(SENTENCES)


class Words:
    """Words counted by the count bolt (shared with this process's clock: not copied)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.n = 0

    def __deepcopy__(self, memo):
        return self


class CyclingSpout(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])

    def open(self, conf, context, collector):
        self.c, self.i = collector, 0

    def next_tuple(self):
        self.i += 1
        self.c.emit([SENTENCES[self.i % N_SENTENCES]], msg_id=self.i)


class Split(BasicBolt):
    def __init__(self, from_fields: bool):
        self.from_fields = from_fields

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def execute(self, tup, collector):
        sentence = tup.values[1]["s"] if self.from_fields else tup.values[0]
        for word in sentence.split():
            collector.emit([word])


class Count(BasicBolt):
    def __init__(self, words: Words):
        self.words = words

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])

    def prepare(self, conf, context):
        self.counts: dict[str, int] = {}

    def execute(self, tup, collector):
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        self.words.n += 1


def build(spout, from_fields: bool, words: Words):
    b = TopologyBuilder()
    b.set_spout("spout", spout, 1)
    b.set_bolt("split", Split(from_fields), 1).shuffle_grouping("spout")
    b.set_bolt("count", Count(words), 1).fields_grouping("split", ["word"])
    return b.create_topology()


def fill(client, entries: int) -> None:
    for start in range(0, entries, 5000):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(entries, start + 5000)):
            pipe.xadd("sentences", {"s": SENTENCES[i % N_SENTENCES]})
        pipe.execute()


def run_one(kind: str, run: int, server: RedisServer, seconds: float, warmup: float) -> dict:
    words = Words()
    if kind == "redis":
        spout = RedisStreamSpout("sentences", f"bench-{run}", port=server.port, start="0", max_in_flight=2000)
    elif kind == "cycling":
        spout = CyclingSpout()
    else:
        spout = RandomSentenceSpout(sentences=SENTENCES, seed=7)
    conf = {"topology.max.spout.pending": 2000, "topology.message.timeout.secs": 30}
    redis_proc = psutil.Process(server.pid)
    with LocalCluster() as cluster:
        cluster.submit_topology(f"src-{kind}-{run}", conf, build(spout, kind == "redis", words))
        deadline = time.monotonic() + 60
        while words.n == 0:
            if time.monotonic() > deadline:
                raise SystemExit(f"{kind}: no words counted within 60s")
            time.sleep(0.1)
        time.sleep(warmup)
        w0, t0, c0, th0 = words.n, time.monotonic(), sum(redis_proc.cpu_times()[:2]), thread_cpu()
        time.sleep(seconds)
        w1, t1, c1, th1 = words.n, time.monotonic(), sum(redis_proc.cpu_times()[:2]), thread_cpu()
        cluster.kill_topology(f"src-{kind}-{run}")
    sentences = (w1 - w0) / (t1 - t0) / MEAN_WORDS
    return {"source": kind, "run": run, "sentences_per_sec": round(sentences), "seconds": round(t1 - t0, 2),
            "redis_cpu_per_sec": round((c1 - c0) / (t1 - t0), 3),
            **{f"{role}_cpu_per_sec": round((th1.get(role, 0.0) - th0.get(role, 0.0)) / (t1 - t0), 3)
               for role in sorted(th1)}}


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's executor threads and the spout's Redis thread (is the
    executor thread busy all the time, or waiting for entries?)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for t in psutil.Process().threads():
        name = names.get(t.id, "")
        role = ("executor" if name.startswith("executor-shared") else
                "redis_thread" if name.startswith("redis-stream") else None)
        if role:
            out[role] = out.get(role, 0.0) + t.user_time + t.system_time
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", choices=KINDS, help="run one source only (for profiling)")
    ap.add_argument("--entries", type=int, default=None,
                    help="entries pre-filled (each redis run reads from the start as a new group); default "
                         "50,000 per second of warm-up and window, so that no run reaches the end")
    args = ap.parse_args()
    # The topologies' workers run in this process, as `storm-py local` runs them: with a worker
    # process's collector thresholds too (executor/gc_policy.py).
    from cluster_state.config import default_config
    from executor.gc_policy import apply_gc_thresholds

    apply_gc_thresholds(default_config())
    if args.entries is None:
        args.entries = int((args.warmup + args.seconds) * 50_000)
    import logging

    logging.basicConfig(level=logging.WARNING)
    sys.setswitchinterval(0.001)  # as worker processes run (executor/worker_main.py)
    with tempfile.TemporaryDirectory(prefix="bench-sources-") as tmp:
        server = RedisServer(Path(tmp) / "redis").start()
        try:
            import redis

            client = redis.Redis(host=server.host, port=server.port, protocol=2)
            t = time.monotonic()
            fill(client, args.entries)
            print(json.dumps({"filled": args.entries, "fill_secs": round(time.monotonic() - t, 1)}), flush=True)
            results: dict[str, list[float]] = {k: [] for k in KINDS}
            for run in range(args.repeat):
                for kind in ((args.only,) if args.only else KINDS):
                    r = run_one(kind, run, server, args.seconds, args.warmup)
                    results[kind].append(r["sentences_per_sec"])
                    print(json.dumps(r), flush=True)
            client.close()
        finally:
            server.stop()
    med = {k: statistics.median(v) for k, v in results.items() if v}
    if len(med) < len(KINDS):
        return 0
    print(json.dumps({"summary": True, **{f"{k}_median": v for k, v in med.items()},
                      "redis_over_builtin": round(med["redis"] / med["builtin"], 3), "goal": 0.8,
                      "redis_over_cycling": round(med["redis"] / med["cycling"], 3),
                      "python": sys.version.split()[0]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
