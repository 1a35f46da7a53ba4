"""Checkpoint overhead: the acked word count (spout -> split -> count, one worker, LocalCluster)
with a plain count bolt (counts in a dict, acked at once) against a stateful count bolt
(BaseStatefulBolt: counts in its KeyValueState, acks held until the checkpoint commits;
topology.state.checkpoint.interval.ms 1000) on the memory provider and on a real Redis
(cluster_state/redisserver.py, a server of its own). Prints one JSON line per run (alternating
the variants --repeat times, each in its own process), then a summary with the stateful/plain
ratios of the medians and the commit latency percentiles (PREPARE sent to COMMIT acked).

The `none` variant is the same word count with no guarantee at all (no message ids, no ackers):
the price of a guarantee is each variant's `processed` rate (sentences the split bolt executed a
second, the same measure for every variant) over none's (`ratio_to_none`).

With --splits 2 the count bolt has two inputs and aligns each checkpoint's barrier: the
alignment percentiles are of its last 60 checkpoints (executor/checkpoint/forwarder.py).

usage: python3 bench/state.py [--seconds 10] [--warmup 5] [--repeat 2] [--only plain memory redis] [--splits 1]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

from local_throughput import BenchSpout, Count, Split, _find, sentence  # noqa: E402

from executor.adapters import user_component  # noqa: E402
from executor.api import BaseStatefulBolt, BaseStatefulSpout, TopologyBuilder  # noqa: E402

# plain: no state; memory / redis: Storm's at-least-once (acks held until the commit, so at most
# max pending per checkpoint interval); memory-100ms: the same, checkpointing every 100 ms;
# exactly-once / exactly-once-redis: a BaseStatefulSpout, topology.state.exactly.once, max spout
# pending unset (there it counts the tuples not yet in a committed checkpoint: it would set the rate);
# redis-pending-40k: at-least-once on Redis with max spout pending 40,000 (the bound raised, as a
# Storm user tunes it: a tuple's acks wait ~one checkpoint interval); none: no message ids, no
# ackers, a plain count (no guarantee)
# exactly-once-dict: exactly-once with the count kept in a dict and put into the state once per
# checkpoint (pre_prepare), reloaded after a rollback: what the state layer's get/put per word costs
VARIANTS = ("plain", "memory", "redis", "memory-100ms", "exactly-once", "exactly-once-redis", "redis-pending-40k",
            "none", "exactly-once-dict")
PENDING = 2000


class StatefulCount(BaseStatefulBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])

    def prepare(self, conf, context, collector):
        self.c = collector

    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        w = tup.values[0]
        self.state.put(w, self.state.get(w, 0) + 1)
        self.c.ack(tup)


class DictStatefulCount(StatefulCount):
    """StatefulCount's counts in a dict, the words changed since the last checkpoint put into the
    state at pre_prepare; after a rollback (the state restored in place) read back from it."""

    def init_state(self, state):
        self.state = state
        self.stale = True

    def execute(self, tup):
        if self.stale:
            self.counts, self.changed, self.stale = dict(self.state.items()), set(), False
        w = tup.values[0]
        self.counts[w] = self.counts.get(w, 0) + 1
        self.changed.add(w)
        self.c.ack(tup)

    def pre_prepare(self, txid):
        if not self.stale:
            for w in self.changed:
                self.state.put(w, self.counts[w])
            self.changed.clear()

    def pre_rollback(self):
        self.stale = True


class StatefulBenchSpout(BaseStatefulSpout):
    """BenchSpout's sentences, its position in its state (exactly-once)."""

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])

    def open(self, conf, context, collector):
        self.c = collector
        self.acks = self.fails = 0

    def init_state(self, state):
        self.state = state
        self.n = state.get("n", 0)

    def pre_prepare(self, txid):
        self.state.put("n", self.n)  # the position once per checkpoint, not per tuple

    def next_tuple(self):
        n = self.n
        self.n = n + 1
        self.c.emit(sentence(n), msg_id=n)

    def ack(self, msg_id):
        self.acks += 1


def _executors(cluster, component: str) -> list:
    return [ex for w in cluster.workers("bench") for ex in w.executors if ex.component_id == component]


def run_one(variant: str, seconds: float, warmup: float, redis_port: int | None, splits: int = 1) -> dict:
    from daemons.local import LocalCluster

    b = TopologyBuilder()
    eo = variant.startswith("exactly-once")
    plain = variant in ("plain", "none")
    b.set_spout("spout", StatefulBenchSpout() if eo else BenchSpout(["sentence"], sentence, acked=variant != "none"))
    b.set_bolt("split", Split(), splits).shuffle_grouping("spout")
    count = Count() if plain else DictStatefulCount() if variant == "exactly-once-dict" else StatefulCount()
    b.set_bolt("count", count).fields_grouping("split", ["word"])
    pending = None if eo else 40_000 if variant == "redis-pending-40k" else PENDING
    conf = {"topology.workers": 1, "topology.max.spout.pending": pending,
            "topology.state.checkpoint.interval.ms": 100 if variant == "memory-100ms" else 1000,
            "topology.state.exactly.once": eo}
    if variant == "none":
        conf["topology.acker.executors"] = 0
    if "redis" in variant:
        conf.update({"topology.state.provider": "redis",
                     "topology.state.provider.config": {"host": "127.0.0.1", "port": redis_port,
                                                        "key_prefix": f"bench-{os.getpid()}"}})
    with LocalCluster() as cluster:
        cluster.submit_topology("bench", conf, b.create_topology())
        spout_ex = _find(cluster, "bench", "spout")
        spout = user_component(spout_ex.w.objs[spout_ex.task_ids[0]])
        split_exs = _executors(cluster, "split")
        cp = None
        if not plain:
            cp_ex = _find(cluster, "bench", "$checkpointspout")
            cp = cp_ex.w.objs[cp_ex.task_ids[0]]
        time.sleep(warmup)
        if cp is not None:
            cp.recent_commit_secs.clear()
        c0, x0, cpu0, t0 = spout.acks, sum(ex.executed for ex in split_exs), time.process_time(), time.monotonic()
        time.sleep(seconds)
        c1, x1, cpu1, t1 = spout.acks, sum(ex.executed for ex in split_exs), time.process_time(), time.monotonic()
        commits = sorted(cp.recent_commit_secs) if cp is not None else []
        # The count bolt's barrier alignments (its last 60: executor/checkpoint/forwarder.py);
        # with one split task there is nothing to align.
        aligned = sorted(a for ex in _executors(cluster, "count") for t in ex.task_ids
                         for a in getattr(ex.w.objs[t], "_alignments", ()))
        died = cluster.died("bench")

    def pct(p):
        return round(commits[min(len(commits) - 1, int(p * len(commits)))] * 1e3, 1) if commits else None

    return {"bench": "state", "variant": variant, "unit": "acked sentences/s", "rate": round((c1 - c0) / (t1 - t0)),
            "processed": round((x1 - x0) / (t1 - t0)),
            "commit_latency_ms_p50": pct(0.5), "commit_latency_ms_p99": pct(0.99),
            "commit_latency_ms_max": pct(1.0), "commits": len(commits), "failed": spout.fails,
            "alignment_ms_p50": aligned[len(aligned) // 2] if aligned else None,
            "alignment_ms_p99": aligned[min(len(aligned) - 1, int(0.99 * len(aligned)))] if aligned else None,
            "alignments": len(aligned), "splits": splits,
            "died": [str(d) for d in died], "cpu_secs_per_sec": round((cpu1 - cpu0) / (t1 - t0), 2),
            "seconds": seconds, "settings": conf, "python": platform.python_version(), "cpus": os.cpu_count()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", nargs="*", choices=VARIANTS)
    ap.add_argument("--splits", type=int, default=1, help="split bolt executors (2+: the count bolt aligns barriers)")
    ap.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    ap.add_argument("--redis-port", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        # The topology's workers run in this process, as `storm-py local` runs them: their
        # collector thresholds too (executor/gc_policy.py).
        from cluster_state.config import default_config
        from executor.gc_policy import apply_gc_thresholds

        apply_gc_thresholds(default_config())
        print(json.dumps(run_one(args.child, args.seconds, args.warmup, args.redis_port, args.splits)), flush=True)
        return
    from cluster_state.redisserver import RedisServer

    variants = args.only or list(VARIANTS)
    redis = RedisServer(tempfile.mkdtemp(prefix="bench-state-redis-")).start() if any("redis" in v for v in variants) else None
    results: dict[str, list[dict]] = {v: [] for v in variants}
    try:
        for _ in range(args.repeat):
            for v in variants:  # alternated: the machine's speed drifts
                out = subprocess.run([sys.executable, __file__, "--child", v, "--seconds", str(args.seconds),
                                      "--warmup", str(args.warmup), "--redis-port", str(redis.port if redis else 0),
                                      "--splits", str(args.splits)],
                                     capture_output=True, text=True, timeout=args.seconds + args.warmup + 120)
                line = next((ln for ln in out.stdout.splitlines() if ln.startswith("{")), None)
                if line is None:
                    print(json.dumps({"bench": "state", "variant": v, "error": out.stderr[-2000:]}), flush=True)
                    continue
                print(line, flush=True)
                results[v].append(json.loads(line))
    finally:
        if redis is not None:
            redis.stop()
    med = {v: statistics.median(r["rate"] for r in rs) for v, rs in results.items() if rs}
    summary = {"bench": "state", "summary": True, "median_rate": med}
    if "plain" in med:
        summary["ratio_to_plain"] = {v: round(m / med["plain"], 2) for v, m in med.items() if v != "plain"}
    processed = {v: statistics.median(r["processed"] for r in rs) for v, rs in results.items() if rs}
    summary["median_processed"] = processed
    if processed.get("none"):
        summary["ratio_to_none"] = {v: round(m / processed["none"], 2) for v, m in processed.items() if v != "none"}
    summary["commit_latency_ms_p99"] = {v: max((r["commit_latency_ms_p99"] or 0) for r in rs)
                                        for v, rs in results.items() if rs and v not in ("plain", "none")}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
