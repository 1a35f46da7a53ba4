"""The windowed word count (10 s windows sliding by 1 s, event time) on storm-py against
Bytewax's (bench/windowed_bytewax.py), in one sitting, runs alternated, each in its own process.

storm-py: LocalCluster, one worker, spout -> split -> count -> sink, parallelism 1. The spout
emits the workload's sentences (bench/windowed_workload.py) with their event time; split emits
(word, ts); count is a BaseWindowedBolt (with_timestamp_field ts, 10 s sliding by 1 s, the
watermark every 200 ms) that keeps the counts of its window up to date from get_new() and
get_expired() (Storm's advice for sliding windows) and emits (end, word, count) for every word
of each window; the sink keeps them. Variants: `unacked` (topology.acker.executors 0) and
`acked` (sentences with message ids, max spout pending 50,000: a window holds its tuples until
they leave it, 10,000 sentences; its emits are unanchored, `anchors=[]`: Storm's default, every
emit anchored to every tuple of the window, would give each of a window's ~1,000 emits the
~100,000 tuples of a 10 s window as anchors). Sentences/s from the spout's first next_tuple to the moment
the sink holds every complete window (windowed_workload.last_complete_end); every run checks
its windows against the plain computation (`correct`).

Bytewax runs with --bytewax-python (default /tmp/bw/bin/python; see windowed_bytewax.py).

usage: python3 bench/windowed.py [--n 200000] [--repeat 2] [--only unacked acked bytewax]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(1, HERE)

import windowed_workload as W  # noqa: E402

from executor.api import BaseWindowedBolt, BasicBolt, Bolt, Duration, Spout, TopologyBuilder  # noqa: E402

VARIANTS = ("unacked", "acked", "bytewax")


class SentenceSpout(Spout):
    def __init__(self, n: int, acked: bool):
        self.n = n
        self.acked = acked

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence", "ts"])

    def open(self, conf, context, collector):
        self.c = collector
        self.sentences = W.make_sentences(self.n)
        self.i = 0
        self.t_first = None

    def next_tuple(self):
        i = self.i
        if i >= self.n:
            return
        if self.t_first is None:
            self.t_first = time.monotonic()
        self.i = i + 1
        if self.acked:
            self.c.emit([self.sentences[i], W.event_ms(i)], msg_id=i)
        else:
            self.c.emit([self.sentences[i], W.event_ms(i)])


class Split(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word", "ts"])

    def execute(self, tup, collector):
        sentence, ts = tup.values
        for w in sentence.split():
            collector.emit([w, ts])


class WindowCount(BaseWindowedBolt):
    def __init__(self):
        super().__init__()
        self.with_window(Duration.of_millis(W.LENGTH_MS), Duration.of_millis(W.SLIDE_MS))
        self.with_timestamp_field("ts")
        self.with_watermark_interval(Duration(0.2))

    def declare_output_fields(self, declarer):
        declarer.declare(["end", "word", "count"])

    def prepare(self, conf, context, collector):
        self.c = collector
        self.counts: dict[str, int] = {}

    def execute(self, window):
        counts = self.counts
        for t in window.get_expired():
            w = t.values[0]
            n = counts[w] - 1
            if n:
                counts[w] = n
            else:
                del counts[w]
        for t in window.get_new():
            w = t.values[0]
            counts[w] = counts.get(w, 0) + 1
        end = window.end_timestamp
        emit = self.c.emit
        for w, n in counts.items():
            emit([end, w, n], anchors=[])


class Sink(Bolt):
    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        self.c = collector
        self.got: dict = {}

    def execute(self, tup):
        end, word, count = tup.values
        self.got[(end, word)] = count
        self.c.ack(tup)


def _obj(cluster, name, component):
    from executor.adapters import user_component

    for w in cluster.workers(name):
        for ex in w.executors:
            if ex.component_id == component:
                return user_component(ex.w.objs[ex.task_ids[0]])
    raise KeyError(component)


def run_storm(variant: str, n: int, timeout: float) -> dict:
    from daemons.local import LocalCluster

    acked = variant == "acked"
    b = TopologyBuilder()
    b.set_spout("spout", SentenceSpout(n, acked))
    b.set_bolt("split", Split()).shuffle_grouping("spout")
    b.set_bolt("count", WindowCount()).fields_grouping("split", ["word"])
    b.set_bolt("sink", Sink()).shuffle_grouping("count")
    conf = {"topology.workers": 1, "topology.message.timeout.secs": 120}
    conf.update({"topology.max.spout.pending": 50_000} if acked else {"topology.acker.executors": 0})
    want_rows = len(W.expected(W.make_sentences(n)))
    last = W.last_complete_end(n)
    with LocalCluster() as cluster:
        cluster.submit_topology("windowed", conf, b.create_topology())
        spout, sink = _obj(cluster, "windowed", "spout"), _obj(cluster, "windowed", "sink")
        deadline = time.monotonic() + timeout
        done_at = None
        while time.monotonic() < deadline:
            # cheap until it may be done (this loop shares the interpreter with the topology)
            if len(sink.got) >= want_rows:
                got = dict(sink.got)  # a copy: the executor thread adds to it
                if sum(1 for k in got if k[0] <= last) >= want_rows:
                    done_at = time.monotonic()
                    break
            time.sleep(0.02)
        died = cluster.died("windowed")
    if done_at is None:
        return {"bench": "windowed", "side": "storm-py", "variant": variant,
                "error": f"not every window within {timeout:.0f}s", "died": [str(d) for d in died]}
    secs = done_at - spout.t_first
    import resource

    return {"bench": "windowed", "side": "storm-py", "variant": variant, "n": n, "run_s": round(secs, 3),
            "sentences_per_s": round(n / secs), "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "windows": "10 s sliding by 1 s, event time", **W.check(got, W.make_sentences(n)),
            "settings": conf, "python": platform.python_version(), "cpus": os.cpu_count()}


def run_child(variant: str, n: int, bytewax_python: str) -> dict:
    if variant == "bytewax":
        if not os.path.exists(bytewax_python):
            return {"bench": "windowed", "side": "bytewax", "skipped": f"no Bytewax python at {bytewax_python}"}
        cmd = [bytewax_python, os.path.join(HERE, "windowed_bytewax.py"), "--n", str(n)]
    else:
        cmd = [sys.executable, __file__, "--child", variant, "--n", str(n)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return {"bench": "windowed", "variant": variant, "error": "no answer within 900 s"}
    line = next((ln for ln in reversed(out.stdout.splitlines()) if ln.startswith("{")), None)
    if line is None:
        return {"bench": "windowed", "variant": variant, "error": (out.stderr or out.stdout)[-2000:]}
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=VARIANTS)
    ap.add_argument("--bytewax-python", default="/tmp/bw/bin/python")
    ap.add_argument("--child", choices=VARIANTS[:2], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        if os.environ.get("WINDOWED_GC") != "python":
            # as a worker process does (executor/worker_process.py): LocalCluster runs in this one
            from cluster_state.config import default_config
            from executor.gc_policy import apply_gc_thresholds

            apply_gc_thresholds(default_config())
        print(json.dumps(run_storm(args.child, args.n, timeout=600)), flush=True)
        return
    variants = args.only or list(VARIANTS)
    rates: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.repeat):
        for v in variants:  # alternated: the machine's speed drifts
            res = run_child(v, args.n, args.bytewax_python)
            print(json.dumps(res), flush=True)
            if res.get("correct") and "sentences_per_s" in res:
                rates[v].append(res["sentences_per_s"])
    med = {v: statistics.median(r) for v, r in rates.items() if r}
    summary: dict = {"bench": "windowed", "summary": True, "median_sentences_per_s": med}
    if med.get("bytewax"):
        summary["over_bytewax"] = {v: round(m / med["bytewax"], 2) for v, m in med.items() if v != "bytewax"}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
