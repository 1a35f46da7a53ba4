"""Distributed-mode throughput and latency: bench/local_throughput.py's scenarios with
topology.workers 2 as two real worker processes on this machine. Prints one JSON line per run.

Starts its own ZooKeeper on loopback (cluster_state.zkserver), a Nimbus core in this process
(submit and scheduling: Nimbus's own placement over two slots), extracts the package where a
supervisor would, and starts the two workers as `python -m executor.worker_main` (as
tests/worker's rig does, no supervisor). The components are local_throughput.py's own: the
topology directory holds a copy of it as a module, plus probes (subclasses) that write counts to
files: acked scenarios count the spout's acks, unacked ones the first bolt's executed tuples.
Complete latency (emit to ack) is sampled at the spout every 20th tuple, within the window.
Per worker process: peak RSS sampled with psutil during the window, CPU seconds per second.

  null_noack, null_acked, wc_acked, wc_noack, wc_latency (5,000 sentences/s offered)

usage: python bench/cluster_throughput.py [--seconds 10] [--warmup 3] [--only NAME ...]
                                          [--profile]   (py-spy record of each worker over the
                                                         window; top self/inclusive entries)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from local_throughput import SCENARIOS  # noqa: E402  (the same scenarios, run on two workers)

from cluster_state import local_layout  # noqa: E402
from cluster_state.config import default_config  # noqa: E402
from cluster_state.factory import mk_storm_cluster_state  # noqa: E402
from cluster_state.local_state import LS_WORKER_HEARTBEAT, LocalState  # noqa: E402
from cluster_state.records import SupervisorInfo  # noqa: E402
from cluster_state.zkserver import ZooKeeperServer  # noqa: E402
from daemons.nimbus.code_store import CodeStore  # noqa: E402
from daemons.nimbus.core import NimbusCore  # noqa: E402
from executor.package import build_package, extract_package  # noqa: E402
from executor.topology_file import load_topology_file  # noqa: E402

PROBES = textwrap.dedent('''
    """Probes: local_throughput's components, writing their counts to files."""
    import json
    import os
    import time

    from bench_components import BenchSpout, Count, NullBolt, Split, fixed_value, sentence  # noqa: F401

    EVERY = 1024


    def _write(path, obj):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(obj, f)
        os.replace(tmp, path)


    class ProbeSpout(BenchSpout):
        def __init__(self, out, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.out = out

        def open(self, conf, context, collector):
            super().open(conf, context, collector)
            self.lat_file = open(os.path.join(self.out, "latency.txt"), "a")

        def ack(self, msg_id):
            super().ack(msg_id)
            if self.acks % EVERY == 0:
                self.flush()

        def flush(self):
            now = time.time()
            if self.lat:
                self.lat_file.write("".join(f"{now} {x}\\n" for x in self.lat))
                self.lat_file.flush()
                self.lat.clear()
            _write(os.path.join(self.out, "spout.json"),
                   {"t": now, "count": self.acks, "fails": self.fails, "emitted": self.n})


    class ProbeNull(NullBolt):
        def __init__(self, out):
            self.out = out

        def execute(self, tup):
            super().execute(tup)
            if self.n % EVERY == 0:
                _write(os.path.join(self.out, "bolt.json"), {"t": time.time(), "count": self.n})


    class ProbeSplit(Split):
        def __init__(self, out):
            self.out = out
            self.n = 0

        def execute(self, tup, collector):
            super().execute(tup, collector)
            self.n += 1
            if self.n % EVERY == 0:
                _write(os.path.join(self.out, "bolt.json"), {"t": time.time(), "count": self.n})
''')

TOPOLOGY = textwrap.dedent('''
    from bench_probes import Count, NullBolt, ProbeNull, ProbeSplit, ProbeSpout, Split, fixed_value, sentence
    from executor.api import TopologyBuilder

    OUT, KIND, ACKED, RATE = {out!r}, {kind!r}, {acked!r}, {rate!r}
    b = TopologyBuilder()
    if KIND == "null":
        b.set_spout("spout", ProbeSpout(OUT, ["value"], fixed_value, acked=ACKED, rate=RATE))
        b.set_bolt("null", NullBolt() if ACKED else ProbeNull(OUT)).shuffle_grouping("spout")
    else:
        b.set_spout("spout", ProbeSpout(OUT, ["sentence"], sentence, acked=ACKED, rate=RATE))
        b.set_bolt("split", Split() if ACKED else ProbeSplit(OUT)).shuffle_grouping("spout")
        b.set_bolt("count", Count()).fields_grouping("split", ["word"])
    topology = b.create_topology()
''')


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_for(predicate, what: str, timeout: float = 60.0, procs=()):
    deadline = time.monotonic() + timeout
    while True:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"a worker exited ({p.returncode}) while waiting for {what}")
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.02)


def read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Cluster:
    """ZooKeeper, a Nimbus core and a fake supervisor record; workers started by hand."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.zk = ZooKeeperServer(tmp / "zk")
        self.zk.start()
        self.ports = free_ports(2)
        conf = default_config()
        conf.update({"storm.zookeeper.servers": [self.zk.host], "storm.zookeeper.port": self.zk.port,
                     "storm.zookeeper.root": "/bench-cluster-throughput", "storm.zookeeper.session.timeout": 10000,
                     "storm.local.dir": str(tmp / "local"), "storm.local.hostname": "127.0.0.1",
                     "supervisor.slots.ports": self.ports, "worker.heartbeat.frequency.secs": 1,
                     "task.heartbeat.frequency.secs": 1, "task.refresh.poll.secs": 1})
        self.conf = conf
        self.cluster = mk_storm_cluster_state(conf)
        self.cluster.supervisor_heartbeat("sup-1", SupervisorInfo(
            time_secs=int(time.time()), hostname="127.0.0.1", assignment_id="sup-1", used_ports=(),
            meta=tuple(self.ports), scheduler_meta=None, uptime_secs=0))
        store = CodeStore(tmp / "local" / "nimbus")
        store.open()
        self.nimbus = NimbusCore(conf, self.cluster, store)

    def submit(self, topo_dir: Path, name: str, conf: dict) -> str:
        tf = load_topology_file(topo_dir / "topology.py")
        pkg = self.tmp / f"{name}.zip"
        build_package(topo_dir, "topology.py", pkg, structure=tf.topology.structure.to_dict(),
                      conf={**tf.config, **conf}, max_bytes=10 << 20)
        storm_id = self.nimbus.submit(name, pkg)
        src = self.nimbus.store.topology_dir(storm_id)
        dest = local_layout.supervisor_stormdist(self.conf, storm_id)
        dest.parent.mkdir(parents=True, exist_ok=True)
        extract_package(src / "stormjar.zip", dest, max_bytes=10 << 20)
        shutil.copy(src / "stormconf.json", dest / "stormconf.json")
        return storm_id

    def placement(self, storm_id: str) -> dict[int, list[str]]:
        layout = self.nimbus.layout(storm_id, self.cluster.storm_base(storm_id))
        comp = {ex: c for c, exs in layout.executors.items() for ex in exs}
        where: dict[int, list[str]] = collections.defaultdict(list)
        for ex, (_node, port) in self.cluster.assignment_info(storm_id).executor_node_port.items():
            where[port].append(comp[ex])
        return {p: sorted(cs) for p, cs in where.items()}

    def start_worker(self, storm_id: str, port: int) -> tuple[subprocess.Popen, str]:
        wid = uuid.uuid4().hex
        wdir = local_layout.worker_root(self.conf, wid)
        wdir.mkdir(parents=True)
        conf_file = wdir / "supervisor-conf.json"
        conf_file.write_text(json.dumps(self.conf))
        out = open(wdir / "stdio.txt", "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "executor.worker_main", "--storm-id", storm_id, "--supervisor-id", "sup-1",
             "--port", str(port), "--worker-id", wid, "--conf-file", str(conf_file)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
        out.close()
        return proc, wid

    def heartbeat(self, wid: str):
        path = local_layout.worker_heartbeats(self.conf, wid)
        return LocalState(path).get(LS_WORKER_HEARTBEAT) if path.exists() else None

    def close(self) -> None:
        self.cluster.disconnect()
        self.zk.stop()


def stop(proc: subprocess.Popen) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def py_spy_top(raw: Path, n: int = 12) -> dict:
    """Top entries of a py-spy raw (collapsed stacks) profile: self and inclusive sample shares."""
    selfc: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        k = int(count)
        total += k
        frames = [f.split(" (")[0] + " (" + f.rsplit("/", 1)[-1] if " (" in f else f for f in stack.split(";")]
        frames = frames[1:] if frames and frames[0].startswith("process ") else frames
        frames = [f for f in frames if not f.startswith("thread ")]
        if frames:
            selfc[frames[-1]] += k
            for f in set(frames):
                incl[f] += k

    def top(c):
        return [[f, round(100 * v / total, 1)] for f, v in c.most_common(n)] if total else []

    return {"samples": total, "self_pct": top(selfc), "inclusive_pct": top(incl)}


def run_one(cl: Cluster, name: str, seconds: float, warmup: float, profile: bool) -> dict:
    sc = SCENARIOS[name]
    tmp = cl.tmp / name
    topo, out = tmp / "topology", tmp / "out"
    topo.mkdir(parents=True)
    out.mkdir()
    shutil.copy(ROOT / "bench" / "local_throughput.py", topo / "bench_components.py")
    (topo / "bench_probes.py").write_text(PROBES)
    (topo / "topology.py").write_text(TOPOLOGY.format(out=str(out), kind=sc["kind"], acked=sc["acked"],
                                                      rate=sc.get("rate")))
    conf = {"topology.workers": 2, **sc["conf"]}
    storm_id = cl.submit(topo, f"bench-{name}", conf)
    placement = cl.placement(storm_id)
    started = {p: cl.start_worker(storm_id, p) for p in sorted(placement)}
    procs = {p: pw[0] for p, pw in started.items()}
    probe = out / ("spout.json" if sc["acked"] else "bolt.json")
    result: dict = {}
    try:
        wait_for(lambda: all(cl.heartbeat(w) for _p, w in started.values()), "worker heartbeats",
                 procs=procs.values())
        wait_for(lambda: read_json(probe), "the first counts", procs=procs.values())
        time.sleep(warmup)
        ps = {p: psutil.Process(proc.pid) for p, proc in procs.items()}
        spies = {}
        if profile:
            spy = shutil.which("py-spy") or "/tmp/bw/bin/py-spy"
            for p, proc in procs.items():
                spies[p] = (subprocess.Popen(
                    [spy, "record", "-p", str(proc.pid), "-d", str(int(seconds)), "-r", "200", "-f", "raw",
                     "--nonblocking", "-o", str(tmp / f"profile-{p}.txt")],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), tmp / f"profile-{p}.txt")
        s0 = read_json(probe)
        cpu0 = {p: sum(ps[p].cpu_times()[:2]) for p in ps}
        w0 = time.monotonic()
        rss = {p: 0 for p in ps}
        while time.monotonic() - w0 < seconds:
            for p in ps:
                rss[p] = max(rss[p], ps[p].memory_info().rss)
            time.sleep(0.25)
        s1 = read_json(probe)
        w1 = time.monotonic()
        cpu1 = {p: sum(ps[p].cpu_times()[:2]) for p in ps}
        alive = all(proc.poll() is None for proc in procs.values())
        lat = []
        lat_path = out / "latency.txt"
        if lat_path.exists():
            for line in lat_path.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and s0["t"] < float(parts[0]) <= s1["t"]:
                    lat.append(float(parts[1]))
        lat.sort()

        def pct(q):
            return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3, 3) if lat else None

        rate = (s1["count"] - s0["count"]) / (s1["t"] - s0["t"]) if s1["t"] > s0["t"] else 0.0
        result = {
            "bench": "cluster_throughput", "scenario": name,
            "unit": ("sentences" if sc["kind"] == "wc" else "tuples") + "/s", "rate": round(rate),
            "measured_at": "spout acks" if sc["acked"] else "first bolt's executed tuples",
            "complete_latency_ms_p50": pct(0.50), "complete_latency_ms_p99": pct(0.99),
            "latency_samples": len(lat), "failed": s1.get("fails"),
            "workers": {str(p): {"components": placement[p], "peak_rss_mb": round(rss[p] / 2**20, 1),
                                 "cpu_secs_per_sec": round((cpu1[p] - cpu0[p]) / (w1 - w0), 2)}
                        for p in sorted(ps)},
            "cpu_secs_per_sec_total": round(sum(cpu1[p] - cpu0[p] for p in ps) / (w1 - w0), 2),
            "workers_alive": alive, "seconds": seconds,
            "settings": {**conf, "offered_rate": sc.get("rate"), "parallelism": 1},
            "python": platform.python_version(), "cpus": os.cpu_count(),
        }
        if spies:
            profiles = {}
            for p, (sp, path) in spies.items():
                try:
                    sp.wait(seconds + 30)
                except subprocess.TimeoutExpired:
                    sp.kill()
                    sp.wait(5)
                err = sp.stderr.read()
                sp.stderr.close()
                profiles[str(p)] = py_spy_top(path) if path.exists() else {"error": err[-500:]}
            result["profile"] = profiles
    finally:
        codes = {p: stop(proc) for p, proc in procs.items()}
        cl.nimbus.kill(f"bench-{name}", 0)  # frees the two slots for the next scenario
        cl.nimbus.fire_timers()
    if result:
        result["worker_exit_codes"] = {str(p): c for p, c in codes.items()}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--only", nargs="*", choices=sorted(SCENARIOS))
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="storm-py-bench-cluster-"))
    cl = Cluster(tmp)
    try:
        for name in args.only or list(SCENARIOS):
            try:
                line = run_one(cl, name, args.seconds, args.warmup, args.profile)
            except Exception as exc:  # one scenario's failure is reported, the others still run
                logs = sorted((tmp / "local").rglob(f"bench-{name}-*/*/worker.log"))
                line = {"bench": "cluster_throughput", "scenario": name, "error": repr(exc),
                        "worker_logs": {str(p.parent.name): p.read_text()[-1500:] for p in logs}}
            print(json.dumps(line), flush=True)
    finally:
        cl.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
