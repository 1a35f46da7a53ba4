"""streamparse's quickstart project (`sparse quickstart`, from the streamparse on PyPI) runs
unmodified under `storm-py local`: its topology file, its WordSpout and WordCountBolt launched
through streamparse_run from src/, counts exact, no subprocess restarted, memory bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Callable

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


def run_local(project: Path, topology: str, seconds: float, *extra: str,
              until: Callable[[str], bool] | None = None) -> tuple[subprocess.CompletedProcess, int]:
    """`storm-py local topologies/TOPOLOGY --duration SECONDS` from the project's root; returns
    the run and the largest resident memory of its process tree (bytes). `until` (given the
    run's output so far): instead of a fixed duration, run until it holds (polled; a deadline of
    SECONDS + 90 s), then stop the run as Ctrl-C does, so that what the test waits for does not
    depend on the machine's speed."""
    env = {**CLI_ENV, "PYTHONPATH": str(ROOT)}
    duration = seconds if until is None else seconds + 90
    # Output to files, not pipes: a child writing while the test polls must never block on a pipe.
    with tempfile.TemporaryDirectory() as d:
        out_path, err_path = Path(d) / "out", Path(d) / "err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "local", f"topologies/{topology}",
                                     "--duration", str(duration), "--log-level", "info", *extra], cwd=project,
                                    env=env, stdout=out, stderr=err, text=True, stdin=subprocess.DEVNULL)
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
            if until is not None:
                deadline = time.monotonic() + duration
                while (proc.poll() is None and not until(out_path.read_text(errors="replace"))
                       and time.monotonic() < deadline):
                    time.sleep(0.2)
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
            proc.wait(timeout=duration + 90)
        finally:
            done.set()
            sampler.join(5)
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        return (subprocess.CompletedProcess(proc.args, proc.returncode, out_path.read_text(errors="replace"),
                                            err_path.read_text(errors="replace")), peak[0])


def emitted_so_far(text: str) -> float:
    """About how many tuples the spouts emitted, from the run's status lines (one a second)."""
    return sum(float(rate) for rate in re.findall(r"\] emitted\s+(\d+)/s", text))


@pytest.mark.slow
def test_the_quickstart_topology_runs_unmodified(quickstart):
    # until its spout emitted some 5,000 words (a fixed 8 s executed 668 on a loaded machine)
    out, peak = run_local(quickstart, "wordcount.py", 8, until=lambda text: emitted_so_far(text) > 5000)
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

    def read_counts() -> dict[str, list[int]]:
        counts: dict[str, list[int]] = {}
        for path in tmp_path.glob("counts-*"):
            for line in path.read_text().splitlines():
                if line.endswith("]"):  # a line still being written is read at the next poll
                    word, count = json.loads(line)
                    counts.setdefault(word, []).append(count)
        return counts

    # Until every word was counted 110 times (a fixed 8 s counted nothing on a loaded machine).
    out, _peak = run_local(quickstart, "wordcount_checked.py", 8, "-c", "topology.multilang.serializer=msgpack",
                           until=lambda _text: len(c := read_counts()) == 4 and min(map(len, c.values())) > 110)
    assert out.returncode == 0, out.stderr[-3000:]
    # the run's serializer wins over config.json's, and streamparse_run is told so
    assert "launched subprocess `streamparse_run -s msgpack spouts.words.WordSpout`" in out.stderr
    counts = read_counts()
    assert set(counts) == {"dog", "cat", "zebra", "elephant"}
    for word, seen in counts.items():
        step = 10 if word == "dog" else 1  # the quickstart's WordCountBolt counts a dog as 10
        assert seen == [step * (i + 1) for i in range(len(seen))], (word, seen[:20])
    sizes = sorted(len(v) for v in counts.values())
    assert sizes[0] > 100 and sizes[-1] - sizes[0] <= 200  # the spout cycles through the four words
