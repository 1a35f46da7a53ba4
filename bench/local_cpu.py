"""CPU seconds for a fixed amount of work: N sentences through the word count in LocalCluster
(one worker), acked or not. Prints one JSON line.

Throughput benchmarks on this shared 2-core machine drift by up to 40% between hours; the CPU
time a fixed workload needs is steadier, so compare hot-path changes with this (alternate the
before and after commits in one sitting).

usage: python bench/local_cpu.py [--sentences 100000] [--mode ack|noack]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from local_throughput import Count, Split, sentence  # noqa: E402

from daemons.local import LocalCluster  # noqa: E402
from executor.api import Spout, TopologyBuilder  # noqa: E402


class Sentences(Spout):
    def __init__(self, total: int, acked: bool):
        self.total = total
        self.acked = acked

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])

    def open(self, conf, context, collector):
        self.c = collector
        self.n = 0

    def next_tuple(self):
        if self.n < self.total:
            self.c.emit(sentence(self.n), msg_id=self.n if self.acked else None)
            self.n += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--mode", choices=["ack", "noack"], default="ack")
    args = ap.parse_args()
    acked = args.mode == "ack"
    b = TopologyBuilder()
    b.set_spout("s", Sentences(args.sentences, acked))
    b.set_bolt("split", Split()).shuffle_grouping("s")
    b.set_bolt("count", Count()).fields_grouping("split", ["word"])
    conf = {"topology.max.spout.pending": 2000} if acked else {"topology.acker.executors": 0}
    component, stat = ("s", "acked") if acked else ("split", "executed")
    with LocalCluster() as cluster:
        cpu0, wall0 = time.process_time(), time.monotonic()
        cluster.submit_topology("cpu", conf, b.create_topology())
        while cluster.component_stats("cpu").get(component, {}).get(stat, 0) < args.sentences:
            time.sleep(0.1)  # each poll merges every executor's stats: keep it out of the figure
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    print(json.dumps({"bench": "local_cpu", "mode": args.mode, "sentences": args.sentences,
                      "cpu_secs": round(cpu, 3), "wall_secs": round(wall, 3)}))


if __name__ == "__main__":
    main()
