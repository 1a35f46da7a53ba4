"""`storm-py ui` as a daemon: it starts without Nimbus (answering 503 naming Nimbus's address,
/metrics saying storm_nimbus_up 0), logs to <storm.log.dir>/ui.log, exits 0 on SIGTERM, and a taken
port is one `error:` line naming the address."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys

import pytest
import yaml
from testutil import CLI_ENV, ROOT, stop_process, storm_py, wait_until
from ui_http import request

pytestmark = [pytest.mark.timeout(90), pytest.mark.cluster]


def _conf_dir(tmp_path, ui_port: int, nimbus_port: int, nimbus_timeout: float = 1):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "storm.yaml").write_text(yaml.safe_dump({
        "storm.local.dir": str(tmp_path / "local"), "ui.host": "127.0.0.1", "ui.port": ui_port,
        "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": nimbus_port, "nimbus.thrift.timeout": nimbus_timeout}))
    return conf_dir


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ui_runs_without_nimbus_and_stops_cleanly(tmp_path):
    nimbus_port = _free_port()  # nothing listens there
    # A Nimbus that refuses connections is given up at once, as the CLI does, not waited for
    # until nimbus.thrift.timeout (issue 47): a page would hang for its whole minute here.
    conf_dir = _conf_dir(tmp_path, 0, nimbus_port, nimbus_timeout=60)
    out_path = tmp_path / "ui.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "ui", "--conf-dir", str(conf_dir)], cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env={k: v for k, v in CLI_ENV.items() if k != "STORM_CONF_DIR"})
        try:
            def url():
                assert proc.poll() is None, out_path.read_text()
                found = re.search(r"ui running on (http://127\.0\.0\.1:\d+)", out_path.read_text())
                return found and found.group(1)
            base = wait_until(url, timeout=30, interval=0.1, message=lambda: out_path.read_text())
            status, body, _ = request(base, "GET", "/api/v1/cluster/summary")
            assert status == 503 and f"127.0.0.1:{nimbus_port}" in body["errorMessage"], body
            assert "connection refused" in body["errorMessage"], body
            status, text, _ = request(base, "GET", "/metrics")
            assert status == 200 and "storm_nimbus_up 0.0" in text
            assert proc.poll() is None  # still serving
        finally:
            code = stop_process(proc, 30, "storm-py ui", sig=signal.SIGTERM)
    assert code == 0, out_path.read_text()
    log_text = (tmp_path / "local" / "logs" / "ui.log").read_text()
    assert "REST API" in log_text


def test_a_taken_port_is_one_error_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = storm_py("ui", conf_dir=_conf_dir(tmp_path, port, _free_port()), timeout=30)
    assert out.returncode == 1
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and f"127.0.0.1:{port}" in errors[0] and "Traceback" not in out.stderr, out.stderr
