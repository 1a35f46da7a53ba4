"""The word count example on a dev cluster (the run's shared one: tests/shared_clusters.py) with
the redis state provider, as a user runs it on `storm-py dev-cluster --redis` (whose defaults
name the provider that tests/scenarios/test_state_on_cluster.py checks): its counts live in
the count bolt's checkpointed Redis state, so a SIGKILLed worker and a rebalance neither reset
them nor start a new run, and `top_words.py` (unchanged) reads totals that hold every sentence
(at-least-once: none lost, a few counted twice at most).

Before the state (issue 35): after a rebalance the count bolt restarted from 0 under the same
run and top_words.py reported "cow" 540,774 instead of ~1.04M."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter

import psutil
import pytest
from devcluster_helpers import ROOT, storm_py, submit
from testutil import wait_until

from executor.state.codec import decode

pytestmark = [pytest.mark.timeout(420), pytest.mark.zk, pytest.mark.cluster, pytest.mark.spark,
              pytest.mark.redis, pytest.mark.slow]

sys.path.insert(0, str(ROOT / "examples" / "word_count"))
from word_count_components import SENTENCES  # noqa: E402

N, SEED, PENDING = 3000, 7, 300
WORDS_PER_SENTENCE_MAX = max(len(s.split()) for s in SENTENCES)
DEADLINE = 240  # faults and a relaunch on a machine whose speed drifts: generous


def expected() -> Counter:
    """What RandomSentenceSpout emits with this seed and limit (replays draw nothing)."""
    rng, out = random.Random(SEED), Counter()
    for _ in range(N):
        out.update(rng.choice(SENTENCES).split())
    return out


def committed(conf: dict, name: str) -> Counter:
    """The count bolt's committed counts, read from Redis itself (every task's namespace)."""
    import redis as redis_py

    pc = conf["topology.state.provider.config"]
    prefix = pc.get("key_prefix", "storm-py")
    client = redis_py.Redis(host=pc.get("host", "127.0.0.1"), port=pc["port"], password=pc.get("password"),
                            socket_timeout=5, socket_connect_timeout=5)
    try:
        out: Counter = Counter()
        for key in client.scan_iter(f"{prefix}:{name}/count-*:committed"):
            for k, v in client.hgetall(key).items():
                word = decode(k)
                if isinstance(word, str) and not word.startswith("$"):
                    out[word] += decode(v)
        return out
    finally:
        client.close()


def components_by_port(conf_dir, name: str) -> dict[int, set[str]]:
    import yaml

    from cluster_state.config import default_config
    from daemons.rpc.client import client_from_conf

    conf = {**default_config(), **yaml.safe_load((conf_dir / "storm.yaml").read_text())}
    client = client_from_conf(conf)
    try:
        details = client.call("topology_details", name=name)
    finally:
        client.close()
    out: dict[int, set[str]] = {}
    for e in details["executors"]:
        if e.get("port") is not None:
            out.setdefault(int(e["port"]), set()).add(e["component"])
    return out


def top_words(table, n: int) -> dict[str, int]:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "word_count" / "top_words.py"), str(table),
                          "-n", str(n)], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if ln.strip()]
    return {word: int(count) for count, word in rows}


def test_word_counts_survive_a_killed_worker_and_a_rebalance(tmp_path, shared_dev_cluster, redis_server):
    want = expected()
    table = tmp_path / "table"
    c = shared_dev_cluster
    conf = redis_server.conf()
    storm_id = submit(c.conf_dir, ROOT / "examples" / "word_count" / "topology.py", "wc",
                      "topology.workers=2", f"wordcount.table={table}", f"wordcount.sentences={N}",
                      f"wordcount.seed={SEED}", f"topology.max.spout.pending={PENDING}",
                      "topology.message.timeout.secs=20", "topology.state.provider=redis",
                      f"topology.state.provider.config={json.dumps(conf['topology.state.provider.config'])}")

    def progress(fraction: float):
        return lambda: sum(committed(conf, "wc").values()) >= fraction * sum(want.values())

    wait_until(progress(0.2), DEADLINE, lambda: f"a fifth of the words committed ({committed(conf, 'wc')})",
               interval=0.5)
    # The worker that counts and does not hold the spout (the spout's replays live in its memory:
    # RandomSentenceSpout is not a durable source).
    by_port = components_by_port(c.conf_dir, "wc")
    victim = next((p for p, comps in sorted(by_port.items()) if "count" in comps and "sentences" not in comps),
                  None)
    assert victim is not None, f"no worker counts without the spout: {by_port}"
    before = committed(conf, "wc")
    pids = c.worker_pids(storm_id)
    assert victim in pids, f"no worker process on port {victim}: {pids}"
    psutil.Process(pids[victim]).kill()
    wait_until(progress(0.5), DEADLINE, lambda: f"counting on after the SIGKILL ({sum(committed(conf, 'wc').values())})",
               interval=0.5)
    after_kill = committed(conf, "wc")
    # Nothing restarted from 0: each count went on from its committed value.
    assert all(after_kill[w] >= before[w] for w in before), (before, after_kill)

    storm_py("rebalance", "wc", "--wait", "1", conf_dir=c.conf_dir, check=0, timeout=120)
    wait_until(lambda: all(committed(conf, "wc")[w] >= n for w, n in want.items()), DEADLINE,
               lambda: f"every sentence counted ({sorted((want - committed(conf, 'wc')).items())[:5]} short)",
               interval=0.5)
    # The table catches up with the committed counts (the sink writes what the count emitted).
    got: dict[str, int] = {}

    def table_complete() -> bool:
        got.clear()
        got.update(top_words(table, len(want)))
        return all(got.get(w, 0) >= n for w, n in want.items())

    wait_until(table_complete, DEADLINE, lambda: f"top_words.py to show every sentence: {got} vs {dict(want)}",
               interval=2)
    storm_py("kill", "wc", "--wait", "0", conf_dir=c.conf_dir, check=0, timeout=120)
    # At least once: a sentence in flight at a fault may count twice, never more than those in flight.
    slack = 2 * PENDING * WORDS_PER_SENTENCE_MAX
    assert sum(got.values()) - sum(want.values()) <= slack, (got, dict(want))
