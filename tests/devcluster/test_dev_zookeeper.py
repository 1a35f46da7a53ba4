"""`storm-py dev-zookeeper`: starts in the foreground, answers `ruok`, stops on SIGTERM with exit
0; a taken port is one `error:` line. Also: a dev cluster whose child cannot start exits 1 with
one `error:` line naming it, and leaves nothing running."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys

import psutil
import pytest
from devcluster_helpers import ENV, ROOT, DevClusterProcess, alive, storm_py
from testutil import one_error_line, wait_until

from cluster_state.zkserver import four_letter_word, free_port

pytestmark = [pytest.mark.timeout(120), pytest.mark.zk, pytest.mark.cluster]

if shutil.which("java") is None:
    pytest.skip("dev-zookeeper needs Java and the Debian zookeeper package", allow_module_level=True)


def test_dev_zookeeper_answers_ruok_and_stops_on_sigterm(tmp_path):
    port = free_port()
    data = tmp_path / "zk-data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "daemons.cli", "dev-zookeeper", "--port", str(port), "--data-dir", str(data),
         "-c", f"storm.local.dir={tmp_path / 'local'}"],
        cwd=ROOT, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def ruok():
            if proc.poll() is not None:
                raise AssertionError(f"dev-zookeeper exited {proc.returncode}: {proc.stderr.read()}")
            try:
                return four_letter_word("127.0.0.1", port, "ruok", timeout=0.5) == "imok"
            except OSError:
                return False
        wait_until(ruok, timeout=60, interval=0.1, message="dev-zookeeper to answer ruok")
        assert (data / "version-2").is_dir()  # ZooKeeper writes its data where --data-dir says
        jvms = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert f"zookeeper running on 127.0.0.1:{port}" in out
    assert not any(alive(j.pid) for j in jvms)
    assert jvms, "the ZooKeeper JVM was a child of dev-zookeeper"
    with pytest.raises(ConnectionRefusedError):  # nothing listens on the port any more
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_dev_zookeeper_port_taken_is_one_error_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = storm_py("dev-zookeeper", "--port", str(port), "-c", f"storm.local.dir={tmp_path}", check=None)
    line = one_error_line(out)
    assert f"127.0.0.1:{port}" in line and "taken" in line


def test_dev_cluster_child_failing_at_start_stops_the_rest(tmp_path):
    # A supervisor with an unusable local dir (a file where its dir must be) cannot start.
    base = tmp_path / "dev"
    base.mkdir()
    (base / "supervisor-1").write_text("not a directory")
    cluster = DevClusterProcess(base, "--supervisors", "1", "--ready-timeout", "60")
    try:
        cluster.proc.wait(90)
    finally:
        cluster.stop()
        leftovers = cluster.kill_leftovers()
    assert cluster.proc.returncode == 1, cluster.output()
    errors = [ln for ln in cluster.output().splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "supervisor-1" in errors[0] and "supervisor.log" in errors[0], cluster.output()
    assert "Traceback" not in cluster.output()
    assert not leftovers, f"processes left behind: {leftovers}"
