"""ZeroMQ transport benchmark: one process sends to another over ZmqTransport on 127.0.0.1.
Prints one JSON line per scenario.

  prepacked     the same msgpack batch of 100 word-count tuples sent over and over; the
                receiver only counts (the transport alone)           tuples/s, MB/s
  pack_unpack   each batch packed by the sender (executor.serialization.pack_batch of Tuple
                values, anchored, as the worker does) and unpacked by the receiver (the
                per-hop cost of a worker)                            tuples/s, MB/s
  rtt           one single-tuple batch at a time, echoed back       round trip median/p99

A refused try_send (high-water mark reached) is retried after a short nap, as the worker's
transfer thread does. The receiver is a child process running this file with --child.

usage: python bench/transport.py [--batches 30000] [--round-trips 5000] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import msgpack  # noqa: E402

from executor.serialization import pack_batch, unpack_batch  # noqa: E402
from executor.transport import ZmqTransport  # noqa: E402
from executor.tuple import Fields, Tuple  # noqa: E402

HOST = "127.0.0.1"
BATCH = 100
END = b""  # end of a run: the child answers with its counts
WORDS = ["the", "cow", "jumped", "over", "moon", "apple", "doctor", "seven", "dwarfs", "home"]
FIELDS = Fields(["word", "count"])
SCENARIOS = ("prepacked", "pack_unpack", "rtt")


def _entries(n: int, rng: random.Random) -> list:
    """n (task, Tuple) entries shaped like word-count traffic between two workers, anchored."""
    return [(7, Tuple([rng.choice(WORDS), rng.randrange(1000)], 3, "default", "split", FIELDS,
                      {rng.getrandbits(64): rng.getrandbits(64)})) for _ in range(n)]


def _resolve(task: int, stream: str):
    return "split", FIELDS


def _send(sender, addr, payload: bytes) -> int:
    """Send, napping while refused; returns the number of refusals."""
    refused = 0
    while not sender.try_send(addr, payload):
        refused += 1
        time.sleep(0.00005)  # the peer is full: give it the CPU (2 cores, 2 processes)
    return refused


def _recv(receiver, deadline: float) -> bytes:
    while True:
        m = receiver.recv(0.1)
        if m is not None:
            return m
        if time.monotonic() > deadline:
            raise TimeoutError("no answer from the child receiver")


def child(mode: str, parent_port: int) -> None:
    """The receiving process: owns one receiver and one sender, all on its main thread."""
    t = ZmqTransport(bind_host=HOST)
    r = t.bind((HOST, 0))
    s = t.connector()
    parent = (HOST, parent_port)
    s.connect(parent)
    print(r.address[1], flush=True)
    messages = nbytes = tuples = 0
    cpu0 = _cpu()
    try:
        while True:
            m = r.recv(1.0)
            if m is None:
                continue
            if m == END:
                _send(s, parent, msgpack.packb([messages, nbytes, tuples, round(_cpu() - cpu0, 3)]))
                break
            messages += 1
            nbytes += len(m)
            if mode == "pack_unpack":
                tuples += len(unpack_batch(m, _resolve))
            elif mode == "rtt":
                _send(s, parent, m)
    finally:
        s.close()
        r.close()
        t.close()


class _Peer:
    """This process's side: a receiver for answers, a sender to the child."""

    def __init__(self, mode: str):
        self.t = ZmqTransport(bind_host=HOST)
        self.r = self.t.bind((HOST, 0))
        self.s = self.t.connector()
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", mode,
                                      str(self.r.address[1])], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"child receiver exited with {self.proc.wait()}")
        self.addr = (HOST, int(line))
        self.s.connect(self.addr)
        deadline = time.monotonic() + 10
        while not self.s.is_connected(self.addr):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no connection to the child receiver at {self.addr}")
            time.sleep(0.001)

    def finish(self) -> list:
        _send(self.s, self.addr, END)
        counts = msgpack.unpackb(_recv(self.r, time.monotonic() + 60))
        self.close()
        return counts

    def close(self) -> None:
        self.s.close()
        self.r.close()
        self.t.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # this child, by its pid
            self.proc.wait()
        self.proc.stdout.close()


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run_throughput(mode: str, batches: int) -> dict:
    rng = random.Random(1)
    peer = _Peer(mode)
    entries = [_entries(BATCH, rng) for _ in range(64)]
    fixed = pack_batch(entries[0])
    refused = 0
    sent_bytes = 0
    cpu0, t0 = _cpu(), time.perf_counter()
    for i in range(batches):
        payload = fixed if mode == "prepacked" else pack_batch(entries[i % 64])
        sent_bytes += len(payload)
        refused += _send(peer.s, peer.addr, payload)
    messages, nbytes, tuples, child_cpu = peer.finish()  # answered once the child read everything
    elapsed = time.perf_counter() - t0
    cpu = _cpu() - cpu0
    assert messages == batches and nbytes == sent_bytes, (messages, batches, nbytes, sent_bytes)
    if mode == "pack_unpack":
        assert tuples == batches * BATCH, (tuples, batches * BATCH)
    return {"tuples_per_s": round(batches * BATCH / elapsed), "mb_per_s": round(sent_bytes / elapsed / 1e6, 1),
            "batches": batches, "tuples_per_batch": BATCH, "bytes_per_batch": round(sent_bytes / batches),
            "seconds": round(elapsed, 3), "sender_cpu_s": round(cpu, 3), "receiver_cpu_s": child_cpu, "refused_sends": refused}


def run_rtt(round_trips: int) -> dict:
    peer = _Peer("rtt")
    payload = pack_batch(_entries(1, random.Random(2)))
    samples = []
    for i in range(round_trips + 100):
        t0 = time.perf_counter()
        _send(peer.s, peer.addr, payload)
        _recv(peer.r, time.monotonic() + 10)
        if i >= 100:  # the first ones warm up
            samples.append(time.perf_counter() - t0)
    peer.finish()
    samples.sort()
    return {"round_trips": round_trips, "bytes": len(payload),
            "rtt_median_us": round(statistics.median(samples) * 1e6, 1),
            "rtt_p99_us": round(samples[int(len(samples) * 0.99) - 1] * 1e6, 1),
            "rtt_max_us": round(samples[-1] * 1e6, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=30000)
    ap.add_argument("--round-trips", type=int, default=5000)
    ap.add_argument("--only", nargs="*", choices=SCENARIOS)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PARENT_PORT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    for name in args.only or SCENARIOS:
        result = run_rtt(args.round_trips) if name == "rtt" else run_throughput(name, args.batches)
        print(json.dumps({"bench": "transport", "scenario": name, **result, "python": platform.python_version(),
                          "time": time.strftime("%Y-%m-%dT%H:%M:%S")}), flush=True)


if __name__ == "__main__":
    main()
