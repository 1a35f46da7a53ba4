"""Bad input to the Spark sink: damaged tables, unusable table paths, no Java.

Every damaged-table case compares the rows read with the rows written: either exactly the rows
written come back, or one clear error names the damaged file. The sink's prepare fails with one
line naming the table (or the missing Java), and `storm-py sink show` / top_words.py print one
`error:` line, never a Python or Java trace. One SparkSession serves the module; the subprocess
cases that need their own JVM are two.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from sink.sink_damage import (
    COLUMNS,
    ROWS,
    alter_value,
    batch_dirs,
    copy_table,
    crc_file,
    edit_manifest,
    edit_meta,
    is_root,
    part_file,
    quiet_session,
    write_table,
)

from executor.sinks import _layout as L
from executor.sinks import _log as G
from executor.sinks._integrity import MANIFEST, TableDamagedError, describe_read_error, summarize_error
from executor.sinks.spark import SinkTableError, SparkSinkBolt, read_table, use_session, verify_table

pytestmark = [pytest.mark.timeout(240), pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    session, created = quiet_session(tmp_path_factory.mktemp("warehouse"))
    use_session(session)
    yield session
    use_session(None)
    if created:
        session.stop()


@pytest.fixture(scope="module")
def pristine(spark, tmp_path_factory):
    """A table holding ROWS in two committed batches; tests damage copies of it."""
    return write_table(spark, tmp_path_factory.mktemp("pristine") / "t")


@pytest.fixture
def table(pristine, tmp_path):
    return copy_table(pristine, tmp_path / "t")


def _rows(spark, table, **kw) -> list:
    return sorted(tuple(r[c] for c in COLUMNS) for r in read_table(str(table), spark=spark, **kw).collect())


def _read_error(spark, table) -> str:
    """The one-line error reading every row of `table` gives (the test fails if it reads)."""
    try:
        rows = _rows(spark, table)
    except Exception as exc:  # noqa: BLE001 - any error is what is looked at
        message = describe_read_error(exc, table)
    else:
        raise AssertionError(f"damaged table read without an error: {len(rows)} rows, "
                             f"{'the same' if rows == ROWS else 'different'} rows than written")
    assert "\n" not in message
    return message


# ---- damaged tables: exact rows or one error naming the file ----

def test_an_intact_table_reads_back_exactly_and_verifies(spark, table):
    assert _rows(spark, table) == ROWS
    assert verify_table(str(table), spark=spark) == len(ROWS)


def test_a_zero_byte_part_file_is_an_error_naming_it(spark, table):
    part = part_file(table, 1)
    size = part.stat().st_size
    part.write_bytes(b"")
    crc_file(part).unlink()
    with pytest.raises(TableDamagedError) as err:
        read_table(str(table), spark=spark)
    assert str(err.value) == f"table {table}: part file {part} is damaged (0 bytes, {size} when committed)"


def test_a_missing_part_file_is_an_error_naming_it(spark, table):
    part = part_file(table, 0)
    part.unlink()
    with pytest.raises(TableDamagedError, match=f"part file {part} is missing"):
        read_table(str(table), spark=spark)


def test_a_flipped_byte_in_a_data_page_is_an_error_naming_the_file(spark, table):
    part = part_file(table, 0)
    alter_value(part, b"VALUE-00007", b"VALUE-00107")  # Hadoop's .crc still describes the old bytes
    message = _read_error(spark, table)
    assert message.startswith(f"table {table}: part file {part} is damaged (")


def test_a_changed_data_page_without_its_crc_is_an_error_not_an_altered_value(spark, table):
    part = part_file(table, 0)
    alter_value(part, b"VALUE-00007", b"VALUE-00107")
    crc_file(part).unlink()
    # Without page checksums Spark returns the altered value: the damage this test is about.
    plain = spark.read.option("parquet.page.verify-checksum.enabled", "false").parquet(str(table))
    values = {r["word"] for r in plain.collect()}
    assert "VALUE-00107" in values and "VALUE-00007" not in values
    message = _read_error(spark, table)
    assert message.startswith(f"table {table}: part file {part} is damaged (")
    assert "checksum" in message.lower()


def test_a_row_count_other_than_committed_is_an_error_naming_the_batch(spark, table):
    batch = batch_dirs(table)[1]
    edit_manifest(batch, lambda doc: doc.update(rows=41))
    with pytest.raises(TableDamagedError) as err:
        verify_table(str(table), spark=spark)
    assert str(err.value) == f"table {table}: batch {batch} reads as 40 rows, but 41 were committed"


def test_a_stray_data_file_in_a_batch_is_an_error_naming_it(spark, table):
    stray = batch_dirs(table)[0] / "part-99999-copied.parquet"
    shutil.copy(part_file(table, 1), stray)
    with pytest.raises(TableDamagedError, match=f"file {stray} was not written by the sink"):
        read_table(str(table), spark=spark)


def test_batches_committed_without_a_manifest_still_read_and_catch_empty_files(spark, table):
    # A table of an older storm-py: no manifests, no table log.
    for batch in batch_dirs(table):
        (batch / MANIFEST).unlink()
    shutil.rmtree(table / G.LOG_DIR)
    assert _rows(spark, table) == ROWS  # tables of older storm-py versions stay readable
    part = part_file(table, 0)
    part.write_bytes(b"")
    with pytest.raises(TableDamagedError, match=f"part file {part} is damaged \\(0 bytes\\)"):
        read_table(str(table), spark=spark)


@pytest.mark.parametrize("change,expected", [
    (lambda m: m.pop("schema"), "lacks the key 'schema'"),
    (lambda m: m.pop("version"), "has no 'version' key"),
    (lambda m: m.update(version=2), "has format version 2, newer than this storm-py reads (up to 1)"),
    (lambda m: m.update(columns="id"), "key 'columns' holds 'id', not a list"),
    (lambda m: m.update(format="delta"), "has format 'delta'"),
])
def test_bad_metadata_says_what_is_wrong(spark, table, change, expected):
    edit_meta(table, change)
    with pytest.raises(SinkTableError) as err:
        read_table(str(table), spark=spark)
    message = str(err.value)
    assert message.startswith(f"table {table}: metadata {table / L.META_FILE} ") and expected in message


@pytest.mark.parametrize("damage,expected", [
    ("garbled", "is not valid JSON"),
    ("binary", "cannot read its metadata"),
    ("directory", "cannot read its metadata"),
    ("unreadable", "cannot read its metadata"),
])
def test_unreadable_metadata_is_an_error_naming_it(spark, table, damage, expected):
    meta = table / L.META_FILE
    if damage == "garbled":
        meta.write_text('{"version": 1, "format": "parq')
    elif damage == "binary":
        meta.write_bytes(b"\xff\xfe\x00garbage")
    elif damage == "directory":
        meta.unlink()
        meta.mkdir()
    else:
        if is_root():
            pytest.skip("root reads files whatever their mode")
        meta.chmod(0)
    with pytest.raises(SinkTableError) as err:
        read_table(str(table), spark=spark)
    assert str(err.value).startswith(f"table {table}: ") and expected in str(err.value)
    assert str(meta) in str(err.value)


def test_a_table_path_that_is_a_regular_file_is_an_error(spark, tmp_path):
    path = tmp_path / "t"
    path.write_text("not a table")
    with pytest.raises(SinkTableError, match=f"table {path}: the path is a regular file, not a directory"):
        read_table(str(path), spark=spark)


# ---- sink show: one error line ----

def _show(*args):
    from daemons.cli import main

    out = CliRunner().invoke(main, ["sink", "show", *map(str, args)])
    return out.exit_code, out.output.splitlines()


def test_sink_show_on_damaged_tables_prints_one_error_line(spark, table, tmp_path):
    part = part_file(table, 1)
    size = part.stat().st_size
    part.write_bytes(b"")
    code, lines = _show(table)
    assert (code, lines) == (1, [f"error: table {table}: part file {part} is damaged (0 bytes, {size} when committed)"])
    file_path = tmp_path / "file"
    file_path.write_text("x")
    assert _show(file_path) == (1, [f"error: table {file_path}: the path is a regular file, not a directory"])
    edit_meta(table, lambda m: m.update(version=7))
    code, lines = _show(table)
    assert code == 1 and len(lines) == 1 and "has format version 7, newer than" in lines[0]
    assert lines[0].startswith(f"error: table {table}: metadata ")


# ---- the sink's prepare: one line naming the table ----

class _Collector:
    def ack(self, t):
        pass

    def fail(self, t):
        pass

    def report_error(self, exc):
        raise AssertionError(f"unexpected report: {exc}")


def _prepare(bolt: SparkSinkBolt) -> None:
    ctx = SimpleNamespace(this_task_id=1, this_component_id="store", topology=None)
    bolt.prepare({}, ctx, _Collector())
    bolt.cleanup()


@pytest.mark.parametrize("case,expected", [
    ("file", "the path is a regular file, not a directory"),
    ("parent-file", "cannot create it, {parent} is not a directory"),
    ("newer", "has format version 9, newer than this storm-py reads"),
    ("garbled", "metadata {path}/_storm_sink.json is not valid JSON"),
    ("layout", "was created with another layout (columns: table has ['run', 'word', 'count'], sink has ['run', 'w'])"),
    ("schema", "has schema struct<run:string,word:string,count:bigint>, not struct<run:string,word:string,count:string>"),
])
def test_prepare_fails_with_one_line_naming_the_table(spark, pristine, tmp_path, case, expected):
    path, fields, schema = tmp_path / "t", COLUMNS, None
    if case == "file":
        path.write_text("x")
    elif case == "parent-file":
        (tmp_path / "p").write_text("x")
        path = tmp_path / "p" / "t"
    else:
        copy_table(pristine, path)
        if case == "newer":
            edit_meta(path, lambda m: m.update(version=9))
        elif case == "garbled":
            (path / L.META_FILE).write_text('{"version": 1, "colu')
        elif case == "layout":
            fields = ["run", "w"]
        else:
            schema = "run STRING, word STRING, count STRING"
    with pytest.raises(SinkTableError) as err:
        _prepare(SparkSinkBolt(str(path), fields=fields, schema=schema))
    message = str(err.value)
    assert message.startswith(f"Spark sink for table {path}: ")
    assert expected.format(parent=tmp_path / "p", path=path) in message and "\n" not in message
    assert err.value.__cause__ is None and err.value.__suppress_context__


NO_JAVA = r"""
import sys
from types import SimpleNamespace
from daemons.local import LocalCluster
from executor.api import TopologyBuilder
from executor.sinks.spark import SparkSinkBolt
from testutil import wait_until

bolt = SparkSinkBolt(sys.argv[1], fields=["id"])
try:
    bolt.prepare({}, SimpleNamespace(this_task_id=1, this_component_id="store", topology=None), None)
except Exception as exc:
    print("prepare:", type(exc).__name__, exc)

from daemons.testing import FeederSpout
b = TopologyBuilder()
b.set_spout("spout", FeederSpout(["id"]))
b.set_bolt("store", SparkSinkBolt(sys.argv[1])).shuffle_grouping("spout")
with LocalCluster() as cluster:
    cluster.submit_topology("nojava", {}, b.create_topology())
    died = wait_until(lambda: cluster.died("nojava"), timeout=60, message="the sink to die")
    print("died:", died[0].component_id, died[0].where, type(died[0].original).__name__, died[0].original)
"""


def test_prepare_without_a_usable_java_fails_with_one_line(tmp_path):
    env = {**os.environ, "JAVA_HOME": "/nonexistent", "PATH": os.path.dirname(sys.executable),
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    proc = subprocess.run([sys.executable, "-c", NO_JAVA, str(tmp_path / "t")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    why = ("no usable Java (JAVA_HOME=/nonexistent, no executable /nonexistent/bin/java); "
           "Spark needs Java 17+")
    table = tmp_path / "t"
    assert proc.stdout.splitlines() == [
        f"prepare: SinkTableError Spark sink for table {table}: {why}",
        f"died: store prepare SinkTableError Spark sink for table {table}: {why}",
    ]
    assert "Traceback" not in proc.stdout
    assert not table.exists()  # checked before anything is created


# ---- sink show and top_words.py on a table damaged inside a page: their own JVM, or a server ----

def _quiet_run(args, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=200)


# One tool starts a JVM of its own; the others read through the test run's Spark Connect server
# (a JVM start is the costliest step of the suite; both paths give the one line).
@pytest.mark.parametrize("tool", ["sink show", "top_words.py through Spark Connect", "sink show through Spark Connect"])
def test_tools_on_a_page_damaged_table_print_one_error_line(pristine, tmp_path, tool, request):
    table = copy_table(pristine, tmp_path / "t")
    part = part_file(table, 0)
    alter_value(part, b"VALUE-00007", b"VALUE-00107")
    crc_file(part).unlink()
    if tool == "sink show":
        args = [sys.executable, "-m", "daemons.cli", "sink", "show", str(table)]
    else:  # through Spark Connect: the error comes back through gRPC from the server's JVM
        remote = request.getfixturevalue("spark_remote")["spark.remote"]
        if tool.startswith("sink show"):
            args = [sys.executable, "-m", "daemons.cli", "sink", "show", str(table), "-c", f"spark.remote={remote}"]
        else:
            args = [sys.executable, str(REPO / "examples" / "word_count" / "top_words.py"), str(table),
                    "--spark-remote", remote]
    proc = _quiet_run(args, tmp_path)
    output = proc.stdout + proc.stderr
    errors = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert proc.returncode == 1, output[-3000:]
    assert errors == [errors[0]] and errors[0].startswith(f"error: table {table}: part file {part} is damaged (")
    assert "Traceback" not in output and "at org.apache" not in output, output[-3000:]
    assert proc.stdout == ""


# ---- pure helpers ----

def test_summarize_error_keeps_one_line_and_the_root_cause():
    java = ("An error occurred while calling o57.save.\n: org.apache.spark.SparkException: Job aborted.\n"
            "\tat org.apache.spark.Foo.bar(Foo.scala:1)\n\t... 12 more\n"
            "Caused by: java.io.IOException: No space left on device\n\tat java.io.X.y(X.java:2)")
    assert summarize_error(RuntimeError(java)) == \
        "SparkException: Job aborted. (cause: IOException: No space left on device)"
    assert summarize_error(OSError("disk on fire\nmore")) == "OSError: disk on fire"
    assert summarize_error(ValueError("")) == "ValueError"
