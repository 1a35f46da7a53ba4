"""streamparse's quickstart project (`sparse quickstart`, from the streamparse on PyPI) runs
unmodified under `storm-py local`: its topology file, its WordSpout and WordCountBolt launched
through streamparse_run from src/, counts exact, no subprocess restarted, memory bounded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psutil
import pytest
from testutil import CLI_ENV, ROOT

pytestmark = [pytest.mark.timeout(180), pytest.mark.cluster]  # subprocess components

# What a user adds to the project to see the counts: a streamparse bolt (src/) recording what
# WordCountBolt emits, and a topology reusing the quickstart's components.
CHECK_BOLT = '''
import json
import os

from streamparse import Bolt


class CheckBolt(Bolt):
    def initialize(self, conf, ctx):
        self.out = open(os.path.join(conf["check.dir"], f"counts-{os.getpid()}"), "a")

    def process(self, tup):
        self.out.write(json.dumps(tup.values) + "\\n")
        self.out.flush()
'''

CHECKED_TOPOLOGY = '''
from streamparse import Grouping, Topology

from bolts.check import CheckBolt
from bolts.wordcount import WordCountBolt
from spouts.words import WordSpout


class WordCountChecked(Topology):
    config = {{"check.dir": {out!r}}}
    word_spout = WordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={{word_spout: Grouping.fields("word")}}, par=2)
    check_bolt = CheckBolt.spec(inputs={{count_bolt: Grouping.fields("word")}}, par=2)
'''


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    """`sparse quickstart wordcount`, as a new streamparse user starts (LEIN_ROOT: streamparse
    refuses root without it; nothing of Leiningen runs)."""
    where = tmp_path_factory.mktemp("sparse")
    sparse = Path(sys.executable).parent / "sparse"
    out = subprocess.run([str(sparse), "quickstart", "wordcount"], cwd=where, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "LEIN_ROOT": "1"}, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    project = where / "wordcount"
    assert (project / "topologies" / "wordcount.py").is_file() and (project / "src" / "bolts").is_dir()
    return project


def run_local(project: Path, topology: str, seconds: float, *extra: str) -> tuple[subprocess.CompletedProcess, int]:
    """`storm-py local topologies/TOPOLOGY --duration SECONDS` from the project's root; returns
    the run and the largest resident memory of its process tree (bytes)."""
    env = {**CLI_ENV, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "local", f"topologies/{topology}", "--duration",
                             str(seconds), "--log-level", "info", *extra], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.5):
            try:
                tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=seconds + 90)
    finally:
        done.set()
        sampler.join(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), peak[0]


@pytest.mark.slow
def test_the_quickstart_topology_runs_unmodified(quickstart):
    out, peak = run_local(quickstart, "wordcount.py", 8)
    assert out.returncode == 0, out.stderr[-3000:]
    # named after its file, as sparse run names it; one subprocess per task, none restarted
    assert "topology wordcount" in out.stdout + out.stderr or "wordcount" in out.stdout
    launched = [line for line in out.stderr.splitlines() if "launched subprocess `streamparse_run" in line]
    assert len(launched) == 3, launched  # word_spout x1, count_bolt x2
    assert "died" not in out.stderr and "ShellError" not in out.stderr
    summary = {line.split()[0]: line.split() for line in out.stdout.splitlines() if line.startswith("  ")}
    assert int(summary["count_bolt"][summary["count_bolt"].index("executed") + 1]) > 1000
    # The spout emits on every `next` without ids: paced by back-pressure, not by memory.
    assert peak < 1.5 * 2**30, f"process tree peaked at {peak / 2**20:.0f} MiB"


@pytest.mark.slow
def test_the_quickstart_counts_are_exact(quickstart, tmp_path):
    (quickstart / "src" / "bolts" / "check.py").write_text(CHECK_BOLT)
    (quickstart / "topologies" / "wordcount_checked.py").write_text(
        textwrap.dedent(CHECKED_TOPOLOGY.format(out=str(tmp_path))))
    out, _peak = run_local(quickstart, "wordcount_checked.py", 8, "-c", "topology.multilang.serializer=msgpack")
    assert out.returncode == 0, out.stderr[-3000:]
    # the run's serializer wins over config.json's, and streamparse_run is told so
    assert "launched subprocess `streamparse_run -s msgpack spouts.words.WordSpout`" in out.stderr
    counts: dict[str, list[int]] = {}
    for path in tmp_path.glob("counts-*"):
        for line in path.read_text().splitlines():
            word, count = json.loads(line)
            counts.setdefault(word, []).append(count)
    assert set(counts) == {"dog", "cat", "zebra", "elephant"}
    for word, seen in counts.items():
        step = 10 if word == "dog" else 1  # the quickstart's WordCountBolt counts a dog as 10
        assert seen == [step * (i + 1) for i in range(len(seen))], (word, seen[:20])
    sizes = sorted(len(v) for v in counts.values())
    assert sizes[0] > 100 and sizes[-1] - sizes[0] <= 200  # the spout cycles through the four words
