"""Spark sink benchmark: rows/s through SparkSinkBolt and the complete latency it adds.
Prints one JSON line per run.

Each scenario runs in its own subprocess (its own JVM), one worker, Spark master local[1]:
  sink_b<B>   spout -> SparkSinkBolt(batch_size=B), as fast as it goes          (acked rows/s)
  rate_b<B>   the same with the spout offering --rate rows/s                    (complete latency)
  rate_null   spout -> a bolt that acks at once, offering --rate rows/s         (baseline latency)
  wc_null     word count (spout -> split x2 -> windowed count x2) -> a bolt that acks at once
  wc_sink     word count -> SparkSinkBolt with its default batch settings        (acked sentences/s)
The sink_b/rate_b runs set topology.max.spout.pending to (max_pending_batches + 1) * B, what the
sink can hold, so that batches can fill; the wc runs use examples/word_count's count bolt (one row
per word per 1 s window, anchored to its inputs) and its pending (20000).
Measuring starts once the first batch is committed (Spark is up) plus --warmup seconds (the
JVM keeps compiling for ~50 writes: use >= 15). Complete latency is sampled at the spout, emit
to ack; the latency the sink adds is rate_b<B> minus rate_null. Besides rates, each line has
the sink's blocked fraction (its executor waiting for the writer: back-pressure), the writer's
busy fraction, rows per write, where write time goes, and the CPU of Python and of the JVM.

usage: python bench/spark_sink.py [--seconds 10] [--warmup 3] [--rate 2000] [--only NAME ...]
       [--wc-pending N] [--sink JSON] [--store-tasks N] [--spark-conf K=V] [--switch-interval S]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "word_count"))

from local_throughput import BenchSpout, NullBolt, Split  # noqa: E402
from word_count_components import CountBolt  # noqa: E402

from executor.adapters import user_component  # noqa: E402
from executor.api import TopologyBuilder  # noqa: E402

WORDS = ["the", "cow", "jumped", "over", "moon", "apple", "day", "keeps", "doctor", "away"]
SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]  # the word_count example's sentences


def word_row(n):
    return [WORDS[n % len(WORDS)], n]


def wc_sentence(n):
    return [SENTENCES[n % len(SENTENCES)]]


def scenarios() -> dict[str, dict]:
    out = {}
    for b in (1_000, 10_000, 100_000):
        out[f"sink_b{b}"] = dict(kind="rows", sink=dict(batch_size=b), pending=5 * b)
        out[f"rate_b{b}"] = dict(kind="rows", sink=dict(batch_size=b), pending=5 * b, rate=True)
    out["rate_null"] = dict(kind="rows", sink=None, pending=50_000, rate=True)
    # The word count example's count bolt and settings (examples/word_count/topology.py).
    out["wc_null"] = dict(kind="wc", sink=None, pending=20_000)
    out["wc_sink"] = dict(kind="wc", sink={}, pending=20_000)
    return out


SCENARIOS = scenarios()


def _find(cluster, name, component):
    for w in cluster.workers(name):
        for ex in w.executors:
            if ex.component_id == component:
                return ex
    raise KeyError(component)


def run_one(name: str, seconds: float, warmup: float, rate: float, extra_conf: dict | None = None) -> dict:
    from daemons.local import LocalCluster
    from executor.sinks.spark import SparkSinkBolt

    sc = SCENARIOS[name]
    table = tempfile.mkdtemp(prefix="spark-sink-bench-")
    b = TopologyBuilder()
    fields, make = (["word", "n"], word_row) if sc["kind"] == "rows" else (["sentence"], wc_sentence)
    b.set_spout("spout", BenchSpout(fields, make, rate=rate if sc.get("rate") else None))
    last = "spout"
    if sc["kind"] == "wc":
        b.set_bolt("split", Split(), 2).shuffle_grouping("spout")
        b.set_bolt("count", CountBolt(), 2).fields_grouping("split", ["word"])
        last = "count"
    if sc["sink"] is None:
        b.set_bolt("store", NullBolt()).shuffle_grouping(last)
    else:
        b.set_bolt("store", SparkSinkBolt(os.path.join(table, "t"), **sc["sink"]),
                   sc.get("store_tasks", 1)).shuffle_grouping(last)
    conf = {"topology.workers": 1, "topology.max.spout.pending": sc["pending"],
            "topology.message.timeout.secs": 120, "spark.master": "local[1]", **(extra_conf or {})}
    try:
        with LocalCluster() as cluster:
            t_start = time.monotonic()
            cluster.submit_topology("bench", conf, b.create_topology())
            spout_ex = _find(cluster, "bench", "spout")
            spout = user_component(spout_ex.w.objs[spout_ex.task_ids[0]])
            stores = [ex.w.objs[t] for w in cluster.workers("bench") for ex in w.executors
                      if ex.component_id == "store" for t in ex.task_ids]
            store = stores[0]
            deadline = time.monotonic() + 180
            while getattr(spout, "acks", 0) == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            first_ack_secs = time.monotonic() - t_start
            time.sleep(warmup)
            spout.lat.clear()
            a0, r0, cpu0, t0 = spout.acks, _sum(stores, "rows_acked"), time.process_time(), time.monotonic()
            b0 = _sum(stores, "blocked_secs")
            writer = getattr(store, "_writer", None)
            w0 = _writer_totals(stores)
            ph0 = _phases(stores)
            jvm0 = _children_cpu()
            time.sleep(seconds)
            jvm1 = _children_cpu()
            w1 = _writer_totals(stores)
            ph1 = _phases(stores)
            a1, r1, cpu1, t1 = spout.acks, _sum(stores, "rows_acked"), time.process_time(), time.monotonic()
            b1 = _sum(stores, "blocked_secs")
            lat = sorted(spout.lat)
            writes = [x for s in stores if hasattr(s, "_writer") for x in s._writer.write_seconds]
            committed = _sum(stores, "batches_committed") if writer else None
            failed = spout.fails
            died = cluster.died("bench")
    finally:
        shutil.rmtree(table, ignore_errors=True)

    def pct(values, p):
        return round(values[min(len(values) - 1, int(p * len(values)))] * 1e3, 1) if values else None

    writes.sort()
    unit = "sentences" if sc["kind"] == "wc" else "rows"
    return {
        "bench": "spark_sink", "scenario": name, "unit": f"acked {unit}/s",
        "rate": round((a1 - a0) / (t1 - t0)),
        "sink_rows_per_sec": round((r1 - r0) / (t1 - t0)) if sc["sink"] is not None else None,
        "complete_latency_ms_p50": pct(lat, 0.50), "complete_latency_ms_p99": pct(lat, 0.99),
        "latency_samples": len(lat), "write_secs_p50": pct(writes, 0.5) and pct(writes, 0.5) / 1e3,
        "write_secs_max": round(writes[-1], 3) if writes else None,
        "batches_committed": committed, "sink_blocked_fraction": round((b1 - b0) / (t1 - t0), 3),
        "writer_busy_fraction": round((w1[0] - w0[0]) / (t1 - t0), 3),
        "rows_per_write": round((w1[1] - w0[1]) / max(1, w1[2] - w0[2])) if writer else None,
        "write_phase_ms": {k: round((v - ph0.get(k, 0.0)) / max(1, w1[2] - w0[2]) * 1e3, 1)
                           for k, v in ph1.items()},
        "first_ack_secs": round(first_ack_secs, 1), "failed": failed, "died": [str(d) for d in died],
        "python_cpu_secs_per_sec": round((cpu1 - cpu0) / (t1 - t0), 2),
        "jvm_cpu_secs_per_sec": round((jvm1 - jvm0) / (t1 - t0), 2),
        "peak_rss_mb_python": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "seconds": seconds, "offered_rate": rate if sc.get("rate") else None,
        "settings": {"topology.max.spout.pending": sc["pending"], "sink": sc["sink"], "spark.master": "local[1]",
                     "sink_tasks": len(stores), **(extra_conf or {})},
        "switch_interval": sys.getswitchinterval(), "python": platform.python_version(), "pyspark": _pyspark_version(), "cpus": os.cpu_count(),
    }


def _sum(objs, attr: str):
    return sum(getattr(o, attr, 0) for o in objs)


def _writer_totals(stores) -> tuple[float, int, int]:
    """(seconds spent writing, rows written, writes) over the sink tasks' writer threads."""
    ws = [s._writer for s in stores if hasattr(s, "_writer")]
    return (sum(w.busy_secs for w in ws), sum(w.rows_written for w in ws),
            sum(len(w.write_seconds) for w in ws))


def _phases(stores) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in stores:
        for k, v in getattr(getattr(s, "_table", None), "phase_secs", {}).items():
            out[k] = out.get(k, 0.0) + v
    return out


def _children_cpu() -> float:
    """CPU seconds used so far by this process's children (the Spark JVM)."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--rate", type=float, default=2000.0, help="offered rows/s of the rate_* scenarios")
    ap.add_argument("--wc-pending", type=int, default=None, help="max spout pending of the wc_* scenarios")
    ap.add_argument("--sink", default=None, help="JSON of SparkSinkBolt options for the wc_sink scenario")
    ap.add_argument("--store-tasks", type=int, default=None, help="sink tasks of the wc_sink scenario")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval for the run (CPython's default is 0.005 s)")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra topology config key, e.g. spark.* or sink.compaction.* (repeatable)")
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.wc_pending:
        for name in ("wc_null", "wc_sink"):
            SCENARIOS[name]["pending"] = args.wc_pending
    if args.sink:
        SCENARIOS["wc_sink"]["sink"] = json.loads(args.sink)
    if args.store_tasks:
        SCENARIOS["wc_sink"]["store_tasks"] = args.store_tasks
    if args.child and args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    if args.child:
        import yaml  # values as -c reads them: "false" is a bool, "5" an int

        extra_conf = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.spark_conf)}
        print(json.dumps(run_one(args.child, args.seconds, args.warmup, args.rate, extra_conf)), flush=True)
        return
    for name in args.only or list(SCENARIOS):
        extra = ["--wc-pending", str(args.wc_pending)] if args.wc_pending else []
        extra += ["--sink", args.sink] if args.sink else []
        extra += ["--store-tasks", str(args.store_tasks)] if args.store_tasks else []
        extra += [a for kv in args.spark_conf for a in ("--spark-conf", kv)]
        extra += ["--switch-interval", str(args.switch_interval)] if args.switch_interval else []
        out = subprocess.run([sys.executable, __file__, "--child", name, "--seconds", str(args.seconds),
                              "--warmup", str(args.warmup), "--rate", str(args.rate), *extra],
                             capture_output=True, text=True, timeout=900)
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else json.dumps(
            {"bench": "spark_sink", "scenario": name, "error": out.stderr[-2000:]})
        print(line, flush=True)


if __name__ == "__main__":
    main()
