"""`storm-py local FILE --ui-port 0` serves the same REST API and /metrics over the local run (the
same checks as on a dev cluster: Storm's fixture shapes, moving figures, reads and actions with the
bearer secret, bad requests), prints where, and stops with the run."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from typing import Any

import pytest
import ui_http
from prometheus_client.parser import text_string_to_metric_families
from testutil import CLI_ENV, ROOT, stop_process, wait_until
from ui_http import post
from ui_shape import assert_shape

pytestmark = [pytest.mark.timeout(180), pytest.mark.cluster, pytest.mark.slow]

SECRET = "local-secret"
EXCLAMATION = ROOT / "examples" / "exclamation" / "topology.py"


def get(base: str, path: str, **params: Any) -> Any:
    """A REST read with the bearer secret (with a secret set, every read needs it)."""
    return ui_http.get(base, path, token=SECRET, **params)


def request(base: str, method: str, path: str, token: str | None = SECRET, **params: Any) -> tuple[int, Any, str]:
    return ui_http.request(base, method, path, token=token, **params)


@pytest.fixture
def local_run(tmp_path):
    out_path = tmp_path / "local.out"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "daemons.cli", "local", str(EXCLAMATION), "--name", "demo",
                                 "--ui-port", "0", "--duration", "120", "-c", f"nimbus.authentication.secret={SECRET}"],
                                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env={k: v for k, v in CLI_ENV.items() if k != "STORM_CONF_DIR"})
        try:
            def url():
                if proc.poll() is not None:
                    raise AssertionError(f"storm-py local exited {proc.returncode}: {out_path.read_text()}")
                found = re.search(r"^ui  (http://127\.0\.0\.1:\d+)$", out_path.read_text(), re.M)
                return found and found.group(1)
            base = wait_until(url, timeout=60, interval=0.2, message=lambda: f"the ui line: {out_path.read_text()}")
            yield proc, base, out_path
        finally:
            stop_process(proc, 60, "storm-py local", sig=signal.SIGTERM)


def test_the_local_run_serves_storms_rest_api(local_run):
    proc, base, out_path = local_run
    assert_shape("cluster-configuration", get(base, "/api/v1/cluster/configuration"))
    assert_shape("cluster-summary", get(base, "/api/v1/cluster/summary"))
    assert_shape("nimbus-summary", get(base, "/api/v1/nimbus/summary"))
    sups = get(base, "/api/v1/supervisor/summary")
    assert_shape("supervisor-summary", sups)
    assert_shape("supervisor-detail", get(base, "/api/v1/supervisor", id=sups["supervisors"][0]["id"]))
    topologies = get(base, "/api/v1/topology/summary")
    assert_shape("topology-summary", topologies)
    storm_id = next(t["id"] for t in topologies["topologies"] if t["name"] == "demo")

    def emitted():
        return get(base, f"/api/v1/topology/{storm_id}")["topologyStats"][3]["emitted"]
    first = wait_until(emitted, timeout=60, interval=0.5, message="the local topology's figures")
    wait_until(lambda: emitted() > first, timeout=60, interval=0.5, message="emitted to grow")
    assert_shape("topology-detail", get(base, f"/api/v1/topology/{storm_id}", window="600", sys="1"))
    assert_shape("component-detail", get(base, f"/api/v1/topology/{storm_id}/component/exclaim2"))
    assert_shape("topology-visualization", get(base, f"/api/v1/topology/{storm_id}/visualization"))
    assert get(base, f"/api/v1/topology-workers/{storm_id}")["hostPortList"]

    assert post(base, f"/api/v1/topology/{storm_id}/deactivate")[0] == 401
    assert request(base, "GET", "/api/v1/cluster/summary", token=None)[0] == 401
    status, body = post(base, f"/api/v1/topology/{storm_id}/deactivate", token=SECRET)
    assert status == 200 and body["status"] == "success"
    detail = get(base, f"/api/v1/topology/{storm_id}")
    assert detail["status"] == "INACTIVE" and any("deactivated" in r for r in detail["diagnosis"])
    assert post(base, f"/api/v1/topology/{storm_id}/activate", token=SECRET)[0] == 200
    assert get(base, f"/api/v1/topology/{storm_id}")["status"] == "ACTIVE"

    status, body, _ = request(base, "GET", f"/api/v1/topology/{storm_id}/component/ghost")
    assert status == 404 and "ghost" in body["errorMessage"]
    status, body, _ = request(base, "GET", f"/api/v1/topology/{storm_id}", window="1h")
    assert status == 400 and "window" in body["errorMessage"]

    status, text, _ = request(base, "GET", "/metrics")
    families = {f.name for f in text_string_to_metric_families(text)}
    assert status == 200 and {"storm_component_emitted", "storm_nimbus_up", "storm_topology_status"} <= families

    assert stop_process(proc, 60, "storm-py local", sig=signal.SIGTERM) == 0
    with pytest.raises(OSError):  # the UI stopped with the run
        request(base, "GET", "/api/v1/cluster/summary")


def test_a_taken_ui_port_is_one_clear_error(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "daemons.cli", "local", str(EXCLAMATION), "--ui-port", str(port),
                              "--duration", "5"], cwd=ROOT, capture_output=True, text=True, timeout=90,
                             env={k: v for k, v in CLI_ENV.items() if k != "STORM_CONF_DIR"})
    assert out.returncode != 0
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and f"127.0.0.1:{port}" in errors[0] and "Traceback" not in out.stderr, out.stderr
