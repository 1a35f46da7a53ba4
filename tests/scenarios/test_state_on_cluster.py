"""Stateful bolts on a dev cluster (the run's shared one: tests/shared_clusters.py; two worker
processes) with the redis state provider on a real Redis of the test's own, under faults the
test causes: a SIGKILLed worker and a Redis server stopped for a few seconds.

- exactly-once (`topology.state.exactly.once: true`, a BaseStatefulSpout): the committed sum
  and count of 1..N are exact, and the count never passes N;
- the default (Storm's at-least-once): no number is lost (every number in the committed state,
  the sum at least the exact one);
- exactly-once into the Spark table: each worker SIGKILLed in turn, the raw table (no dedupe)
  holds every number exactly once."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from scenario_harness import DevHarness
from test_sources_exactly_once import add_numbers
from testutil import QUIET_IDLE, wait_until
from zk_fixture import zookeeper_at

from executor.state.codec import decode

pytestmark = [pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(420)]

FAST = {"nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 1,
        "supervisor.heartbeat.frequency.secs": 1}
N = 3000
RUN = {**QUIET_IDLE, "numbers.n": N, "numbers.rate": 150, "topology.message.timeout.secs": 10,
       "topology.state.checkpoint.interval.ms": 300}
# A fault mid-run, the outage ends, the run finishes: generous, as the machine's speed drifts.
DEADLINE = 240


def committed(redis, name: str, prefix: str | None = None) -> dict[str, dict]:
    """The sum bolt's committed state per task, read from Redis itself (not through storm-py)."""
    import redis as redis_py

    client = redis_py.Redis(host=redis.host, port=redis.port, socket_timeout=5, socket_connect_timeout=5)
    try:
        prefix = prefix or redis.provider_config().get("key_prefix", "storm-py")
        out = {}
        for key in client.scan_iter(f"{prefix}:{name}/sum#*:committed"):
            ns = key.decode()[len(prefix) + 1:-len(":committed")]
            out[ns] = {decode(k): decode(v) for k, v in client.hgetall(key).items()}
        return out
    finally:
        client.close()


def totals(redis, name: str, prefix: str | None = None) -> tuple[int, int]:
    states = committed(redis, name, prefix).values()
    return sum(s.get("sum", 0) for s in states), sum(s.get("count", 0) for s in states)


@contextlib.contextmanager
def _dev_harness(tmp_path, dev):
    """A harness submitting to the shared dev cluster `dev` (its topologies are killed by the
    shared fixture at the end of the test)."""
    (tmp_path / "runs").mkdir()
    harness = DevHarness(tmp_path / "runs", dev)
    try:
        yield dev, harness
    finally:
        harness.client.close()


def _evidence(redis, name: str, records) -> str:
    """What a run that did not finish left: the numbers no committed state has seen (the sum
    bolt keeps a seen-N key per number), and its tasks' checkpoint records, in time order."""
    try:
        seen = {int(k[5:]) for state in committed(redis, name).values() for k in state
                if isinstance(k, str) and k.startswith("seen-")}
    except Exception as exc:  # noqa: BLE001 -- evidence for a failure message, never a second failure
        return f"committed state not read: {exc!r}"
    missing = sorted(set(range(1, N + 1)) - seen)
    steps = [{k: r.get(k) for k in ("component", "task", "kind", "txid", "next", "sum", "count") if k in r}
             for r in records.records() if r["kind"] in ("init", "prepared", "committed", "rollback")]
    return f"missing numbers {missing[:40]}{' ...' if len(missing) > 40 else ''}; records {records.summary()}; " \
           f"checkpoint records (last 40): {steps[-40:]}"


def _run_with_faults(tmp_path, dev, redis, topology_file: str, name: str, conf: dict, done):
    """Run `topology_file` on `dev` through a worker SIGKILL and a Redis outage until
    `done(totals)`; (the final totals, the run's records)."""
    with _dev_harness(tmp_path, dev) as (dev, harness):
        run = harness.submit(topology_file, name, {**redis.conf(), **RUN, **conf})

        def progress(at_least):
            return lambda: totals(redis, name)[1] >= at_least

        wait_until(progress(N // 5), DEADLINE, f"{name}: a fifth of the numbers committed",
                   interval=0.2, tolerate=(OSError,))
        port, pid = max(dev.worker_pids(harness.storm_ids[name]).items())
        dev.kill_worker(port)
        after_kill = totals(redis, name)[1]
        wait_until(progress(after_kill + N // 10), DEADLINE,
                   lambda: f"{name}: commits going on after worker {pid} (port {port}) was killed "
                           f"({totals(redis, name)})", interval=0.2)
        redis.stop()
        time.sleep(3)  # the outage itself (the fault), not a wait for something
        redis.start()
        wait_until(lambda: done(totals(redis, name)), DEADLINE,
                   lambda: f"{name}: the run to finish after the Redis outage ({totals(redis, name)}); "
                           f"{_evidence(redis, name, run.results)}",
                   interval=0.5, tolerate=(OSError,))
        result = totals(redis, name)
        harness.kill(name)
        return result, run.results


def test_exactly_once_state_survives_a_killed_worker_and_a_redis_outage(tmp_path, shared_dev_cluster, redis_server):
    exact = (N * (N + 1) // 2, N)
    seen_counts = []

    def done(t):
        seen_counts.append(t[1])
        return t[1] >= N

    result, records = _run_with_faults(tmp_path, shared_dev_cluster, redis_server, "exactly_once_sum.py", "eo",
                                       {"topology.state.exactly.once": True}, done)
    assert result == exact
    # The faults made the topology roll back: the spout was rewound (init_state again) at least once.
    assert len(records.records("numbers", "init")) >= 2, records.summary()
    assert max(seen_counts) <= N  # never a number counted twice, even for a while


@pytest.mark.redis
@pytest.mark.parametrize("source", ["directory", "redis"])
def test_exactly_once_sources_survive_a_killed_worker_and_a_redis_outage(tmp_path, shared_dev_cluster, redis_server,
                                                                         source):
    """DirectorySpout and RedisStreamSpout in the checkpoint (their positions in the test's Redis,
    restored by the killed worker's tasks): every number summed once. Max spout pending paces
    them (at most 20 numbers a task between commits), so that the faults land mid-run."""
    conf = {"topology.state.exactly.once": True, "topology.max.spout.pending": 20}
    if source == "directory":
        directory = tmp_path / "in"
        directory.mkdir()
        for i in range(3):
            part = directory / f".part-{i}"
            part.write_text("".join(f"{n}\n" for n in range(1 + i * N // 3, 1 + (i + 1) * N // 3)))
            part.rename(directory / f"part-{i}")
        conf["scenario.source.dir"] = str(directory)
    else:
        client = redis_server.client()
        try:
            add_numbers(client, N)
        finally:
            client.close()
        conf["scenario.redis.port"] = redis_server.port
    seen_counts = []

    def done(t):
        seen_counts.append(t[1])
        return t[1] >= N

    result, records = _run_with_faults(tmp_path, shared_dev_cluster, redis_server, f"exactly_once_{source}.py",
                                       f"eo{source}", conf, done)
    assert result == (N * (N + 1) // 2, N)
    assert max(seen_counts) <= N  # never a number counted twice, even for a while


def test_at_least_once_state_loses_no_number_across_the_same_faults(tmp_path, shared_dev_cluster, redis_server):
    exact_sum = N * (N + 1) // 2

    def done(t):
        if t[1] < N or t[0] < exact_sum:
            return False
        merged = _merged(redis_server)
        return all(merged.get(f"seen-{n}") for n in range(1, N + 1))

    _run_with_faults(tmp_path, shared_dev_cluster, redis_server, "stateful_sum.py", "alo", {}, done)
    merged = _merged(redis_server)
    assert [n for n in range(1, N + 1) if not merged.get(f"seen-{n}")] == []
    s, c = totals(redis_server, "alo")
    assert s >= exact_sum and c >= N


def _merged(redis) -> dict:
    out: dict = {}
    for state in committed(redis, "alo").values():
        out.update(state)
    return out


def test_dev_cluster_with_redis_is_every_topologys_state_provider(tmp_path, zk_conf):
    if shutil.which("java") is None:
        pytest.skip("the dev cluster needs Java and the Debian zookeeper package")
    from daemons.devcluster import DevCluster

    dev = DevCluster(tmp_path / "dev", supervisors=1, slots=2, user_conf=FAST, redis=True,
                     zookeeper_at=zookeeper_at(zk_conf))
    try:
        dev.start()
        redis = dev.redis
        assert dev.conf["topology.state.provider"] == "redis" and "redis" in dev.describe()
        (tmp_path / "runs").mkdir()
        harness = DevHarness(tmp_path / "runs", dev)
        try:
            run = harness.submit("stateful_sum.py", "viaredis", {})  # no provider of its own
            exact = (300 * 301 // 2, 300)
            run.wait(lambda: totals(redis, "viaredis", "storm-py") == exact,
                     lambda: f"the sum committed in the dev cluster's Redis ({totals(redis, 'viaredis', 'storm-py')})")
            harness.kill("viaredis")
        finally:
            harness.client.close()
        pid = redis.pid
    finally:
        dev.stop()
    assert not dev.redis.running and not psutil.pid_exists(pid)  # stopped (and reaped) with the rest


def test_a_persistent_window_survives_a_killed_worker(tmp_path, shared_dev_cluster, redis_server):
    n = 1500
    with _dev_harness(tmp_path, shared_dev_cluster) as (dev, harness):
        run = harness.submit("persistent_window_numbers.py", "pwin",
                             {**redis_server.conf(), **RUN, "numbers.n": n})
        r = run.results

        def windowed() -> set:
            return {v for w in r.records("window", "window") for v in w["values"]}

        wait_until(lambda: len(windowed()) >= n // 5, DEADLINE, "a fifth of the numbers windowed", interval=0.2)
        by_port: dict[int, set] = {}
        for e in harness.topology_details("pwin")["executors"]:
            by_port.setdefault(int(e["port"]), set()).add(e["component"])
        # the window's worker, not the spout's (NumberSpout's replays live in its memory)
        victim = next((p for p, comps in sorted(by_port.items()) if "window" in comps and "numbers" not in comps), None)
        assert victim is not None, f"the window shares its worker with the spout: {by_port}"
        dev.kill_worker(victim)
        wait_until(lambda: len(windowed()) >= n, DEADLINE,
                   lambda: f"every number in a window after the kill (missing "
                           f"{sorted(set(range(1, n + 1)) - windowed())[:10]}...)", interval=0.5)
        assert windowed() == set(range(1, n + 1))
        assert len(r.records("window", "init")) >= 2, r.summary()  # the window's task started again
        harness.kill("pwin")


def _spout_position(redis, name: str) -> int:
    """The numbers the spout's committed state says it has emitted (its committed `next` - 1)."""
    import redis as redis_py

    client = redis_py.Redis(host=redis.host, port=redis.port, socket_timeout=5, socket_connect_timeout=5)
    try:
        prefix = redis.provider_config().get("key_prefix", "storm-py")
        for key in client.scan_iter(f"{prefix}:{name}/numbers#*:committed"):
            state = {decode(k): decode(v) for k, v in client.hgetall(key).items()}
            return int(state.get("next", 1)) - 1
        return 0
    finally:
        client.close()


def _published_rows(table: Path) -> int:
    """Rows the table's log lists (no Spark: the log alone)."""
    from executor.sinks import _log as G

    if not G.exists(table):
        return 0
    return sum(max(0, n) for n in G.read_snapshot(table, tombstones=False).batch_rows.values())


@pytest.mark.spark
def test_exactly_once_table_holds_each_number_once_through_worker_kills(tmp_path, shared_dev_cluster, redis_server,
                                                                         spark_remote):
    if shutil.which("java") is None:
        pytest.skip("needs Java")
    table = tmp_path / "table"
    name = "eotable"
    with _dev_harness(tmp_path, shared_dev_cluster) as (dev, harness):
        harness.submit("exactly_once_table.py", name, {**redis_server.conf(), **RUN, "numbers.table": str(table),
                                                       **spark_remote})
        storm_id = harness.storm_ids[name]
        for round_ in range(2):  # each worker in turn, once numbers are being committed
            # (after the first kill's recovery the paced spout catches up at once, so the second
            # may find every number committed already: the table must still hold each once)
            floor = _spout_position(redis_server, name)
            wait_until(lambda f=floor: _spout_position(redis_server, name) >= min(f + 300, N), DEADLINE,
                       lambda r=round_: f"{name}: 300 more numbers committed before kill {r + 1} "
                               f"({_spout_position(redis_server, name)})", interval=0.5, tolerate=(OSError,))
            pids = wait_until(lambda: p if len(p := sorted(dev.worker_pids(storm_id).items())) == 2 else None,
                              DEADLINE, "two workers running", interval=0.5)
            dev.kill_worker(pids[round_][0])
        wait_until(lambda: _published_rows(table) >= N, DEADLINE,
                   lambda: f"{name}: all {N} numbers published ({_published_rows(table)} rows, spout at "
                           f"{_spout_position(redis_server, name)})", interval=1.0, tolerate=(OSError,))
        harness.kill(name)
    script = ("import json, sys; from pyspark.sql import SparkSession; from executor.sinks.spark import read_table; "
              "spark = SparkSession.builder.remote(sys.argv[2]).getOrCreate(); "
              "ids = [r[0] for r in read_table(sys.argv[1], spark=spark, dedupe=False).select('n').collect()]; "
              "print(json.dumps({'rows': len(ids), 'distinct': len(set(ids)), 'min': min(ids), 'max': max(ids)}))")
    out = subprocess.run([sys.executable, "-c", script, str(table), spark_remote["spark.remote"]],
                         capture_output=True, text=True, timeout=180,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"rows": N, "distinct": N, "min": 1, "max": N}, got


def _memory_sums(records) -> tuple[int, int]:
    """The committed (sum, count) over the sum tasks, from their records: per task, what the
    PREPARE of its last committed txid captured (txids may start again after a reset)."""
    total = [0, 0]
    for task in {r["task"] for r in records.records("sum")}:
        prepared: dict[int, tuple[int, int]] = {}
        last = (0, 0)
        for r in records.records("sum"):
            if r["task"] != task:
                continue
            if r["kind"] == "prepared":
                prepared[r["txid"]] = (r["sum"], r["count"])
            elif r["kind"] == "committed" and r["txid"] in prepared:
                last = prepared[r["txid"]]
            elif r["kind"] == "init":  # a restarted task starts empty (memory provider)
                prepared, last = {}, (r["sum"], r["count"])
        total[0] += last[0]
        total[1] += last[1]
    return total[0], total[1]


def test_exactly_once_in_memory_state_starts_afresh_when_a_worker_dies(tmp_path, shared_dev_cluster):
    """The memory provider loses a dead worker's part of the last checkpoint: the topology starts
    its state afresh everywhere (spouts from their beginning), as if submitted again, and
    finishes with the exact sum instead of waiting for a checkpoint that cannot be restored.
    First the checkpoint spout's worker (its record is lost: it starts over from no commit), then
    the other (a restarted task finds its committed state gone and asks for the reset)."""
    name = "eomem"
    exact = (N * (N + 1) // 2, N)
    with _dev_harness(tmp_path, shared_dev_cluster) as (dev, harness):
        run = harness.submit("exactly_once_sum.py", name, {**RUN, "topology.state.provider": "memory"})
        storm_id = harness.storm_ids[name]
        run.wait(lambda: len(run.results.records("sum", "committed")) >= 6, "a few checkpoints committed")
        coordinator = {int(e["port"]) for e in harness.topology_details(name)["executors"]
                       if e["component"] == "$checkpointspout" and e.get("port") is not None}
        assert len(coordinator) == 1, coordinator
        ports = sorted(dev.worker_pids(storm_id), key=lambda port: port not in coordinator)
        assert len(ports) == 2, ports
        for port in ports:
            pid = dev.worker_pids(storm_id)[port]
            dev.kill_worker(port)
            killed_at = time.monotonic_ns()
            run.wait(lambda k=killed_at: {r["task"] for r in run.results.records("sum", "committed") if r["t"] > k}
                     == {r["task"] for r in run.results.records("sum", "start")},
                     f"every sum task committing again after worker {pid} (port {port}) was killed")
        wait_until(lambda: _memory_sums(run.results) == exact, DEADLINE,
                   lambda: f"{name}: the exact sum committed after both kills: {_memory_sums(run.results)} of "
                           f"{exact}\n{harness.describe(name)}", interval=1.0)
        harness.kill(name)
