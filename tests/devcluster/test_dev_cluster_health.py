"""A topology that can never run, as an operator meets it on a dev cluster: `storm-py list` shows
its workers restarting and the cause (component, host, port), not ACTIVE with its workers; a
module installed where it was submitted but not where the workers run is named as such; the
cluster keeps working for a topology submitted afterwards."""

from __future__ import annotations

import os
import re
import shutil
import textwrap

import pytest
from devcluster_helpers import ROOT, storm_py, submit
from testutil import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]

if shutil.which("java") is None:
    pytest.skip("dev-cluster needs Java and the Debian zookeeper package", allow_module_level=True)

COLUMNS = ("NAME", "ID", "STATUS", "TASKS", "WORKERS", "UPTIME", "RESTARTS")

SPOUT = '''
from executor.api import Spout, TopologyBuilder


class Numbers(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0

    def next_tuple(self):
        self.n += 1
        self.collector.emit([self.n])
'''


def _topology(root, name, head, bolt):
    d = root / name
    d.mkdir()
    (d / "topology.py").write_text(textwrap.dedent(head) + SPOUT + textwrap.dedent(bolt) + textwrap.dedent('''
        builder = TopologyBuilder()
        builder.set_spout("numbers", Numbers(), 1)
        builder.set_bolt("fragile", Fragile(), 1).shuffle_grouping("numbers")
        topology = builder.create_topology()
        config = {"topology.workers": 1}
        '''))
    return d / "topology.py"


def rows(conf_dir) -> dict[str, dict[str, str]]:
    """`storm-py list` as {name: {column: value}}; LAST ERROR is the rest of the line."""
    out = storm_py("list", conf_dir=conf_dir).stdout.splitlines()
    found = {}
    for line in out[1:]:
        parts = line.split(None, len(COLUMNS))
        if len(parts) > len(COLUMNS):
            found[parts[0]] = {**dict(zip(COLUMNS, parts)), "LAST ERROR": parts[len(COLUMNS)]}
    return found


def test_list_shows_restarts_and_the_cause_of_a_topology_that_can_never_run(tmp_path, shared_dev_cluster):
    raising = _topology(tmp_path, "raising", "", '''
        from executor.api import Bolt


        class Fragile(Bolt):
            def prepare(self, conf, context, collector):
                raise RuntimeError("the database at db.example:5432 refused the connection: check that it runs "
                                   "and that this host may reach it (pg_hba.conf), then submit the topology again")

            def execute(self, tup):
                pass
        ''')
    # A module the submitter's Python has (on its PYTHONPATH) and the workers' does not.
    lib = tmp_path / "client-lib"
    lib.mkdir()
    (lib / "fancylib.py").write_text("VALUE = 1\n")
    missing = _topology(tmp_path, "missing", "import fancylib  # noqa: F401\n", '''
        from executor.api import Bolt


        class Fragile(Bolt):
            def execute(self, tup):
                pass
        ''')
    # A worker that dies on every start without a traceback (os._exit while importing the
    # topology, where workers run only): only its exit code says anything.
    silent = _topology(tmp_path, "silent", """
        import os
        import sys

        if any("worker_main" in a for a in sys.argv):
            os._exit(3)
        """, '''
        from executor.api import Bolt


        class Fragile(Bolt):
            def execute(self, tup):
                pass
        ''')
    # Its structure depends on the submitter's environment: the workers build another topology
    # than the one packaged, and refuse to run it.
    envdep = _topology(tmp_path, "envdep", "import os\n", '''
        from executor.api import Bolt


        class Fragile(Bolt):
            def execute(self, tup):
                pass
        ''')
    envdep.write_text(envdep.read_text().replace(
        'set_bolt("fragile", Fragile(), 1)', 'set_bolt("fragile", Fragile(), int(os.environ.get("FRAGILES", "1")))'))
    c = shared_dev_cluster  # 2 supervisors with 4 slots each, daemon periods of a second
    submit(c.conf_dir, raising, "raising")
    submit(c.conf_dir, silent, "silent")
    out = storm_py("jar", "submit", str(missing), "--name", "missing", conf_dir=c.conf_dir,
                   env_extra={"PYTHONPATH": os.pathsep.join((str(ROOT), str(lib)))}, timeout=120)
    assert "submitted topology missing as " in out.stdout, out.stderr

    def failing(name, words):
        # WORKERS counts live workers: 0 while it crash-loops (between its deaths)
        row = rows(c.conf_dir).get(name)
        return (row is not None and row["STATUS"] == "ACTIVE" and int(row["RESTARTS"]) >= 1
                and row["WORKERS"] == "0" and all(w in row["LAST ERROR"] for w in words) and row)

    row = wait_until(lambda: failing("raising", ["RuntimeError: the database at db.example:5432 refused"]),
                     timeout=120, interval=1,
                     message=lambda: f"list showing raising's restarts and its error: {rows(c.conf_dir)}")
    assert re.search(r":\d+ \d+m\d+s ago: ", row["LAST ERROR"]), row
    # the user's error first and whole, the wrapper's class and its component/task prefix gone
    assert re.search(r"ago: RuntimeError: the database at db\.example:5432 refused the connection: .* then submit "
                     r"the topology again \(task \d+, in prepare\)$", row["LAST ERROR"]), row
    assert "ComponentError" not in row["LAST ERROR"], row
    # Each crash-looping topology goes once its row is shown: every relaunch is a worker start.
    storm_py("kill", "raising", "-w", "0", conf_dir=c.conf_dir)
    row = wait_until(lambda: failing("missing", ["module 'fancylib' is not installed"]),
                     timeout=120, interval=1,
                     message=lambda: f"list naming the module missing where workers run: {rows(c.conf_dir)}")
    storm_py("kill", "missing", "-w", "0", conf_dir=c.conf_dir)

    row = wait_until(lambda: failing("silent", ["workers keep dying (", "restarts in 5m), exit code 3: "]),
                     timeout=120, interval=1,
                     message=lambda: f"list saying silent's workers keep dying, with the exit code: {rows(c.conf_dir)}")
    assert int(row["RESTARTS"]) >= 3, row
    # Killed before the next is submitted: on a loaded machine a crash loop left running (a
    # Python start each few seconds) slowed envdep's workers past the wait below (a CPU-hog run).
    storm_py("kill", "silent", "-w", "0", conf_dir=c.conf_dir)

    out = storm_py("jar", "submit", str(envdep), "--name", "envdep", conf_dir=c.conf_dir,
                   env_extra={"FRAGILES": "2"}, timeout=120)
    assert "submitted topology envdep as " in out.stdout, out.stderr
    row = wait_until(lambda: failing("envdep", ["refused to start: the topology differs from its package manifest "
                                                "in component(s) fragile"]),
                     timeout=120, interval=1,
                     message=lambda: f"list saying envdep's workers refuse its code: {rows(c.conf_dir)}")
    storm_py("kill", "envdep", "-w", "0", conf_dir=c.conf_dir)

    # the cluster goes on: a topology submitted now runs, its workers live, no error
    wait_until(lambda: not ({"raising", "missing", "silent", "envdep"} & set(rows(c.conf_dir))), timeout=60,
               interval=1,
               message="the failing topologies removed")
    submit(c.conf_dir, ROOT / "examples" / "exclamation" / "topology.py", "fine")
    row = wait_until(lambda: (r := rows(c.conf_dir).get("fine")) and r["WORKERS"] == "2" and r,
                     timeout=120, interval=1, message="the next topology's 2 workers live")
    assert row["RESTARTS"] == "0" and row["LAST ERROR"] == "-", row
    storm_py("kill", "fine", "-w", "0", conf_dir=c.conf_dir)
