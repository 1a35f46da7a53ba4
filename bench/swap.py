"""The time a swap takes (issue 48): `storm-py swap` of a running exactly-once word count (numbered
sentences at `--rate`/s -> split -> a stateful count keyed by word; bench/swap/) to a changed
split rule, on a dev cluster (daemons.devcluster.DevCluster: ZooKeeper, Nimbus, one supervisor
with 2 slots, Redis as the state provider; one worker a topology). Per round it prints one JSON
line: the swap command's own seconds, when its spouts had stopped at a committed checkpoint (the
command's "stopped" line), and the seconds from the command's start until the new code's first
commit that moved the spout past the savepoint (the new code processing), then a summary line.

With `--memory` the topology keeps its state in the memory provider and swaps through a savepoint
directory its workers write (`swap --dir`); progress is then the spout's committed tuples as
Nimbus reports them (topology_info), not its position in Redis.

usage: python3 bench/swap.py [--rounds 3] [--rate 2000] [--dir D] [--memory]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

from scaling import FAST, kill_and_wait, nimbus, wait_until  # noqa: E402

from daemons.devcluster import DevCluster  # noqa: E402
from executor.state.codec import decode  # noqa: E402

NAME = "swapbench"
FILES = ROOT / "bench" / "swap"


def cli(dev: DevCluster, *args: str, timeout: float = 300) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen([sys.executable, "-m", "daemons.cli", *args, "--conf-dir", str(dev.conf_dir)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def position(client, generation: str | None) -> int:
    """The spout's committed position in a generation of the topology's state (0: none yet)."""
    best = 0
    pattern = f"*:{NAME}:{generation}/sentences#*:committed" if generation else f"*:{NAME}/sentences#*:committed"
    for key in client.scan_iter(pattern):
        raw = client.hget(key, b"\xa4next")
        if raw is not None:
            best = max(best, decode(raw) - 1)
    return best


def committed(dev: DevCluster) -> int:
    """The running topology's spout tuples in committed checkpoints (0 before it reports)."""
    try:
        info = nimbus(dev, "topology_info", name=NAME)
    except Exception:
        return 0
    return sum(int(c.get("acked") or 0) for c in info["components"] if c["id"] == "sentences")


def run_swap(dev: DevCluster, rule_to: int, conf: list[str]) -> tuple[float, float, float | None]:
    """`storm-py swap` to split rule `rule_to`: (its start, its seconds, when it said the spouts
    had stopped at a committed checkpoint)."""
    t0 = time.monotonic()
    proc = cli(dev, "swap", NAME, str(FILES / f"words_v{rule_to}.py"), *conf)
    stopped_at = None
    for line in proc.stdout:
        if " stopped at checkpoint " in line:
            stopped_at = time.monotonic() - t0
    proc.wait(timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"storm-py swap exited {proc.returncode}: {proc.stderr.read().strip()}")
    return t0, time.monotonic() - t0, stopped_at


def _line(rule_to: int, t0: float, command: float, stopped_at: float | None, **more) -> dict:
    return {"bench": "swap", **more, "to_rule": rule_to, "command_secs": round(command, 2),
            "stopped_at_barrier_secs": None if stopped_at is None else round(stopped_at, 2),
            "to_new_code_processing_secs": round(time.monotonic() - t0, 2)}


def memory_round(dev: DevCluster, rule_to: int, conf: list[str], directory: Path) -> dict:
    before = committed(dev)
    wait_until(lambda: committed(dev) > before + 1000, "the running topology to move on", 120, dev)
    t0, command, stopped_at = run_swap(dev, rule_to, [*conf, "--dir", str(directory)])
    wait_until(lambda: committed(dev) > 0, "the new code to commit progress", 120, dev)
    return _line(rule_to, t0, command, stopped_at, provider="memory")


def one_round(dev: DevCluster, client, rule_to: int, conf: list[str]) -> dict:
    generation = client.get(f"storm-py:{NAME}:generation")
    before = position(client, generation.decode() if generation else None)
    wait_until(lambda: position(client, generation.decode() if generation else None) > before + 1000,
               "the running topology to move on", 120, dev)
    t0, command, stopped_at = run_swap(dev, rule_to, conf)
    new_gen = client.get(f"storm-py:{NAME}:generation").decode()
    base = position(client, new_gen)  # the savepoint's position, written before the submit
    wait_until(lambda: position(client, new_gen) > base, "the new code to commit progress", 120, dev)
    return _line(rule_to, t0, command, stopped_at, savepoint_position=base)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--memory", action="store_true", help="the memory provider, swapped through a directory")
    args = ap.parse_args(argv)
    base = Path(args.dir or tempfile.mkdtemp(prefix="storm-py-swap-bench-"))
    dev = DevCluster(base / "cluster", supervisors=1, slots=2, redis=True, user_conf=dict(FAST))
    lines = []
    try:
        dev.start()
        import redis as redis_py

        client = redis_py.Redis(host="127.0.0.1", port=dev.redis.port, socket_timeout=10)
        conf = ["-c", f"swap.rate={args.rate}", *(["-c", "topology.state.provider=memory"] if args.memory else [])]
        proc = cli(dev, "jar", "submit", str(FILES / "words_v1.py"), "--name", NAME, *conf)
        if proc.wait(timeout=300) != 0:
            raise RuntimeError(f"submit failed: {proc.stderr.read().strip()}")
        for i in range(args.rounds):
            rule = 2 if i % 2 == 0 else 1
            line = (memory_round(dev, rule, conf, base / "savepoints") if args.memory
                    else one_round(dev, client, rule, conf))
            print(json.dumps(line), flush=True)
            lines.append(line)
        kill_and_wait(dev, NAME)
        client.close()
    finally:
        dev.stop()
    to_new = [ln["to_new_code_processing_secs"] for ln in lines]
    print(json.dumps({"bench": "swap", "summary": {
        "rounds": len(lines), "to_new_code_processing_secs_median": statistics.median(to_new) if to_new else None,
        "to_new_code_processing_secs_max": max(to_new, default=None),
        "stopped_at_barrier_secs_median": statistics.median([ln["stopped_at_barrier_secs"] or 0 for ln in lines])
        if lines else None}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
