"""Worker-process test rig: a real ZooKeeper, a Nimbus core that writes the storm base and the
assignment, the package extracted where a supervisor would put it, and worker processes
started by the test itself (no supervisor)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from testutil import wait_until

from cluster_state import local_layout
from cluster_state.factory import mk_storm_cluster_state
from cluster_state.records import SupervisorInfo
from cluster_state.worker_beats import read_worker_heartbeat
from daemons.nimbus.code_store import CodeStore
from daemons.nimbus.core import NimbusCore
from executor.package import build_package, extract_package
from executor.topology_file import load_topology_file

ROOT = Path(__file__).resolve().parents[2]


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class Rig:
    def __init__(self, zk_conf: dict, tmp: Path, ports: list[int]):
        self.tmp = tmp
        self.ports = ports
        self.conf = {**zk_conf, "storm.local.dir": str(tmp / "local"), "storm.local.hostname": "127.0.0.1",
                     "worker.heartbeat.frequency.secs": 1, "task.heartbeat.frequency.secs": 1,
                     "task.refresh.poll.secs": 1, "supervisor.slots.ports": ports}
        self.cluster = mk_storm_cluster_state(self.conf)
        self.cluster.supervisor_heartbeat("sup-1", SupervisorInfo(
            time_secs=1, hostname="127.0.0.1", assignment_id="sup-1", used_ports=(), meta=tuple(ports),
            scheduler_meta=None, uptime_secs=0))
        store = CodeStore(tmp / "local" / "nimbus")
        store.open()
        self.nimbus = NimbusCore(self.conf, self.cluster, store)
        self.procs: dict[int, subprocess.Popen] = {}
        self.worker_ids: dict[int, str] = {}

    def submit(self, topo_dir: Path, name: str, conf: dict) -> str:
        tf = load_topology_file(topo_dir / "topology.py")
        pkg = self.tmp / f"{name}.zip"
        build_package(topo_dir, "topology.py", pkg, structure=tf.topology.structure.to_dict(),
                      conf={**tf.config, **conf}, max_bytes=10 << 20)
        storm_id = self.nimbus.submit(name, pkg)
        self.install_code(storm_id)
        return storm_id

    def install_code(self, storm_id: str, package: Path | None = None) -> Path:
        """What the supervisor does: the package extracted, stormconf.json beside it."""
        src = self.nimbus.store.topology_dir(storm_id)
        dest = local_layout.supervisor_stormdist(self.conf, storm_id)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        extract_package(package or src / "stormjar.zip", dest, max_bytes=10 << 20)
        shutil.copy(src / "stormconf.json", dest / "stormconf.json")
        return dest

    def slots(self, storm_id: str) -> list[int]:
        a = self.cluster.assignment_info(storm_id)
        return sorted({port for _node, port in a.executor_node_port.values()})

    def place(self, storm_id: str, port_of) -> dict[int, int]:
        """Rewrite the assignment: each executor goes to port_of(component, (start, end)) on sup-1.
        Returns task id -> port. Call before starting the workers."""
        from dataclasses import replace

        base = self.cluster.storm_base(storm_id)
        layout = self.nimbus.layout(storm_id, base)
        a = self.cluster.assignment_info(storm_id)
        enp, task_port = {}, {}
        for comp, execs in layout.executors.items():
            for ex in execs:
                port = port_of(comp, ex)
                enp[ex] = ("sup-1", port)
                for t in range(ex[0], ex[1] + 1):
                    task_port[t] = port
        assert set(enp) == set(a.executor_node_port), "the layout and the assignment disagree"
        self.cluster.set_assignment(storm_id, replace(a, executor_node_port=enp))
        return task_port

    def component_tasks(self, storm_id: str) -> dict[str, list[int]]:
        return self.nimbus.layout(storm_id, self.cluster.storm_base(storm_id)).component_tasks

    def start_worker(self, storm_id: str, port: int, env: dict | None = None) -> subprocess.Popen:
        wid = uuid.uuid4().hex
        wdir = local_layout.worker_root(self.conf, wid)
        wdir.mkdir(parents=True)
        conf_file = wdir / "supervisor-conf.json"
        conf_file.write_text(json.dumps(self.conf))
        proc = subprocess.Popen(
            [sys.executable, "-m", "executor.worker_main", "--storm-id", storm_id, "--supervisor-id", "sup-1",
             "--port", str(port), "--worker-id", wid, "--conf-file", str(conf_file)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        self.procs[port] = proc
        self.worker_ids[port] = wid
        return proc

    def heartbeat(self, port: int):
        return read_worker_heartbeat(self.conf, self.worker_ids[port])

    def wait_heartbeats(self, ports, timeout=60):
        def all_beating():
            for p in ports:
                if self.procs[p].poll() is not None:
                    raise AssertionError(f"worker on {p} exited {self.procs[p].returncode}: {self.log(p)}")
            return all(self.heartbeat(p) is not None for p in ports)
        wait_until(all_beating, timeout=timeout, message="worker heartbeats")

    def log(self, port: int, storm_id: str | None = None) -> str:
        logs = list((Path(self.conf["storm.local.dir"]) / "logs" / "workers-artifacts").glob(f"*/{port}/worker.log"))
        return "\n".join(p.read_text()[-3000:] for p in logs)

    def stop_worker(self, port: int, sig=signal.SIGTERM, timeout=15) -> int:
        proc = self.procs[port]
        if proc.poll() is None:
            proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
            raise AssertionError(f"worker on {port} did not exit within {timeout}s of {sig}") from None
        proc.stdout.close()
        proc.stderr.close()
        return proc.returncode

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            for f in (proc.stdout, proc.stderr):
                if not f.closed:
                    f.close()
        self.cluster.disconnect()


COUNT_COMPONENTS = textwrap.dedent('''
    import json
    import os

    from executor.api import BasicBolt, Bolt, Spout

    SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away",
                 "four score and seven years ago", "snow white and the seven dwarfs", "i am at two with nature"]


    class SentenceSpout(Spout):
        def __init__(self, total, ack_dir=None):
            self.total = total
            self.ack_dir = ack_dir

        def declare_output_fields(self, declarer):
            declarer.declare(["sentence"])

        def open(self, conf, context, collector):
            self.collector = collector
            self.i = context.this_task_index
            self.step = len(context.component_tasks(context.this_component_id))
            self.replay = []

        def next_tuple(self):
            if self.replay:
                i = self.replay.pop()
            elif self.i < self.total:
                i, self.i = self.i, self.i + self.step
            else:
                return
            self.collector.emit([SENTENCES[i % len(SENTENCES)]], msg_id=i)

        def fail(self, msg_id):
            self.replay.append(msg_id)

        def ack(self, msg_id):
            if self.ack_dir:  # acked ids survive a killed worker: the test reads them back
                with open(os.path.join(self.ack_dir, f"acks-{self.i % self.step}.txt"), "a") as f:
                    f.write(f"{msg_id}\\n")


    class Split(BasicBolt):
        def declare_output_fields(self, declarer):
            declarer.declare(["word"])

        def execute(self, tup, collector):
            for w in tup.values[0].split():
                collector.emit([w])


    class Count(Bolt):
        def __init__(self, out_dir):
            self.out_dir = out_dir

        def get_component_configuration(self):
            return {"topology.tick.tuple.freq.secs": 0.2}

        def prepare(self, conf, context, collector):
            self.collector = collector
            self.counts = {}
            self.path = os.path.join(self.out_dir, f"counts-{context.this_task_id}.json")

        def execute(self, tup):
            if tup.is_tick():
                tmp = self.path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(self.counts, f)
                os.replace(tmp, self.path)
                return
            w = tup.values[0]
            self.counts[w] = self.counts.get(w, 0) + 1
            self.collector.ack(tup)
''')

COUNT_TOPOLOGY = textwrap.dedent('''
    from {module} import Count, SentenceSpout, Split
    from executor.api import TopologyBuilder

    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout({total}, {out!r}), 2)
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", Count({out!r}), 3).fields_grouping("split", ["word"])
    topology = b.create_topology()
''')


def count_topology(root: Path, total: int) -> tuple[Path, Path]:
    return write_topology(root, COUNT_COMPONENTS, COUNT_TOPOLOGY, prefix="wc_components", total=total)


def write_topology(root: Path, components: str, topology: str, prefix: str = "components",
                   **fmt) -> tuple[Path, Path]:
    """A topology directory with a uniquely named components module `{prefix}_<hex>` (workers
    import the topology from the package) and an output directory; `topology` is formatted with
    module=, out= and fmt."""
    module = f"{prefix}_{uuid.uuid4().hex[:8]}"
    d = root / f"topo-{module}"
    out = root / f"out-{module}"
    d.mkdir()
    out.mkdir()
    (d / f"{module}.py").write_text(components)
    (d / "topology.py").write_text(topology.format(module=module, out=str(out), **fmt))
    return d, out


def read_json_files(out: Path, pattern: str) -> dict[str, object]:
    """name -> parsed JSON of every file matching pattern (files being replaced are skipped)."""
    found = {}
    for p in out.glob(pattern):
        try:
            found[p.name] = json.loads(p.read_text())
        except ValueError:
            continue
    return found


def read_lines(out: Path, pattern: str) -> list[str]:
    lines: list[str] = []
    for p in out.glob(pattern):
        lines.extend(p.read_text().split())
    return lines


def acked_ids(out: Path) -> set[int]:
    ids: set[int] = set()
    for p in out.glob("acks-*.txt"):
        ids.update(int(x) for x in p.read_text().split())
    return ids


def expected_counts(total: int) -> dict[str, int]:
    from collections import Counter

    sentences = ["the cow jumped over the moon", "an apple a day keeps the doctor away",
                 "four score and seven years ago", "snow white and the seven dwarfs", "i am at two with nature"]
    c: Counter = Counter()
    for i in range(total):
        c.update(sentences[i % len(sentences)].split())
    return dict(c)


def read_counts(out: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in out.glob("counts-*.json"):
        try:
            part = json.loads(p.read_text())
        except ValueError:
            continue
        for w, n in part.items():
            counts[w] = counts.get(w, 0) + n
    return counts
