"""Spark sink parts that need no JVM: the bolt's batching and acking with a fake writer, the
session holder, staging locks and cleanup, metadata, batch ids, schema checks, the writer thread."""

from __future__ import annotations

import copy
import datetime
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from sink_helpers import kill_process, poll, writer_process

from executor.sinks import _layout as L
from executor.sinks._session import (
    SparkSessionHolder,
    describe_spark,
    quiet_reader_settings,
    reader_shuffle_partitions,
    spark_settings,
)
from executor.sinks._writer import Batch, BatchWriter
from executor.sinks.spark import SinkWriteError, SparkSinkBolt
from executor.tuple import Fields, Tuple, make_tick

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.cluster  # starts a process
def test_importing_the_api_the_cli_or_the_sink_module_does_not_import_pyspark():
    code = ("import sys, executor.api, daemons.local, daemons.cli, executor.sinks.spark; "
            "print('pyspark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# ---- constructor ----

def test_constructor_keeps_plain_data_and_validates():
    bolt = SparkSinkBolt("/tmp/t", fields=["a", "b"], batch_size=5, flush_interval_secs=0.5,
                         partition_by=["a"], dedupe_fields=["b"])
    clone = copy.deepcopy(bolt)
    assert clone.__dict__ == bolt.__dict__
    assert bolt.get_component_configuration() == {"topology.tick.tuple.freq.secs": 0.1,
                                                  "topology.executor.thread.mode": "dedicated"}
    assert SparkSinkBolt("/t", flush_interval_secs=0.05).tick_secs == 0.05
    bad = [dict(batch_size=0), dict(batch_size=True), dict(flush_interval_secs=0), dict(format="delta"),
           dict(fields="word"), dict(fields=["a", "a"]), dict(fields=["storm_batch_id"]),
           dict(fields=["a"], partition_by=["b"]), dict(fields=["a"], dedupe_fields=["b"]),
           dict(max_pending_batches=0), dict(schema="")]
    for kwargs in bad:
        with pytest.raises((ValueError, TypeError)):
            SparkSinkBolt("/t", **kwargs)
    with pytest.raises(L.SinkTableError):
        SparkSinkBolt("hdfs://nn/table")


# ---- the bolt's batching and acking, with a fake table writer ----

class FakeCollector:
    def __init__(self):
        self.acked, self.failed, self.errors = [], [], []
        self.thread = None

    def _check_thread(self):
        # The collector is not thread-safe: every call must come from the executor thread.
        assert threading.current_thread() is self.thread

    def ack(self, t):
        self._check_thread()
        self.acked.append(t.values[0])

    def fail(self, t):
        self._check_thread()
        self.failed.append(t.values[0])

    def report_error(self, exc):
        self._check_thread()
        self.errors.append(exc)


class FakeTable:
    def prepare(self):
        pass

    def close(self):
        pass


class GatedSink(SparkSinkBolt):
    """Commits wait for the test to open a gate; outcomes come from `plan` (None = success)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gate = threading.Semaphore(0)
        self.plan: list = []
        self.writes: list[list] = []

    def __deepcopy__(self, memo):
        return self

    def _table_writer(self, conf):
        return FakeTable()

    def _commit(self, table, rows):
        self.gate.acquire()
        self.writes.append([r[0] for r in rows])
        outcome = self.plan.pop(0) if self.plan else None
        if isinstance(outcome, Exception):
            raise outcome
        return f"b{len(self.writes)}", outcome or {}


def _prepare(bolt):
    collector = FakeCollector()
    collector.thread = threading.current_thread()
    ctx = SimpleNamespace(this_task_id=7, this_component_id="store", topology=None)
    bolt.prepare({}, ctx, collector)
    return collector


FIELDS = Fields(["id", "word"])


def _tup(i, fields=FIELDS, values=None):
    return Tuple(values if values is not None else [i, f"w{i}"], 1, "default", "src", fields, {i: 1})


def _pump(bolt, until, timeout=10.0):
    """Deliver ticks (as the executor would) until until() holds."""
    tick = make_tick(bolt.tick_secs)

    def step():
        bolt.execute(tick)
        return until()

    poll(step, timeout=timeout, interval=0.005, message="sink to hand back results")


def _prepare_with(bolt, conf):
    collector = FakeCollector()
    collector.thread = threading.current_thread()
    bolt.prepare(conf, SimpleNamespace(this_task_id=7, this_component_id="store", topology=None), collector)


def test_path_key_names_the_table_from_the_topology_config_else_the_path():
    named = GatedSink("/default", fields=["id", "word"], path_key="my.table")
    _prepare_with(named, {"my.table": "/from/config"})
    try:
        assert named.path == "/from/config"
    finally:
        named.cleanup()
    unset = GatedSink("/default", fields=["id", "word"], path_key="my.table")
    _prepare_with(unset, {})
    try:
        assert unset.path == "/default"
    finally:
        unset.cleanup()


def test_a_table_only_from_the_config_is_required_there():
    with pytest.raises(ValueError, match="path_key"):
        SparkSinkBolt(None)
    bolt = GatedSink(None, fields=["id", "word"], path_key="my.table")
    with pytest.raises(ValueError, match=r"'store'.*-c my\.table=PATH"):
        _prepare_with(bolt, {})


def test_acks_only_after_the_commit_and_batches_by_size():
    bolt = GatedSink("/unused", fields=["id", "word"], batch_size=3, flush_interval_secs=60)
    c = _prepare(bolt)
    try:
        for i in range(3):
            bolt.execute(_tup(i))
        poll(lambda: not bolt._writer._jobs, message="the writer to take the first batch")
        for i in range(3, 7):
            bolt.execute(_tup(i))
        bolt.execute(make_tick(0.1))
        assert c.acked == []  # two batches handed over, neither committed
        bolt.gate.release()
        _pump(bolt, lambda: len(c.acked) == 3)
        assert c.acked == [0, 1, 2]
        bolt.gate.release()
        _pump(bolt, lambda: len(c.acked) == 6)
        assert bolt.writes == [[0, 1, 2], [3, 4, 5]]  # the 7th waits for its batch to fill
        assert c.failed == [] and c.errors == []
    finally:
        bolt.gate.release(10)
        bolt.cleanup()


def test_flushes_a_partial_batch_after_the_interval_on_a_tick():
    bolt = GatedSink("/unused", fields=["id", "word"], batch_size=100, flush_interval_secs=0.2)
    bolt.gate.release(10)
    c = _prepare(bolt)
    try:
        bolt.execute(_tup(1))
        bolt.execute(make_tick(0.1))
        assert bolt.writes == []  # not due yet
        _pump(bolt, lambda: c.acked == [1])
    finally:
        bolt.cleanup()


def test_write_failure_fails_the_whole_batch_and_reports():
    bolt = GatedSink("/unused", fields=["id", "word"], batch_size=2, flush_interval_secs=60)
    bolt.plan = [OSError("disk on fire\njava stack ...")]
    c = _prepare(bolt)
    try:
        for i in range(2):
            bolt.execute(_tup(i))
        poll(lambda: not bolt._writer._jobs, message="the writer to take the first batch")
        for i in range(2, 4):
            bolt.execute(_tup(i))
        bolt.gate.release(10)
        _pump(bolt, lambda: len(c.failed) == 2 and len(c.acked) == 2)
        assert c.failed == [0, 1] and c.acked == [2, 3]
        assert len(c.errors) == 1 and isinstance(c.errors[0], SinkWriteError)
        assert "disk on fire" in str(c.errors[0]) and "java stack" not in str(c.errors[0])
        assert bolt.writes_failed == 1 and bolt.rows_failed == 2 and bolt.rows_acked == 2
    finally:
        bolt.gate.release(10)
        bolt.cleanup()


def test_a_run_of_failing_writes_is_reported_once_in_one_line():
    bolt = GatedSink("/unused", fields=["id", "word"], batch_size=1, flush_interval_secs=60)
    java = ("An error occurred while calling o9.save.\n: org.apache.spark.SparkException: Job aborted.\n"
            "\tat org.apache.spark.X.y(X.scala:1)\nCaused by: java.io.IOException: No space left on device")
    bolt.plan = [RuntimeError(java)] * 3 + [None, RuntimeError(java)]
    bolt.gate.release(10)
    c = _prepare(bolt)
    try:
        for i in range(5):
            bolt.execute(_tup(i))
            _pump(bolt, lambda n=i + 1: len(c.failed) + len(c.acked) == n)
        assert c.failed == [0, 1, 2, 4] and c.acked == [3]
        assert len(c.errors) == 2  # one per run of failures, not one per failed write
        assert str(c.errors[0]) == str(c.errors[1]) == (
            "Spark sink for table /unused: writing 1 rows failed, their tuples are failed (replayed); "
            "further failures in a row are not reported: SparkException: Job aborted. "
            "(cause: IOException: No space left on device)")
        assert c.errors[0].__cause__ is None
    finally:
        bolt.cleanup()


def test_rejected_rows_are_failed_the_rest_acked():
    bolt = GatedSink("/unused", fields=["id", "word"], batch_size=3, flush_interval_secs=60)
    bolt.plan = [{1: "field 'word': int value 5 does not fit column type string"}]
    bolt.gate.release(10)
    c = _prepare(bolt)
    try:
        for i in range(3):
            bolt.execute(_tup(i))
        _pump(bolt, lambda: len(c.acked) + len(c.failed) == 3)
        assert c.acked == [0, 2] and c.failed == [1]
        assert "does not fit" in str(c.errors[0])
    finally:
        bolt.cleanup()


def test_back_pressure_blocks_the_executor_at_max_pending_batches():
    bolt = GatedSink("/unused", fields=["id", "word"], batch_size=1, flush_interval_secs=60,
                     max_pending_batches=2)
    c = _prepare(bolt)
    done = threading.Event()

    def run():
        c.thread = threading.current_thread()
        for i in range(3):
            bolt.execute(_tup(i))
        done.set()

    t = threading.Thread(target=run, name="test-executor")
    t.start()
    try:
        assert not done.wait(0.3)  # the third batch waits for room
        bolt.gate.release()
        assert done.wait(5)
        assert c.acked[:1] == [0]  # handled while waiting, on the executor thread
    finally:
        bolt.gate.release(10)
        t.join(5)
        bolt.cleanup()


def test_selects_fields_by_name_and_fails_tuples_of_streams_lacking_them():
    bolt = GatedSink("/unused", fields=["word"], batch_size=2, flush_interval_secs=60)
    bolt.gate.release(10)
    c = _prepare(bolt)
    try:
        bolt.execute(_tup(1))
        bolt.execute(Tuple([9], 1, "other", "src", Fields(["id"]), {9: 1}))
        assert c.failed == [9] and "lacks" in str(c.errors[0])
        bolt.execute(_tup(2))
        _pump(bolt, lambda: len(c.acked) == 2)
        assert bolt.writes == [["w1", "w2"]]
    finally:
        bolt.cleanup()


def test_input_columns_come_from_the_declared_input_stream():
    from daemons.testing import FeederSpout
    from executor.api import TopologyBuilder
    from executor.context import TopologyContext
    from executor.layout import compute_layout

    b = TopologyBuilder()
    b.set_spout("feed", FeederSpout(["id", "word"]))
    b.set_bolt("store", GatedSink("/unused")).shuffle_grouping("feed")
    topo = b.create_topology()
    layout = compute_layout(topo, {"topology.acker.executors": 0}, 1)
    task = layout.component_tasks["store"][0]
    bolt = GatedSink("/unused", batch_size=1)
    bolt.gate.release(10)
    collector = FakeCollector()
    collector.thread = threading.current_thread()
    bolt.prepare({}, TopologyContext("s", topo, layout, task), collector)
    try:
        assert bolt._columns == ["id", "word"]
    finally:
        bolt.cleanup()


# ---- the writer thread ----

def test_batch_writer_commits_queued_batches_together_and_stops_idempotently():
    gate = threading.Event()
    seen = []

    def write(rows):
        gate.wait(5)
        seen.append(list(rows))
        return "b", {}

    w = BatchWriter("spark-sink-test-1", write)
    w.start()
    w.start()
    w.submit(Batch([1], ["t1"], "size"))
    poll(lambda: not w._jobs, message="first batch taken")
    w.submit(Batch([2], ["t2"], "size"))
    w.submit(Batch([3], ["t3"], "interval"))
    gate.set()
    r1, r2 = w.results.get(timeout=5), w.results.get(timeout=5)
    assert (r1.tuples, r1.batches) == (["t1"], 1)
    assert (r2.tuples, r2.batches) == (["t2", "t3"], 2)
    assert seen == [[1], [2, 3]]
    assert w.stop() and w.stop()
    with pytest.raises(RuntimeError):
        w.submit(Batch([4], ["t4"], "size"))


def test_batch_writer_stop_drops_unstarted_batches_and_runs_on_stop():
    gate = threading.Event()
    stopped = []
    w = BatchWriter("spark-sink-test-2", lambda rows: (gate.wait(5), ("b", {}))[1],
                    on_stop=lambda: stopped.append(True))
    w.start()
    w.submit(Batch([1], ["t1"], "size"))
    poll(lambda: not w._jobs, message="first batch taken")
    w.submit(Batch([2], ["t2"], "size"))
    threading.Timer(0.2, gate.set).start()
    assert w.stop(5)
    assert w.results.get(timeout=1).tuples == ["t1"]
    assert w.results.empty() and stopped == [True]


# ---- session holder ----

class FakeSession:
    def __init__(self):
        self.stopped = 0

    def stop(self):
        self.stopped += 1


def test_session_holder_creates_once_shares_and_stops_with_the_last_release():
    built = []

    def build(settings):
        built.append(dict(settings))
        return FakeSession()

    h = SparkSessionHolder(build=build, existing=lambda: None)
    s1 = h.acquire({"spark.master": "local[2]", "spark.executor.memory": "1g", "topology.name": "wc"})
    s2 = h.acquire({})
    assert s1 is s2 and len(built) == 1 and h.refs == 2
    assert built[0]["spark.master"] == "local[2]" and built[0]["spark.executor.memory"] == "1g"
    assert built[0]["spark.app.name"] == "storm-py-wc"
    h.release()
    assert s1.stopped == 0
    h.release()
    assert s1.stopped == 1 and h.session is None
    h.release()  # extra releases are harmless
    assert h.acquire({}) is not s1 and len(built) == 2


def test_session_holder_never_stops_a_session_it_did_not_create():
    mine, theirs = FakeSession(), FakeSession()
    h = SparkSessionHolder(build=lambda s: pytest.fail("must not build"), existing=lambda: theirs)
    assert h.acquire({}) is theirs
    h.release()
    assert theirs.stopped == 0
    h.use(mine)
    assert h.acquire({}) is mine
    h.release()
    assert mine.stopped == 0


@pytest.mark.parametrize("master, want", [("local", 2), ("local[1]", 2), ("local[3]", 6), ("local[2,4]", 4),
                                          ("local[*]", 2 * (os.cpu_count() or 1)),
                                          ("spark://h:7077", None), ("yarn", None)])
def test_a_reading_session_shuffles_into_few_partitions_on_a_local_master(master, want):
    # Spark's 200 shuffle partitions are 200 tasks in a row on local[1]: `sink show` of a small
    # table read for 18 s instead of 8.
    assert reader_shuffle_partitions(master) == want
    settings = quiet_reader_settings({"spark.master": master})
    assert settings.get("spark.sql.shuffle.partitions") == (None if want is None else str(want))
    # the user's own setting wins
    assert quiet_reader_settings({"spark.master": master, "spark.sql.shuffle.partitions": 7})[
        "spark.sql.shuffle.partitions"] == "7"


def test_compaction_summary_says_the_rows_rewritten_and_the_rows_held_apart():
    from daemons.cli_sink import compaction_summary
    from executor.sinks._compact import RunResult

    runs = [RunResult("compacted", inputs=2, rows=10), RunResult("compacted", inputs=2, rows=15),
            RunResult("nothing")]
    before = {"batch_dirs": 3, "compacted_dirs": 0, "files": 3}
    after = {"batch_dirs": 0, "compacted_dirs": 1, "files": 1}
    line = compaction_summary("/t", runs, before, after, held=15)
    assert line.startswith("table /t: 2 compaction run(s) merged 4 entries, rewriting 25 rows (a row merged "
                           "again by a later run counts again); the table holds 15 rows;"), line
    assert "directories read: 3 -> 1, files: 3 -> 1" in line
    one = compaction_summary("/t", runs[1:], before, after, held=15)
    assert "rewriting 15 rows; the table holds 15 rows" in one


def test_spark_settings_defaults_and_pass_through():
    s = spark_settings({"spark.sql.shuffle.partitions": 4, "spark.eventLog.enabled": True,
                        "topology.workers": 2, "spark.driver.memory": None})
    assert s["spark.master"] == "local[1]"
    assert s["spark.sql.shuffle.partitions"] == "4" and s["spark.eventLog.enabled"] == "true"
    assert s["spark.ui.enabled"] == "false"
    assert "topology.workers" not in s and "spark.driver.memory" not in s
    assert spark_settings({"spark.ui.enabled": True})["spark.ui.enabled"] == "true"
    # Spark's warehouse directory goes to the temp dir, not into the worker's working directory.
    assert spark_settings({})["spark.sql.warehouse.dir"].startswith(tempfile.gettempdir())
    assert spark_settings({"spark.sql.warehouse.dir": "/w"})["spark.sql.warehouse.dir"] == "/w"



# ---- Spark Connect (spark.remote) ----

class FakeRemoteSession(FakeSession):
    """A session whose class lives where PySpark's Connect client's does (is_remote's test)."""


FakeRemoteSession.__module__ = "pyspark.sql.connect.session"


def test_with_spark_remote_a_session_gets_only_what_a_connect_client_can_set():
    conf = {"spark.remote": "sc://127.0.0.1:15002", "spark.master": "local[1]", "spark.driver.memory": "2g",
            "spark.sql.shuffle.partitions": 3, "spark.sql.warehouse.dir": "/w", "topology.name": "wc"}
    s = spark_settings(conf)
    # The server's own keys (master, UI, memory, Hadoop, warehouse) would only be warned about.
    assert s == {"spark.remote": "sc://127.0.0.1:15002", "spark.sql.shuffle.partitions": "3",
                 "spark.sql.adaptive.enabled": "false"}
    r = quiet_reader_settings({k: v for k, v in conf.items() if k != "spark.sql.shuffle.partitions"})
    assert r["spark.remote"] == "sc://127.0.0.1:15002"
    assert r["spark.sql.shuffle.partitions"] == str(2 * (os.cpu_count() or 1))  # a server of this host
    assert not any(k.startswith(("spark.driver.", "spark.log.", "spark.master")) for k in r)
    assert describe_spark(s) == "Spark Connect server sc://127.0.0.1:15002"
    assert describe_spark(spark_settings({})) == "master local[1]"
    assert spark_settings({"spark.remote": None})["spark.master"] == "local[1]"  # the packaged default


def test_a_failed_remote_session_is_dropped_and_the_next_use_connects_again():
    built = []

    def build(settings):
        built.append(dict(settings))
        return FakeRemoteSession()

    h = SparkSessionHolder(build=build, existing=lambda: None)
    first = h.acquire({"spark.remote": "sc://h:1"})
    h.acquire({"spark.remote": "sc://h:1"})  # a second sink task of the worker
    assert h.renew(first) is True and first.stopped == 1
    again = h.current()
    assert again is not first and h.current() is again and len(built) == 2 and h.refs == 2
    assert h.renew(first) is False  # a stale failure does not drop the new session
    h.release()
    h.release()
    assert again.stopped == 1


def test_a_failed_write_never_drops_a_jvm_session_or_one_the_holder_did_not_make():
    local, theirs = FakeSession(), FakeRemoteSession()
    h = SparkSessionHolder(build=lambda s: local, existing=lambda: None)
    assert h.acquire({}) is local and h.renew(local) is False and local.stopped == 0
    h.release()
    h2 = SparkSessionHolder(build=lambda s: pytest.fail("must not build"), existing=lambda: theirs)
    assert h2.acquire({}) is theirs and h2.renew(theirs) is False and theirs.stopped == 0


def test_the_spark_connect_server_command_carries_the_sink_defaults_and_the_address():
    from daemons.cli_spark import SERVER_CLASS, server_command, server_settings

    settings = server_settings({"spark.remote": "sc://x:1", "spark.master": "local[1]", "spark.driver.memory": "3g",
                                "topology.workers": 2}, "127.0.0.2", 15010, "local[*]")
    assert settings["spark.master"] == "local[*]"  # the workers' spark.master is not the server's
    assert settings["spark.driver.memory"] == "3g" and "spark.remote" not in settings
    assert settings["spark.connect.grpc.binding.address"] == "127.0.0.2"
    assert settings["spark.connect.grpc.binding.port"] == "15010"
    assert settings["spark.ui.enabled"] == "false" and "topology.workers" not in settings
    cmd = server_command("/opt/spark", settings)
    assert cmd[:3] == ["/opt/spark/bin/spark-submit", "--class", SERVER_CLASS] and cmd[-1] == "spark-internal"
    assert "spark.connect.grpc.binding.port=15010" in cmd


# ---- layout: batch ids, staging, metadata ----

def test_batch_ids_are_unique_and_sort_by_time():
    a, b = L.BatchIds(L.new_owner(3)), L.BatchIds(L.new_owner(3))
    first, second = a.next(), a.next()
    assert first < second

    def in_a_later_millisecond():
        candidate = b.next()
        return candidate if candidate.split("-")[0] > second.split("-")[0] else None

    later = poll(in_a_later_millisecond, timeout=5, interval=0.001, message="the clock to move on")
    assert later > second and len({first, second, later}) == 3  # another writer, later: sorts after
    assert "/" not in later and "=" not in later and "T" in later.split("-")[0]


@pytest.mark.cluster  # starts a process
def test_clean_staging_removes_leftovers_of_killed_writers_only(tmp_path):
    table = tmp_path / "t"
    live = writer_process(table, "t1-live")
    killed = writer_process(table, "t2-killed")
    try:
        kill_process(killed)
        orphan = table / L.STAGING_DIR / "t3-orphan" / "b9"
        orphan.mkdir(parents=True)
        mine = L.Staging(table, "t4-mine")
        mine.open()
        removed = L.clean_staging(table)
        assert sorted(removed) == ["t2-killed", "t3-orphan"]
        left = sorted(os.listdir(table / L.STAGING_DIR))
        assert left == ["t1-live", "t1-live.lock", "t4-mine", "t4-mine.lock"]
        mine.close()
        mine.close()
        assert sorted(os.listdir(table / L.STAGING_DIR)) == ["t1-live", "t1-live.lock"]
    finally:
        kill_process(live)
    assert L.clean_staging(table) == ["t1-live"]
    assert os.listdir(table / L.STAGING_DIR) == []


SCHEMA_A = '{"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": true, "metadata": {}}]}'


def test_metadata_first_writer_wins_and_mismatch_is_an_error(tmp_path):
    meta = {"version": L.META_VERSION, "format": "parquet", "columns": ["a"], "partition_by": [],
            "dedupe_fields": None, "schema": SCHEMA_A}
    assert L.read_meta(tmp_path) is None
    assert L.create_meta(tmp_path, meta) == meta
    assert L.create_meta(tmp_path, {**meta, "columns": ["b"]})["columns"] == ["a"]
    assert [p.name for p in tmp_path.iterdir()] == [L.META_FILE]  # no temp files left
    L.check_meta(meta, table=tmp_path, columns=["a"], format="parquet", partition_by=[], dedupe_fields=None)
    with pytest.raises(L.SinkTableError, match="columns"):
        L.check_meta(meta, table=tmp_path, columns=["b"], format="parquet", partition_by=[], dedupe_fields=None)
    (tmp_path / L.META_FILE).write_text("{not json")
    with pytest.raises(L.SinkTableError):
        L.read_meta(tmp_path)


def test_committed_batches_are_listed_oldest_first(tmp_path):
    for b in ("20260101T000000002Z-x", "20260101T000000001Z-x"):
        (tmp_path / L.batch_dir_name(b)).mkdir()
    (tmp_path / L.STAGING_DIR).mkdir()
    assert L.committed_batches(tmp_path) == ["20260101T000000001Z-x", "20260101T000000002Z-x"]
    assert L.table_dir("file:///x/y") == Path("/x/y")


# ---- schema inference and enforcement (pyspark.sql.types only; no JVM) ----

def test_infer_schema_from_the_first_batch():
    from executor.sinks._schema import infer_schema

    rows = [[1, 1.5, "a", True, None, [1, 2], {"k": 1.0}, b"x", datetime.datetime(2026, 1, 1)],
            [2, 2, "b", False, None, [], {}, b"y", None]]
    s = infer_schema(["i", "f", "s", "b", "n", "arr", "m", "bin", "ts"], rows)
    assert s.simpleString() == ("struct<i:bigint,f:double,s:string,b:boolean,n:string,arr:array<bigint>,"
                                "m:map<string,double>,bin:binary,ts:timestamp>")
    assert infer_schema(["x"], [[1], ["a"], [2]]).simpleString() == "struct<x:bigint>"  # majority wins


def test_conform_converts_ints_for_doubles_and_rejects_misfits():
    from executor.sinks._schema import conform, infer_schema

    schema = infer_schema(["n", "x"], [["a", 1.5]])
    rows = [["a", 1.5], ["b", 2]]
    out, bad = conform(schema, rows)
    assert out == [("a", 1.5), ("b", 2.0)] and type(out[1][1]) is float and bad == {}
    same = [["a", 1.0], [None, None]]
    assert conform(schema, same) == (same, {})  # fast path: the same list, untouched
    out, bad = conform(schema, [["a", 1.0], [5, 2.0], ["c", "x"], ["d", True]])
    assert out == [("a", 1.0)]
    assert sorted(bad) == [1, 2, 3] and "field 'n'" in bad[1] and "field 'x'" in bad[2]
