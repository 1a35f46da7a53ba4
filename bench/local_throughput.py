"""Local-mode throughput and latency benchmark. Prints one JSON line per run.

Runs each scenario in its own subprocess (so peak RSS is per scenario), one worker:
  null_noack    spout -> null bolt, topology.acker.executors 0      (tuples/s through the bolt)
  null_acked    spout -> null bolt, acking                           (acked tuples/s)
  wc_acked      spout -> split -> count, acking                      (acked sentences/s)
  wc_noack      the same with topology.acker.executors 0             (sentences/s through split)
  wc_latency    acked word count with the spout offering 5,000 sentences/s
Complete latency is sampled at the spout, from emit to ack.

usage: python bench/local_throughput.py [--seconds 10] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from executor.adapters import user_component  # noqa: E402
from executor.api import BasicBolt, Bolt, Spout, TopologyBuilder  # noqa: E402

SENTENCES = [
    "the cow jumped over the moon and back again",
    "an apple a day keeps the doctor away from me",
    "four score and seven years ago our fathers",
    "snow white and the seven dwarfs went home now",
]  # 9-10 words each: about 11 tuples and 12 acker messages per sentence


class BenchSpout(Spout):
    """Emits make_values(n) for n = 0, 1, 2, ... (with message ids unless acked=False), as fast as
    it can or at `rate` per second; samples complete latency (emit to ack) every sample_every."""

    def __init__(self, fields, make_values, acked=True, rate=None, sample_every=20):
        self.fields = list(fields)
        self.make_values = make_values
        self.acked_mode = acked
        self.rate = rate
        self.sample_every = sample_every

    def declare_output_fields(self, declarer):
        declarer.declare(self.fields)

    def open(self, conf, context, collector):
        self.c = collector
        self.n = 0
        self.acks = 0
        self.fails = 0
        self.started = {}
        self.lat = []
        self.t0 = time.monotonic()

    def next_tuple(self):
        if self.rate is not None and self.n >= (time.monotonic() - self.t0) * self.rate:
            return
        n = self.n
        self.n = n + 1
        values = self.make_values(n)
        if not self.acked_mode:
            self.c.emit(values)
            return
        if n % self.sample_every == 0:
            self.started[n] = time.monotonic()
        self.c.emit(values, msg_id=n)

    def ack(self, msg_id):
        self.acks += 1
        t = self.started.pop(msg_id, None)
        if t is not None:
            self.lat.append(time.monotonic() - t)

    def fail(self, msg_id):
        self.fails += 1
        self.started.pop(msg_id, None)


def fixed_value(n):
    return ["x" * 16]


def sentence(n):
    return [SENTENCES[n % len(SENTENCES)]]


class NullBolt(Bolt):
    def prepare(self, conf, context, collector):
        self.c = collector
        self.n = 0

    def execute(self, tup):
        self.n += 1
        self.c.ack(tup)


class Split(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def execute(self, tup, collector):
        for w in tup.values[0].split():
            collector.emit([w])


class Count(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])

    def prepare(self, conf, context):
        self.counts = {}

    def execute(self, tup, collector):
        w = tup.values[0]
        c = self.counts.get(w, 0) + 1
        self.counts[w] = c


SCENARIOS = {
    "null_noack": dict(kind="null", acked=False, conf={"topology.acker.executors": 0}),
    "null_acked": dict(kind="null", acked=True, conf={"topology.max.spout.pending": 5000}),
    "wc_acked": dict(kind="wc", acked=True, conf={"topology.max.spout.pending": 2000}),
    "wc_noack": dict(kind="wc", acked=False, conf={"topology.acker.executors": 0}),
    "wc_latency": dict(kind="wc", acked=True, rate=5000, conf={"topology.max.spout.pending": 2000}),
}


def _find(cluster, name, component):
    for w in cluster.workers(name):
        for ex in w.executors:
            if ex.component_id == component:
                return ex
    raise KeyError(component)


def run_one(name: str, seconds: float, warmup: float) -> dict:
    from daemons.local import LocalCluster

    sc = SCENARIOS[name]
    b = TopologyBuilder()
    if sc["kind"] == "null":
        b.set_spout("spout", BenchSpout(["value"], fixed_value, acked=sc["acked"], rate=sc.get("rate")))
        b.set_bolt("null", NullBolt()).shuffle_grouping("spout")
        unit = "tuples"
    else:
        b.set_spout("spout", BenchSpout(["sentence"], sentence, acked=sc["acked"], rate=sc.get("rate")))
        b.set_bolt("split", Split()).shuffle_grouping("spout")
        b.set_bolt("count", Count()).fields_grouping("split", ["word"])
        unit = "sentences"
    conf = {"topology.workers": 1, **sc["conf"]}
    # As `storm-py local` does: the scenario's process is the worker's (it runs alone in it).
    from cluster_state.config import default_config
    from executor.gc_policy import apply_gc_thresholds

    apply_gc_thresholds({**default_config(), **conf})
    with LocalCluster() as cluster:
        cluster.submit_topology("bench", conf, b.create_topology())
        spout_ex = _find(cluster, "bench", "spout")
        first_bolt = _find(cluster, "bench", "null" if sc["kind"] == "null" else "split")
        spout = user_component(spout_ex.w.objs[spout_ex.task_ids[0]])

        def done() -> int:
            return spout.acks if sc["acked"] else first_bolt.executed

        time.sleep(warmup)
        spout.lat.clear()
        c0, cpu0, t0 = done(), time.process_time(), time.monotonic()
        time.sleep(seconds)
        c1, cpu1, t1 = done(), time.process_time(), time.monotonic()
        lat = sorted(spout.lat)
        failed = spout.fails
        died = cluster.died("bench")
    rate = (c1 - c0) / (t1 - t0)

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3, 3) if lat else None

    return {
        "bench": "local_throughput", "scenario": name, "unit": f"{unit}/s", "rate": round(rate),
        "complete_latency_ms_p50": pct(0.50), "complete_latency_ms_p99": pct(0.99),
        "latency_samples": len(lat), "failed": failed, "died": [str(d) for d in died],
        "cpu_secs_per_sec": round((cpu1 - cpu0) / (t1 - t0), 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "seconds": seconds, "settings": {**conf, "offered_rate": sc.get("rate"), "parallelism": 1,
                                         "gc_threshold": list(gc.get_threshold())},
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.seconds, args.warmup)), flush=True)
        return
    for name in args.only or list(SCENARIOS):
        out = subprocess.run([sys.executable, __file__, "--child", name, "--seconds", str(args.seconds),
                              "--warmup", str(args.warmup)], capture_output=True, text=True, timeout=600)
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else json.dumps(
            {"bench": "local_throughput", "scenario": name, "error": out.stderr[-2000:]})
        print(line, flush=True)


if __name__ == "__main__":
    main()
