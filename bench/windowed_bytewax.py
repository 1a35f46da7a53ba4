#!/usr/bin/env python3
"""Bytewax's side of the windowed word count (bench/windowed.py runs it): run it with a Python
that has Bytewax (in its own virtualenv: `python3 -m venv /tmp/bw && /tmp/bw/bin/pip install
bytewax psutil`; Bytewax pins its own dependencies, never install it into storm-py's).

Dataflow, one process, one worker (run_main): a source of (sentence, event time) ->
flat_map split -> count_window keyed by word (EventClock on the sentence's time, 5 s wait;
SlidingWindower 10 s sliding by 1 s) -> a sink keeping (window end, word) -> count. Prints one
JSON line: sentences/s from the first source poll to the sink's close, and whether the complete
windows equal the plain computation (windowed_workload.check).

usage: /tmp/bw/bin/python bench/windowed_bytewax.py [--n 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import windowed_workload as W  # noqa: E402

NPART = 1  # one ordered source: with two, one partition's batch runs ahead and the other's tuples come late
BATCH = 1000


def _dt(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)


def build(sentences: list[str], result: dict):
    import bytewax.operators as op
    import bytewax.operators.windowing as win
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
    from bytewax.outputs import DynamicSink, StatelessSinkPartition

    n = len(sentences)
    align_ms = W.BASE_MS - 2 * W.LENGTH_MS  # a whole second before every window that holds a sentence

    class Part(StatefulSourcePartition):
        def __init__(self, k, resume):
            self.i = resume if resume is not None else k

        def next_batch(self):
            result.setdefault("t_first", time.monotonic())
            if self.i >= n:
                raise StopIteration()
            out = []
            while self.i < n and len(out) < BATCH:
                out.append((sentences[self.i], W.event_ms(self.i)))
                self.i += NPART
            return out

        def snapshot(self):
            return self.i

    class Source(FixedPartitionedSource):
        def list_parts(self):
            return [f"p{k}" for k in range(NPART)]

        def build_part(self, step_id, for_part, resume_state):
            return Part(int(for_part[1:]), resume_state)

    class SinkPart(StatelessSinkPartition):
        def write_batch(self, items):
            got = result["got"]
            for word, (window_id, count) in items:
                end = align_ms + window_id * W.SLIDE_MS + W.LENGTH_MS
                got[(end, word)] = count

        def close(self):
            result["t_end"] = time.monotonic()

    class Sink(DynamicSink):
        def build(self, step_id, worker_index, worker_count):
            return SinkPart()

    flow = Dataflow("windowed_wordcount")
    s = op.input("inp", flow, Source())
    words = op.flat_map("split", s, lambda st: [(w, st[1]) for w in st[0].split()])
    # Bytewax's watermark moves on with the system clock between items (a batch later it is a few ms
    # past the newest sentence, that is a few sentences): a wait keeps the in-order items on time.
    clock = win.EventClock(lambda wt: _dt(wt[1]), wait_for_system_duration=timedelta(seconds=5))
    windower = win.SlidingWindower(length=timedelta(milliseconds=W.LENGTH_MS),
                                   offset=timedelta(milliseconds=W.SLIDE_MS), align_to=_dt(align_ms))
    counted = win.count_window("count", words, clock, windower, key=lambda wt: wt[0])
    op.output("out", counted.down, Sink())
    return flow


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()
    import psutil
    from bytewax.testing import run_main

    sentences = W.make_sentences(args.n)
    result: dict = {"got": {}}
    run_main(build(sentences, result))
    secs = result["t_end"] - result["t_first"]
    import bytewax  # noqa: F401

    out = {"bench": "windowed", "side": "bytewax", "n": args.n, "run_s": round(secs, 3),
           "sentences_per_s": round(args.n / secs), "rss_mb": round(psutil.Process().memory_info().rss / 2**20, 1),
           "windows": "10 s sliding by 1 s, event time", **W.check(result["got"], sentences)}
    try:
        from importlib.metadata import version
        out["version"] = version("bytewax")
    except Exception:  # noqa: BLE001 - the version is a label only
        pass
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
