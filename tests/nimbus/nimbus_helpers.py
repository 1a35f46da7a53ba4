"""Helpers for Nimbus tests: topology directories, packages, fake supervisors and heartbeats."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path
from typing import Any

from cluster_state.records import SupervisorInfo, WorkerHeartbeat
from executor.package import build_package
from executor.stats_record import ExecutorStats, to_wire
from executor.stats_windows import ALL_TIME
from executor.topology_file import load_topology_file

_ids = itertools.count(1)

COMPONENTS = textwrap.dedent('''
    import time

    from executor.api import Bolt, Spout


    class NumberSpout(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(["n"])

        def open(self, conf, context, collector):
            self.collector = collector
            self.n = 0
            rate = conf.get("numbers.per.second")  # unset: as fast as the topology takes them
            self.gap = 1.0 / rate if rate else 0.0
            self.next_at = 0.0

        def next_tuple(self):
            if self.gap:
                now = time.monotonic()
                if now < self.next_at:
                    return
                self.next_at = now + self.gap
            self.n += 1
            self.collector.emit([self.n], msg_id=self.n)


    class PassBolt(Bolt):
        def declare_output_fields(self, declarer):
            declarer.declare(["n"])

        def prepare(self, conf, context, collector):
            self.collector = collector

        def execute(self, tup):
            self.collector.emit(tup.values, anchors=tup)
            self.collector.ack(tup)
''')

TOPOLOGY = textwrap.dedent('''
    from {module} import NumberSpout, PassBolt
    from executor.api import TopologyBuilder

    builder = TopologyBuilder()
    builder.set_spout("numbers", NumberSpout(), {spouts})
    builder.set_bolt("pass", PassBolt(), {bolts}).set_num_tasks({bolt_tasks}).shuffle_grouping("numbers")
    topology = builder.create_topology()
    config = {config!r}
''')


def topology_dir(root: Path, spouts: int = 2, bolts: int = 3, bolt_tasks: int | None = None,
                 config: dict | None = None) -> Path:
    """A topology directory: topology.py plus a components module of a unique name."""
    module = f"nimbus_test_components_{next(_ids)}"
    d = root / f"topo-{module}"
    d.mkdir(parents=True)
    (d / f"{module}.py").write_text(COMPONENTS)
    (d / "topology.py").write_text(TOPOLOGY.format(module=module, spouts=spouts, bolts=bolts,
                                                   bolt_tasks=bolt_tasks or bolts, config=config or {}))
    return d


def package(root: Path, structure_edit=None, conf: dict | None = None, **kw: Any) -> Path:
    """Build a package of a fresh topology dir; structure_edit(dict) may break the structure."""
    d = topology_dir(root, **kw)
    tf = load_topology_file(d / "topology.py")
    structure = tf.topology.structure.to_dict()
    if structure_edit is not None:
        structure_edit(structure)
    out = root / f"{d.name}.zip"
    build_package(d, "topology.py", out, structure=structure, conf={**tf.config, **(conf or {})},
                  max_bytes=100 << 20)
    return out


def register_supervisor(cluster, sid: str, host: str, ports=(6700, 6701, 6702, 6703), time_secs: int = 1) -> None:
    cluster.supervisor_heartbeat(sid, SupervisorInfo(time_secs=time_secs, hostname=host, assignment_id=sid,
                                                     used_ports=(), meta=tuple(ports), scheduler_meta=None,
                                                     uptime_secs=0))


def beat(cluster, storm_id: str, assignment, time_secs: int, skip_slots=()) -> None:
    """Write a worker heartbeat for every assigned slot (as running workers would)."""
    by_slot: dict = {}
    for ex, slot in assignment.executor_node_port.items():
        by_slot.setdefault(slot, []).append(ex)
    for (node, port), executors in by_slot.items():
        if (node, port) in skip_slots:
            continue
        cluster.worker_heartbeat(storm_id, node, port, WorkerHeartbeat(
            storm_id=storm_id, executors=tuple(executors), port=port, time_secs=time_secs, uptime_secs=time_secs,
            executor_stats={ex: to_wire(ExecutorStats("c", "bolt", time_secs, {ALL_TIME: (time_secs, {
                "emitted|default": 1, "acked|src:default": 1})})) for ex in executors}))
