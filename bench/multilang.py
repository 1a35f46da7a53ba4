"""Multilang cost: bench/scaling.py's word count (sentence spout -> split -> count, parallelism
2 each, acked) with native components against the same topology written with pystorm
components (ShellSpout/ShellBolt, one subprocess per task), JSON and msgpack, on a dev cluster
(ZooKeeper + storm-py nimbus + one supervisor with 2 slots) as topology.workers 1 and 2,
alternated in one sitting. Throughput is counted at the count bolts from their probe files, as
bench/scaling.py does (the pystorm count bolt writes the same probes). One JSON line per run,
then a summary with the multilang/native ratios (goal, issue 20: msgpack >= 0.4x native).

usage: python3 bench/multilang.py [--seconds 15] [--warmup 5] [--workers 1|2 ...] [--repeat N]
                                  [--only native|json|msgpack ...] [--dir D] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scaling as S  # noqa: E402

PYSTORM_COMPONENTS = textwrap.dedent('''
    """bench/multilang.py's word count as pystorm components (run by ShellSpout/ShellBolt)."""
    import os
    import sys

    from pystorm import Bolt, Spout

    from scaling_components import CHECK_EVERY, N_SENTENCES, SENTENCES, Probe


    class SentenceSpout(Spout):
        def initialize(self, conf, context):
            tasks = sorted(int(t) for t, c in context["task->component"].items() if c == context["componentid"])
            self.i = tasks.index(context["taskid"]) * N_SENTENCES // len(tasks)
            self.n = self.acks = self.fails = self.events = 0
            self.probe = Probe(conf["scaling.out"], f"spout-{context['taskid']}")

        def next_tuple(self):
            sentence = SENTENCES[self.i % N_SENTENCES]
            self.i += 1
            self.n += 1
            self.emit([sentence], tup_id=self.n)
            self._event()

        def _event(self):
            self.events += 1
            if self.events % CHECK_EVERY == 0:
                self.probe.maybe_write({"emitted": self.n, "acked": self.acks, "failed": self.fails})

        def ack(self, tup_id):
            self.acks += 1
            self._event()

        def fail(self, tup_id):
            self.fails += 1
            self._event()


    class Split(Bolt):
        def process(self, tup):
            for word in tup.values[0].split():
                self.emit([word])


    class Count(Bolt):
        def initialize(self, conf, context):
            self.counts = {}
            self.n = 0
            self.probe = Probe(conf["scaling.out"], f"count-{context['taskid']}")

        def process(self, tup):
            word = tup.values[0]
            self.counts[word] = self.counts.get(word, 0) + 1
            self.n += 1
            if self.n % CHECK_EVERY == 0:
                self.probe.maybe_write({"words": self.n})


    if __name__ == "__main__":
        globals()[sys.argv[1]](serializer=os.environ["STORM_PY_MULTILANG_SERIALIZER"]).run()
''')

MULTILANG_TOPOLOGY = textwrap.dedent('''
    """bench/multilang.py's topology: the word count's pystorm components; the serializer comes
    with -c topology.multilang.serializer at submit, and each subprocess is told it."""
    import sys

    from executor.api import ShellBolt, ShellSpout, TopologyBuilder


    def shell(kind, cls, outputs):
        return kind([sys.executable, "pystorm_components.py", cls], outputs=outputs)


    b = TopologyBuilder()
    b.set_spout("spout", shell(ShellSpout, "SentenceSpout", ["sentence"]), {spout})
    b.set_bolt("split", shell(ShellBolt, "Split", ["word"]), {split}).shuffle_grouping("spout")
    b.set_bolt("count", shell(ShellBolt, "Count", ["word", "count"]), {count}).fields_grouping("split", ["word"])
    topology = b.create_topology()
    config = {{"topology.message.timeout.secs": 30}}
''')

KINDS = ("native", "json", "msgpack")


def write_topologies(topo_dir: Path) -> dict[str, Path]:
    native = S.write_topology(topo_dir)
    (topo_dir / "pystorm_components.py").write_text(PYSTORM_COMPONENTS)
    multilang = topo_dir / "topology_multilang.py"
    multilang.write_text(MULTILANG_TOPOLOGY.format(**S.PARALLELISM))
    return {"native": native, "json": multilang, "msgpack": multilang}


def run_one(dev, files, base: Path, kind: str, workers: int, rep: int, args, mean: float) -> dict:
    name = f"multilang-{kind}-{workers}w-{rep}"
    run_dir = base / "runs" / name
    out = run_dir / "out"
    out.mkdir(parents=True, exist_ok=True)
    conf = S.run_conf("acked", workers, out, {} if kind == "native" else {"topology.multilang.serializer": kind})
    started = time.monotonic()
    S.submit(dev, files[kind], name, conf)
    try:
        S.wait_until(lambda: S.flowing(out, workers, dev), f"{name}: words counted at every count task",
                     S.START_TIMEOUT, dev)
        up = time.monotonic() - started
        where = S.placement(dev, name)
        time.sleep(args.warmup)  # warm-up: a fixed span by design
        before = subprocess_cpu(dev)
        m = S.measure(dev, out, run_dir, args.seconds, args.profile)
        after = subprocess_cpu(dev)
        errors = S.last_errors(dev, name)
    finally:
        S.kill_and_wait(dev, name)
    line = S.result("acked", workers, rep, conf, mean, m, where, errors, up)
    line.update({"bench": "multilang", "components": kind})
    line["cpu"] = cpu_budget(line, before, after)
    return line


def subprocess_cpu(dev) -> tuple[float, dict[str, float]]:
    """(now, CPU seconds so far per multilang component class) over the workers' child processes
    (the class is the subprocess's last argument, as MULTILANG_TOPOLOGY starts them)."""
    per: dict[str, float] = {}
    for pid in dev.worker_pids().values():
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            continue
        for child in children:
            try:
                t = child.cpu_times()
                name = child.cmdline()[-1]
            except (psutil.Error, IndexError):
                continue
            per[name] = per.get(name, 0.0) + t.user + t.system
    return time.monotonic(), per


def cpu_budget(line: dict, before, after) -> dict:
    """Where each sentence's CPU goes: the workers' and each kind of subprocess's CPU seconds per
    second and milliseconds per sentence, and the rate the machine's cores would allow if the
    CPU were all that limited it (the bound the ratio goal meets on this machine)."""
    (t0, c0), (t1, c1) = before, after
    window = max(t1 - t0, 1e-9)
    rate = max(line["sentences_per_s"], 1)
    subs = {name: round((c1[name] - c0.get(name, 0.0)) / window, 2) for name in sorted(c1)}
    workers = line["cpu_secs_per_sec_total"]
    total = workers + sum(subs.values())
    cores = os.cpu_count() or 1
    return {"workers_cpu_per_s": workers, "subprocesses_cpu_per_s": subs,
            "ms_per_sentence": {"workers": round(1000 * workers / rate, 3),
                                "subprocesses": round(1000 * sum(subs.values()) / rate, 3)},
            "cores_busy": round(total, 2), "cores": cores,
            "cpu_bound_sentences_per_s": round(rate * cores / total) if total else None}


def summary(lines: list[dict]) -> dict:
    med: dict[tuple[str, int], float] = {}
    for kind in KINDS:
        for w in (1, 2):
            vals = [ln["sentences_per_s"] for ln in lines if ln.get("components") == kind and ln["workers"] == w
                    and "error" not in ln]
            if vals:
                med[(kind, w)] = statistics.median(vals)
    out = {"sentences_per_s_median": {f"{k}_{w}w": v for (k, w), v in sorted(med.items())}}
    for kind in ("json", "msgpack"):
        for w in (1, 2):
            if (kind, w) in med and ("native", w) in med:
                out[f"{kind}_over_native_{w}w"] = round(med[(kind, w)] / med[("native", w)], 3)
    out["goal"] = "msgpack_over_native >= 0.4"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--workers", action="append", type=int, choices=(1, 2))
    ap.add_argument("--only", action="append", choices=KINDS)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir")
    ap.add_argument("--profile", action="store_true", help="py-spy each worker over the window (raw files in "
                    "the run's dir with --dir; a summary in the JSON line)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, S._interrupt)
    base = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix="storm-py-multilang-"))
    files = write_topologies(base / "topology")
    mean = S.mean_words(base / "topology")
    dev = S.DevCluster(base / "cluster", supervisors=1, slots=2, user_conf=S.FAST)
    lines: list[dict] = []
    try:
        dev.start()
        for rep in range(args.repeat):
            for workers in args.workers or (1, 2):
                for kind in args.only or KINDS:
                    try:
                        line = run_one(dev, files, base, kind, workers, rep, args, mean)
                    except Exception as exc:  # noqa: BLE001 - reported, the next run goes on
                        if S.topology_names(dev):
                            raise
                        line = {"bench": "multilang", "components": kind, "workers": workers, "repeat": rep,
                                "error": repr(exc)}
                    print(json.dumps(line), flush=True)
                    lines.append(line)
    finally:
        dev.stop()
    print(json.dumps({"bench": "multilang", "summary": summary(lines)}), flush=True)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if not any("error" in ln for ln in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
