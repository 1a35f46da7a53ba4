"""Every grouping across two worker processes (real ZooKeeper, real ZeroMQ): the assignment puts
the producer in one worker and its consumers in the other; each consumer task records what it
received in a file, and the test checks the exact distribution."""

from __future__ import annotations

import collections
import textwrap
from zlib import crc32

import pytest
from testutil import wait_until
from worker_helpers import Rig, free_ports, read_json_files, write_topology

from executor.grouping import mix32

pytestmark = [pytest.mark.timeout(150), pytest.mark.zk, pytest.mark.cluster]

COMPONENTS = textwrap.dedent('''
    import json
    import os

    from executor.api import Bolt, Spout


    class Source(Spout):
        """Emits (key, n) for n < total on the default stream and, when direct_to is set, the
        same numbers on the direct stream to direct_to's task n % len(tasks)."""

        def __init__(self, total, keys, direct_to=None):
            self.total = total
            self.keys = keys
            self.direct_to = direct_to

        def declare_output_fields(self, declarer):
            declarer.declare(["key", "n"])
            declarer.declare(["task", "n"], stream="direct", direct=True)

        def open(self, conf, context, collector):
            self.c = collector
            self.n = 0
            self.direct = context.component_tasks(self.direct_to) if self.direct_to else []

        def next_tuple(self):
            n = self.n
            if n >= self.total:
                return
            self.n = n + 1
            self.c.emit([f"k{n % self.keys}", n])
            if self.direct:
                task = self.direct[n % len(self.direct)]
                self.c.emit_direct(task, [task, n], stream="direct")


    class Recorder(Bolt):
        """Keeps (source task, values) of every input; writes them, with its pid and hash seed,
        to <out>/<component>-<task>.json on every tick."""

        def __init__(self, out):
            self.out = out

        def get_component_configuration(self):
            return {"topology.tick.tuple.freq.secs": 0.2}

        def prepare(self, conf, context, collector):
            self.c = collector
            self.got = []
            self.path = os.path.join(self.out, f"{context.this_component_id}-{context.this_task_id}.json")

        def execute(self, tup):
            if tup.is_tick():
                tmp = self.path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"pid": os.getpid(), "seed": os.environ.get("PYTHONHASHSEED"),
                               "got": self.got}, f)
                os.replace(tmp, self.path)
                return
            self.got.append([tup.source_task, list(tup.values)])
            self.c.ack(tup)


    class ModuloGrouping:
        def prepare(self, context, stream, targets):
            self.targets = sorted(targets)

        def choose_tasks(self, task_id, values):
            return [self.targets[values[1] % len(self.targets)]]
''')

ALL_TOPOLOGY = textwrap.dedent('''
    from {module} import ModuloGrouping, Recorder, Source
    from executor.api import TopologyBuilder

    out = {out!r}
    b = TopologyBuilder()
    b.set_spout("src", Source({total}, 5, direct_to="direct"))
    b.set_bolt("shuffle", Recorder(out), 3).shuffle_grouping("src")
    b.set_bolt("fields", Recorder(out), 3).fields_grouping("src", ["key"])
    b.set_bolt("all", Recorder(out), 3).all_grouping("src")
    b.set_bolt("global", Recorder(out), 3).global_grouping("src")
    b.set_bolt("none", Recorder(out), 2).none_grouping("src")
    b.set_bolt("local_remote", Recorder(out), 2).local_or_shuffle_grouping("src")
    b.set_bolt("local_mixed", Recorder(out), 2).local_or_shuffle_grouping("src")
    b.set_bolt("shuffle_mixed", Recorder(out), 2).shuffle_grouping("src")
    b.set_bolt("pkg", Recorder(out), 3).partial_key_grouping("src", ["key"])
    b.set_bolt("custom", Recorder(out), 3).custom_grouping("src", ModuloGrouping())
    b.set_bolt("direct", Recorder(out), 3).direct_grouping("src", stream="direct")
    topology = b.create_topology()
''')

SEEDS_TOPOLOGY = textwrap.dedent('''
    from {module} import Recorder, Source
    from executor.api import TopologyBuilder

    out = {out!r}
    b = TopologyBuilder()
    b.set_spout("src", Source({total}, {keys}), 2)
    b.set_bolt("fields", Recorder(out), 4).fields_grouping("src", ["key"])
    b.set_bolt("pkg", Recorder(out), 4).partial_key_grouping("src", ["key"])
    topology = b.create_topology()
''')


@pytest.fixture
def rig(zk_conf, tmp_path):
    r = Rig(zk_conf, tmp_path, free_ports(2))
    yield r
    r.close()


def _received(out, component, tasks) -> dict[int, list]:
    files = read_json_files(out, f"{component}-*.json")
    return {t: files[f"{component}-{t}.json"]["got"] for t in tasks if f"{component}-{t}.json" in files}


def _wait_for(rig, out, expected_totals: dict[str, int], tasks: dict[str, list[int]], ports):
    def done():
        for p in ports:
            if rig.procs[p].poll() is not None:
                raise AssertionError(f"worker on {p} exited: {rig.log(p)}")
        return all(sum(len(v) for v in _received(out, c, tasks[c]).values()) >= n for c, n in expected_totals.items())

    wait_until(done, timeout=90, message=lambda: "every consumer's records: " + str(
        {c: sum(len(v) for v in _received(out, c, tasks[c]).values()) for c in expected_totals}))


def test_every_grouping_routes_as_specified_across_two_worker_processes(rig, tmp_path):
    total = 120
    topo, out = write_topology(tmp_path, COMPONENTS, ALL_TOPOLOGY, total=total)
    storm_id = rig.submit(topo, "groupings", {"topology.workers": 2})
    a, b = rig.ports
    tasks = rig.component_tasks(storm_id)
    mixed_local = tasks["local_mixed"][0]
    shuffle_local = tasks["shuffle_mixed"][0]
    # The spout alone in worker a; every consumer in worker b except one local_mixed task and one
    # shuffle_mixed task.
    task_port = rig.place(storm_id, lambda comp, ex: a if comp == "src" or ex[0] in (mixed_local, shuffle_local)
                          else b)
    assert task_port[tasks["src"][0]] == a and task_port[mixed_local] == a and task_port[shuffle_local] == a
    assert all(task_port[t] == b for c in ("shuffle", "fields", "all", "global", "none", "local_remote", "pkg",
                                             "custom", "direct") for t in tasks[c])
    for p in (a, b):
        rig.start_worker(storm_id, p)
    rig.wait_heartbeats([a, b])
    consumers = ["shuffle", "fields", "all", "global", "none", "local_remote", "local_mixed", "shuffle_mixed",
                 "pkg", "custom", "direct"]
    expected = {c: total for c in consumers} | {"all": 3 * total}
    _wait_for(rig, out, expected, tasks, [a, b])
    got = {c: _received(out, c, tasks[c]) for c in consumers}
    sent = [[f"k{n % 5}", n] for n in range(total)]

    def values(c, task=None):
        return sorted((v for t, vs in got[c].items() if task in (None, t) for _src, v in vs), key=lambda v: v[1])

    # Each consumer got every tuple exactly once (all: once per task), from the spout's task.
    for c in consumers:
        if c not in ("all", "direct"):
            assert values(c) == sent, c
        assert all(src == tasks["src"][0] for vs in got[c].values() for src, _v in vs)
    # shuffle: spread over every task (round robin over a reshuffled list: 40 each).
    assert sorted(len(got["shuffle"].get(t, [])) for t in tasks["shuffle"]) == [40, 40, 40]
    # fields: each key at exactly one task, the one the stable hash names.
    targets = sorted(tasks["fields"])
    for t, vs in got["fields"].items():
        assert all(targets[mix32(crc32(v[0].encode())) % len(targets)] == t for _s, v in vs)
    # all: every task got every tuple.
    assert all(values("all", t) == sent for t in tasks["all"])
    # global: the lowest task got everything.
    assert values("global", min(tasks["global"])) == sent
    assert all(not got["global"].get(t) for t in tasks["global"] if t != min(tasks["global"]))
    # local_or_shuffle: with no local task, spread over the remote ones; with one, only it.
    assert all(len(got["local_remote"].get(t, [])) == total // 2 for t in tasks["local_remote"])
    assert values("local_mixed", mixed_local) == sent
    # shuffle with a task in the spout's worker, far from overloaded: locality-aware, only it.
    assert values("shuffle_mixed", shuffle_local) == sent
    # partial key: each key at one or two tasks.
    for key in {k for k, _n in sent}:
        assert 1 <= len({t for t, vs in got["pkg"].items() if any(v[0] == key for _s, v in vs)}) <= 2
    # custom: task index n % 3.
    custom = sorted(tasks["custom"])
    assert all(custom[v[1] % 3] == t for t, vs in got["custom"].items() for _s, v in vs)
    assert values("custom") == sent
    # direct: every number at the task the spout chose, named in the tuple.
    direct = tasks["direct"]
    assert sorted(v[1] for vs in got["direct"].values() for _s, v in vs) == list(range(total))
    assert all(v[0] == t and direct[v[1] % 3] == t for t, vs in got["direct"].items() for _s, v in vs)
    for p in (a, b):
        assert rig.stop_worker(p) == 0


def test_fields_grouping_agrees_between_processes_with_different_hash_seeds(rig, tmp_path):
    total, keys = 400, 40
    topo, out = write_topology(tmp_path, COMPONENTS, SEEDS_TOPOLOGY, total=total, keys=keys)
    storm_id = rig.submit(topo, "seeds", {"topology.workers": 2})
    a, b = rig.ports
    tasks = rig.component_tasks(storm_id)
    # One spout task in each worker; the consumers' tasks split over both workers.
    halves = {c: set(tasks[c][: len(tasks[c]) // 2]) for c in tasks}
    task_port = rig.place(storm_id, lambda comp, ex: a if ex[0] in halves.get(comp, ()) else b)
    src_a, src_b = tasks["src"]
    assert task_port[src_a] == a and task_port[src_b] == b
    rig.start_worker(storm_id, a, env={"PYTHONHASHSEED": "1"})
    rig.start_worker(storm_id, b, env={"PYTHONHASHSEED": "2"})
    rig.wait_heartbeats([a, b])
    # Each spout task emits n = 0 .. total-1, so every key total // keys times.
    _wait_for(rig, out, {"fields": 2 * total, "pkg": 2 * total}, tasks, [a, b])
    files = read_json_files(out, "fields-*.json")
    assert {f["seed"] for f in files.values()} == {"1", "2"}  # consumers ran under both seeds
    assert len({f["pid"] for f in files.values()}) == 2
    got = _received(out, "fields", tasks["fields"])
    key_task: dict[str, int] = {}
    per_source: dict[int, collections.Counter] = {src_a: collections.Counter(), src_b: collections.Counter()}
    for t, vs in got.items():
        for src, (key, _n) in vs:
            assert key_task.setdefault(key, t) == t, f"{key} at tasks {key_task[key]} and {t}"
            per_source[src][key] += 1
    assert len(key_task) == keys
    assert per_source[src_a] == per_source[src_b] == collections.Counter({f"k{i}": total // keys for i in range(keys)})
    assert len(set(key_task.values())) > 1  # the keys did spread over several tasks in both workers
    assert {task_port[t] for t in key_task.values()} == {a, b}
    # partial key: each key at one or two tasks, whichever process emitted it.
    pkg = _received(out, "pkg", tasks["pkg"])
    for i in range(keys):
        assert 1 <= len({t for t, vs in pkg.items() if any(v[0] == f"k{i}" for _s, v in vs)}) <= 2
    assert sum(len(vs) for vs in pkg.values()) == 2 * total
    for p in (a, b):
        assert rig.stop_worker(p) == 0
