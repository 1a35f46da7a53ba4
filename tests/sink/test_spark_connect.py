"""`storm-py spark-connect` and the Spark sink as its client (`spark.remote`): refusals in one
line, and a sink that outlives its server's restart with every row in the table once."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from spark_connect_fixture import SparkConnectServer
from testutil import CLI_ENV, stop_process, wait_until

from executor.sinks import _log as G
from executor.sinks.spark import read_table, table_snapshot, verify_table

pytestmark = [pytest.mark.timeout(300), pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
NUMBERED = REPO / "tests" / "sink" / "topologies" / "numbered" / "topology.py"


def test_spark_connect_on_a_taken_port_is_one_error_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "daemons.cli", "spark-connect", "--port", str(port),
                              "-c", f"storm.log.dir={tmp_path}"], cwd=REPO, capture_output=True, text=True,
                             timeout=60)
    assert out.returncode == 1, out
    assert out.stderr.startswith(f"error: spark-connect cannot start: cannot listen on 127.0.0.1:{port}: "), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def _committed(table: Path) -> int:
    return sum(table_snapshot(table).batch_rows.values()) if G.exists(table) else 0


@pytest.mark.slow
def test_a_sink_writes_on_after_its_spark_connect_server_restarts(spark, tmp_path):
    n = 600
    server = SparkConnectServer(tmp_path / "server")
    server.start()
    table = tmp_path / "t"
    log = tmp_path / "numbers.log"
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "daemons.cli", "local", str(NUMBERED), "--name", "numbers",
                 "-c", f"numbers.table={table}", "-c", f"numbers.count={n}", "-c", f"spark.remote={server.url}",
                 "-c", "sink.compaction.enabled=false", "-c", "topology.message.timeout.secs=30"],
                cwd=REPO, env=CLI_ENV, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: _committed(table) >= 50, 120, interval=0.5,
                       message=lambda: f"the first rows committed through {server.url}: {log.read_text()[-2000:]}")
            # The server goes away mid-run and a new one comes up on the same address: the writes
            # in between fail (their tuples are replayed), the next one connects again.
            server.stop()
            before = _committed(table)
            server.start()
            wait_until(lambda: proc.poll() is None and _committed(table) >= n, 200, interval=0.5,
                       message=lambda: f"all {n} rows committed after the restart ({_committed(table)}; "
                                       f"{before} before it): {log.read_text()[-3000:]}")
        finally:
            stop_process(proc, 30, "storm-py local numbers")
    finally:
        server.stop()
    assert before < n, "the restart came after the last write: it tested nothing"
    assert "the next one connects again" in log.read_text()
    ids = sorted(r["id"] for r in read_table(table, spark=spark).select("id").collect())
    assert ids == list(range(n))  # each once after dedupe on id; every committed batch verifies
    assert verify_table(table, spark=spark) == _committed(table)
