"""`storm-py ui` on a real dev cluster (Nimbus, two supervisors, worker processes, the UI daemon:
the run's shared secured one, tests/shared_clusters.py), secured with nimbus.authentication.secret: every REST answer has the shape of Storm's
own UI fixtures, its figures move as the topologies run, the POST actions change the topology as
the CLI does (and need the admin's bearer secret: a read-only one is refused), every read needs a
bearer too (401 without), /metrics parses with prometheus-client, bad requests get 404/400 naming
the culprit, a stalled spout is explained in words (REST and `monitor`), and the UI answers 503
while Nimbus is down and recovers when it returns."""

from __future__ import annotations

from typing import Any

import pytest
import ui_http
from devcluster_helpers import ROOT, status_in_list, storm_py, submit
from prometheus_client.parser import text_string_to_metric_families
from shared_clusters import READONLY_SECRET, SECRET
from testutil import QUIET_IDLE_ARGS, wait_until
from ui_http import post
from ui_shape import PROMETHEUS_FAMILIES, assert_shape

pytestmark = [pytest.mark.timeout(420), pytest.mark.zk, pytest.mark.cluster, pytest.mark.slow]
EXCLAMATION = ROOT / "examples" / "exclamation" / "topology.py"
PACE = 200  # words a second per spout task
STALLING = ROOT / "tests" / "devcluster" / "topologies" / "stalling" / "topology.py"


def get(base: str, path: str, **params: Any) -> Any:
    """The JSON of a GET that must answer 200, with the admin's bearer (every read needs one)."""
    return ui_http.get(base, path, token=SECRET, **params)


def request(base: str, method: str, path: str, body: Any = None, token: str | None = SECRET,
            **params: Any) -> tuple[int, Any, str]:
    """ui_http.request presenting the admin's bearer unless told otherwise (token=None: none)."""
    return ui_http.request(base, method, path, body=body, token=token, **params)


def spout_emitted(base: str, storm_id: str) -> int:
    return sum(s["emitted"] for s in get(base, f"/api/v1/topology/{storm_id}")["spouts"])


@pytest.fixture(scope="module")
def cluster(shared_dev_clusters):
    """The shared secured cluster with this module's two topologies, killed at its end."""
    dev = shared_dev_clusters.acquire("secured")
    try:
        # Paced: the module's figures need words flowing, not a core of the machine for its minutes.
        ids = {"demo": submit(dev.conf_dir, EXCLAMATION, "demo", f"exclamation.rate={PACE}", *QUIET_IDLE_ARGS),
               "stuck": submit(dev.conf_dir, STALLING, "stuck", *QUIET_IDLE_ARGS)}
        for storm_id in ids.values():
            wait_until(lambda s=storm_id: spout_emitted(dev.ui_url, s) > 0, timeout=120, interval=1,
                       message=f"{storm_id}'s spouts to emit (as the UI reports them)")
        yield dev, ids
    finally:
        shared_dev_clusters.release("secured")


def test_every_endpoint_answers_with_storms_shapes(cluster):
    dev, ids = cluster
    base, storm_id = dev.ui_url, ids["demo"]
    configuration = get(base, "/api/v1/cluster/configuration")
    assert_shape("cluster-configuration", configuration)
    assert configuration["nimbus.authentication.secret"] == "********"
    summary = get(base, "/api/v1/cluster/summary")
    assert_shape("cluster-summary", summary)
    assert summary["supervisors"] == 2 and summary["topologies"] == 2 and summary["slotsUsed"] >= 2
    assert_shape("nimbus-summary", get(base, "/api/v1/nimbus/summary"))
    sups = get(base, "/api/v1/supervisor/summary")
    assert_shape("supervisor-summary", sups)
    for sup in sups["supervisors"]:
        detail = get(base, "/api/v1/supervisor", id=sup["id"])
        assert_shape("supervisor-detail", detail)
    assert sum(len(get(base, "/api/v1/supervisor", id=s["id"])["workers"]) for s in sups["supervisors"]) >= 3
    topologies = get(base, "/api/v1/topology/summary")
    assert_shape("topology-summary", topologies)
    assert {t["name"] for t in topologies["topologies"]} == {"demo", "stuck"}
    for window in ("600", "10800", "86400", ":all-time"):
        for sys in ("0", "1"):
            detail = get(base, f"/api/v1/topology/{storm_id}", window=window, sys=sys)
            assert_shape("topology-detail", detail)
    detail = get(base, f"/api/v1/topology/{storm_id}")
    assert [w["window"] for w in detail["topologyStats"]] == ["600", "10800", "86400", ":all-time"]
    assert detail["configuration"].get("nimbus.authentication.secret") in (None, "********")
    assert {b["boltId"] for b in detail["bolts"]} == {"exclaim1", "exclaim2"}
    assert all(w["workerLogLink"].startswith("http://127.0.0.1:") for w in detail["workers"])
    # each worker's pid (storm-py's field): the live process of that slot's worker
    import psutil

    for w in detail["workers"]:
        assert isinstance(w["pid"], int), w
        cmdline = " ".join(psutil.Process(w["pid"]).cmdline())
        assert storm_id in cmdline and str(w["port"]) in cmdline, (w, cmdline)
    assert_shape("component-detail", get(base, f"/api/v1/topology/{storm_id}/component/exclaim1"))
    spout = get(base, f"/api/v1/topology/{storm_id}/component/word", window="600")
    assert spout["componentType"] == "spout" and [w["window"] for w in spout["spoutSummary"]][0] == "600"
    assert_shape("topology-visualization", get(base, f"/api/v1/topology/{storm_id}/visualization", sys=1))
    workers = get(base, f"/api/v1/topology-workers/{storm_id}")
    assert len(workers["hostPortList"]) == 2 and isinstance(workers["logviewerPort"], int)


def test_figures_move_as_the_topology_runs(cluster):
    dev, ids = cluster
    base, storm_id = dev.ui_url, ids["demo"]
    first = get(base, f"/api/v1/topology/{storm_id}")
    bolt = next(b for b in first["bolts"] if b["boltId"] == "exclaim1")
    wait_until(lambda: next(b for b in get(base, f"/api/v1/topology/{storm_id}")["bolts"]
                            if b["boltId"] == "exclaim1")["executed"] > bolt["executed"],
               timeout=60, interval=1, message="exclaim1's executed count to grow")
    wait_until(lambda: spout_emitted(base, storm_id) > first["spouts"][0]["emitted"], timeout=60, interval=1,
               message="the spout's emitted count to grow")
    acked = get(base, f"/api/v1/topology/{storm_id}")["topologyStats"][3]["acked"]
    assert acked > 0


def test_actions_need_the_secret_and_change_the_topology_as_the_cli_does(cluster):
    dev, ids = cluster
    base, storm_id = dev.ui_url, ids["demo"]
    status, body = post(base, f"/api/v1/topology/{storm_id}/deactivate")
    assert status == 401 and body["error"] == "auth" and "Authorization: Bearer" in body["errorMessage"]
    status, body = post(base, f"/api/v1/topology/{storm_id}/deactivate", token="wrong")
    assert status == 401 and "wrong" in body["errorMessage"]
    status, body = post(base, f"/api/v1/topology/{storm_id}/deactivate", token=READONLY_SECRET)
    assert status == 403 and f"read-only credentials cannot deactivate {storm_id}" in body["errorMessage"]
    assert status_in_list(dev.conf_dir, "demo") == "ACTIVE"
    status, body = post(base, f"/api/v1/topology/{storm_id}/deactivate", token=SECRET)
    assert (status, body) == (200, {"topologyOperation": "deactivate", "topologyId": storm_id, "status": "success"})
    assert status_in_list(dev.conf_dir, "demo") == "INACTIVE"
    reasons = get(base, f"/api/v1/topology/{storm_id}")["diagnosis"]
    assert any("deactivated" in r for r in reasons), reasons
    status, _ = post(base, f"/api/v1/topology/{storm_id}/activate", token=SECRET)
    assert status == 200 and status_in_list(dev.conf_dir, "demo") == "ACTIVE"
    status, body = post(base, f"/api/v1/topology/{storm_id}/rebalance/0",
                        {"rebalanceOptions": {"numWorkers": 1, "executors": {"exclaim1": "2"}}}, token=SECRET)
    assert status == 200 and body["topologyOperation"] == "rebalance"
    wait_until(lambda: get(base, f"/api/v1/topology/{storm_id}")["status"] == "ACTIVE"
               and get(base, f"/api/v1/topology/{storm_id}")["workersTotal"] == 1, timeout=90, interval=1,
               message="the rebalance to one worker")
    assert next(b for b in get(base, f"/api/v1/topology/{storm_id}")["bolts"]
                if b["boltId"] == "exclaim1")["executors"] == 2
    victim = submit(dev.conf_dir, EXCLAMATION, "victim")
    status, body = post(base, f"/api/v1/topology/{victim}/kill/0", token=SECRET)
    assert (status, body["topologyOperation"]) == (200, "kill")
    wait_until(lambda: status_in_list(dev.conf_dir, "victim") is None, timeout=60, interval=0.5,
               message="the killed topology gone from storm-py list")


def test_bad_requests_name_the_culprit(cluster):
    dev, ids = cluster
    base, storm_id = dev.ui_url, ids["demo"]
    cases = [
        ("GET", "/api/v1/topology/no-such-1-1", {}, 404, "no-such-1-1"),
        ("GET", f"/api/v1/topology/{storm_id}/component/nope", {}, 404, "nope"),
        ("GET", f"/api/v1/topology/{storm_id}", {"window": "7"}, 400, "window"),
        ("GET", f"/api/v1/topology/{storm_id}", {"sys": "maybe"}, 400, "sys"),
        ("GET", "/api/v1/supervisor", {"id": "nobody"}, 404, "nobody"),
        ("GET", "/api/v1/no/such/path", {}, 404, "/api/v1/no/such/path"),
    ]
    for method, path, params, code, named in cases:
        status, body, ctype = request(base, method, path, **params)
        assert status == code and ctype.startswith("application/json"), (path, params, status, body)
        assert set(body) == {"error", "errorMessage"} and named in body["errorMessage"], (path, body)
    status, body = post(base, f"/api/v1/topology/{storm_id}/rebalance/soon", token=SECRET)
    assert status == 400 and "wait" in body["errorMessage"]
    status, body = post(base, f"/api/v1/topology/{storm_id}/rebalance/0",
                        {"rebalanceOptions": {"executors": {"ghost": 2}}}, token=SECRET)
    assert status == 400 and "ghost" in body["errorMessage"]
    status, body = post(base, "/api/v1/topology/no-such-1-1/activate", token=SECRET)
    assert status == 404 and "no-such-1-1" in body["errorMessage"]


def test_metrics_parse_and_hold_the_families(cluster):
    dev, ids = cluster
    status, text, ctype = request(dev.ui_url, "GET", "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in PROMETHEUS_FAMILIES:
        assert name in families, name
    assert families["storm_nimbus_up"].samples[0].value == 1
    emitted = [s for s in families["storm_component_emitted"].samples
               if s.labels.get("topology") == "demo" and s.labels.get("component") == "word"]
    assert emitted and emitted[0].value > 0
    assert sum(s.value for s in families["storm_supervisor_slots"].samples) == dev.n_supervisors * dev.n_slots


def test_a_stalled_spout_is_explained_in_words(cluster):
    dev, ids = cluster
    base, storm_id = dev.ui_url, ids["stuck"]
    wait_until(lambda: any("max pending" in r for r in get(base, f"/api/v1/topology/{storm_id}")["diagnosis"]),
               timeout=60, interval=1, message="the max-pending diagnosis of the stalled topology")
    out = storm_py("monitor", "stuck", "-i", "1", "-n", "2", conf_dir=dev.conf_dir)
    lines = out.stdout.splitlines()
    assert lines[0].startswith("topology\tcomponent\tparallelism\tstream")
    assert any(ln.startswith("# spout numbers is at max pending") for ln in lines), out.stdout
    rows = [ln.split("\t") for ln in lines if ln.startswith("stuck\t")]
    assert len(rows) == 2 and rows[0][1] == "numbers" and rows[0][3] == "default"


@pytest.fixture(scope="module")
def nimbus_outage(cluster):
    """What the UI answered while Nimbus was down and once it was back. A module fixture: the
    restarted Nimbus belongs to the cluster (the fixture's), not to the test."""
    dev, _ids = cluster
    base = dev.ui_url
    seen = {}
    dev.stop_nimbus(kill=True)
    try:
        seen["summary"] = request(base, "GET", "/api/v1/topology/summary")
        seen["metrics"] = request(base, "GET", "/metrics")
    finally:
        dev.start_nimbus_again()
    wait_until(lambda: request(base, "GET", "/api/v1/topology/summary")[0] == 200, timeout=60, interval=0.5,
               message="the UI to answer again once Nimbus is back")
    seen["after"] = request(base, "GET", "/api/v1/topology/summary")
    return seen


def test_the_ui_answers_503_while_nimbus_is_down_and_recovers(cluster, nimbus_outage):
    dev, _ids = cluster
    status, body, _ = nimbus_outage["summary"]
    assert status == 503 and body["error"] == "Nimbus unavailable" and dev.nimbus_address in body["errorMessage"]
    status, text, _ = nimbus_outage["metrics"]
    assert status == 200 and "storm_nimbus_up 0.0" in text
    status, body, _ = nimbus_outage["after"]
    assert status == 200 and {t["name"] for t in body["topologies"]} >= {"demo", "stuck"}


def test_log_levels_through_the_rest_api_reach_the_workers(cluster):
    dev, ids = cluster
    base, storm_id = dev.ui_url, ids["stuck"]
    logger = "ui_rest_demo.bolts"
    status, body = post(base, f"/api/v1/topology/{storm_id}/logconfig",
                        {"namedLoggerLevels": {logger: {"target_level": "DEBUG", "timeout": 60}}})
    assert status == 401 and body["error"] == "auth"
    status, body = post(base, f"/api/v1/topology/{storm_id}/logconfig",
                        {"namedLoggerLevels": {logger: {"target_level": "DEBUG", "timeout": 60}}}, token=SECRET)
    assert status == 200 and body["namedLoggerLevels"][logger]["target_level"] == "DEBUG", body
    assert get(base, f"/api/v1/topology/{storm_id}/logconfig")["namedLoggerLevels"][logger]["timeout"] == 60
    logs = dev.log_dir.glob(f"supervisor-*/workers-artifacts/{storm_id}/*/worker.log")
    wait_until(lambda: any(f"log level of {logger} set to DEBUG" in p.read_text(errors="replace")
                           for p in dev.log_dir.glob(f"supervisor-*/workers-artifacts/{storm_id}/*/worker.log")),
               timeout=60, interval=0.5, message=f"the worker's log to say {logger} is at DEBUG (logs: {list(logs)})")
    status, body = post(base, f"/api/v1/topology/{storm_id}/logconfig",
                        {"namedLoggerLevels": {logger: {"target_level": "LOUD"}}}, token=SECRET)
    assert status == 400 and "LOUD" in body["errorMessage"]
    status, body = post(base, f"/api/v1/topology/{storm_id}/logconfig",
                        {"namedLoggerLevels": {logger: {"target_level": ""}}}, token=SECRET)
    assert status == 200 and logger not in body["namedLoggerLevels"]


def test_log_links_open_the_workers_log_through_the_logviewer(cluster):
    dev, ids = cluster
    comp = get(dev.ui_url, f"/api/v1/topology/{ids['demo']}/component/exclaim1")
    links = {e["workerLogLink"] for e in comp["executorStats"]}
    assert links and all(link.startswith("http://127.0.0.1:") for link in links), links
    for link in links:
        status, page, ctype = request(link + "&start=0", "GET", "", token=None)  # the logviewer's own rule
        assert status == 401 and "<pre id=log" not in page and "action='/login'" in page, (link, status)
        status, page, ctype = request(link + "&start=0", "GET", "")  # the log's first page
        assert status == 200 and ctype.startswith("text/html") and "<pre id=log" in page, (link, status)
        assert ids["demo"] in page  # the worker logs its topology id when it starts


def test_reads_need_credentials_and_a_reader_reads(cluster):
    dev, ids = cluster
    base, storm_id = dev.ui_url, ids["demo"]
    for path in ("/api/v1/cluster/summary", f"/api/v1/topology/{storm_id}", "/metrics"):
        status, body, ctype = request(base, "GET", path, token=None)
        assert status == 401 and ctype.startswith("application/json") and "credentials" in body["errorMessage"]
        assert storm_id not in str(body)
        assert request(base, "GET", path, token="wrong")[0] == 401
        assert request(base, "GET", path, token=READONLY_SECRET)[0] == 200
    status, page, ctype = request(base, "GET", "/", token=None)
    assert status == 401 and ctype.startswith("text/html") and "action='/login'" in page
    configuration = get(base, "/api/v1/cluster/configuration")
    assert configuration["ui.readonly.secret"] == "********"
    assert READONLY_SECRET not in str(get(base, f"/api/v1/topology/{storm_id}"))
    status, body = post(base, f"/api/v1/topology/{storm_id}/kill/0", token=READONLY_SECRET)
    assert status == 403 and f"read-only credentials cannot kill {storm_id}" in body["errorMessage"]
    assert status_in_list(dev.conf_dir, "demo") is not None
    ui_log = (dev.log_dir / "ui.log").read_text()
    assert f"refused kill of {storm_id} from 127.0.0.1: read-only credentials" in ui_log
    assert "from 127.0.0.1: wrong bearer secret" in ui_log and SECRET not in ui_log
