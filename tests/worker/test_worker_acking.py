"""Acking across two worker processes (real ZooKeeper, real ZeroMQ): fan-out, multi-anchoring,
explicit fail, timeout and replay. The spout runs in one worker, the bolts (and one acker) in
the other; spouts and bolts record what they saw in files."""

from __future__ import annotations

import textwrap

import pytest
from testutil import wait_until
from worker_helpers import Rig, free_ports, read_lines, write_topology

pytestmark = [pytest.mark.timeout(150), pytest.mark.zk, pytest.mark.cluster]

COMPONENTS = textwrap.dedent('''
    import glob
    import os

    from executor.api import Bolt, Spout


    def append(path, line):
        with open(path, "a") as f:
            f.write(line + "\\n")


    def ids_in(out, pattern):
        ids = set()
        for p in glob.glob(os.path.join(out, pattern)):
            with open(p) as f:
                ids.update(int(x) for x in f.read().split())
        return ids


    class IdSpout(Spout):
        """Emits [n] with message id n for n < total. On ack it appends "n 1" to acks-<i>.txt when
        every component in `check` had already recorded acking n (else "n 0"); on fail it
        appends n to fails-<i>.txt and, with replay, emits n again."""

        def __init__(self, total, out, replay=False, check=()):
            self.total = total
            self.out = out
            self.do_replay = replay
            self.check = list(check)

        def declare_output_fields(self, declarer):
            declarer.declare(["n"])

        def open(self, conf, context, collector):
            self.c = collector
            self.i = context.this_task_index
            self.step = len(context.this_component_tasks)
            self.next = self.i
            self.replay = []

        def next_tuple(self):
            if self.replay:
                n = self.replay.pop()
            elif self.next < self.total:
                n, self.next = self.next, self.next + self.step
            else:
                return
            self.c.emit([n], msg_id=n)

        def ack(self, msg_id):
            seen = all(msg_id in ids_in(self.out, f"{comp}-acked-*.txt") for comp in self.check)
            append(os.path.join(self.out, f"acks-{self.i}.txt"), f"{msg_id} {int(seen)}")

        def fail(self, msg_id):
            append(os.path.join(self.out, f"fails-{self.i}.txt"), str(msg_id))
            if self.do_replay:
                self.replay.append(msg_id)


    class _Recording(Bolt):
        def __init__(self, out):
            self.out = out

        def prepare(self, conf, context, collector):
            self.c = collector
            self.name = f"{context.this_component_id}-%s-{context.this_task_id}.txt"

        def record(self, what, line):
            append(os.path.join(self.out, self.name % what), line)


    class AckBolt(_Recording):
        """Records n in <component>-acked-<task>.txt, then acks."""

        def execute(self, tup):
            self.record("acked", str(tup.values[0]))
            self.c.ack(tup)


    class HoldBolt(_Recording):
        """Holds its inputs until `after`'s acked files name every n < total, then records and
        acks them (checked on each tick)."""

        def __init__(self, out, after, total):
            super().__init__(out)
            self.after = after
            self.total = total

        def get_component_configuration(self):
            return {"topology.tick.tuple.freq.secs": 0.2}

        def prepare(self, conf, context, collector):
            super().prepare(conf, context, collector)
            self.held = []
            self.released = False

        def execute(self, tup):
            if not tup.is_tick():
                self.held.append(tup)
                self.record("held", str(tup.values[0]))
            elif not self.released:
                self.released = len(ids_in(self.out, f"{self.after}-acked-*.txt")) >= self.total
            if self.released:
                for t in self.held:
                    self.record("acked", str(t.values[0]))
                    self.c.ack(t)
                self.held = []


    class Pair(_Recording):
        """Joins inputs two by two: emits [a, b] anchored to both, then acks both."""

        def declare_output_fields(self, declarer):
            declarer.declare(["a", "b"])

        def prepare(self, conf, context, collector):
            super().prepare(conf, context, collector)
            self.pending = None

        def execute(self, tup):
            if self.pending is None:
                self.pending = tup
                return
            first, self.pending = self.pending, None
            self.c.emit([first.values[0], tup.values[0]], anchors=[first, tup])
            self.c.ack(first)
            self.c.ack(tup)


    class FailMultiples(_Recording):
        """Fails an input any of whose values is a multiple of `mod`, acks the others; records
        "v1,v2,... ok|fail" in <component>-seen-<task>.txt."""

        def __init__(self, out, mod):
            super().__init__(out)
            self.mod = mod

        def execute(self, tup):
            bad = any(v % self.mod == 0 for v in tup.values)
            self.record("seen", ",".join(str(v) for v in tup.values) + (" fail" if bad else " ok"))
            if bad:
                self.c.fail(tup)
            else:
                self.c.ack(tup)


    class DropFirst(_Recording):
        """Neither acks nor fails the first delivery of a multiple of `mod`; acks the rest.
        Records every delivery in <component>-seen-<task>.txt."""

        def __init__(self, out, mod):
            super().__init__(out)
            self.mod = mod

        def prepare(self, conf, context, collector):
            super().prepare(conf, context, collector)
            self.dropped = set()

        def execute(self, tup):
            n = tup.values[0]
            self.record("seen", str(n))
            if n % self.mod == 0 and n not in self.dropped:
                self.dropped.add(n)
                return
            self.c.ack(tup)
''')

TOPOLOGIES = {
    "fanout": '''
        b.set_spout("src", IdSpout({total}, out, check=["a", "b"]))
        b.set_bolt("a", AckBolt(out), 2).shuffle_grouping("src")
        b.set_bolt("b", HoldBolt(out, "a", {total}), 2).shuffle_grouping("src")
    ''',
    "multi": '''
        b.set_spout("src", IdSpout({total}, out))
        b.set_bolt("pair", Pair(out)).global_grouping("src")
        b.set_bolt("down", FailMultiples(out, 5), 2).shuffle_grouping("pair")
    ''',
    "fail": '''
        b.set_spout("src", IdSpout({total}, out), 2)
        b.set_bolt("judge", FailMultiples(out, 3), 2).shuffle_grouping("src")
    ''',
    "replay": '''
        b.set_spout("src", IdSpout({total}, out, replay=True))
        b.set_bolt("drop", DropFirst(out, 4), 2).shuffle_grouping("src")
    ''',
}


def _topology(tmp_path, kind: str, total: int):
    body = textwrap.dedent(TOPOLOGIES[kind])
    src = ("from {module} import AckBolt, DropFirst, FailMultiples, HoldBolt, IdSpout, Pair\n"
           "from executor.api import TopologyBuilder\n\nout = {out!r}\nb = TopologyBuilder()\n"
           + body + "topology = b.create_topology()\n")
    return write_topology(tmp_path, COMPONENTS, src, total=total)


@pytest.fixture
def rig(zk_conf, tmp_path):
    r = Rig(zk_conf, tmp_path, free_ports(2))
    yield r
    r.close()


def _run(rig, topo, name, conf, spout_with=()):
    """Submit; the spout (and the components in spout_with, and the first acker) in worker a, the
    other components and acker in worker b; start both."""
    storm_id = rig.submit(topo, name, {"topology.workers": 2, **conf})
    a, b = rig.ports
    tasks = rig.component_tasks(storm_id)
    first_acker = tasks["__acker"][0]
    rig.place(storm_id, lambda comp, ex: a if comp in ("src", *spout_with) or ex[0] == first_acker else b)
    for p in (a, b):
        rig.start_worker(storm_id, p)
    rig.wait_heartbeats([a, b])
    return storm_id, (a, b)


def _lines(out, pattern) -> list[str]:
    return [line for p in out.glob(pattern) for line in p.read_text().splitlines() if line.strip()]


def _acks(out) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for line in _lines(out, "acks-*.txt"):
        n, flag = line.split()
        found.setdefault(int(n), []).append(flag)
    return found


def _fails(out) -> list[int]:
    return [int(x) for x in read_lines(out, "fails-*.txt")]


def _wait(rig, ports, cond, message):
    def check():
        for p in ports:
            if rig.procs[p].poll() is not None:
                raise AssertionError(f"worker on {p} exited: {rig.log(p)}")
        return cond()
    wait_until(check, timeout=90, message=message)


def _stop(rig, ports):
    for p in ports:
        assert rig.stop_worker(p) == 0


def test_fan_out_to_bolts_in_the_other_worker_acks_only_when_every_branch_acked(rig, tmp_path):
    total = 60
    topo, out = _topology(tmp_path, "fanout", total)
    _sid, ports = _run(rig, topo, "fanout", {})
    _wait(rig, ports, lambda: len(_acks(out)) >= total,
          lambda: f"every tuple acked ({len(_acks(out))} of {total})")
    acks = _acks(out)
    assert sorted(acks) == list(range(total)) and all(v == ["1"] for v in acks.values()), acks
    assert _fails(out) == []
    # Branch b held every tuple until branch a had acked them all: the acks waited for b.
    assert sorted(int(x) for x in read_lines(out, "b-held-*.txt")) == list(range(total))
    assert sorted(int(x) for x in read_lines(out, "a-acked-*.txt")) == list(range(total))
    _stop(rig, ports)


def test_multi_anchored_tuple_acks_or_fails_both_of_its_roots(rig, tmp_path):
    total = 100
    topo, out = _topology(tmp_path, "multi", total)
    _sid, ports = _run(rig, topo, "multi", {}, spout_with=("down",))  # pair in b, down back in a
    _wait(rig, ports, lambda: len(_acks(out)) + len(_fails(out)) >= total,
          lambda: f"every root acked or failed ({len(_acks(out))} + {len(_fails(out))} of {total})")
    seen = [line.split() for line in _lines(out, "down-seen-*.txt")]
    pairs = {tuple(int(v) for v in vals.split(",")): verdict for vals, verdict in seen}
    assert sorted(n for pair in pairs for n in pair) == list(range(total))
    want_ack = {n for pair, verdict in pairs.items() if verdict == "ok" for n in pair}
    want_fail = {n for pair, verdict in pairs.items() if verdict == "fail" for n in pair}
    assert want_fail >= set(range(0, total, 5)) and want_ack  # a failed pair fails both its roots
    acks, fails = _acks(out), _fails(out)
    assert sorted(acks) == sorted(want_ack) and all(len(v) == 1 for v in acks.values())
    assert sorted(fails) == sorted(want_fail)
    _stop(rig, ports)


def test_an_explicit_fail_in_the_other_worker_calls_the_spouts_fail_with_the_message_id(rig, tmp_path):
    total = 90
    topo, out = _topology(tmp_path, "fail", total)
    _sid, ports = _run(rig, topo, "fail", {})
    _wait(rig, ports, lambda: len(_acks(out)) + len(_fails(out)) >= total,
          lambda: f"every message acked or failed ({len(_acks(out))} + {len(_fails(out))} of {total})")
    assert sorted(_fails(out)) == list(range(0, total, 3))
    assert sorted(_acks(out)) == [n for n in range(total) if n % 3]
    _stop(rig, ports)


@pytest.mark.slow
def test_a_dropped_tuple_times_out_fails_at_the_spout_and_is_replayed_until_acked(rig, tmp_path):
    total = 40
    topo, out = _topology(tmp_path, "replay", total)
    _sid, ports = _run(rig, topo, "replay", {"topology.message.timeout.secs": 2})
    _wait(rig, ports, lambda: set(_acks(out)) >= set(range(total)),
          lambda: f"every message acked ({len(set(_acks(out)) & set(range(total)))} of {total})"
                  f" fails {sorted(set(_fails(out)))}")
    dropped = set(range(0, total, 4))
    fails = _fails(out)
    assert set(fails) >= dropped and set(fails) <= set(range(total))
    assert all(len(v) == 1 for v in _acks(out).values())  # each message acked once
    delivered = [int(x) for x in read_lines(out, "drop-seen-*.txt")]
    assert all(delivered.count(n) >= 2 for n in dropped)  # the first delivery dropped, then replayed
    _stop(rig, ports)
