"""The SparkSession's life in a fresh process: none before a sink prepares, one built from the
topology's spark.* keys, shared by the sink tasks, stopped when the last of them cleans up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

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
