"""Back-pressure across worker processes (real ZooKeeper, real ZeroMQ): a fast spout in worker a
feeds a slow bolt in worker b, with small buffers, no topology.max.spout.pending and no bound
learned without it (topology.spout.pending.latency.ms null). Memory stays bounded on both sides (RSS sampled with psutil, grouped by progress, not by time), the spout is
held back (tuples in flight stay far below the total), and every message is acked exactly once."""

from __future__ import annotations

import json
import textwrap

import psutil
import pytest
from testutil import wait_until
from worker_helpers import Rig, free_ports, write_topology

pytestmark = [pytest.mark.timeout(240), pytest.mark.zk, pytest.mark.cluster]

COMPONENTS = textwrap.dedent('''
    import json
    import os
    import time

    from executor.api import Bolt, Spout


    def write_json(path, obj):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(obj, f)
        os.replace(tmp, path)


    class FastSpout(Spout):
        """Emits (n, payload) with message id n for n < total as fast as it is allowed; writes
        its progress (emitted, acked, failed, duplicate acks, most tuples in flight) to
        <out>/spout.json every 500 acks and when every message is settled."""

        def __init__(self, total, payload_bytes, out):
            self.total = total
            self.payload = "x" * payload_bytes
            self.out = out

        def declare_output_fields(self, declarer):
            declarer.declare(["n", "payload"])

        def open(self, conf, context, collector):
            self.c = collector
            self.emitted = 0
            self.acked = set()
            self.dups = 0
            self.failed = 0
            self.max_inflight = 0
            self.path = os.path.join(self.out, "spout.json")

        def next_tuple(self):
            n = self.emitted
            if n >= self.total:
                return
            self.emitted = n + 1
            self.c.emit([n, self.payload], msg_id=n)
            inflight = self.emitted - len(self.acked) - self.failed
            if inflight > self.max_inflight:
                self.max_inflight = inflight

        def _settled(self):
            done = len(self.acked) + self.failed
            if done % 500 == 0 or done >= self.total:
                write_json(self.path, {"emitted": self.emitted, "acked": len(self.acked), "dups": self.dups,
                                       "failed": self.failed, "max_inflight": self.max_inflight})

        def ack(self, msg_id):
            if msg_id in self.acked:
                self.dups += 1
            self.acked.add(msg_id)
            self._settled()

        def fail(self, msg_id):
            self.failed += 1
            self._settled()


    class SlowBolt(Bolt):
        """Sleeps per tuple, acks, and writes how many tuples it executed on every tick."""

        def __init__(self, sleep_secs, out):
            self.sleep_secs = sleep_secs
            self.out = out

        def get_component_configuration(self):
            return {"topology.tick.tuple.freq.secs": 0.5}

        def prepare(self, conf, context, collector):
            self.c = collector
            self.seen = set()
            self.executed = 0
            self.path = os.path.join(self.out, f"bolt-{context.this_task_id}.json")

        def execute(self, tup):
            if tup.is_tick():
                write_json(self.path, {"executed": self.executed, "distinct": len(self.seen)})
                return
            time.sleep(self.sleep_secs)
            self.executed += 1
            self.seen.add(tup.values[0])
            self.c.ack(tup)
''')

TOPOLOGY = textwrap.dedent('''
    from {module} import FastSpout, SlowBolt
    from executor.api import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("src", FastSpout({total}, {payload}, {out!r}))
    b.set_bolt("slow", SlowBolt({sleep}, {out!r})).shuffle_grouping("src")
    topology = b.create_topology()
''')

MB = 1 << 20


@pytest.fixture
def rig(zk_conf, tmp_path):
    r = Rig(zk_conf, tmp_path, free_ports(2))
    yield r
    r.close()


def _read(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@pytest.mark.slow
def test_a_slow_bolt_in_the_other_worker_holds_the_spout_back_with_bounded_memory_and_nothing_lost(rig, tmp_path):
    total, payload, sleep = 60_000, 2048, 0.0002  # unbounded queues would hold ~150 MB of payload alone
    topo, out = write_topology(tmp_path, COMPONENTS, TOPOLOGY, total=total, payload=payload, sleep=sleep)
    storm_id = rig.submit(topo, "bp", {
        "topology.workers": 2, "topology.acker.executors": 1, "topology.message.timeout.secs": 120,
        "topology.spout.pending.latency.ms": None,  # no learned bound either: back-pressure alone
        "topology.executor.receive.buffer.size": 256, "topology.transfer.buffer.size": 1})
    a, b = rig.ports
    rig.place(storm_id, lambda comp, ex: b if comp == "slow" else a)  # spout and acker in a
    for p in (a, b):
        rig.start_worker(storm_id, p)
    rig.wait_heartbeats([a, b])
    procs = {p: psutil.Process(rig.procs[p].pid) for p in (a, b)}
    samples: list[tuple[int, int, int]] = []  # (acked, rss of a, rss of b)

    def settled():
        for p in (a, b):
            if rig.procs[p].poll() is not None:
                raise AssertionError(f"worker on {p} exited: {rig.log(p)}")
        s = _read(out / "spout.json") or {"acked": 0, "failed": 0}
        samples.append((s["acked"], procs[a].memory_info().rss, procs[b].memory_info().rss))
        return s["acked"] + s["failed"] >= total

    wait_until(settled, timeout=200, interval=0.1,
               message=lambda: f"every message settled: {_read(out / 'spout.json')}")
    spout = _read(out / "spout.json")
    assert spout["failed"] == 0 and spout["dups"] == 0 and spout["acked"] == total, spout
    # Held back: the spout never ran far ahead of the acks. What may be in flight: the bolt's
    # queue and the receive overflow (256 each), the destination queue (1 batch of 100), the
    # ZeroMQ high-water marks (64 messages each side, a message up to a destination queue's
    # content) and the kernel's socket buffers: about 14,000 tuples here.
    assert spout["max_inflight"] < total // 2, spout
    bolt_file = out / f"bolt-{rig.component_tasks(storm_id)['slow'][0]}.json"
    wait_until(lambda: (_read(bolt_file) or {}).get("executed") == total, timeout=30,
               message=lambda: f"the bolt's final count: {_read(bolt_file)}")
    bolt = _read(bolt_file)
    assert bolt == {"executed": total, "distinct": total}  # nothing dropped, nothing duplicated
    # Bounded on both sides, and no longer growing in the second half of the run.
    early = [s for s in samples if s[0] < total // 2]
    late = [s for s in samples if s[0] >= total // 2]
    assert early and late
    print(f"max in flight {spout['max_inflight']}; peak RSS a {max(s[1] for s in samples) / MB:.0f} MB,"
          f" b {max(s[2] for s in samples) / MB:.0f} MB; {len(samples)} samples")
    for i, name in ((1, "a (spout)"), (2, "b (slow bolt)")):
        peak = max(s[i] for s in samples)
        assert peak < 400 * MB, f"worker {name} peaked at {peak / MB:.0f} MB"
        assert max(s[i] for s in late) <= max(s[i] for s in early) + 64 * MB, (
            f"worker {name} kept growing: {max(s[i] for s in early) / MB:.0f} -> {max(s[i] for s in late) / MB:.0f} MB")
    for p in (a, b):
        assert rig.stop_worker(p) == 0
