"""Sink behaviour that needs a process of its own: the SparkSession's life (none before a sink
prepares, one built from the topology's spark.* keys, shared by the sink tasks, stopped when the
last of them cleans up), and a worker killed in the middle of a write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(180), pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from sink_helpers import poll
from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from executor.api import TopologyBuilder
from executor.sinks._session import sessions
from executor.sinks.spark import SparkSinkBolt

out = {"pyspark_before": "pyspark" in sys.modules}
feeder = FeederSpout(["id", "v"])
b = TopologyBuilder()
b.set_spout("spout", feeder)
b.set_bolt("store", SparkSinkBolt(sys.argv[1], batch_size=2, flush_interval_secs=0.2), 2).shuffle_grouping("spout")
conf = {"spark.sql.shuffle.partitions": 3, "spark.app.name": "lifecycle-test"}
with LocalCluster() as cluster:
    cluster.submit_topology("lifecycle", conf, b.create_topology())
    for i in range(6):
        feeder.feed([i, "x"], msg_id=i)
    poll(lambda: len(feeder.acked) == 6, timeout=120, message="all acked")
    spark = sessions.session
    out["refs_while_running"] = sessions.refs
    out["master"] = spark.sparkContext.master
    out["app"] = spark.sparkContext.appName
    out["partitions"] = spark.conf.get("spark.sql.shuffle.partitions")
from pyspark import SparkContext
out["refs_after"] = sessions.refs
out["stopped_after"] = SparkContext._active_spark_context is None
print(json.dumps(out))
"""


def test_session_is_lazy_shared_configured_and_stopped_with_the_last_sink(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "t"), str(Path(__file__).parent)],
                          cwd=REPO, capture_output=True, text=True, timeout=170)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"pyspark_before": False, "refs_while_running": 2, "master": "local[1]",
                   "app": "lifecycle-test", "partitions": "3", "refs_after": 0, "stopped_after": True}


WRITER = r"""
import itertools, os, sys, time
import psutil
from daemons.local import LocalCluster
from executor.api import Spout, TopologyBuilder
from executor.sinks.spark import SparkSinkBolt

class Numbers(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["id", "v"])
    def open(self, conf, context, collector):
        self.c, self.ids = collector, itertools.count()
    def next_tuple(self):
        i = next(self.ids)
        self.c.emit([i, "x" * 20], msg_id=i)

b = TopologyBuilder()
b.set_spout("numbers", Numbers())
b.set_bolt("store", SparkSinkBolt(sys.argv[1], batch_size=500, flush_interval_secs=0.2)).shuffle_grouping("numbers")
cluster = LocalCluster()
cluster.submit_topology("crash", {"topology.max.spout.pending": 5000}, b.create_topology())
while True:
    jvms = [p.pid for p in psutil.Process().children(recursive=True) if "java" in p.name()]
    if jvms:
        print("jvm", jvms[0], flush=True)
        break
    time.sleep(0.1)
time.sleep(600)  # until killed
"""


def test_a_worker_killed_while_writing_leaves_a_readable_table_and_its_staging_is_cleaned(spark, tmp_path):
    import os
    import signal

    import psutil
    from sink_helpers import Probe, ReplayingSpout, feed, poll

    from daemons.local import LocalCluster
    from executor.api import TopologyBuilder
    from executor.sinks import _layout as L
    from executor.sinks.spark import SparkSinkBolt, read_table

    table = tmp_path / "t"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(table)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        assert line and line[0] == "jvm", "the writer process did not start Spark"
        jvm = int(line[1])
        poll(lambda: len(L.committed_batches(table)) >= 3, timeout=120, interval=0.05, message="3 commits")

        def staging_batches():
            staging = table / L.STAGING_DIR
            try:
                return [p for d in staging.iterdir() if d.is_dir() for p in d.iterdir() if p.is_dir()]
            except FileNotFoundError:  # a batch was committed (renamed away) while we listed it
                return []

        poll(staging_batches, timeout=30, interval=0.002, message="a write in progress")
        proc.send_signal(signal.SIGKILL)  # mid-write, most likely
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
    # Spark's JVM follows its Python driver down.
    poll(lambda: not psutil.pid_exists(jvm) or psutil.Process(jvm).status() == psutil.STATUS_ZOMBIE,
         timeout=30, message="the orphaned JVM to exit")

    committed = L.committed_batches(table)
    rows = read_table(str(table), dedupe=False, spark=spark)
    ids = [r["id"] for r in rows.select("id").collect()]
    assert len(ids) >= 3 * 500 and len(set(ids)) == len(ids)  # complete batches, each id once
    # What the killed writer left: its lock and, usually, the batch it was writing.
    assert any(n.endswith(".lock") for n in os.listdir(table / L.STAGING_DIR))

    probe = Probe()
    feed(probe, [(10**9, [10**9, "after"])])
    b = TopologyBuilder()
    b.set_spout("spout", ReplayingSpout(probe, ["id", "v"]))
    b.set_bolt("store", SparkSinkBolt(str(table), batch_size=1)).shuffle_grouping("spout")
    with LocalCluster() as cluster:
        cluster.submit_topology("restart", {}, b.create_topology())
        poll(lambda: probe.acked == [10**9], timeout=90, message="the restarted sink to write")
    assert os.listdir(table / L.STAGING_DIR) == []
    assert L.committed_batches(table)[:len(committed)] == committed
    assert read_table(str(table), dedupe=False, spark=spark).count() == len(ids) + 1
