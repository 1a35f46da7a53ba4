"""`storm-py local`: runs topology files end to end in a subprocess."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from testutil import wait_until

from executor.sinks._layout import committed_batches

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.timeout(120), pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]


def storm_py(*args, cwd=None, env=None, timeout=90):
    return subprocess.run([sys.executable, "-m", "daemons.cli", *args], cwd=cwd or REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.mark.timeout(240)
def test_word_count_example_runs_and_acks(tmp_path):
    # The example stores its counts through Spark: a sentence is acked only after the first
    # Spark write committed (a JVM start plus a first write; much longer on a loaded host). So
    # run until the status line shows acks (a poll with a deadline), then stop it as a user does.
    err = tmp_path / "stderr"
    table = tmp_path / "wc-table"  # the topology config names the table (-c), not the environment
    with open(err, "w") as err_file:  # a file, not a pipe nobody reads: Spark may log a lot
        proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "local", "examples/word_count/topology.py",
                                 "-c", f"wordcount.table={table}"],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=err_file, text=True,
                                stdin=subprocess.DEVNULL)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        # Exactly once: a sentence is acked once the checkpoint after it commits, and its counts
        # reach the table with the checkpoint after their window fired: wait for both.
        wait_until(lambda: any(re.search(r"acked +[1-9]\d*/s", line) for line in list(lines))
                   and bool(committed_batches(table)), timeout=180,
                   message=lambda: f"a status line with acks and a committed batch in {table}; output so far: "
                                   f"{lines[-5:]}")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    out = "".join(lines)
    assert proc.returncode == 0, err.read_text()
    m = re.search(r"summary: .* acked (\d+), failed (\d+)", out)
    assert m, out
    assert int(m.group(1)) > 0
    assert "acked" in lines[0]  # a live status line came first
    assert list(table.rglob("*.parquet")), f"no Parquet file under {table}"


def test_bin_shim_runs_from_another_directory(tmp_path):
    out = subprocess.run([str(REPO / "bin" / "storm-py"), "local", str(REPO / "examples/exclamation/topology.py"),
                          "--duration", "2"], cwd=tmp_path, capture_output=True, text=True, timeout=90,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "summary:" in out.stdout


TOPOLOGY = textwrap.dedent('''
    import json
    from helper_components import RecordingSpout
    from executor.api import TopologyBuilder

    builder = TopologyBuilder()
    builder.set_spout("rec", RecordingSpout())
    topology = builder.create_topology()
    config = {"layer.topology": "topology", "topology.message.timeout.secs": 5}
''')

HELPER = textwrap.dedent('''
    import json
    from executor.api import Spout

    class RecordingSpout(Spout):
        def open(self, conf, context, collector):
            keys = ["layer.yaml", "layer.cli", "layer.topology", "topology.message.timeout.secs",
                    "topology.max.spout.pending"]
            with open(conf["out.path"], "w") as f:
                json.dump({k: conf.get(k) for k in keys}, f)

        def next_tuple(self):
            pass
''')


def test_config_precedence_and_sibling_imports(tmp_path):
    topo_dir = tmp_path / "topo"
    topo_dir.mkdir()
    (topo_dir / "topology.py").write_text(TOPOLOGY)
    (topo_dir / "helper_components.py").write_text(HELPER)
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "storm.yaml").write_text(
        "layer.yaml: yaml\nlayer.cli: yaml\nlayer.topology: yaml\ntopology.max.spout.pending: 7\n")
    out_path = tmp_path / "seen.json"
    out = storm_py("local", str(topo_dir / "topology.py"), "--duration", "1.5", "--conf-dir", str(conf_dir),
                   "-c", "layer.cli=cli", "-c", "layer.topology=cli", "-c", f"out.path={out_path}",
                   cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out_path.read_text())
    # defaults < storm.yaml < topology config < -c (Storm's submitter merges -c over the topology's conf)
    assert seen == {"layer.yaml": "yaml", "layer.cli": "cli", "layer.topology": "cli",
                    "topology.message.timeout.secs": 5, "topology.max.spout.pending": 7}


def test_wrongly_typed_config_fails_naming_the_key(tmp_path):
    out = storm_py("local", "examples/word_count/topology.py", "--duration", "1", "-c", "topology.workers=many")
    assert out.returncode != 0
    assert "topology.workers" in out.stderr and "Traceback" not in out.stderr


def test_env_conf_dir_is_honoured(tmp_path):
    (tmp_path / "storm.yaml").write_text("topology.acker.executors: lots\n")
    env = {**os.environ, "STORM_CONF_DIR": str(tmp_path)}
    out = storm_py("local", "examples/word_count/topology.py", "--duration", "1", env=env)
    assert out.returncode != 0 and "topology.acker.executors" in out.stderr


CRASHING = textwrap.dedent('''
    from executor.api import Bolt, Spout, TopologyBuilder

    class Once(Spout):
        def declare_output_fields(self, d):
            d.declare(["v"])
        def open(self, conf, context, collector):
            self.c, self.done = collector, False
        def next_tuple(self):
            if not self.done:
                self.done = True
                self.c.emit([1], msg_id=1)

    class Crash(Bolt):
        def execute(self, tup):
            raise RuntimeError("kaboom in user code")

    b = TopologyBuilder()
    b.set_spout("once", Once())
    b.set_bolt("crasher", Crash()).shuffle_grouping("once")
    topology = b.create_topology()
''')


def test_crashing_component_exits_non_zero_naming_it(tmp_path):
    f = tmp_path / "crash.py"
    f.write_text(CRASHING)
    out = storm_py("local", str(f), "--duration", "10", cwd=tmp_path)
    assert out.returncode != 0
    assert "crasher" in out.stderr and "kaboom in user code" in out.stderr


def test_file_without_topology_attribute_is_a_clear_error(tmp_path):
    f = tmp_path / "empty.py"
    f.write_text("x = 1\n")
    out = storm_py("local", str(f), "--duration", "1", cwd=tmp_path)
    assert out.returncode != 0
    assert "defines no module attribute 'topology'" in out.stderr and "Traceback" not in out.stderr


def test_invalid_topology_is_a_clear_error(tmp_path):
    f = tmp_path / "invalid.py"
    f.write_text(textwrap.dedent('''
        from executor.api import Bolt, Spout, TopologyBuilder
        class S(Spout):
            def declare_output_fields(self, d):
                d.declare(["v"])
        class B(Bolt):
            def execute(self, t):
                pass
        b = TopologyBuilder()
        b.set_spout("s", S())
        b.set_bolt("b", B()).fields_grouping("s", ["missing"])
        topology = b.create_topology()
    '''))
    out = storm_py("local", str(f), "--duration", "1", cwd=tmp_path)
    assert out.returncode != 0
    assert "missing" in out.stderr and "Traceback" not in out.stderr


def test_ctrl_c_shuts_down_cleanly_with_a_summary():
    import time

    proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "local", "examples/word_count/topology.py"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        first = proc.stdout.readline()  # a status line: the topology runs
        assert "acked" in first, first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=max(1, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert "summary:" in out and "Traceback" not in err
