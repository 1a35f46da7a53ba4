"""The Spark table over days (docs/topology-guide.md, "The Spark sink"), with real Spark: readers in
a loop while a topology writes and compacts see whole batches and never fewer rows; a compaction
SIGKILLed at each step loses nothing and shows nothing twice, and the next run cleans up after it;
two topologies in two processes write one table while their sinks compact it; the sink writes
through a Spark standalone master and worker started from the Spark that pyspark installs."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from sink_helpers import poll
from testutil import CLI_ENV, stop_process

from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from executor.api import TopologyBuilder
from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks.spark import (
    SparkSinkBolt,
    compact_table,
    read_table,
    table_snapshot,
    table_stats,
    verify_table,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
NUMBERED = REPO / "tests" / "sink" / "topologies" / "numbered" / "topology.py"


def _ids(df) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


def _write_rows(path: str, n: int, conf: dict, batch_size: int = 10) -> None:
    spout = FeederSpout(["id", "v"])
    b = TopologyBuilder()
    b.set_spout("spout", spout)
    b.set_bolt("store", SparkSinkBolt(path, batch_size=batch_size, flush_interval_secs=0.2,
                                      dedupe_fields=["id"])).shuffle_grouping("spout")
    with LocalCluster() as cluster:
        cluster.submit_topology("rows", conf, b.create_topology())
        for i in range(n):
            spout.feed([i, f"v{i}"], msg_id=i)
        poll(lambda: len(set(spout.acked)) == n, timeout=120, message=f"{n} rows acked")


def test_readers_in_a_loop_while_a_topology_writes_and_compacts(spark, tmp_path):
    from daemons.cli_sink import sink

    path = str(tmp_path / "t")
    spout = FeederSpout(["id", "v"])
    b = TopologyBuilder()
    b.set_spout("spout", spout)
    b.set_bolt("store", SparkSinkBolt(path, batch_size=5, flush_interval_secs=0.1,
                                      dedupe_fields=["id"])).shuffle_grouping("spout")
    n, reads, last = 400, 0, 0
    shows = []
    with LocalCluster() as cluster:
        cluster.submit_topology("live", {"sink.compaction.min.batches": 4, "topology.max.spout.pending": 20},
                                b.create_topology())
        for i in range(n):
            spout.feed([i, f"v{i}"], msg_id=i)

        def read_once() -> bool:
            nonlocal reads, last
            if not (tmp_path / "t" / L.META_FILE).exists():
                return False  # nothing committed yet
            snap = table_snapshot(path)
            # verify_table checks every batch of the snapshot reads whole (its committed count).
            total = verify_table(path, spark=spark, snapshot=snap)
            ids = _ids(read_table(path, spark=spark, snapshot=snap))
            assert total == sum(snap.batch_rows.values()) and len(ids) == len(set(ids)) == total
            assert total >= last, f"a read returned {total} rows after one returned {last}"
            last, reads = total, reads + 1
            if reads % 5 == 1:
                shows.append(CliRunner().invoke(sink, ["show", path, "--limit", "1"]))
            return len(set(spout.acked)) == n and table_stats(path)["compacted_dirs"] >= 1

        poll(read_once, timeout=240, interval=0.2, message="all rows acked and a compaction committed")
        assert cluster.errors("live") == []
    assert reads >= 3
    assert all(r.exit_code == 0 for r in shows), [r.output for r in shows if r.exit_code]
    assert _ids(read_table(path, spark=spark)) == list(range(n))
    assert verify_table(path, spark=spark) == n


_KILLED_COMPACTION = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from pyspark.sql import SparkSession
    from executor.sinks import _compact, _layout as L
    table, step, remote = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    spark = SparkSession.builder.remote(remote).getOrCreate()  # the test run's Spark Connect server
    def pause(at):
        if at == step:
            os.kill(os.getpid(), signal.SIGKILL)
    _compact.compact_once(spark, table, L.read_meta(table), _compact.Policy.from_conf({"sink.compaction.min.batches": 2}), pause=pause)
    print("finished without being killed", flush=True)
""")


@pytest.fixture(scope="module")
def uncompacted(spark, tmp_path_factory) -> Path:
    """60 rows in batches of 5, never compacted: each killed compaction works on a copy (a
    topology run per step cost the most of these tests)."""
    original = tmp_path_factory.mktemp("uncompacted") / "original"
    _write_rows(str(original), 60, {"sink.compaction.enabled": False}, batch_size=5)
    assert table_stats(original)["batch_dirs"] >= 2
    return original


@pytest.mark.parametrize("step", ["read", "written", "renamed", "committed"])
def test_a_compaction_killed_at_any_step_loses_nothing(spark, spark_remote, uncompacted, tmp_path, step):
    original = uncompacted
    table = tmp_path / f"killed-at-{step}"
    shutil.copytree(original, table)
    # The killed process is a Spark Connect client: the steps are its own calls, so a kill between
    # two of them leaves the table as a killed JVM of its own would (and costs no JVM start).
    out = subprocess.run([sys.executable, "-c", _KILLED_COMPACTION, str(table), step, spark_remote["spark.remote"]],
                         cwd=REPO, env=CLI_ENV,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == -signal.SIGKILL, (out.returncode, out.stdout, out.stderr[-2000:])
    # Read as it was left: every row exactly once, the dedupe view exact.
    assert verify_table(table, spark=spark) == 60
    assert _ids(read_table(table, spark=spark, dedupe=False)) == list(range(60))
    assert read_table(table, spark=spark).count() == 60
    if step == "committed":
        assert table_stats(table)["compacted_dirs"] == 1
    # The next run cleans up after it (retention 0: nothing can still need superseded files).
    compact_table(table, spark=spark, conf={"sink.retention.secs": 0})
    snap = table_snapshot(table)
    assert [n for n in os.listdir(table / L.STAGING_DIR) if not n.endswith(".lock")] == []
    on_disk = {f"_storm_compacted/{n}" for n in os.listdir(table / "_storm_compacted")}
    on_disk |= {L.batch_dir_name(b) for b in L.committed_batches(table)}
    assert on_disk == set(snap.entries), "leftovers of the killed run, or superseded directories, remain"
    assert _ids(read_table(table, spark=spark, dedupe=False)) == list(range(60))
    assert verify_table(table, spark=spark) == 60


def _local_topology(table: Path, offset: int, count: int, log: Path, *conf: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "daemons.cli", "local", str(NUMBERED), "--name", f"numbers-{offset}",
            "-c", f"numbers.table={table}", "-c", f"numbers.offset={offset}", "-c", f"numbers.count={count}"]
    for kv in conf:
        args += ["-c", kv]
    with open(log, "wb") as out:
        return subprocess.Popen(args, cwd=REPO, env=CLI_ENV, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)


def _ids_committed(table: Path, at_least: int = 0) -> set[int] | None:
    """The ids committed to `table`; None while it does not exist or its log counts fewer than
    `at_least` rows (a poll reads the table's log every second and Spark only when it can pass)."""
    if not G.exists(table) or sum(table_snapshot(table).batch_rows.values()) < at_least:
        return None
    return set(_ids(read_table(table, dedupe=False)))


def test_two_topologies_in_two_processes_write_one_table_and_compact_it(spark, spark_remote, tmp_path):
    table = tmp_path / "shared"
    # Both write through one Spark Connect server, as two workers of a host with spark.remote do.
    procs = [_local_topology(table, offset, 150, tmp_path / f"numbers-{offset}.log",
                             f"spark.remote={spark_remote['spark.remote']}") for offset in (0, 1000)]
    want = set(range(150)) | set(range(1000, 1150))
    try:
        def all_in() -> bool:
            for p, offset in zip(procs, (0, 1000)):
                assert p.poll() is None, (tmp_path / f"numbers-{offset}.log").read_text()[-3000:]
            if not G.exists(table) or table_stats(table)["compacted_dirs"] < 1:
                return False
            ids = _ids_committed(table, len(want))
            return ids is not None and ids >= want
        poll(all_in, timeout=240, interval=1.0, message="both topologies' rows committed and a compaction")
    finally:
        for p, offset in zip(procs, (0, 1000)):
            stop_process(p, 30, f"storm-py local numbers-{offset}")
    # Rows of both, each once (the spouts replay nothing here: every tuple was acked once).
    ids = _ids(read_table(table, spark=spark, dedupe=False))
    assert set(ids) == want and len(ids) == len(want), (len(ids), len(want))
    assert verify_table(table, spark=spark) == len(want)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def spark_standalone(tmp_path):
    """A Spark standalone master and one worker on loopback, from pyspark's own Spark."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**CLI_ENV, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(tmp_path / "spark-work"), "SPARK_LOG_DIR": str(tmp_path / "spark-logs")}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    logs = {}
    procs = []
    try:
        for name, args in [("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(port), "--webui-port", str(_free_port())]),
                           ("worker", ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                       "--webui-port", str(_free_port()), "--cores", "1", "--memory", "1g"])]:
            logs[name] = tmp_path / f"spark-{name}.log"
            with open(logs[name], "wb") as out:
                procs.append(subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env,
                                              stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                              start_new_session=True))
            marker = "I have been elected leader" if name == "master" else "Successfully registered with master"
            poll(lambda n=name, m=marker: m in logs[n].read_text(errors="replace"), timeout=90, interval=0.5,
                 message=f"the Spark {name} to start (log {logs[name]})")
        yield url, logs["master"]
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


def test_the_sink_writes_through_a_spark_standalone_cluster(spark, spark_standalone, tmp_path):
    url, master_log = spark_standalone
    table = tmp_path / "standalone"
    log = tmp_path / "numbers.log"
    # The executor's JVM, which the Spark worker starts, with the tests' JVM options too
    # (tests/conftest.py: the client compiler, the serial collector, the class archive).
    proc = _local_topology(table, 0, 60, log, f"spark.master={url}", "spark.cores.max=1",
                           "spark.executor.memory=512m",
                           f"spark.executor.extraJavaOptions={os.environ.get('SPARK_SUBMIT_OPTS', '')}")

    def committed() -> bool:
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        return (_ids_committed(table, 60) or set()) >= set(range(60))

    try:
        poll(committed, timeout=240, interval=1.0, message=f"60 rows committed through {url} (log {log})")
    finally:
        stop_process(proc, 30, "storm-py local numbers-0")
    assert "Registering app storm-py-numbers-0" in master_log.read_text(errors="replace")
    # At least once (the topology acks its rows; a write slower than the message timeout on a
    # loaded machine is replayed): every id, and the dedupe view exact.
    assert sorted(set(_ids(read_table(table, spark=spark, dedupe=False)))) == list(range(60))
    assert _ids(read_table(table, spark=spark)) == list(range(60))
    assert verify_table(table, spark=spark) == 60
