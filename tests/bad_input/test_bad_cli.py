"""Bad CLI input and the `storm-py local` run loop: one `error:` line naming the culprit, a
non-zero exit, no traceback; tiny topologies in tmp_path (no Spark, no ZooKeeper).

Parsing and usage errors run the CLI in this process (tests/cli_inprocess.py); what runs user
code or a topology, talks to a Nimbus, or is about the process itself (its exit code, a signal)
runs it as a process, as do one `-h` and `version` (the entry point as a user starts it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import click
import pytest
from cli_inprocess import storm_py as storm_py_here
from click.testing import CliRunner
from testutil import CLI_ENV, error_lines, one_error_line
from testutil import storm_py as _storm_py

from daemons.cli import main as cli_main

pytestmark = pytest.mark.timeout(90)
# The tests below that start the CLI as a process.
process = pytest.mark.cluster


def _env():
    return {k: v for k, v in CLI_ENV.items() if k != "STORM_CONF_DIR"}


def storm_py(*args, cwd=None, timeout=60):
    return _storm_py(*args, cwd=cwd, timeout=timeout)


# ---------------------------------------------------------------- -h everywhere


def _command_paths(group: click.Group, prefix=()):
    yield prefix
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _command_paths(cmd, prefix + (name,))
        else:
            yield prefix + (name,)


@pytest.mark.parametrize("path", list(_command_paths(cli_main)), ids=lambda p: " ".join(p) or "storm-py")
def test_dash_h_works_on_every_command_and_group(path):
    out = storm_py_here(*path, "-h")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("Usage: storm-py") and "-h, --help" in out.stdout


def _command_at(path):
    cmd = cli_main
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def test_dash_h_whatever_group_ran_a_command_first():
    # click builds a command's help option on its first run, from that run's context: a command
    # first run under another group (as tests/unit/test_unit_log_levels.py runs set_log_level)
    # kept only --help, and `storm-py set_log_level -h` failed later in the same process.
    for path in list(_command_paths(cli_main))[1:]:
        foreign = click.Group("foreign")
        foreign.add_command(_command_at(path))
        first = CliRunner().invoke(foreign, [path[-1], "--help"])
        assert first.exit_code == 0, (path, first.output)
        out = storm_py_here(*path, "-h")
        assert out.returncode == 0 and "-h, --help" in out.stdout, (path, out.stderr)


@process
def test_dash_h_and_version_of_the_cli_as_a_process():
    out = storm_py("-h")
    assert out.returncode == 0 and out.stdout.startswith("Usage: storm-py") and "-h, --help" in out.stdout
    out = storm_py("version")
    assert out.returncode == 0 and out.stdout.startswith("storm-py ")


def test_version_command():
    out = storm_py_here("version")
    assert out.returncode == 0 and out.stdout.startswith("storm-py ")


# ---------------------------------------------------------------- usage errors


def test_unknown_command():
    one_error_line(storm_py_here("frobnicate"), "frobnicate", code=2)


@process
def test_a_usage_error_of_the_cli_as_a_process_exits_2_with_one_line():
    one_error_line(storm_py("frobnicate"), "frobnicate", code=2)


def test_missing_argument():
    one_error_line(storm_py_here("local"), "FILE", code=2)


def test_unknown_option():
    one_error_line(storm_py_here("local", "x.py", "--nope"), "--nope", code=2)


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "-inf", "soon", "0.0"])
def test_bad_duration(value):
    one_error_line(storm_py_here("local", "whatever.py", "--duration", value), "--duration", value, code=2)


def test_jar_submit_of_a_directory_says_what_it_takes(tmp_path):
    (tmp_path / "topology.py").write_text("")
    line = one_error_line(storm_py_here("jar", "submit", str(tmp_path)), str(tmp_path), code=2)
    assert "the topology .py file in it (here: topology.py) or a package .zip" in line


@pytest.mark.parametrize("command", ["kill", "rebalance"])
@pytest.mark.parametrize("value", ["-1", "nan", "inf", "-inf", "1e9", "soon"])
def test_bad_wait(command, value):
    # refused before Nimbus is asked: a wait that never ends held Nimbus's timer for every topology
    one_error_line(storm_py_here(command, "wc", "-w", value), "--wait", code=2)


def test_nimbus_refuses_waits_that_never_end():
    from daemons.nimbus.handlers import _wait
    from daemons.rpc.protocol import BadRequestError

    assert _wait({"wait_secs": 0}) == 0 and _wait({}) is None
    for bad in (float("nan"), float("inf"), -1.0, 1e9):
        with pytest.raises(BadRequestError, match="wait must be a number of seconds from 0"):
            _wait({"wait_secs": bad})


# ---------------------------------------------------------------- no Nimbus there


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dev_cluster_dir(temp, name, port, pid=None):
    """A dev cluster's directory as `storm-py dev-cluster` leaves it in the temp dir by default
    (running when `pid` is a live dev-cluster process); its conf dir."""
    base = temp / f"storm-py-dev-{name}"
    (base / "conf").mkdir(parents=True)
    (base / "conf" / "storm.yaml").write_text(f"nimbus.thrift.port: {port}\n")
    if pid is not None:
        (base / "pids").mkdir()
        (base / "pids" / "dev-cluster.pid").write_text(f"{pid}\n")
    return base / "conf"


def _unreachable(*args, tmp_path, env_extra):
    """`storm-py list` against a port where nothing listens: its one error line. The command's
    nimbus.thrift.timeout (600 s) is far beyond the subprocess's (60 s): a refused connection
    must be final, not waited for (else the subprocess times out and the test fails)."""
    out = _storm_py("list", "-c", "nimbus.thrift.timeout=600", *args, cwd=tmp_path, env_extra=env_extra,
                    timeout=60)
    return one_error_line(out, "cannot reach Nimbus at ", ": connection refused (nothing listens there)",
                          code=1)


@process
def test_no_nimbus_and_no_conf_names_the_conf_used_and_the_running_dev_cluster(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    port = _free_port()
    # a dev cluster the user started earlier, and an older one that is gone
    stopped = _dev_cluster_dir(temp, "old", port)
    os.utime(stopped / "storm.yaml", (1, 1))
    dev = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "dev-cluster"],
                           stdin=subprocess.DEVNULL)
    try:
        conf_dir = _dev_cluster_dir(temp, "abc", port, pid=dev.pid)
        line = _unreachable("-c", f"nimbus.thrift.port={port}", tmp_path=tmp_path,
                                  env_extra={"TMPDIR": str(temp)})
    finally:
        dev.kill()
        dev.wait(10)
    assert line.startswith(f"error: cannot reach Nimbus at localhost:{port}: connection refused"), line
    assert "conf: no storm.yaml found (no --conf-dir, $STORM_CONF_DIR unset), packaged defaults" in line
    assert (f"a dev cluster runs with conf dir {conf_dir.resolve()}: add --conf-dir {conf_dir.resolve()} "
            f"(or export STORM_CONF_DIR={conf_dir.resolve()})") in line


@process
def test_no_nimbus_with_a_conf_dir_names_its_storm_yaml_and_a_stopped_dev_cluster(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    conf_dir = _dev_cluster_dir(temp, "gone", _free_port())
    line = _unreachable("--conf-dir", str(conf_dir), tmp_path=tmp_path, env_extra={"TMPDIR": str(temp)})
    assert f"conf: --conf-dir {conf_dir / 'storm.yaml'}" in line, line
    assert f"that dev cluster is not running (storm-py dev-cluster --dir {conf_dir.parent.resolve()} starts it)" \
        in line
    # without --conf-dir, the stopped dev cluster is where to look
    line = _unreachable("-c", f"nimbus.thrift.port={_free_port()}", tmp_path=tmp_path,
                               env_extra={"TMPDIR": str(temp)})
    assert f"no dev cluster runs (the latest one's conf dir, {conf_dir.resolve()}, is used with --conf-dir" in line


@process
def test_no_nimbus_with_an_empty_storm_conf_dir_says_it_has_no_storm_yaml(tmp_path):
    (tmp_path / "tmp").mkdir()
    (tmp_path / "etc").mkdir()
    line = _unreachable("-c", f"nimbus.thrift.port={_free_port()}", tmp_path=tmp_path,
                               env_extra={"TMPDIR": str(tmp_path / "tmp"), "STORM_CONF_DIR": str(tmp_path / "etc")})
    assert (f"conf: no storm.yaml found ($STORM_CONF_DIR={tmp_path / 'etc'} has none), packaged defaults; "
            "name the cluster's conf dir (holding its storm.yaml) with --conf-dir DIR or $STORM_CONF_DIR") in line


# ---------------------------------------------------------------- bad topology files


def _file(tmp_path, text, name="topo.py"):
    f = tmp_path / name
    f.write_text(textwrap.dedent(text))
    return f


def test_missing_file(tmp_path):
    one_error_line(storm_py_here("local", str(tmp_path / "nope.py")), str(tmp_path / "nope.py"))


def test_directory_instead_of_file(tmp_path):
    one_error_line(storm_py_here("local", str(tmp_path)), str(tmp_path), "not a file")


@process
def test_file_calling_sys_exit(tmp_path):
    f = _file(tmp_path, "import sys\nsys.exit(3)\n")
    one_error_line(storm_py("local", str(f), "--duration", "5", cwd=tmp_path), str(f), "sys.exit(3)")


@process
def test_file_calling_sys_exit_zero(tmp_path):
    f = _file(tmp_path, "raise SystemExit\n")
    one_error_line(storm_py("local", str(f), "--duration", "5", cwd=tmp_path), str(f), "sys.exit")


@process
def test_file_raising_names_file_exception_and_line(tmp_path):
    f = _file(tmp_path, "x = 1\n\nraise ValueError('bad setting in user code')\n")
    one_error_line(storm_py("local", str(f), "--duration", "5", cwd=tmp_path), str(f), "ValueError",
              "bad setting in user code", f"{f}:3")


@process
def test_file_raising_in_a_sibling_module_names_the_sibling_line(tmp_path):
    _file(tmp_path, "def boom():\n    return 1 / 0\n", name="helpers.py")
    f = _file(tmp_path, "from helpers import boom\nboom()\n")
    one_error_line(storm_py("local", str(f), "--duration", "5", cwd=tmp_path), str(f), "ZeroDivisionError",
              f"{tmp_path / 'helpers.py'}:2")


@process
def test_file_with_syntax_error(tmp_path):
    f = _file(tmp_path, "def broken(:\n")
    one_error_line(storm_py("local", str(f), "--duration", "5", cwd=tmp_path), str(f), "SyntaxError")


@process
def test_file_importing_a_missing_module(tmp_path):
    f = _file(tmp_path, "import no_such_module_here\n")
    one_error_line(storm_py("local", str(f), "--duration", "5", cwd=tmp_path), str(f), "no_such_module_here")


@process
@pytest.mark.parametrize("text,names", [
    ("x = 1\n", ["defines no module attribute 'topology'"]),
    ("topology = 5\n", ["'topology' is a int"]),
    (textwrap.dedent('''
        from executor.api import Spout, TopologyBuilder
        class S(Spout):
            def next_tuple(self):
                pass
        b = TopologyBuilder()
        b.set_spout("s", S())
        topology = b.create_topology()
        config = ["topology.workers", 2]
    '''), ["'config' must be a dict"]),
])
def test_not_a_topology(tmp_path, text, names):
    f = _file(tmp_path, text)
    one_error_line(storm_py("local", str(f), "--duration", "5", cwd=tmp_path), str(f), *names)


# ---------------------------------------------------------------- the run loop

COUNTING = '''
    import json
    from executor.api import Bolt, Spout, TopologyBuilder

    class Counter(Spout):
        def declare_output_fields(self, d):
            d.declare(["n"])
        def open(self, conf, context, collector):
            self.c, self.n = collector, 0
            if conf.get("seen.path"):
                with open(conf["seen.path"], "w") as f:
                    json.dump({"pending": conf.get("topology.max.spout.pending")}, f)
        def next_tuple(self):
            self.n += 1
            self.c.emit([self.n], msg_id=self.n)

    class Sink(Bolt):
        def prepare(self, conf, context, collector):
            self.c = collector
            self.marker = conf.get("cleanup.path")
        def execute(self, tup):
            REPORT
            self.c.ack(tup)
        def cleanup(self):
            if self.marker:
                open(self.marker, "w").close()

    b = TopologyBuilder()
    b.set_spout("counter", Counter())
    b.set_bolt("sink", Sink()).shuffle_grouping("counter")
    topology = b.create_topology()
    config = {"topology.max.spout.pending": 50}
'''


def _counting(tmp_path, report="pass"):
    return _file(tmp_path, COUNTING.replace("REPORT", report))


def _status_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("[") and "acked" in line]


@process
def test_status_line_about_once_a_second(tmp_path):
    f = _counting(tmp_path)
    out = storm_py("local", str(f), "--duration", "3.5", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert 1 <= len(_status_lines(out.stdout)) <= 6, out.stdout
    assert "summary:" in out.stdout


@process
def test_c_overrides_the_topology_files_config(tmp_path):
    f = _counting(tmp_path)
    seen = tmp_path / "seen.json"
    out = storm_py("local", str(f), "--duration", "1", "-c", "topology.max.spout.pending=7",
                   "-c", f"seen.path={seen}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(seen.read_text()) == {"pending": 7}


@process
def test_sigterm_ends_the_run_like_ctrl_c(tmp_path):
    f = _counting(tmp_path)
    marker = tmp_path / "cleaned"
    proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "local", str(f), "-c", f"cleanup.path={marker}"],
                            cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        first = proc.stdout.readline()  # a status line: the topology runs
        assert "acked" in first, first + proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    assert "summary:" in out and "Traceback" not in err
    assert not [line for line in err.splitlines() if line.startswith("error:")]
    assert marker.exists()  # the bolt's cleanup ran: a clean stop, not an abrupt exit


@process
def test_reported_errors_without_a_death_exit_non_zero_once(tmp_path):
    f = _counting(tmp_path, report='self.c.report_error(ValueError("odd input " + "seen"))')
    out = storm_py("local", str(f), "--duration", "2", cwd=tmp_path)
    assert out.returncode != 0
    assert "summary:" in out.stdout
    line = one_error_line(out, "'sink'", "ValueError: odd input seen")
    assert "times" in line  # reported many times, printed once


@process
def test_a_dying_component_is_reported_once_with_the_user_line(tmp_path):
    f = _counting(tmp_path, report='raise RuntimeError("kaboom")')
    out = storm_py("local", str(f), "--duration", "30", cwd=tmp_path)
    assert out.returncode != 0
    lines = error_lines(out)
    assert len(lines) == 1, out.stderr
    assert "'sink'" in lines[0] and "RuntimeError: kaboom" in lines[0] and f"{f}:" in lines[0]
    # The trace is in the executor's log of the death, once per death: neither the worker's FATAL
    # line nor the CLI repeats it. A worker the supervisor restarted before the CLI's kill may die
    # again (a second death, logged as such): seen once in a loaded CI run.
    deaths = out.stderr.count("executor sink[3-3] died:")
    assert deaths >= 1 and out.stderr.count("Traceback (most recent call last)") == deaths, out.stderr


# ---------------------------------------------------------------- error report (pure)


def test_error_report_prints_each_distinct_error_once(tmp_path):
    from types import SimpleNamespace as NS

    from daemons.cli_report import error_lines as report
    from executor.errors import ComponentError

    user = tmp_path / "topo.py"
    trace = (f'Traceback (most recent call last):\n  File "/lib/executor/bolt.py", line 9, in _run\n'
             f'  File "{user}", line 22, in execute\nRuntimeError: kaboom\n')
    death = ComponentError("sink", 3, "execute", RuntimeError("kaboom"), trace)
    records = [NS(component_id="sink", task_id=3, error=f"ComponentError: {death}"),
               NS(component_id="sink", task_id=3, error="RuntimeError: kaboom"),
               NS(component_id="split", task_id=4, error="ValueError: odd"),
               NS(component_id="split", task_id=5, error="ValueError: odd"),
               NS(component_id="split", task_id=4, error="KeyError: 'w'")]
    assert report([death], records, tmp_path) == [
        f"component 'sink' task 3 died in execute: RuntimeError: kaboom (at {user}:22)",
        "component 'split' tasks 4,5 reported an error (2 times): ValueError: odd",
        "component 'split' task 4 reported an error: KeyError: 'w'",
    ]
    assert report([], [], tmp_path) == []


# ---------------------------------------------------------------- checked on the client at submit

_UNCOPYABLE = '''
import threading

from executor.api import Bolt, Spout, TopologyBuilder


class Numbers(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["n"])

    def next_tuple(self):
        pass


class Holder(Bolt):
    def __init__(self):
        self.lock = threading.Lock()  # made in __init__: every worker's per-task copy fails

    def execute(self, tup):
        pass


builder = TopologyBuilder()
builder.set_spout("numbers", Numbers())
builder.set_bolt("holder", Holder()).shuffle_grouping("numbers")
topology = builder.create_topology()
'''


@process
def test_a_component_that_cannot_be_copied_is_refused_at_build_naming_it(tmp_path):
    # it used to be submitted, then every worker crash-looped copying it per task
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "topology.py").write_text(_UNCOPYABLE)
    line = one_error_line(storm_py("jar", "build", str(tmp_path / "t"), "-o", str(tmp_path / "out.zip")))
    assert "component 'holder': its instance cannot be copied per task" in line and "prepare()" in line
    assert not (tmp_path / "out.zip").exists()


@process
def test_build_names_the_third_party_modules_a_topology_imports(tmp_path):
    # installed where it is submitted, maybe not where workers run: said at submit
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "fancylib.py").write_text("VALUE = 1\n")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "sibling.py").write_text("VALUE = 2\n")
    (tmp_path / "t" / "topology.py").write_text(
        "import fancylib  # noqa\nimport sibling  # noqa\nimport json  # noqa\nimport yaml  # noqa\n"
        + _UNCOPYABLE.replace("threading.Lock()", "None"))
    out = _storm_py("jar", "build", str(tmp_path / "t"), "-o", str(tmp_path / "out.zip"),
                    env_extra={"PYTHONPATH": f"{CLI_ENV['PYTHONPATH']}:{lib}"})
    assert out.returncode == 0, out.stderr
    notes = [ln for ln in out.stderr.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1 and "the topology imports fancylib, installed here but not packaged" in notes[0], out.stderr
    assert "sibling" not in notes[0] and "json" not in notes[0] and "yaml" not in notes[0]


def test_credentials_write_creates_a_new_conf_dir_and_its_storm_yaml_private(tmp_path):
    # docs/operations.md: --write appends to --conf-dir's storm.yaml; a new directory is made
    # (before: "error: --conf-dir DIR: no storm.yaml there").
    import stat

    import yaml

    conf_dir = tmp_path / "new" / "conf"
    out = storm_py_here("secure", "credentials", "--write", "--conf-dir", str(conf_dir), check=0)
    path = conf_dir / "storm.yaml"
    assert f"written to new file {path} (mode 600)" in out.stdout
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    written = yaml.safe_load(path.read_text())
    assert written["storm.messaging.curve.public"] and written["storm.zookeeper.auth.payload"]
    # an existing file is appended to, and never overwritten
    again = storm_py_here("secure", "credentials", "--write", "--conf-dir", str(conf_dir), check=1)
    assert "already sets" in again.stderr and "Traceback" not in again.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "storm.yaml").write_text("nimbus.seeds: [127.0.0.1]\n")
    storm_py_here("secure", "credentials", "--write", "--conf-dir", str(other), check=0)
    assert yaml.safe_load((other / "storm.yaml").read_text())["nimbus.seeds"] == ["127.0.0.1"]
