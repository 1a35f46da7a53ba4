"""Scale-out on a real cluster: the word count with every component at parallelism 2 (spout 2,
split 2, count 2; ackers at the default, one per worker) on ZooKeeper + `storm-py nimbus` + one
`storm-py supervisor` with 2 slots (daemons.devcluster.DevCluster), as topology.workers 1 and 2,
acked and unacked. Prints one JSON line per run, then a summary line with the two/one ratios.

Each run submits the topology (`storm-py jar submit ... -c topology.workers=W`), waits until its
workers run and counts flow, warms up, then measures over a steady window and kills the topology
(waiting until its workers are gone) before the next run.
  acked    topology.max.spout.pending 2000 (per spout task), ackers on, sentences emitted with ids
  unacked  topology.acker.executors 0, sentences emitted without ids
  exactly-once (only with --only exactly-once) topology.state.exactly.once: true, the spout's
           position its state (a RewindableSpout, put at each checkpoint), the counts in the count
           bolts' KeyValueState (a BaseStatefulBolt), checkpoints every second, memory provider;
           the summary gives its ratio to unacked (no guarantee) per worker count
Sentences are the peers' workload (../shared/peers/common.py: 1,000-word vocabulary, 8-12 words
a sentence, random.Random(42)), the first 10,000 generated in the spout and cycled through, each
spout task from its own offset. Throughput is counted AT THE COUNT BOLTS: they write their word
counts to probe files (every 0.5 s, os.replace of a tmp file) in a directory named by the
topology config key scaling.out; each task's rate is taken between its own timestamps, and
sentences/s = words/s / the list's exact mean words per sentence. The spouts' own figure
(acked/s, or emitted/s unacked) is reported as a cross-check.
Acked runs also report complete latency (emit to ack, every 8th sentence, at the spouts: p50 and
p99 over the window from log-scale histograms, ~5% resolution); --rate R paces the spouts to R
sentences/s in all (the latency goal is stated at 5,000/s on two workers).
Per worker process over the window (psutil): CPU seconds per second, peak RSS; and how many
worker processes were seen (a restarted worker shows up as one more). For the whole machine
(`host_cpu`, /proc/stat): the cores it kept busy and the cores the hypervisor stole, which is
time the run's processes did not run while the wall clock went on.

Bytewax, same machine, same sitting: `PY PEER_DIR/bench_bytewax.py --n 200000` (1 process) once
after the cluster stopped; its sentences/s and the storm-py/Bytewax ratios go in the summary (a
note there instead when the Bytewax python or the peer script is missing).

usage: python3 bench/scaling.py [--seconds 15] [--warmup 5] [--only acked|unacked|exactly-once ...]
                                [--workers 1|2 ...] [--repeat N]  (alternate the runs N times)
                                [--dir D]      (keep the cluster, probes and logs in D)
                                [--profile]    (py-spy record of each worker over the window;
                                                top self/inclusive entries; it costs CPU)
                                [--conf KEY=YAML ...]  (topology config for every run)
                                [--rate R]     (sentences/s offered in all, instead of flat out)
                                [--no-bytewax] [--bytewax-python PY] [--peer-dir DIR]
                                [--curve]      (the cluster with CurveZMQ keys: encrypted links
                                                between workers and to Nimbus)
                                [--no-calibrate] (skip the machine's speed before and after each run)

The machine's speed drifts (up to 40% within an hour here), so each run is bracketed by
`bench/core_path.py --n 60000` (one process, the cluster idle between runs): its sentences/s
before and after go in the line as "machine", and "sentences_per_s_per_core_path" divides the
run's rate by their mean (the summary gives its medians too). It shows when the machine moved
around a run; as a correction it is rough: one process against a cluster's several, and the
machine has been seen to move 1.5x between one calibration and the next, a minute apart.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

from cluster_throughput import py_spy_top, read_json  # noqa: E402

from daemons.devcluster import DevCluster  # noqa: E402
from daemons.rpc.client import client_from_conf  # noqa: E402
from executor.checkpoint.protocol import ALIGNMENT_BOUNDS_MS, percentile_bound  # noqa: E402

log = logging.getLogger("scaling")

MODES = ("acked", "unacked", "exactly-once")
DEFAULT_MODES = ("acked", "unacked")
WORKER_COUNTS = (1, 2)
PARALLELISM = {"spout": 2, "split": 2, "count": 2}
MODE_CONF = {
    "acked": {"topology.max.spout.pending": 2000},
    "unacked": {"topology.acker.executors": 0},
    "exactly-once": {"topology.state.exactly.once": True},
}
# Fast supervisor/Nimbus loops, so a run starts and a killed topology's slots free quickly.
FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1}
POLL_SECS = 0.25
START_TIMEOUT = 180.0   # submit -> workers running and counts flowing (first run imports code)
GONE_TIMEOUT = 90.0     # kill -> topology and its workers gone
BYTEWAX_N = 200_000

COMPONENTS = textwrap.dedent('''
    """bench/scaling.py's word count: sentence spout -> split -> count, with probe files."""
    import json
    import math
    import os
    import random
    import string
    import time

    from executor.api import BaseStatefulBolt, BasicBolt, RewindableSpout, TopologyBuilder

    N_SENTENCES = 10_000
    CHECK_EVERY = 64      # look at the clock every 64 events ...
    MAX_AGE = 0.5         # ... and write a probe file once MAX_AGE seconds passed since the last
    SAMPLE_EVERY = 8      # complete latency of every 8th sentence (acked runs)
    LAT_RES = 20          # latency histogram buckets per factor e: bucket(us) = int(log(us + 1) * 20)


    def make_vocab(size=1000, seed=1234):
        """The peers' vocabulary (shared/peers/common.py)."""
        rng = random.Random(seed)
        seen, out = set(), []
        while len(out) < size:
            w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
            if w not in seen:
                seen.add(w)
                out.append(w)
        return out


    def make_sentences(n=N_SENTENCES, seed=42):
        """The peers' first n sentences: 8-12 words each."""
        vocab = make_vocab()
        rng = random.Random(seed)
        return [" ".join(rng.choices(vocab, k=rng.randint(8, 12))) for _ in range(n)]


    SENTENCES = make_sentences()
    MEAN_WORDS = sum(len(s.split()) for s in SENTENCES) / len(SENTENCES)


    class Probe:
        """Counts to OUT/NAME.json as {"t": epoch secs, ...} (os.replace of a tmp file)."""

        def __init__(self, out, name):
            self.path = os.path.join(out, name + ".json")
            self.last = 0.0

        def maybe_write(self, counts):
            # Time-based only: a write costs ~1 ms of file system, too much every 1,024 tuples.
            now = time.time()
            if now - self.last >= MAX_AGE:
                self.last = now
                tmp = self.path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"t": now, **counts}, f)
                os.replace(tmp, self.path)


    class SentenceSpout(RewindableSpout):
        """In exactly-once mode its position (the next sentence) is its state."""

        def declare_output_fields(self, declarer):
            declarer.declare(["sentence"])

        def open(self, conf, context, collector):
            self.c = collector
            self.acked = bool(conf.get("scaling.acked", True))
            # Each task cycles the whole list from its own offset: its mean words is the list's.
            self.i = context.this_task_index * N_SENTENCES // len(context.this_component_tasks)
            self.n = self.acks = self.fails = self.events = 0
            self.probe = Probe(conf["scaling.out"], f"spout-{context.this_task_id}")
            # scaling.rate: sentences/s offered by the whole topology (paced per task), else flat out
            self.rate = float(conf.get("scaling.rate") or 0) / len(context.this_component_tasks)
            self.t0 = None
            self.sent_at = {}
            self.lat = {}  # latency bucket -> sampled sentences

        def init_state(self, state):
            self.state = state
            self.i = state.get("i", self.i)

        def pre_prepare(self, txid):
            self.state.put("i", self.i)

        def next_tuple(self):
            if self.rate:
                now = time.monotonic()
                if self.t0 is None:
                    self.t0 = now
                if self.n >= (now - self.t0) * self.rate:
                    return
            sentence = SENTENCES[self.i % N_SENTENCES]
            self.i += 1
            self.n += 1
            if self.acked:
                if self.n % SAMPLE_EVERY == 0:
                    self.sent_at[self.n] = time.monotonic()
                self.c.emit([sentence], msg_id=self.n)
            else:
                self.c.emit([sentence])
            self._event()

        def _event(self):
            self.events += 1
            if self.events % CHECK_EVERY == 0:
                self.probe.maybe_write({"emitted": self.n, "acked": self.acks, "failed": self.fails,
                                        "lat": self.lat})

        def ack(self, msg_id):
            self.acks += 1
            started = self.sent_at.pop(msg_id, None)
            if started is not None:
                b = int(math.log((time.monotonic() - started) * 1e6 + 1) * LAT_RES)
                self.lat[b] = self.lat.get(b, 0) + 1
            self._event()

        def fail(self, msg_id):
            self.fails += 1
            self.sent_at.pop(msg_id, None)
            self._event()


    class Split(BasicBolt):
        def declare_output_fields(self, declarer):
            declarer.declare(["word"])

        def prepare(self, conf, context):
            # scaling.emit_many: false emits word by word (the figures before emit_many)
            if conf.get("scaling.emit_many", True) is False:
                self.execute = self.execute_each

        def execute(self, tup, collector):
            collector.emit_many([[word] for word in tup.values[0].split()])

        def execute_each(self, tup, collector):
            for word in tup.values[0].split():
                collector.emit([word])


    class Count(BasicBolt):
        def declare_output_fields(self, declarer):
            declarer.declare(["word", "count"])

        def prepare(self, conf, context):
            self.counts = {}
            self.n = 0
            self.probe = Probe(conf["scaling.out"], f"count-{context.this_task_id}")

        def execute(self, tup, collector):
            word = tup.values[0]
            self.counts[word] = self.counts.get(word, 0) + 1
            self.n += 1
            if self.n % CHECK_EVERY == 0:
                self.probe.maybe_write({"words": self.n})


    class StatefulCount(BaseStatefulBolt):
        """Count's counts in its KeyValueState, checkpointed (exactly-once mode)."""

        def declare_output_fields(self, declarer):
            declarer.declare(["word", "count"])

        def prepare(self, conf, context, collector):
            self.c = collector
            self.n = 0
            self.probe = Probe(conf["scaling.out"], f"count-{context.this_task_id}")

        def init_state(self, state):
            self.state = state

        def execute(self, tup):
            word = tup.values[0]
            self.state.put(word, self.state.get(word, 0) + 1)
            self.c.ack(tup)
            self.n += 1
            if self.n % CHECK_EVERY == 0:
                self.probe.maybe_write({"words": self.n})


    def build_topology(spouts=2, splits=2, counts=2, exactly_once=False):
        b = TopologyBuilder()
        b.set_spout("spout", SentenceSpout(), spouts)
        b.set_bolt("split", Split(), splits).shuffle_grouping("spout")
        b.set_bolt("count", StatefulCount() if exactly_once else Count(), counts).fields_grouping("split", ["word"])
        return b.create_topology()
''')

TOPOLOGY = textwrap.dedent('''
    """bench/scaling.py's topology; settings come with -c at submit (scaling.out, scaling.acked)."""
    from scaling_components import build_topology

    topology = build_topology({spout}, {split}, {count}, exactly_once={exactly_once})
    config = {{"topology.message.timeout.secs": 30}}
''')


# -- setup ----------------------------------------------------------------------------------------


def write_topology(topo_dir: Path) -> Path:
    """The topology directory (components, topology.py, and topology_exactly_once.py with the
    stateful count); returns topology.py."""
    topo_dir.mkdir(parents=True, exist_ok=True)
    (topo_dir / "scaling_components.py").write_text(COMPONENTS)
    (topo_dir / "topology_exactly_once.py").write_text(TOPOLOGY.format(**PARALLELISM, exactly_once=True))
    path = topo_dir / "topology.py"
    path.write_text(TOPOLOGY.format(**PARALLELISM, exactly_once=False))
    return path


def topology_for(topology_file: Path, mode: str) -> Path:
    return topology_file.with_name("topology_exactly_once.py") if mode == "exactly-once" else topology_file


def mean_words(topo_dir: Path) -> float:
    """The exact mean words per sentence of the spout's list (importing the components module)."""
    spec = importlib.util.spec_from_file_location("scaling_components", topo_dir / "scaling_components.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MEAN_WORDS


def wait_until(predicate, what: str, timeout: float, dev: DevCluster):
    """Poll `predicate` until it returns a true value (returned); raise naming `what` and the
    logs after `timeout`, or at once if a daemon of the cluster died."""
    deadline = time.monotonic() + timeout
    while True:
        dead = [c.why_dead() for c in dev.children() if c.exit_code() is not None]
        if dead:
            raise RuntimeError(f"a daemon died while waiting for {what}: {'; '.join(dead)}")
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what} (logs: {dev.log_dir})")
        time.sleep(POLL_SECS)  # poll interval, bounded by the deadline


# -- talking to the cluster -----------------------------------------------------------------------


def nimbus(dev: DevCluster, op: str, **args):
    client = client_from_conf(dev.conf)
    try:
        return client.call(op, **args)
    finally:
        client.close()


def submit(dev: DevCluster, topology_file: Path, name: str, conf: dict) -> str:
    """`storm-py jar submit FILE --name NAME -c k=v ...` against the dev cluster; the storm id."""
    overrides = [a for k, v in conf.items() for a in ("-c", f"{k}={json.dumps(v)}")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-m", "daemons.cli", "jar", "submit", str(topology_file), "--name", name,
                          *overrides, "--conf-dir", str(dev.conf_dir)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"storm-py jar submit exited {out.returncode}: {out.stderr.strip() or out.stdout}")
    return out.stdout.strip().rsplit(" ", 1)[-1]


def topology_names(dev: DevCluster) -> set[str]:
    return {t["name"] for t in nimbus(dev, "cluster_info")["topologies"]}


def kill_and_wait(dev: DevCluster, name: str) -> None:
    """Kill `name` at once and wait until Nimbus forgot it and no worker process is left."""
    nimbus(dev, "kill", name=name, wait_secs=0)
    wait_until(lambda: name not in topology_names(dev) and not dev.worker_pids(),
               f"topology {name} and its workers to be gone", GONE_TIMEOUT, dev)


def placement(dev: DevCluster, name: str) -> dict[str, list[str]]:
    """Slot port -> the components with executors there (Nimbus's topology_info)."""
    where: dict[str, set[str]] = {}
    for comp in nimbus(dev, "topology_info", name=name)["components"]:
        for ex in comp["executors"]:
            if ex["port"] is not None:
                where.setdefault(str(ex["port"]), set()).add(comp["id"])
    return {p: sorted(cs) for p, cs in sorted(where.items())}


def last_errors(dev: DevCluster, name: str) -> dict[str, str]:
    info = nimbus(dev, "topology_info", name=name)
    return {c["id"]: c["last_error"]["error"][-500:] for c in info["components"] if c.get("last_error")}


# -- probes ---------------------------------------------------------------------------------------


def snapshot(out: Path, prefix: str) -> dict[str, dict]:
    """Every probe file OUT/PREFIX-*.json, by task."""
    found = {}
    for path in out.glob(f"{prefix}-*.json"):
        data = read_json(path)
        if data:
            found[path.stem] = data
    return found


def flowing(out: Path, workers: int, dev: DevCluster) -> bool:
    """All `workers` worker processes up and every count task counted words."""
    counts = snapshot(out, "count")
    return (len(counts) == PARALLELISM["count"] and all(c.get("words", 0) > 0 for c in counts.values())
            and len(dev.worker_pids()) == workers)


LAT_RES = 20  # as in the components: bucket = int(log(microseconds + 1) * LAT_RES)


def latency(s0: dict[str, dict], s1: dict[str, dict]) -> dict | None:
    """Complete latency over the window from the spouts' histograms (bucket upper bounds; pure)."""
    hist: dict[int, int] = {}
    for task, end in s1.items():
        start = s0.get(task, {}).get("lat", {})
        for b, n in end.get("lat", {}).items():
            d = n - start.get(b, 0)
            if d > 0:
                hist[int(b)] = hist.get(int(b), 0) + d
    total = sum(hist.values())
    if not total:
        return None

    def pct(q: float) -> float:
        seen = 0
        for b in sorted(hist):
            seen += hist[b]
            if seen >= q * total:
                return round((math.exp((b + 1) / LAT_RES) - 1) / 1000, 2)
        return float("nan")

    return {"p50_ms": pct(0.5), "p99_ms": pct(0.99), "samples": total}


def rate(s0: dict[str, dict], s1: dict[str, dict], key: str) -> tuple[float, int]:
    """Sum over tasks of (count delta / own time delta), and the total delta (pure)."""
    total_rate, total = 0.0, 0
    for task, end in s1.items():
        start = s0.get(task, {"t": end["t"], key: end.get(key, 0)})
        delta = end.get(key, 0) - start.get(key, 0)
        total += delta
        if end["t"] > start["t"]:
            total_rate += delta / (end["t"] - start["t"])
    return total_rate, total


# -- measuring ------------------------------------------------------------------------------------


def cpu_secs(procs: dict[int, psutil.Process]) -> dict[int, float | None]:
    out: dict[int, float | None] = {}
    for port, proc in procs.items():
        try:
            t = proc.cpu_times()
            out[port] = t.user + t.system
        except psutil.Error:
            out[port] = None  # gone
    return out


def sample_rss(procs: dict[int, psutil.Process], peak: dict[int, int], seconds: float) -> None:
    """Peak RSS of each process, sampled every POLL_SECS for `seconds`."""
    end = time.monotonic() + seconds
    while True:
        for port, proc in procs.items():
            try:
                peak[port] = max(peak[port], proc.memory_info().rss)
            except psutil.Error:
                pass
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(POLL_SECS, left))


def py_spy() -> str:
    spy = shutil.which("py-spy")
    if spy is None:
        raise RuntimeError("--profile needs py-spy on PATH")
    return spy


def start_profiles(pids: dict[int, int], seconds: float, run_dir: Path) -> dict[int, tuple]:
    spy, spies = py_spy(), {}
    for port, pid in pids.items():
        path = run_dir / f"profile-{port}.txt"
        proc = subprocess.Popen([spy, "record", "--nonblocking", "--format", "raw", "-d", str(math.ceil(seconds)),
                                 "-p", str(pid), "-o", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        spies[port] = (proc, path)
    return spies


def finish_profiles(spies: dict[int, tuple], seconds: float) -> dict[str, dict]:
    """Wait for each py-spy (bounded; killed by pid past it) and summarise its profile."""
    out = {}
    for port, (proc, path) in spies.items():
        try:
            _, err = proc.communicate(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            err = f"py-spy did not finish within {seconds + 30:g}s; killed. {err}"
        out[str(port)] = py_spy_top(path) if path.exists() else {"error": err[-500:]}
    return out


def stop_profiles(spies: dict[int, tuple]) -> None:
    for proc, _path in spies.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def host_jiffies() -> list[int] | None:
    """The machine's CPU time so far (/proc/stat's `cpu` line, in clock ticks), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def host_cpu(before: list[int] | None, after: list[int] | None, window: float) -> dict | None:
    """Cores the whole machine spent over the window, busy (user, nice, system, irq, softirq)
    and stolen by the hypervisor (a VM's vCPU not running: a run's processes get less CPU while
    the wall clock goes on, which no figure of the run shows otherwise)."""
    if before is None or after is None or window <= 0:
        return None
    d = [b - a for a, b in zip(before, after)]
    ticks = os.sysconf("SC_CLK_TCK") * window
    busy = d[0] + d[1] + d[2] + d[5] + d[6]
    steal = d[7] if len(d) > 7 else 0
    return {"busy_cores": round(busy / ticks, 2), "steal_cores": round(steal / ticks, 2)}


def measure(dev: DevCluster, out: Path, run_dir: Path, seconds: float, profile: bool) -> dict:
    """The steady window: probe deltas, per-worker CPU and peak RSS, py-spy profiles."""
    pids = dev.worker_pids()
    procs = {port: psutil.Process(pid) for port, pid in pids.items()}
    spies = start_profiles(pids, seconds, run_dir) if profile else {}
    try:
        c0, s0, cpu0, t0 = snapshot(out, "count"), snapshot(out, "spout"), cpu_secs(procs), time.monotonic()
        host0 = host_jiffies()
        peak = dict.fromkeys(procs, 0)
        sample_rss(procs, peak, seconds)
        c1, s1, cpu1, t1 = snapshot(out, "count"), snapshot(out, "spout"), cpu_secs(procs), time.monotonic()
        host1 = host_jiffies()
        pids_after = dev.worker_pids()
        profiles = finish_profiles(spies, seconds) if spies else None
    finally:
        stop_profiles(spies)
    window = t1 - t0
    per_worker = {port: {"pid": pids[port], "peak_rss_mb": round(peak[port] / 2**20, 1),
                         "cpu_secs_per_sec": None if cpu1[port] is None or cpu0[port] is None
                         else round((cpu1[port] - cpu0[port]) / window, 2)} for port in sorted(procs)}
    return {"counts": (c0, c1), "spouts": (s0, s1), "window": window, "per_worker": per_worker,
            "host_cpu": host_cpu(host0, host1, window),
            "pids_seen": sorted(set(pids.values()) | set(pids_after.values())), "profiles": profiles}


# -- one run --------------------------------------------------------------------------------------


def run_conf(mode: str, workers: int, out: Path, extra: dict | None = None) -> dict:
    """A run's topology config. The spout emits with message ids in acked mode; in exactly-once
    mode too with `--conf scaling.acked=true` (a Storm user's spout: each id acked at its commit)."""
    extra = extra or {}
    acked = mode == "acked" or (mode == "exactly-once" and extra.get("scaling.acked") is True)
    return {"topology.workers": workers, **MODE_CONF[mode], **extra, "scaling.acked": acked,
            "scaling.out": str(out)}


def run_one(dev: DevCluster, topology_file: Path, run_dir: Path, mode: str, workers: int, rep: int,
            args, mean: float) -> dict:
    name = f"scaling-{mode}-{workers}w-{rep}"
    out = run_dir / "out"
    out.mkdir(parents=True, exist_ok=True)
    conf = run_conf(mode, workers, out, args.conf)
    started = time.monotonic()
    storm_id = submit(dev, topology_file, name, conf)
    try:
        wait_until(lambda: flowing(out, workers, dev), f"{name}: {workers} worker(s) up and words counted at "
                   f"every count task (probes in {out})", START_TIMEOUT, dev)
        up_secs = time.monotonic() - started
        where = placement(dev, name)
        time.sleep(args.warmup)  # warm-up: no condition to poll, a fixed span by design
        cp0 = checkpoints(dev, storm_id) if mode == "exactly-once" else None
        m = measure(dev, out, run_dir, args.seconds, args.profile)
        cp1 = checkpoints(dev, storm_id) if mode == "exactly-once" else None
        errors = last_errors(dev, name)
    finally:
        kill_and_wait(dev, name)
    line = {**result(mode, workers, rep, conf, mean, m, where, errors, up_secs), "curve": bool(args.curve)}
    if cp1 is not None:
        line["checkpoints"] = checkpoint_window(cp0, cp1)
    return line


def checkpoints(dev: DevCluster, storm_id: str) -> dict | None:
    """The topology page's checkpoints (the UI's REST API), or None when it does not answer."""
    import urllib.request

    secret = dev.conf.get("nimbus.authentication.secret")
    request = urllib.request.Request(f"{dev.ui_url}/api/v1/topology/{storm_id}",
                                     headers={"Authorization": f"Bearer {secret}"} if secret else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return json.loads(reply.read()).get("checkpoints")
    except (OSError, ValueError) as exc:
        log.warning("checkpoints of %s not read from the UI: %s", storm_id, exc)
        return None


def checkpoint_window(before: dict | None, after: dict | None) -> dict:
    """Commits and rollbacks in the window; the bolts' alignments in it (how many, their 99th
    percentile's bucket, how many took over 100 ms) from the UI's cumulative buckets, the longest
    among their last checkpoints (executor/checkpoint/protocol.py ALIGNMENTS_KEPT, ~a minute at
    1 s, so it may reach back before the window) and the checkpoint spout's commit latency, as the
    UI reports them at the window's end."""
    if not before or not after:
        return {"error": "the UI did not answer"}
    now, then = after.get("alignmentBucketsMs") or {}, before.get("alignmentBucketsMs") or {}
    counts = [now.get(str(b), 0) - then.get(str(b), 0) for b in ALIGNMENT_BOUNDS_MS]
    total = (after.get("alignments") or 0) - (before.get("alignments") or 0)
    within_100 = dict(zip(ALIGNMENT_BOUNDS_MS, counts))[100] if now else None
    p99 = percentile_bound(counts, total, 0.99)
    return {"commits": after["commits"] - before["commits"], "rollbacks": after["rollbacks"] - before["rollbacks"],
            "alignments": total, "alignment_p99_ms_at_most": "over the last bucket" if p99 == math.inf else p99,
            "alignments_over_100ms": None if within_100 is None else total - within_100,
            "alignment_last_ms": after["alignmentMs"], "alignment_max_ms": after["alignmentMaxMs"],
            "commit_latency_ms": after["commitLatencyMs"], "commit_latency_max_ms": after["commitLatencyMaxMs"]}


def result(mode: str, workers: int, rep: int, conf: dict, mean: float, m: dict, where: dict,
           errors: dict, up_secs: float) -> dict:
    words_rate, words = rate(*m["counts"], "words")
    spout_rate, _ = rate(*m["spouts"], "acked" if mode == "acked" else "emitted")
    _, failed = rate(*m["spouts"], "failed")
    per_worker = {str(p): {**w, "components": where.get(str(p), [])} for p, w in m["per_worker"].items()}
    cpus = [w["cpu_secs_per_sec"] for w in per_worker.values() if w["cpu_secs_per_sec"] is not None]
    line = {
        "bench": "scaling", "mode": mode, "workers": workers, "repeat": rep,
        "sentences_per_s": round(words_rate / mean), "words_per_s": round(words_rate),
        "measured_at": "count bolts (words / mean words per sentence)",
        ("spout_acked_per_s" if mode == "acked" else "spout_emitted_per_s"): round(spout_rate),
        "words_in_window": words, "window_secs": round(m["window"], 2),
        "mean_words_per_sentence": round(mean, 4),
        "worker_processes": per_worker, "worker_processes_seen": len(m["pids_seen"]),
        "cpu_secs_per_sec_total": round(sum(cpus), 2), "host_cpu": m.get("host_cpu"),
        "startup_secs": round(up_secs, 1), "component_errors": errors,
        "settings": {k: v for k, v in conf.items() if k != "scaling.out"}, "parallelism": PARALLELISM,
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }
    if mode == "acked":
        line["failed_in_window"] = failed
        line["complete_latency"] = latency(*m["spouts"])
    if m["profiles"] is not None:
        line["profile"] = m["profiles"]
    return line


CALIBRATION_N = 60000


def machine_speed() -> float | None:
    """The machine's speed now: `bench/core_path.py --n 60000` sentences/s (one process, ~1 s),
    or None when it fails (the run is then reported without it)."""
    try:
        out = subprocess.run([sys.executable, str(ROOT / "bench" / "core_path.py"), "--n", str(CALIBRATION_N)],
                             capture_output=True, text=True, timeout=120)
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
        return float(json.loads(lines[-1])["sentences_per_s"]) if out.returncode == 0 and lines else None
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError):
        return None


def calibrated(line: dict, before: float | None, after: float | None) -> dict:
    """The run's line with the machine's speed around it and its rate divided by their mean."""
    known = [s for s in (before, after) if s]
    line = {**line, "machine": {"core_path_sentences_per_s_before": before,
                                "core_path_sentences_per_s_after": after}}
    if known and "sentences_per_s" in line:
        line["sentences_per_s_per_core_path"] = round(line["sentences_per_s"] / statistics.mean(known), 4)
    return line


def guarded_run(dev: DevCluster, topology_file: Path, base: Path, mode: str, workers: int, rep: int,
                args, mean: float) -> dict:
    """One run; a failure becomes an error line, unless the cluster was left busy (then raise)."""
    run_dir = base / "runs" / f"{mode}-{workers}w-{rep}"
    try:
        return run_one(dev, topology_file, run_dir, mode, workers, rep, args, mean)
    except Exception as exc:  # noqa: BLE001 -- reported; the next run goes on if the slots are free
        if topology_names(dev) or dev.worker_pids():
            raise
        return {"bench": "scaling", "mode": mode, "workers": workers, "repeat": rep, "error": repr(exc),
                "worker_logs": worker_log_tails(dev, f"scaling-{mode}-{workers}w-{rep}-")}


def worker_log_tails(dev: DevCluster, storm_prefix: str) -> dict[str, str]:
    logs = [p for p in dev.log_dir.rglob("worker.log") if storm_prefix in str(p)]
    return {str(p.relative_to(dev.log_dir)): p.read_text(errors="replace")[-1500:] for p in sorted(logs)}


# -- Bytewax --------------------------------------------------------------------------------------


def bytewax(python: str, peer_dir: Path) -> dict:
    """The peer's word count (`bench_bytewax.py --n 200000`): its JSON line, or why not."""
    script = peer_dir / "bench_bytewax.py"
    if not Path(python).exists():
        return {"skipped": f"no Bytewax python at {python} (--bytewax-python)"}
    if not script.exists():
        return {"skipped": f"no peer script {script} (--peer-dir)"}
    try:
        out = subprocess.run([python, str(script), "--n", str(BYTEWAX_N)], cwd=peer_dir, capture_output=True,
                             text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": f"{script} did not finish within 900s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{") and "sentences_per_s" in ln]
    if out.returncode != 0 or not lines:
        return {"error": f"{script} exited {out.returncode}: {(out.stderr or out.stdout)[-1000:]}"}
    return json.loads(lines[-1])


# -- summary --------------------------------------------------------------------------------------


def medians_of(lines: list[dict], key: str) -> dict[tuple[str, int], float]:
    """The median of `key` over the runs of each mode and worker count that have it."""
    medians = {}
    for mode in MODES:
        for workers in WORKER_COUNTS:
            got = [ln[key] for ln in lines if ln.get("mode") == mode and ln.get("workers") == workers and key in ln]
            if got:
                medians[(mode, workers)] = statistics.median(got)
    return medians


def summary(lines: list[dict], peer: dict) -> dict:
    """Median sentences/s per mode and worker count, two/one ratios, storm-py/Bytewax (pure);
    the medians of the calibrated rates when the runs have them."""
    medians = medians_of(lines, "sentences_per_s")
    out: dict = {}
    for mode in MODES:
        one, two = medians.get((mode, 1)), medians.get((mode, 2))
        if one is None and two is None:
            continue
        out[mode] = {"one_worker_sentences_per_s": one, "two_workers_sentences_per_s": two,
                     "two_over_one": round(two / one, 3) if one and two is not None else None}
    for workers in WORKER_COUNTS:
        eo, none = medians.get(("exactly-once", workers)), medians.get(("unacked", workers))
        if eo and none:
            out.setdefault("exactly_once_over_unacked", {})[f"{workers}w"] = round(eo / none, 3)
    bw = peer.get("sentences_per_s")
    out["bytewax"] = peer
    if bw:
        out["storm_py_over_bytewax"] = {f"{mode}_{w}w": round(v / bw, 4) for (mode, w), v in sorted(medians.items())}
    per_speed = medians_of(lines, "sentences_per_s_per_core_path")
    if per_speed:
        out["sentences_per_s_per_core_path"] = {f"{mode}_{w}w": v for (mode, w), v in sorted(per_speed.items())}
    out["runs"] = len(lines)
    out["errors"] = sum(1 for ln in lines if "error" in ln)
    out["cpus"] = os.cpu_count()
    return out


# -- main -----------------------------------------------------------------------------------------


def _interrupt(*_args) -> None:
    raise KeyboardInterrupt


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15.0, help="measurement window per run")
    ap.add_argument("--warmup", type=float, default=5.0, help="seconds between counts flowing and the window")
    ap.add_argument("--rate", type=float, default=None,
                    help="sentences/s the spouts offer (all tasks together); default: flat out")
    ap.add_argument("--only", action="append", choices=MODES,
                    help="a mode to run (repeatable; default acked and unacked)")
    ap.add_argument("--workers", action="append", type=int, choices=WORKER_COUNTS,
                    help="a topology.workers to run (repeatable; default 1 and 2)")
    ap.add_argument("--repeat", type=int, default=1, help="alternate all the runs this many times")
    ap.add_argument("--dir", help="keep the cluster, probes and logs here (default: a temp dir, removed "
                                  "unless a run failed)")
    ap.add_argument("--profile", action="store_true", help="py-spy record each worker over the window")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=YAML",
                    help="a topology config key for every run, e.g. topology.worker.gc.thresholds='[0]' "
                         "(repeatable; for experiments)")
    ap.add_argument("--no-bytewax", action="store_true", help="skip the Bytewax run")
    ap.add_argument("--curve", action="store_true", help="CurveZMQ keys for the cluster (encrypted links)")
    ap.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                    help="skip bench/core_path.py before and after each run (the machine's speed)")
    ap.add_argument("--bytewax-python", default="/tmp/bw/bin/python")
    ap.add_argument("--peer-dir", type=Path, default=ROOT.parent / "shared" / "peers")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--conf {item!r}: expected KEY=VALUE (the value in YAML)")
        conf[key] = yaml.safe_load(value)
    if args.rate:
        conf["scaling.rate"] = args.rate
    args.conf = conf
    return args


def run_all(args, base: Path) -> list[dict]:
    """Start the cluster, do every run (printing its line), stop the cluster whatever happens."""
    topology_file = write_topology(base / "topology")
    mean = mean_words(topology_file.parent)
    modes = [m for m in MODES if m in (args.only or DEFAULT_MODES)]
    counts = [w for w in WORKER_COUNTS if not args.workers or w in args.workers]
    from executor.transport.curve import new_keys

    dev = DevCluster(base / "cluster", supervisors=1, slots=2, user_conf={**FAST, **(new_keys() if args.curve else {})})
    lines = []
    try:
        dev.start()
        for name in sorted(topology_names(dev)):  # a re-used --dir brings its topologies back
            kill_and_wait(dev, name)
        speed = machine_speed() if args.calibrate else None
        for rep in range(args.repeat):
            for mode in modes:
                for workers in counts:
                    line = guarded_run(dev, topology_for(topology_file, mode), base, mode, workers, rep, args, mean)
                    if speed is not None:
                        after = machine_speed()
                        line = calibrated(line, speed, after)
                        speed = after
                    print(json.dumps(line), flush=True)
                    lines.append(line)
    finally:
        dev.stop()
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    # SIGTERM unwinds like Ctrl-C, so the cluster (workers included) is stopped on the way out.
    signal.signal(signal.SIGTERM, _interrupt)
    base = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix="storm-py-scaling-"))
    base.mkdir(parents=True, exist_ok=True)
    ok = False
    try:
        lines = run_all(args, base)
        peer = {"skipped": "--no-bytewax"} if args.no_bytewax else bytewax(args.bytewax_python, args.peer_dir)
        print(json.dumps({"bench": "scaling", "summary": summary(lines, peer)}), flush=True)
        ok = not any("error" in ln for ln in lines)
    finally:
        if not args.dir and ok:
            shutil.rmtree(base, ignore_errors=True)
        elif not args.dir:
            print(f"scaling: kept {base} (interrupted, or a run failed; logs under cluster/logs)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
