"""The Spark sink on a LocalCluster with real Spark (local master, one session for the run)."""

from __future__ import annotations

import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from sink_helpers import Probe, ProbedSink, ReplayingSpout, feed, kill_process, poll, writer_process

from daemons.local import LocalCluster
from daemons.testing import FeederSpout, complete_topology
from executor.api import TopologyBuilder
from executor.sinks import _layout as L
from executor.sinks.spark import SparkSinkBolt, read_table, verify_table

pytestmark = [pytest.mark.timeout(150), pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples" / "word_count"))

from word_count_components import SENTENCES, RandomSentenceSpout, build_topology, top_words  # noqa: E402


def _ids(df, column="id") -> list:
    return sorted(r[column] for r in df.select(column).collect())


def _sink_topology(spout, sink):
    b = TopologyBuilder()
    b.set_spout("spout", spout)
    b.set_bolt("store", sink).shuffle_grouping("spout")
    return b.create_topology()


def test_word_count_table_equals_the_plain_python_count(spark, tmp_path):
    rng = random.Random(7)
    sentences = [rng.choice(SENTENCES) for _ in range(300)]
    path = str(tmp_path / "wc")
    # the at-least-once build (RandomSentenceSpout), whose spout the mock replaces
    topology = build_topology(path, spout=RandomSentenceSpout(),
                              sink_options={"batch_size": 500, "flush_interval_secs": 0.3})
    result = complete_topology(topology, mock_sources={"sentences": [[s] for s in sentences]},
                               timeout_secs=120)
    assert result.failed["sentences"] == [] and len(result.acked["sentences"]) == 300
    expected = Counter(w for s in sentences for w in s.split())
    df = read_table(path, spark=spark)
    assert dict(top_words(df, n=1000)) == dict(expected)
    # the count bolt writes one row per word per window, not one per occurrence
    rows = read_table(path, dedupe=False, spark=spark).count()
    assert len(expected) <= rows < sum(expected.values())


def test_no_tuple_is_acked_before_its_batch_is_committed(spark, tmp_path):
    path = str(tmp_path / "t")
    probe = Probe(commit_delay=0.3)
    sink = ProbedSink(probe, path, batch_size=10, flush_interval_secs=0.2)
    spout = ReplayingSpout(probe, ["id", "v"], table=path)
    feed(probe, [(i, [i, f"v{i}"]) for i in range(45)])
    with LocalCluster() as cluster:
        cluster.submit_topology("ack-after-commit", {}, _sink_topology(spout, sink))
        poll(lambda: len(probe.acked) == 45, timeout=90, message="all 45 acked")
        assert cluster.errors("ack-after-commit") == []
    assert probe.violations == []
    assert probe.failed == []
    assert _ids(read_table(path, spark=spark)) == list(range(45))


def test_failed_write_fails_its_tuples_which_are_replayed_into_a_complete_table(spark, tmp_path):
    path = str(tmp_path / "t")
    probe = Probe(fail_writes=1)
    sink = ProbedSink(probe, path, batch_size=10, flush_interval_secs=0.2)
    spout = ReplayingSpout(probe, ["id", "v"], table=path)
    feed(probe, [(i, [i, f"v{i}"]) for i in range(30)])
    with LocalCluster() as cluster:
        cluster.submit_topology("write-fails", {}, _sink_topology(spout, sink))
        poll(lambda: sorted(probe.acked) == list(range(30)), timeout=90, message="all 30 acked")
        errors = cluster.errors("write-fails")
    assert probe.failed, "the first batch should have been failed"
    assert probe.attempts >= 2
    assert any("SinkWriteError" in e.error and "injected write failure" in e.error for e in errors)
    assert probe.violations == []
    # Nothing of the failed write reached the table, and every row arrived exactly once.
    assert _ids(read_table(path, dedupe=False, spark=spark)) == list(range(30))


def test_staging_leftover_of_a_killed_writer_is_invisible_and_removed_on_next_start(spark, tmp_path):
    table = tmp_path / "t"
    probe = Probe()
    spout = ReplayingSpout(probe, ["id", "v"])
    feed(probe, [(i, [i, "a"]) for i in range(5)])
    with LocalCluster() as cluster:
        cluster.submit_topology("first", {}, _sink_topology(spout, SparkSinkBolt(str(table), batch_size=5)))
        poll(lambda: len(probe.acked) == 5, timeout=90, message="first rows acked")
    assert os.listdir(table / L.STAGING_DIR) == []  # a clean stop leaves no staging behind

    kill_process(writer_process(table, "t9-p1-dead00"))
    leftover = table / L.STAGING_DIR / "t9-p1-dead00"
    assert (leftover / "b1" / "part-0.parquet").exists()
    # Spark would fail on that garbage file if it read it: plain readers skip staging.
    assert spark.read.parquet(str(table)).count() == 5
    assert read_table(str(table), spark=spark).count() == 5

    probe2 = Probe()
    feed(probe2, [(i, [i, "b"]) for i in range(5, 8)])
    with LocalCluster() as cluster:
        cluster.submit_topology("second", {}, _sink_topology(ReplayingSpout(probe2, ["id", "v"]),
                                                           SparkSinkBolt(str(table), batch_size=3)))
        poll(lambda: not leftover.exists(), timeout=60, message="the leftover to be cleaned up")
        poll(lambda: len(probe2.acked) == 3, timeout=90, message="second rows acked")
    assert os.listdir(table / L.STAGING_DIR) == []
    assert _ids(read_table(str(table), spark=spark)) == list(range(8))


def test_a_single_tuple_is_written_within_the_flush_interval(spark, tmp_path):
    path = str(tmp_path / "t")
    probe = Probe()
    feeder = FeederSpout(["id", "v"])
    sink = ProbedSink(probe, path, batch_size=1000, flush_interval_secs=1.0)
    with LocalCluster() as cluster:
        cluster.submit_topology("by-time", {}, _sink_topology(feeder, sink))
        feeder.feed([1, "only"], msg_id="m1")
        # The batch is far from full: only the flush interval can write it. The deadline is the
        # interval plus room for a slow machine; the point is that it comes without more input.
        poll(lambda: feeder.acked == ["m1"], timeout=1.0 + 30, message="the lone tuple acked")
    assert [len(rows) for _, rows in probe.commits] == [1]
    assert [tuple(r) for r in read_table(path, spark=spark).select("id", "v").collect()] == [(1, "only")]


def test_partitioned_typed_table_round_trips_and_dedupes(spark, tmp_path):
    path = str(tmp_path / "t")
    feeder = FeederSpout(["id", "code", "x"])
    sink = SparkSinkBolt(path, batch_size=4, flush_interval_secs=0.2, partition_by=["code"],
                         dedupe_fields=["id"], schema="id BIGINT, code STRING, x DOUBLE")
    with LocalCluster() as cluster:
        cluster.submit_topology("typed", {}, _sink_topology(feeder, sink))
        rows = [[1, "007", 1], [2, "010", 2.5], [1, "007", 1], [3, "007", None], [4, "x", "not a number"]]
        for i, r in enumerate(rows):
            feeder.feed(r, msg_id=i)
        poll(lambda: len(feeder.acked) + len(feeder.failed) == 5, timeout=90, message="all completed")
        errors = cluster.errors("typed")
        store_tasks = cluster.layout("typed").component_tasks["store"]
    assert feeder.failed == [4]  # the misfit is failed, not stored as null
    assert any("does not fit column type double" in e.error for e in errors)
    df = read_table(path, spark=spark)
    assert [(r["id"], r["code"], r["x"]) for r in df.orderBy("id").collect()] == \
        [(1, "007", 1.0), (2, "010", 2.5), (3, "007", None)]
    raw = read_table(path, dedupe=False, spark=spark)
    assert raw.count() == 4
    assert set(raw.columns) == {"id", "code", "x", L.WRITTEN_AT_COLUMN, L.TASK_COLUMN, L.BATCH_COLUMN}
    assert {r[L.TASK_COLUMN] for r in raw.collect()} == set(store_tasks)
    batch = L.committed_batches(Path(path))[0]
    assert (Path(path) / L.batch_dir_name(batch) / "code=007").is_dir()


def test_sink_show_prints_rows_and_counts(spark, tmp_path):
    from daemons.cli import main

    path = str(tmp_path / "t")
    feeder = FeederSpout(["id", "v"])
    with LocalCluster() as cluster:
        cluster.submit_topology("show", {}, _sink_topology(
            feeder, SparkSinkBolt(path, batch_size=3, flush_interval_secs=0.2, dedupe_fields=["id"])))
        for i, v in enumerate([1, 2, 2, 3]):
            feeder.feed([v, f"v{v}"], msg_id=i)
        poll(lambda: len(feeder.acked) == 4, timeout=90, message="all acked")
    runner = CliRunner()
    out = runner.invoke(main, ["sink", "show", path, "--limit", "2"])
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert "4 rows, 3 after dedupe on ['id']" in lines[0]
    # what it is doing goes to stderr, so that stdout holds only the answer
    assert "reading every row of 2 batches (4 rows by their commit records" in out.stderr, out.stderr
    assert "counting the rows after dedupe on ['id']" in out.stderr, out.stderr
    assert lines[1].split()[:2] == ["id", "v"] and L.BATCH_COLUMN in lines[1]
    assert len(lines) == 5 and lines[-1] == "(2 of 3 rows shown)"
    out = runner.invoke(main, ["sink", "show", path, "--no-dedupe", "--limit", "10"])
    assert out.exit_code == 0 and out.stdout.splitlines()[-1] == "(4 of 4 rows shown)"
    out = runner.invoke(main, ["sink", "show", str(tmp_path / "missing")])
    assert out.exit_code != 0 and "no storm-py sink table" in out.output


def test_sink_compact_says_what_it_rewrote_apart_from_what_the_table_holds(spark, tmp_path):
    """Later compaction runs merge the outputs of earlier ones again: the rows they rewrote add
    up to more than the table holds, and the command says which is which (it said "N rows" for
    the rewritten total alone, 1.2M for a table of 25k)."""
    from daemons.cli import main

    path = str(tmp_path / "t")
    feeder = FeederSpout(["id", "v"])
    with LocalCluster() as cluster:
        cluster.submit_topology("compact", {"sink.compaction.enabled": False}, _sink_topology(
            feeder, SparkSinkBolt(path, batch_size=2, flush_interval_secs=60)))
        for i in range(8):  # a batch of two at a time (rows that wait for a write join the next batch)
            feeder.feed([i, f"v{i}"], msg_id=i)
            if i % 2:
                poll(lambda n=i + 1: len(feeder.acked) == n, timeout=90, message=f"rows 0-{i} acked")
    out = CliRunner().invoke(main, ["sink", "compact", path, "-c", "sink.compaction.max.batches=2",
                                    "-c", "sink.retention.secs=0"])
    assert out.exit_code == 0, out.output
    line = out.stdout.strip()
    assert "the table holds 8 rows" in line, line
    runs = [ln for ln in out.stderr.splitlines() if ln.startswith("run ")]
    assert len(runs) >= 2 and "(a row merged again by a later run counts again)" in line, out.output
    rewritten = int(line.split("rewriting ")[1].split()[0])
    assert rewritten > 8, line
    assert verify_table(path, spark=spark) == 8


def test_a_table_of_another_layout_kills_the_sink_in_prepare_with_one_line(spark, tmp_path):
    path = str(tmp_path / "t")
    feeder = FeederSpout(["id", "v"])
    with LocalCluster() as cluster:
        cluster.submit_topology("a", {}, _sink_topology(feeder, SparkSinkBolt(path, batch_size=1)))
        feeder.feed([1, "x"], msg_id=1)
        poll(lambda: feeder.acked == [1], timeout=90, message="first write")
    feeder2 = FeederSpout(["id", "v"])
    with LocalCluster() as cluster:
        cluster.submit_topology("b", {}, _sink_topology(
            feeder2, SparkSinkBolt(path, batch_size=1, dedupe_fields=["id"])))
        died = poll(lambda: cluster.died("b"), timeout=90, message="the sink to die in prepare")
    assert died[0].component_id == "store" and died[0].where == "prepare"
    message = str(died[0].original)
    assert message.startswith(f"Spark sink for table {path}: ") and "another layout" in message
    assert "\n" not in message


_DDL = ("f DOUBLE, i BIGINT, b BOOLEAN, s STRING, bin BINARY, arr ARRAY<DOUBLE>, "
        "m MAP<STRING,ARRAY<BIGINT>>, ts TIMESTAMP, d DATE, dec DECIMAL(10,2)")


@pytest.mark.parametrize("fmt,fallback", [("parquet", False), ("parquet", True), ("orc", False), ("json", False)])
def test_values_of_every_type_round_trip(spark, tmp_path, fmt, fallback):
    import datetime
    import decimal
    import math

    from executor.sinks._session import sessions
    from executor.sinks._writer import TableWriter

    utc = datetime.timezone.utc
    rows = [
        [float("nan"), 2 ** 62, True, 'é"\n\u2603', b"\x00\xff", [1.5, 2], {"k": [1, None]},
         datetime.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=utc), datetime.date(2026, 2, 3),
         decimal.Decimal("1.25")],
        [float("-inf"), -5, False, "", b"", [], {}, datetime.datetime(2026, 3, 4, 5, 6, 7), None, None],
        [None] * 10,
    ]
    ddl = _DDL
    columns = ["f", "i", "b", "s", "bin", "arr", "m", "ts", "d", "dec"]
    if fallback:  # a map with bigint keys cannot travel as JSON: createDataFrame writes it
        rows[0][5] = [1.5, 2.0]  # there nested values must have their exact types (2 would be null)
        ddl += ", mk MAP<BIGINT,STRING>"
        columns.append("mk")
        for r, v in zip(rows, [{1: "a"}, {}, None]):
            r.append(v)
    path = tmp_path / "t"
    tw = TableWriter(path, columns, fmt, [], None, ddl, 5, {}, sessions)
    try:
        batch_id, rejected = tw.write([list(r) for r in rows])
        assert (tw._json_columns is None) == fallback
    finally:
        tw.close()
    assert rejected == {} and L.committed_batches(path) == [batch_id]
    assert verify_table(str(path), spark=spark) == 3  # every column of every type is read whole
    got = {r["i"]: r for r in read_table(str(path), spark=spark).collect()}
    first, second, empty = got[2 ** 62], got[-5], got[None]
    assert math.isnan(first["f"]) and second["f"] == float("-inf")
    assert (first["b"], first["s"], first["bin"], first["arr"], first["m"]) == \
        (True, 'é"\n\u2603', b"\x00\xff", [1.5, 2.0], {"k": [1, None]})
    assert (second["b"], second["s"], second["bin"], second["arr"], second["m"]) == (False, "", b"", [], {})
    assert first["ts"].timestamp() == rows[0][7].timestamp()
    assert second["ts"].timestamp() == rows[1][7].timestamp()  # naive means local time, as in PySpark
    assert (first["d"], first["dec"]) == (datetime.date(2026, 2, 3), decimal.Decimal("1.25"))
    assert all(empty[c] is None for c in columns)
    assert first[L.BATCH_COLUMN] == batch_id and first[L.TASK_COLUMN] == 5
    written = first[L.WRITTEN_AT_COLUMN].timestamp()
    assert abs(written - time.time()) < 600
    if fallback:
        assert first["mk"] == {1: "a"}


def test_a_table_with_no_committed_batch_reads_as_empty(spark, tmp_path):
    from executor.sinks._session import sessions
    from executor.sinks._writer import TableWriter

    path = tmp_path / "t"
    tw = TableWriter(path, ["id"], "parquet", [], None, "id BIGINT", 1, {}, sessions)
    try:
        batch_id, rejected = tw.write([["not a number"]])  # creates the table, writes nothing
    finally:
        tw.close()
    assert batch_id is None and list(rejected) == [0]
    assert L.committed_batches(path) == []
    df = read_table(str(path), spark=spark)
    assert df.count() == 0 and df.columns == ["id", *L.AUDIT_COLUMNS]
