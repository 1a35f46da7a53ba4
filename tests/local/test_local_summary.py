"""README's first command, checked as its user can (issue 62, item 7): `storm-py local` of the
word count, which runs without a seed, prints a summary whose `acked` is the number of sentences
top_words.py then finds in the table (each sentence has a word no other has). Before, the run
read its figures before the kill let the last checkpoints commit: `acked 313500` for 315,800
sentences in the table."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from testutil import CLI_ENV, ROOT

pytestmark = [pytest.mark.timeout(300), pytest.mark.spark, pytest.mark.slow]


def test_the_summary_says_acked_what_the_table_counted(tmp_path, spark_remote):
    table, remote = tmp_path / "table", spark_remote["spark.remote"]
    run = subprocess.run([sys.executable, "-m", "daemons.cli", "local", str(ROOT / "examples" / "word_count" / "topology.py"),
                          "--duration", "20", "-c", f"wordcount.table={table}", "-c", f"spark.remote={remote}"],
                         cwd=tmp_path, env=CLI_ENV, capture_output=True, text=True, timeout=200,
                         stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = re.search(r"^summary: word_count \((?P<id>[^)]+)\) ran [\d.]+s: spouts emitted (?P<emitted>\d+), "
                        r"acked (?P<acked>\d+), failed 0 ", run.stdout, re.M)
    assert summary, run.stdout[-3000:]
    assert "not done within" not in run.stdout, run.stdout[-3000:]
    acked = int(summary["acked"])
    assert acked > 0 and acked == int(summary["emitted"]), summary.group(0)  # the stop drained them
    read = subprocess.run([sys.executable, str(ROOT / "examples" / "word_count" / "top_words.py"), str(table),
                           "--spark-remote", remote], capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert read.returncode == 0, read.stderr[-3000:]
    runs = dict(ln.split()[::-1] for ln in read.stdout.split("sentences counted", 1)[1].splitlines()[1:] if ln.strip())
    assert runs == {summary["id"]: str(acked)}, read.stdout
