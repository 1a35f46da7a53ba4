"""The operator's paths around an exactly-once topology, on a dev cluster with Redis as the README's
`storm-py dev-cluster --redis` makes it (the state provider in its storm.yaml, no `-c` for it):
the word count example swapped to 3 count tasks with its client SIGKILLed once the swap has
started, and again to 4 with its client killed after the old code was removed (Nimbus runs a
swap: the new code starts anyway); then killed and submitted again with 2 count tasks (its state
continues, moved to the new parallelism), and a resubmit that would split the spout's position
refused in one line. After all of it every word's total in the table is exactly that of the
sentences sent (seeded), each count of a word appears once, and so do the committed counts.

Before (issue 62): the swap was refused on this cluster (its provider read as 'memory'), the
count bolt's `$window` and `$run` keys refused any parallelism change, a client killed mid-swap
left the topology inactive, and a resubmit with another parallelism started the spout from its
first sentence (another task's state): 28,350 rows twice."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
from collections import Counter, defaultdict

import pytest
from devcluster_helpers import ROOT, status_in_list, storm_py, submit
from testutil import CLI_ENV, QUIET_IDLE_ARGS, wait_until
from zk_fixture import zookeeper_at

from daemons.rpc.client import client_from_conf
from executor.state.codec import decode

pytestmark = [pytest.mark.timeout(600), pytest.mark.zk, pytest.mark.cluster, pytest.mark.spark,
              pytest.mark.redis, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("the dev cluster needs Java and the Debian zookeeper package", allow_module_level=True)

sys.path.insert(0, str(ROOT / "examples" / "word_count"))
from word_count_components import SENTENCES  # noqa: E402

FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1, "task.heartbeat.frequency.secs": 1}
N, SEED = 6000, 11
DEADLINE = 240
VARIANT = '''
from topology import config
from word_count_components import TABLE, build_topology

topology = build_topology(TABLE, count_tasks={tasks}, spout_tasks={spouts})
config = dict(config)
'''


@pytest.fixture(scope="module")
def dev(tmp_path_factory, zk_server, zk_admin):
    """A dev cluster with Redis of its own, as `storm-py dev-cluster --redis` runs it."""
    from zk_fixture import zk_conf_for

    from daemons.devcluster import DevCluster

    base = tmp_path_factory.mktemp("upgrades")
    root = f"/upgrades-{base.name}"
    cluster = DevCluster(base / "dev", supervisors=2, slots=3, user_conf=FAST, redis=True,
                         zookeeper_at=zookeeper_at(zk_conf_for(zk_server, root)))
    try:
        cluster.start()
        assert cluster.conf["topology.state.provider"] == "redis"
        yield cluster
    finally:
        cluster.stop()
        zk_admin.delete(root, recursive=True)


@pytest.fixture
def code(tmp_path):
    """The example's directory, with variants of its topology with 3, 4 and 2 count tasks."""
    d = tmp_path / "word_count"
    shutil.copytree(ROOT / "examples" / "word_count", d, ignore=shutil.ignore_patterns("__pycache__"))
    for tasks in (2, 3, 4):
        (d / f"topology_p{tasks}.py").write_text(VARIANT.format(tasks=tasks, spouts=1))
    (d / "topology_spouts2.py").write_text(VARIANT.format(tasks=2, spouts=2))
    return d


def _redis(dev):
    import redis

    return redis.Redis(host=dev.redis.host, port=dev.redis.port, socket_timeout=5, socket_connect_timeout=5)


def expected() -> Counter:
    rng, out = random.Random(SEED), Counter()
    for _ in range(N):
        out.update(rng.choice(SENTENCES).split())
    return out


def committed(dev, name: str) -> Counter:
    """The count bolt's committed counts in the current state generation (read from Redis)."""
    client = _redis(dev)
    try:
        generation = client.get(f"storm-py:{name}:generation")
        base = f"storm-py:{name}:{generation.decode()}" if generation else f"storm-py:{name}"
        out: Counter = Counter()
        for key in client.scan_iter(f"{base}/count#*:committed"):
            for k, v in client.hgetall(key).items():
                word = decode(k)
                if isinstance(word, str) and not word.startswith("$"):
                    out[word] += decode(v)[1]
        return out
    finally:
        client.close()


def sent(dev, name: str) -> int:
    """The spout's committed position (sentences sent and committed)."""
    client = _redis(dev)
    try:
        best = 0
        for key in client.scan_iter(f"storm-py:{name}*sentences#*:committed"):
            raw = client.hget(key, b"\xa8position")
            if raw is not None:
                best = max(best, decode(raw)[0])
        return best
    finally:
        client.close()


def swap_status(dev, name: str):
    import yaml

    from cluster_state.config import default_config

    client = client_from_conf({**default_config(), **yaml.safe_load((dev.conf_dir / "storm.yaml").read_text())})
    try:
        return client.call("swap_status", name=name)
    finally:
        client.close()


def swap_killed_at(dev, code, name: str, file: str, phase: str, log, conf: list[str]) -> dict:
    """`storm-py swap NAME FILE` as a process, SIGKILLed once its swap is at `phase`; the swap's
    record once Nimbus ended it (not the record of a swap before it)."""
    before = swap_status(dev, name)
    earlier = before["savepoint"] if before else None
    proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "swap", name, str(code / file), "--wait", "120",
                             *[a for kv in conf for a in ("-c", kv)], "--conf-dir", str(dev.conf_dir)], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, env=CLI_ENV)
    try:
        phases = ("stopping", "parking", "writing", "saved", "killed", "done")

        def reached():
            record = swap_status(dev, name)
            return record if record and record["savepoint"] != earlier and \
                phases.index(record["phase"]) >= phases.index(phase) else None

        wait_until(reached, DEADLINE, f"the swap of {name} to reach {phase}", interval=0.05, tolerate=(Exception,))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    return wait_until(lambda: (r := swap_status(dev, name)) and r["savepoint"] != earlier and
                      r["phase"] in ("done", "failed") and r,
                      DEADLINE, f"Nimbus to end the swap of {name}", interval=0.5, tolerate=(Exception,))


def table_counts(table, remote: str) -> list[tuple[str, str, int]]:
    read = ("import json, sys\nfrom executor.sinks.spark import read_table, reader_session\n"
            "spark = reader_session({'spark.remote': sys.argv[2]})\n"
            "print(json.dumps([[r['run'], r['word'], r['count']] for r in "
            "read_table(sys.argv[1], dedupe=False, spark=spark).collect()]))\n")
    out = subprocess.run([sys.executable, "-c", read, str(table), remote], capture_output=True, text=True,
                         timeout=180, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    return [tuple(r) for r in json.loads(out.stdout.strip().splitlines()[-1])]


def test_swaps_with_their_client_killed_and_a_resubmit_to_another_parallelism_count_each_sentence_once(
        dev, code, tmp_path, spark_remote):
    name, table, want = "wcs", tmp_path / "table", expected()
    conf = [f"wordcount.table={table}", f"wordcount.sentences={N}", f"wordcount.seed={SEED}", "wordcount.rate=60",
            "topology.workers=2", f"spark.remote={spark_remote['spark.remote']}", *QUIET_IDLE_ARGS]
    log = open(tmp_path / "swaps.out", "wb")
    try:
        submit(dev.conf_dir, code / "topology.py", name, *conf)
        wait_until(lambda: sent(dev, name) >= N // 8, DEADLINE, "the first sentences committed", interval=0.5)
        # 2 -> 3 count tasks, the client killed as soon as Nimbus took the swap
        first = swap_killed_at(dev, code, name, "topology_p3.py", "stopping", log, conf)
        assert first["phase"] == "done", first
        assert status_in_list(dev.conf_dir, name) == "ACTIVE"
        assert f"{name}: started from savepoint {first['savepoint']}" in storm_py("list", conf_dir=dev.conf_dir).stdout
        at = sent(dev, name)
        assert at < N, "the first swap came after the last sentence"
        wait_until(lambda: sent(dev, name) > at, DEADLINE, "sentences after the first swap", interval=0.5)
        # 3 -> 4, the client killed after the old code was removed
        second = swap_killed_at(dev, code, name, "topology_p4.py", "killed", log, conf)
        assert second["phase"] == "done", second
        # killed, then submitted again with 2 count tasks: it continues, its state moved
        storm_py("kill", name, "--wait", "0", conf_dir=dev.conf_dir, timeout=120)
        wait_until(lambda: status_in_list(dev.conf_dir, name) is None, DEADLINE, "the topology gone", interval=0.5)
        args = [a for kv in conf for a in ("-c", kv)]
        refused = storm_py("jar", "submit", str(code / "topology_spouts2.py"), "--name", name, *args,
                           conf_dir=dev.conf_dir, check=1, timeout=120)
        lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "spout 'sentences' had 1 task(s)" in lines[0] and "Traceback" not in refused.stderr, \
            refused.stderr
        assert status_in_list(dev.conf_dir, name) is None  # nothing runs
        out = storm_py("jar", "submit", str(code / "topology_p2.py"), "--name", name, *args,
                       "-c", "wordcount.rate=1000", conf_dir=dev.conf_dir, timeout=120)  # the rest at once
        assert "continues from checkpoint" in out.stderr and "count: 4 -> 2 tasks" in out.stderr, out.stderr
        wait_until(lambda: committed(dev, name) == want, DEADLINE,
                   lambda: f"every sentence counted ({sorted((want - committed(dev, name)).items())[:5]} short, "
                           f"{sorted((committed(dev, name) - want).items())[:5]} over)", interval=1)
        rows = wait_until(lambda: (r := table_counts(table, spark_remote["spark.remote"])) and
                          sum(max(c for run, w, c in r if (run, w) == k) for k in {(run, w) for run, w, _c in r})
                          >= sum(want.values()) and r, DEADLINE, "every count in the table", interval=2)
    finally:
        storm_py("kill", name, "--wait", "0", conf_dir=dev.conf_dir, check=None, timeout=120)
        log.close()
    by_run: dict[tuple, list[int]] = defaultdict(list)
    for run, word, count in rows:
        by_run[(run, word)].append(count)
    for key, counts in by_run.items():
        assert len(counts) == len(set(counts)), f"{key}: a count twice in the table: {sorted(counts)}"
    totals: Counter = Counter()
    for (_run, word), counts in by_run.items():
        totals[word] += max(counts)
    assert totals == want


def _group(dev) -> dict:
    client = _redis(dev)
    try:
        groups = [g for g in client.xinfo_groups("events") if g["name"] == b"summer"] if client.exists("events") else []
        return groups[0] if groups else {"entries-read": 0, "pending": 0}
    finally:
        client.close()


def _acked(dev) -> int:
    g = _group(dev)
    return (g.get("entries-read") or 0) - g["pending"]


def _feed(dev, first: int, last: int) -> None:
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "redis_events" / "feed.py"), "--port",
                          str(dev.redis.port), "--events", str(last - first + 1), "--first", str(first)],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr


def _event_rows(table, remote: str) -> Counter:
    read = ("import json, sys\nfrom executor.sinks.spark import read_table, reader_session\n"
            "spark = reader_session({'spark.remote': sys.argv[2]})\n"
            "print(json.dumps([r['id'] for r in read_table(sys.argv[1], dedupe=False, spark=spark).collect()]))\n")
    out = subprocess.run([sys.executable, "-c", read, str(table), remote], capture_output=True, text=True,
                         timeout=180, stdin=subprocess.DEVNULL, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    import json
    return Counter(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_start_from_an_older_savepoint_of_a_redis_stream_is_refused_or_reads_again_what_came_after_it(
        dev, tmp_path, spark_remote):
    """Events 1..2000, a savepoint, 2001..4000 acked, the topology killed: a start from the savepoint
    is refused in one line (the table holds what came after it), and with --allow-repeated-output
    the stream group goes back to the savepoint's cut: every entry the savepoint had not read is
    read again (its row twice in the raw table), every entry it had, once; none is lost."""
    from executor.spouts.stream_ledger import id_order

    name, table, remote = "events", tmp_path / "events-table", spark_remote["spark.remote"]
    conf = [f"events.redis.port={dev.redis.port}", f"events.table={table}", f"spark.remote={remote}",
            *QUIET_IDLE_ARGS]
    args = [a for kv in conf for a in ("-c", kv)]
    topology = ROOT / "examples" / "redis_events" / "topology.py"
    try:
        _feed(dev, 1, 2000)
        submit(dev.conf_dir, topology, name, *conf)
        wait_until(lambda: _acked(dev) >= 1000, DEADLINE, lambda: f"1,000 events acked ({_acked(dev)})", interval=0.5)
        out = storm_py("savepoint", name, conf_dir=dev.conf_dir, timeout=120)
        savepoint = out.stdout.split()[1]
        _feed(dev, 2001, 4000)
        wait_until(lambda: _acked(dev) >= 4000, DEADLINE, lambda: f"every event acked ({_acked(dev)})", interval=0.5)
        storm_py("kill", name, "--wait", "0", conf_dir=dev.conf_dir, timeout=120)
        wait_until(lambda: status_in_list(dev.conf_dir, name) is None, DEADLINE, "the topology gone", interval=0.5)
        refused = storm_py("jar", "submit", str(topology), "--name", name, "--from-savepoint", savepoint, *args,
                           conf_dir=dev.conf_dir, check=1, timeout=120)
        lines = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "would be written again" in lines[0], refused.stderr
        # what the savepoint had not read: its tasks' pending entries past their positions, and
        # everything after the group's last delivered id (its cut, kept in the spout's state)
        client = _redis(dev)
        try:
            cuts = [decode(client.hget(f"storm-py:{name}:savepoint:{savepoint}:events#{i}", b"\xa7$rewind"))
                    for i in range(2)]
            ids = {e[0].decode(): int(e[1][b"n"]) for e in client.xrange("events")}
        finally:
            client.close()
        ld = cuts[0]["events"]["ld"]
        again = {i for c in cuts for i in c["events"]["replay"]} | {i for i in ids if id_order(i) > id_order(ld)}
        assert 0 < len(again) < len(ids)
        storm_py("jar", "submit", str(topology), "--name", name, "--from-savepoint", savepoint,
                 "--allow-repeated-output", *args, conf_dir=dev.conf_dir, timeout=120)
        want = Counter({i: 2 if i in again else 1 for i in ids})
        wait_until(lambda: _group(dev)["pending"] == 0 and sum(_event_rows(table, remote).values()) >= sum(want.values()),
                   DEADLINE, "the events after the savepoint read again", interval=2)
        assert _event_rows(table, remote) == want
    finally:
        storm_py("kill", name, "--wait", "0", conf_dir=dev.conf_dir, check=None, timeout=120)


STANDBY_HOST = "127.0.0.3"


def test_a_swap_goes_on_when_nimbus_s_leader_is_killed_in_its_middle(tmp_path, code, zk_server, zk_admin,
                                                                     spark_remote):
    """A Nimbus HA pair on a dev cluster with Redis: the word count swapped from 2 to 3 count
    tasks, the leader SIGKILLed once the standby holds the new code, before the savepoint; the
    standby takes over, ends the swap, and every word's count is exact."""
    import yaml
    from zk_fixture import zk_conf_for

    from daemons.devcluster import DevCluster

    root = f"/upgrades-ha-{tmp_path.name}"
    ha = {**FAST, "storm.zookeeper.session.timeout": 4000, "nimbus.code.sync.freq.secs": 1}
    dev = DevCluster(tmp_path / "dev", supervisors=1, slots=3, user_conf=ha, redis=True,
                     more_nimbus_hosts=(STANDBY_HOST,), zookeeper_at=zookeeper_at(zk_conf_for(zk_server, root)))
    standby = standby_out = None
    name, table, want = "wcs", tmp_path / "table", expected()
    conf = [f"wordcount.table={table}", f"wordcount.sentences={N}", f"wordcount.seed={SEED}", "wordcount.rate=150",
            "topology.workers=2", f"spark.remote={spark_remote['spark.remote']}", *QUIET_IDLE_ARGS]
    try:
        dev.start()
        standby_conf = {**dev.conf, "storm.local.hostname": STANDBY_HOST,
                        "storm.local.dir": str(tmp_path / "nimbus-2"), "storm.log.dir": str(tmp_path / "logs-2")}
        (tmp_path / "conf-standby").mkdir()
        (tmp_path / "conf-standby" / "storm.yaml").write_text(yaml.safe_dump(standby_conf))
        standby_out = open(tmp_path / "standby.out", "wb")
        standby = subprocess.Popen([sys.executable, "-m", "daemons.cli", "nimbus", "--conf-dir",
                                    str(tmp_path / "conf-standby")], cwd=ROOT, stdin=subprocess.DEVNULL,
                                   stdout=standby_out, stderr=subprocess.STDOUT, env=CLI_ENV)
        submit(dev.conf_dir, code / "topology.py", name, *conf)
        wait_until(lambda: sent(dev, name) >= N // 8, DEADLINE, "the first sentences committed", interval=0.5)
        log = open(tmp_path / "swap.out", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "swap", name, str(code / "topology_p3.py"),
                                 "--wait", "120", *[a for kv in conf for a in ("-c", kv)], "--conf-dir",
                                 str(dev.conf_dir)], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=CLI_ENV)
        try:
            # the leader waits for the standby to hold the new code before it removes the old
            # topology; killed before, the swap is given up (tests/unit/test_unit_swap_steps.py)
            stormdist = tmp_path / "nimbus-2" / "nimbus" / "stormdist"
            wait_until(lambda: (r := swap_status(dev, name)) and (stormdist / r["new_id"]).is_dir(), DEADLINE,
                       "the standby to hold the new code", interval=0.05, tolerate=(Exception,))
            dev.stop_nimbus(kill=True)
        finally:
            proc.kill()
            proc.wait(30)
            log.close()
        ended = wait_until(lambda: (r := swap_status(dev, name)) and r["phase"] in ("done", "failed") and r, DEADLINE,
                           "the standby to take over and end the swap", interval=0.5, tolerate=(Exception,))
        assert ended["phase"] == "done", ended
        assert sent(dev, name) < N, "the swap came after the last sentence"
        wait_until(lambda: committed(dev, name) == want, DEADLINE,
                   lambda: f"every sentence counted ({sorted((want - committed(dev, name)).items())[:5]} short, "
                           f"{sorted((committed(dev, name) - want).items())[:5]} over)", interval=1)
    finally:
        if standby is not None:
            from testutil import stop_process
            stop_process(standby, 30, "the standby nimbus")
            standby_out.close()
        dev.stop()
        zk_admin.delete(root, recursive=True)
