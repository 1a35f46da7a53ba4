"""`storm-py swap` on a dev cluster (the run's shared one) with Redis and the Spark table, under
load: the word count of tests/devcluster/swap/ (numbered sentences -> split -> a stateful count
keyed by word -> the table of (n, word, count)) is swapped to a changed split rule (each word
twice) with 3 count tasks instead of 2. Then every sentence is in the table exactly once, by the
old rule up to a point and by the new one after it (nothing lost, nothing twice), and every word's
counts run 1, 2, 3, ... without a gap or a repeat across the swap (its count continued on the
task the fields grouping now picks). Refusals leave the running topology as it was."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from devcluster_helpers import ROOT, status_in_list, storm_py, submit
from testutil import QUIET_IDLE_ARGS, wait_until

from executor.state.codec import decode

pytestmark = [pytest.mark.timeout(480), pytest.mark.zk, pytest.mark.cluster, pytest.mark.spark,
              pytest.mark.redis, pytest.mark.slow]

FILES = Path(__file__).parent / "swap"
sys.path.insert(0, str(FILES))
from swap_parts import sentence  # noqa: E402  (what the spout emits)

N, RATE = 3000, 150   # ~20 s of sentences (the swap tests pace the old code slower, the new faster)
DEADLINE = 240


def _conf(table: Path, redis_server, spark_remote, n: int = N, rate: int = RATE) -> list[str]:
    pc = redis_server.conf()["topology.state.provider.config"]
    return [f"swap.n={n}", f"swap.rate={rate}", f"swap.table={table}", "topology.state.provider=redis",
            f"topology.state.provider.config={json.dumps(pc)}", f"spark.remote={spark_remote['spark.remote']}",
            *QUIET_IDLE_ARGS]


def _emitted(redis_server, name: str, generation: str | None = None) -> int:
    """The spout's committed position: in any generation of the topology's state, or in the one
    a start from savepoint `generation` writes (the run before it may have gone further)."""
    client = redis_server.client()
    try:
        best = 0
        pattern = f"*:{name}*sentences*:committed" if generation is None else f"*:{name}:{generation}/sentences#*:committed"
        for key in client.scan_iter(pattern):
            raw = client.hget(key, b"\xa4next")
            if raw is not None:
                best = max(best, decode(raw) - 1)
        return best
    finally:
        client.close()


_READ = """
import json, sys
from executor.sinks.spark import read_table, reader_session
spark = reader_session({"spark.remote": sys.argv[2]})
print(json.dumps([[r["n"], r["word"], r["count"]] for r in read_table(sys.argv[1], dedupe=False, spark=spark).collect()]))
"""


def _rows(table: Path, spark_remote) -> list[tuple[int, str, int]]:
    # In a process of its own: a Spark Connect session sets SPARK_CONNECT_MODE_ENABLED in its
    # process's environment, which every later subprocess of this test process would inherit.
    out = subprocess.run([sys.executable, "-c", _READ, str(table), spark_remote["spark.remote"]], capture_output=True,
                         text=True, timeout=180, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return [tuple(r) for r in json.loads(out.stdout.strip().splitlines()[-1])]


def _complete(table: Path, spark_remote) -> list | None:
    """The table's rows once every sentence is in it."""
    rows = _rows(table, spark_remote)
    return rows if len({n for n, _w, _c in rows}) >= N else None


def _assert_each_sentence_once_and_counts_continue(rows) -> None:
    """Every sentence 1..N in the table exactly once, by the old rule (each word once) up to a cut
    after the first N/5 and by the new one (each word twice) after it, and every word's counts
    1, 2, 3, ... with no gap and no repeat."""
    per_sentence: dict[int, Counter] = defaultdict(Counter)
    for n, word, _count in rows:
        per_sentence[n][word] += 1
    assert sorted(per_sentence) == list(range(1, N + 1))
    rule = {}
    for n, words in per_sentence.items():
        once = Counter(sentence(n).split(" "))
        assert words in (once, once + once), f"sentence {n}: rows {dict(words)}, its words {dict(once)}"
        rule[n] = 1 if words == once else 2
    cut = max(n for n, r in rule.items() if r == 1)
    assert all(rule[n] == 1 for n in range(1, cut + 1)) and all(rule[n] == 2 for n in range(cut + 1, N + 1)), \
        "old rule and new rule interleave"
    assert N // 5 <= cut < N, cut
    counts: dict[str, list[int]] = defaultdict(list)
    for _n, word, count in rows:
        counts[word].append(count)
    for word, seen in counts.items():
        assert sorted(seen) == list(range(1, len(seen) + 1)), f"{word}: counts {sorted(seen)[:20]}..."


def _swap(conf_dir, file: str, *conf: str, check: int):
    args = [a for kv in conf for a in ("-c", kv)]
    return storm_py("swap", "swapwc", str(FILES / file), *args, "--wait", "120", conf_dir=conf_dir, check=check,
                    timeout=240)


def test_swap_to_a_new_split_rule_and_three_count_tasks_counts_each_sentence_once(
        tmp_path, shared_dev_cluster, redis_server, spark_remote):
    c, table = shared_dev_cluster, tmp_path / "table"
    # The old code paced slowly (a minute of sentences: the swap comes before the last one even
    # when a loaded machine takes half of that to start the command), the new code faster.
    conf = _conf(table, redis_server, spark_remote, rate=RATE // 3)
    submit(c.conf_dir, FILES / "words.py", "swapwc", *conf)
    try:
        wait_until(lambda: _emitted(redis_server, "swapwc") >= N // 5, DEADLINE,
                   lambda: f"{N // 5} sentences committed ({_emitted(redis_server, 'swapwc')})", interval=0.5)
        out = _swap(c.conf_dir, "words_v2_p3.py", *conf, f"swap.rate={RATE * 4}", check=0)
        assert "swapped topology swapwc" in out.stdout and "from savepoint" in out.stdout, out
        at_swap = _emitted(redis_server, "swapwc")
        assert at_swap < N, f"the swap came after the last sentence ({at_swap}): not under load"
        listed = storm_py("savepoints", "swapwc", "-c", conf[4], conf_dir=c.conf_dir, check=0).stdout
        assert "count x2" in listed, listed
        savepoint_id = out.stdout.rsplit("from savepoint ", 1)[1].split()[0]
        assert f"swapwc: started from savepoint {savepoint_id}" in storm_py("list", conf_dir=c.conf_dir).stdout
        wait_until(lambda: _emitted(redis_server, "swapwc") >= N, DEADLINE,
                   lambda: f"all {N} sentences committed ({_emitted(redis_server, 'swapwc')})", interval=0.5)
        rows = wait_until(lambda: _complete(table, spark_remote), DEADLINE, "every sentence in the table", interval=1)
    finally:
        storm_py("kill", "swapwc", "--wait", "0", conf_dir=c.conf_dir, check=None, timeout=120)
    _assert_each_sentence_once_and_counts_continue(rows)


def _words_counted(redis_server, name: str, generation: str) -> dict[str, int]:
    client = redis_server.client()
    try:
        out: dict[str, int] = {}
        for key in client.scan_iter(f"*:{name}:{generation}/count#*:committed"):
            for k, v in client.hgetall(key).items():
                out[decode(k)] = out.get(decode(k), 0) + decode(v)
        return out
    finally:
        client.close()


def test_a_savepoint_of_a_running_topology_is_where_a_later_submit_starts(
        tmp_path, shared_dev_cluster, redis_server, spark_remote):
    """`storm-py savepoint` while it runs, kill, `jar submit --from-savepoint` with the other split
    rule: refused in one line (the topology committed after the savepoint, its table has those
    rows), then given --allow-repeated-output: every word's count is exactly that of the
    savepoint's sentences by the old rule plus the later sentences by the new one (what ran
    between the savepoint and the kill is not counted)."""
    c, table = shared_dev_cluster, tmp_path / "table"
    conf = _conf(table, redis_server, spark_remote)
    submit(c.conf_dir, FILES / "words.py", "swapwc", *conf)
    try:
        wait_until(lambda: _emitted(redis_server, "swapwc") >= N // 5, DEADLINE, "sentences committed", interval=0.5)
        out = storm_py("savepoint", "swapwc", "-c", conf[4], conf_dir=c.conf_dir, check=0)
        assert out.stdout.startswith("savepoint ") and "count x2" in out.stdout, out
        savepoint_id = out.stdout.split()[1]
        before_kill = _emitted(redis_server, "swapwc")
        # (a loaded machine may have sent every sentence by now: then there are no more)
        wait_until(lambda: _emitted(redis_server, "swapwc") > before_kill or before_kill >= N, DEADLINE,
                   "more sentences", interval=0.5)
        storm_py("kill", "swapwc", "--wait", "0", conf_dir=c.conf_dir, check=0, timeout=120)
        wait_until(lambda: status_in_list(c.conf_dir, "swapwc") is None, DEADLINE, "the topology gone", interval=0.5)
        args = [a for kv in conf for a in ("-c", kv)]
        # the topology committed checkpoints after the savepoint: their rows are in the table
        refused = storm_py("jar", "submit", str(FILES / "words_v2.py"), "--name", "swapwc", "--from-savepoint",
                           savepoint_id, *args, conf_dir=c.conf_dir, check=1, timeout=120)
        lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "would be written again" in lines[0] and "--allow-repeated-output" in lines[0], \
            refused.stderr
        assert status_in_list(c.conf_dir, "swapwc") is None
        out = storm_py("jar", "submit", str(FILES / "words_v2.py"), "--name", "swapwc", "--from-savepoint",
                       savepoint_id, "--allow-repeated-output", *args, conf_dir=c.conf_dir, check=0, timeout=120)
        assert f"from savepoint {savepoint_id}" in out.stdout, out
        wait_until(lambda: _emitted(redis_server, "swapwc", savepoint_id) >= N, DEADLINE,
                   "every sentence committed by the run started from the savepoint", interval=0.5)
    finally:
        storm_py("kill", "swapwc", "--wait", "0", conf_dir=c.conf_dir, check=None, timeout=120)
    client = redis_server.client()
    try:
        saved_next = decode(client.hget(f"storm-py-test:swapwc:savepoint:{savepoint_id}:sentences#0", b"\xa4next"))
    finally:
        client.close()
    assert N // 5 < saved_next <= before_kill + 1
    want: dict[str, int] = {}
    for n in range(1, N + 1):
        for w in sentence(n).split(" "):
            want[w] = want.get(w, 0) + (1 if n < saved_next else 2)
    assert _words_counted(redis_server, "swapwc", savepoint_id) == want
    out = storm_py("savepoints", "swapwc", "--delete", savepoint_id, "-c", conf[4], conf_dir=c.conf_dir, check=0)
    assert f"deleted savepoint {savepoint_id}" in out.stdout
    assert "No savepoints" in storm_py("savepoints", "swapwc", "-c", conf[4], conf_dir=c.conf_dir, check=0).stdout


def _spout_acked(conf_dir, name: str) -> int:
    """The spout's tuples in committed checkpoints (exactly-once counts them as acked), all time."""
    import yaml

    from cluster_state.config import default_config
    from daemons.rpc.client import client_from_conf

    client = client_from_conf({**default_config(), **yaml.safe_load((conf_dir / "storm.yaml").read_text())})
    try:
        info = client.call("topology_info", name=name)
    except Exception:
        return 0
    finally:
        client.close()
    return sum(int(c.get("acked") or 0) for c in info["components"] if c["id"] == "sentences")


def test_a_memory_topology_is_swapped_through_a_savepoint_directory(tmp_path, shared_dev_cluster, spark_remote,
                                                                    redis_server):
    """The memory provider keeps state only in the workers: `swap --dir` has them write it at the
    stopping checkpoint, and the new code (3 count tasks) starts from the directory: the same
    table and counts as with Redis."""
    c, table, spdir = shared_dev_cluster, tmp_path / "table", tmp_path / "savepoints"
    conf = [*_conf(table, redis_server, spark_remote, rate=RATE // 3), "topology.state.provider=memory"]  # as above
    submit(c.conf_dir, FILES / "words.py", "swapmem", *conf)
    try:
        wait_until(lambda: _spout_acked(c.conf_dir, "swapmem") >= N // 5, DEADLINE,
                   lambda: f"{N // 5} sentences committed ({_spout_acked(c.conf_dir, 'swapmem')})", interval=0.5)
        args = [a for kv in conf for a in ("-c", kv)]
        out = storm_py("swap", "swapmem", str(FILES / "words_v2_p3.py"), *args, "-c", f"swap.rate={RATE * 4}",
                       "--dir", str(spdir), "--wait", "120",
                       conf_dir=c.conf_dir, check=0, timeout=240)
        assert "swapped topology swapmem" in out.stdout, out
        savepoint_id = out.stdout.rsplit("from savepoint ", 1)[1].split()[0]
        listed = storm_py("savepoints", "swapmem", "--dir", str(spdir), conf_dir=c.conf_dir, check=0).stdout
        assert savepoint_id in listed and "count x2" in listed, listed

        rows = wait_until(lambda: _complete(table, spark_remote), DEADLINE, "every sentence in the table", interval=2)
        # a savepoint of the running (new) topology, written by its workers
        out = storm_py("savepoint", "swapmem", "--dir", str(spdir), conf_dir=c.conf_dir, check=0, timeout=180)
        assert out.stdout.startswith("savepoint ") and "count x3" in out.stdout, out
        listed = storm_py("savepoints", "swapmem", "--dir", str(spdir), conf_dir=c.conf_dir, check=0).stdout
        assert len([ln for ln in listed.splitlines()[1:] if ln.strip()]) == 2, listed
        # ... and a later submit from it: its spout starts at the savepoint's position (all sent)
        later = out.stdout.split()[1]
        storm_py("kill", "swapmem", "--wait", "0", conf_dir=c.conf_dir, check=0, timeout=120)
        wait_until(lambda: status_in_list(c.conf_dir, "swapmem") is None, DEADLINE, "the topology gone", interval=0.5)
        out = storm_py("jar", "submit", str(FILES / "words_v2_p3.py"), "--name", "swapmem", "--from-savepoint", later,
                       "--dir", str(spdir), *args, conf_dir=c.conf_dir, check=0, timeout=120)
        assert f"from savepoint {later}" in out.stdout, out
        wait_until(lambda: f"swapmem: started from savepoint {later}" in storm_py("list", conf_dir=c.conf_dir).stdout,
                   DEADLINE, "the topology listed from its savepoint", interval=1)
    finally:
        storm_py("kill", "swapmem", "--wait", "0", conf_dir=c.conf_dir, check=None, timeout=120)
    _assert_each_sentence_once_and_counts_continue(rows)


def test_swaps_that_cannot_keep_the_state_are_refused_and_the_topology_runs_on(
        tmp_path, shared_dev_cluster, redis_server, spark_remote):
    c, table = shared_dev_cluster, tmp_path / "table"
    # Sentences for far longer than the refusals take on a loaded machine: "goes on" can be seen.
    conf = _conf(table, redis_server, spark_remote, n=100 * N)
    submit(c.conf_dir, FILES / "words.py", "swapwc", *conf)
    try:
        wait_until(lambda: _emitted(redis_server, "swapwc") >= 100, DEADLINE, "sentences committed", interval=0.5)
        for file, extra, why in [
                ("words_renamed.py", (), "component 'count' has state in the savepoint and is not in the new topology"),
                ("words_spouts2.py", (), "spout 'sentences': its read positions cannot be split over 2 tasks"),
                ("words_v2.py", ("topology.state.exactly.once=false",), "topology.state.exactly.once: true")]:
            out = _swap(c.conf_dir, file, *conf, *extra, check=1)
            lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
            assert len(lines) == 1 and why in lines[0] and "Traceback" not in out.stderr, (file, out.stderr)
            assert status_in_list(c.conf_dir, "swapwc") == "ACTIVE", file
        before = _emitted(redis_server, "swapwc")
        wait_until(lambda: _emitted(redis_server, "swapwc") > before, DEADLINE, "the topology goes on", interval=0.5)
    finally:
        storm_py("kill", "swapwc", "--wait", "0", conf_dir=c.conf_dir, check=None, timeout=120)
