"""The UI secured by nimbus.authentication.secret (daemons/http_auth.py): the pure decisions (a
forged, tampered or expired session refused, a read-only one cannot act, no open redirect), then
real attackers against a UI served by waitress over an in-process cluster running a topology: no
credentials, a wrong bearer, a forged cookie, a read-only user trying a kill. Each gets a 401/403
that shows nothing, the refusal is logged with the client's address, and the topology is still
there. The admin's bearer, a login through /login and `storm-py ui` as a daemon work."""

from __future__ import annotations

import base64
import http.cookiejar
import logging
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml
from testutil import CLI_ENV, ROOT, stop_process, wait_until
from ui_http import raw, request

from cluster_state.secrets import MASK
from daemons import http_auth
from daemons.http_auth import ADMIN, READ_ONLY, BadSession, Secrets
from daemons.local import LocalCluster
from daemons.testing import FeederSpout
from daemons.ui.daemon import UiServer
from executor.api import Bolt, TopologyBuilder

pytestmark = pytest.mark.timeout(120)

ADMIN_SECRET, READONLY_SECRET = "admin-secret-4x", "reader-secret-9y"
SECRETS = Secrets(ADMIN_SECRET, READONLY_SECRET)
KEY = http_auth.session_key(SECRETS, "ui")
NOW = 1_800_000_000.0


# ---------------------------------------------------------------------- the pure decisions
def test_a_signed_session_gives_its_role_until_it_expires():
    for role in (ADMIN, READ_ONLY):
        value = http_auth.sign_session(KEY, role, NOW)
        assert http_auth.verify_session(KEY, value, NOW + 60) == role
        assert http_auth.verify_session(KEY, value, NOW + http_auth.SESSION_LIFETIME_SECS - 1) == role
    with pytest.raises(BadSession, match="expired"):
        http_auth.verify_session(KEY, http_auth.sign_session(KEY, ADMIN, NOW), NOW + http_auth.SESSION_LIFETIME_SECS)
    with pytest.raises(ValueError, match="unknown role"):
        http_auth.sign_session(KEY, "root", NOW)


def _payload(value: str) -> str:
    body = value.rpartition(".")[0]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def _encode(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def test_forged_and_tampered_sessions_are_refused():
    reader = http_auth.sign_session(KEY, READ_ONLY, NOW)
    sig = reader.rpartition(".")[2]
    promoted = _payload(reader).replace(READ_ONLY, ADMIN, 1)  # the reader makes itself admin
    with pytest.raises(BadSession, match="signature"):
        http_auth.verify_session(KEY, f"{_encode(promoted)}.{sig}", NOW)
    extended = "|".join([READ_ONLY, str(int(NOW) + 10**8), "x"])  # or lives forever
    with pytest.raises(BadSession, match="signature"):
        http_auth.verify_session(KEY, f"{_encode(extended)}.{sig}", NOW)
    other_key = http_auth.session_key(Secrets("guessed", None), "ui")  # signed without the secret
    with pytest.raises(BadSession, match="signature"):
        http_auth.verify_session(KEY, http_auth.sign_session(other_key, ADMIN, NOW), NOW)
    for junk in ("", "admin", ".", "YWRtaW4.", "é.é", reader + "0"):
        with pytest.raises(BadSession):
            http_auth.verify_session(KEY, junk, NOW)


def test_sessions_are_per_app_and_end_with_a_change_of_secret():
    value = http_auth.sign_session(KEY, ADMIN, NOW)
    for key in (http_auth.session_key(SECRETS, "logviewer"), http_auth.session_key(Secrets(ADMIN_SECRET, None), "ui"),
                http_auth.session_key(Secrets("rotated", READONLY_SECRET), "ui")):
        with pytest.raises(BadSession):
            http_auth.verify_session(key, value, NOW)


def test_which_role_a_credential_gives():
    assert http_auth.role_of_secret(ADMIN_SECRET, SECRETS) == ADMIN
    assert http_auth.role_of_secret(READONLY_SECRET, SECRETS) == READ_ONLY
    assert http_auth.role_of_secret("wrong", SECRETS) is None
    assert http_auth.role_of_secret(READONLY_SECRET, Secrets(ADMIN_SECRET)) is None
    assert http_auth.bearer_token(f"Bearer {ADMIN_SECRET}") == ADMIN_SECRET
    assert http_auth.bearer_token(f"bearer {ADMIN_SECRET}") == ADMIN_SECRET
    assert http_auth.bearer_token(f"Basic {ADMIN_SECRET}") is None and http_auth.bearer_token("Bearer ") is None
    session = http_auth.sign_session(KEY, READ_ONLY, NOW)
    assert http_auth.decide(SECRETS, KEY, None, session, NOW).role == READ_ONLY
    assert http_auth.decide(SECRETS, KEY, f"Bearer {ADMIN_SECRET}", None, NOW) == \
        http_auth.Decision(ADMIN, "", "bearer")
    # A wrong bearer is not rescued by a good cookie; nothing at all is refused as such.
    assert http_auth.decide(SECRETS, KEY, "Bearer nope", session, NOW).reason == "wrong bearer secret"
    assert http_auth.decide(SECRETS, KEY, "Basic x", None, NOW).role is None
    assert http_auth.decide(SECRETS, KEY, None, None, NOW) == http_auth.Decision(None, "no credentials")


def test_secrets_from_the_conf():
    assert http_auth.secrets_from_conf({}) is None
    assert http_auth.secrets_from_conf({"nimbus.authentication.secret": None, "ui.readonly.secret": None}) is None
    assert http_auth.secrets_from_conf({"nimbus.authentication.secret": "a"}) == Secrets("a", None)
    with pytest.raises(http_auth.AuthConfigError, match="ui.readonly.secret is set but nimbus.authentication"):
        http_auth.secrets_from_conf({"ui.readonly.secret": "r"})
    with pytest.raises(http_auth.AuthConfigError, match="must differ"):
        http_auth.secrets_from_conf({"nimbus.authentication.secret": "a", "ui.readonly.secret": "a"})
    with pytest.raises(http_auth.AuthConfigError, match="must be a string"):
        http_auth.secrets_from_conf({"nimbus.authentication.secret": 1234})


def test_paths_and_redirects():
    assert http_auth.is_api_path("/api/v1/cluster/summary") and http_auth.is_api_path("/metrics")
    assert not http_auth.is_api_path("/") and not http_auth.is_api_path("/topology.html")
    assert http_auth.safe_next("/topology.html?id=a-1") == "/topology.html?id=a-1"
    for evil in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)",
                 "evil.example", "", None, "/x\r\nSet-Cookie: a=b"):
        assert http_auth.safe_next(evil) == "/", evil
    assert http_auth.same_origin(None, "127.0.0.1:80") and http_auth.same_origin("http://127.0.0.1:80", "127.0.0.1:80")
    assert not http_auth.same_origin("http://evil.example", "127.0.0.1:80")


def test_what_a_client_sends_cannot_forge_a_log_line():
    assert http_auth.printable("/a\nWARNING forged") == "/a\\nWARNING forged"


def test_the_login_page_escapes_what_it_shows():
    page = http_auth.login_page("storm-py UI", "<script>x</script>", "/a'><script>")
    assert "<script>" not in page and 'name=secret' in page and "type=password" in page


def test_the_readonly_key_is_in_the_schema_and_masked():
    from cluster_state.config import default_config
    from cluster_state.config_schema import SCHEMA
    from cluster_state.secrets import masked_value

    assert "ui.readonly.secret" in SCHEMA and default_config()["ui.readonly.secret"] is None
    assert masked_value("ui.readonly.secret", "r") == MASK


# ---------------------------------------------------------------------- a running UI
class Sink(Bolt):
    def declare_output_fields(self, declarer):
        pass

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)


@pytest.fixture(scope="module")
def secured_ui():
    """A UI (waitress, a real port) over an in-process cluster running `guarded`."""
    secured = {"nimbus.authentication.secret": ADMIN_SECRET, "ui.readonly.secret": READONLY_SECRET}
    with LocalCluster(secured) as cluster:
        builder = TopologyBuilder()
        builder.set_spout("feed", FeederSpout(["v"]))
        builder.set_bolt("sink", Sink()).shuffle_grouping("feed")
        storm_id = cluster.submit_topology("guarded", {}, builder.create_topology())
        ui = UiServer(cluster.conf, nimbus=cluster.nimbus_calls(), nimbus_address=("local", 0), host="127.0.0.1", port=0)
        ui.start()
        try:
            yield ui, cluster, storm_id
        finally:
            ui.stop()


_raw = raw  # (tests/ui_http.py)


def _refusals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "refused" in r.getMessage()]


def _still_running(ui, storm_id: str) -> None:
    status, body, _ = request(ui.url, "GET", "/api/v1/topology/summary", token=ADMIN_SECRET)
    assert status == 200 and [(t["id"], t["status"]) for t in body["topologies"]] == [(storm_id, "ACTIVE")], body


READS = ["/api/v1/cluster/summary", "/api/v1/cluster/configuration", "/api/v1/nimbus/summary",
         "/api/v1/supervisor/summary", "/api/v1/topology/summary", "/metrics"]
PAGES = ["/", "/index.html", "/topology.html?id=x", "/component.html", "/supervisor.html", "/static/js/api.js",
         "/static/css/ui.css", "/static/favicon.svg"]


def test_no_credentials_get_a_401_and_nothing_else(secured_ui, caplog):
    ui, _cluster, storm_id = secured_ui
    caplog.set_level(logging.WARNING)
    for path in [*READS, f"/api/v1/topology/{storm_id}", f"/api/v1/topology-workers/{storm_id}"]:
        status, headers, text = _raw(ui.url + path)
        assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="storm-py"', (path, status)
        assert headers["Content-Type"].startswith("application/json"), path
        body = yaml.safe_load(text)
        assert set(body) == {"error", "errorMessage"} and "credentials" in body["errorMessage"]
        assert "Authorization: Bearer" in body["errorMessage"] and "/login" in body["errorMessage"]
        assert storm_id not in text and "guarded" not in text
    for path in PAGES:
        status, headers, text = _raw(ui.url + path)
        assert status == 401 and headers["Content-Type"].startswith("text/html"), (path, status)
        assert headers["WWW-Authenticate"] == 'Bearer realm="storm-py"'
        assert "credentials" in text and "<form method=post action='/login'" in text and "type=password" in text
        assert "type=\"module\"" not in text and "Cluster summary" not in text  # not the page
    assert any("from 127.0.0.1: no credentials" in m for m in _refusals(caplog)), _refusals(caplog)
    _still_running(ui, storm_id)


def test_a_wrong_bearer_and_forged_cookies_are_refused(secured_ui, caplog):
    ui, _cluster, storm_id = secured_ui
    caplog.set_level(logging.WARNING)
    for token in ("wrong", ADMIN_SECRET + "x", READONLY_SECRET.upper()):
        status, body, _ = request(ui.url, "GET", "/api/v1/cluster/summary", token=token)
        assert status == 401 and "wrong bearer secret" in body["errorMessage"]
        status, body = request(ui.url, "POST", f"/api/v1/topology/{storm_id}/kill/0", token=token)[:2]
        assert status == 401 and body["error"] == "auth"
    reader = http_auth.sign_session(KEY, READ_ONLY, time.time())
    sig = reader.rpartition(".")[2]
    forged = [
        http_auth.sign_session(http_auth.session_key(Secrets("guessed"), "ui"), ADMIN, time.time()),
        f"{_encode(_payload(reader).replace(READ_ONLY, ADMIN, 1))}.{sig}",
        http_auth.sign_session(KEY, ADMIN, time.time() - 2 * http_auth.SESSION_LIFETIME_SECS),  # an old one
        http_auth.sign_session(http_auth.session_key(SECRETS, "logviewer"), ADMIN, time.time()),
        "admin",
    ]
    for cookie in forged:
        for method, path in (("GET", "/api/v1/topology/summary"), ("POST", f"/api/v1/topology/{storm_id}/kill/0"),
                             ("GET", "/")):
            status, _headers, text = _raw(ui.url + path, method, {"Cookie": f"storm-py-ui-session={cookie}"})
            assert status == 401 and "session cookie refused" in text and storm_id not in text, (cookie, path)
    logged = _refusals(caplog)
    assert any("from 127.0.0.1: wrong bearer secret" in m for m in logged), logged
    assert any("from 127.0.0.1: session cookie refused: bad signature" in m for m in logged), logged
    assert any("session cookie refused: expired" in m for m in logged), logged
    assert not any(ADMIN_SECRET in m or READONLY_SECRET in m for m in logged)
    _still_running(ui, storm_id)


def test_a_readonly_user_reads_everything_but_cannot_act(secured_ui, caplog):
    ui, cluster, storm_id = secured_ui
    caplog.set_level(logging.WARNING)
    for path in READS:
        status, _body, _ = request(ui.url, "GET", path, token=READONLY_SECRET)
        assert status == 200, path
    conf = request(ui.url, "GET", "/api/v1/cluster/configuration", token=READONLY_SECRET)[1]
    assert conf["nimbus.authentication.secret"] == MASK and conf["ui.readonly.secret"] == MASK
    detail = request(ui.url, "GET", f"/api/v1/topology/{storm_id}", token=READONLY_SECRET)[1]
    assert READONLY_SECRET not in str(detail) and ADMIN_SECRET not in str(detail)
    assert detail["configuration"].get("ui.readonly.secret") in (None, MASK)
    for op, path in (("kill", "kill/0"), ("deactivate", "deactivate"), ("rebalance", "rebalance/0"),
                     ("logconfig", "logconfig")):
        status, body = request(ui.url, "POST", f"/api/v1/topology/{storm_id}/{path}", token=READONLY_SECRET,
                               body={})[:2]
        assert status == 403 and body["error"] == "auth", (op, body)
        assert f"read-only credentials cannot {op} {storm_id}" in body["errorMessage"]
    assert any(f"refused kill of {storm_id} from 127.0.0.1: read-only" in m for m in _refusals(caplog))
    # The same through a read-only login's cookie.
    jar = _login(ui.url, READONLY_SECRET)
    status, body = _post_with(jar, ui.url + f"/api/v1/topology/{storm_id}/kill/0")
    assert status == 403 and "read-only credentials cannot kill" in body
    _still_running(ui, storm_id)
    assert cluster.topology_names() == ["guarded"]


def _login(base: str, secret: str, next_path: str = "/") -> http.cookiejar.CookieJar:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = urllib.parse.urlencode({"secret": secret, "next": next_path}).encode()
    with opener.open(urllib.request.Request(base + "/login", data=form, method="POST"), timeout=30) as reply:
        assert reply.status == 200 and reply.url.endswith(next_path)
    return jar


def _post_with(jar, url: str) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    try:
        with opener.open(urllib.request.Request(url, data=b"", method="POST"), timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_login_sets_a_strict_httponly_session_and_goes_back_local(secured_ui, caplog):
    ui, _cluster, storm_id = secured_ui
    caplog.set_level(logging.WARNING)
    status, headers, page = _raw(ui.url + "/login?next=/topology.html%3Fid%3Dx")
    assert status == 200 and "name=secret" in page and "value='/topology.html?id=x'" in page
    form = urllib.parse.urlencode({"secret": ADMIN_SECRET, "next": "/topology.html?id=x"}).encode()
    status, headers, _ = _raw(ui.url + "/login", "POST", data=form)
    assert status == 303 and headers["Location"] == "/topology.html?id=x"
    cookie = headers["Set-Cookie"]
    assert cookie.startswith("storm-py-ui-session=") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert "Max-Age=43200" in cookie and "Secure" not in cookie  # plain http here
    session = cookie.split(";")[0].split("=", 1)[1]
    status, _h, text = _raw(ui.url + "/api/v1/topology/summary", headers={"Cookie": f"storm-py-ui-session={session}"})
    assert status == 200 and storm_id in text
    # No open redirect: a foreign target goes home.
    form = urllib.parse.urlencode({"secret": ADMIN_SECRET, "next": "https://evil.example/"}).encode()
    assert _raw(ui.url + "/login", "POST", data=form)[1]["Location"] == "/"
    # A wrong secret: the form again, a 401, the client's address logged, never the secret.
    form = urllib.parse.urlencode({"secret": "guess-1234", "next": "/"}).encode()
    status, headers, page = _raw(ui.url + "/login", "POST", data=form)
    assert status == 401 and "Set-Cookie" not in headers and "Wrong secret" in page and "name=secret" in page
    logged = _refusals(caplog)
    assert any("refused a login to the storm-py UI from 127.0.0.1: wrong secret" in m for m in logged), logged
    assert not any("guess-1234" in r.getMessage() for r in caplog.records)
    # Logout drops the cookie.
    status, headers, _ = _raw(ui.url + "/logout", "POST")
    assert status == 303 and "storm-py-ui-session=;" in headers["Set-Cookie"] and "Max-Age=0" in headers["Set-Cookie"]


def test_a_session_cookie_from_another_site_cannot_act(secured_ui):
    ui, _cluster, storm_id = secured_ui
    session = http_auth.sign_session(KEY, ADMIN, time.time())
    status, _h, text = _raw(ui.url + f"/api/v1/topology/{storm_id}/deactivate", "POST",
                            {"Cookie": f"storm-py-ui-session={session}", "Origin": "https://evil.example"})
    assert status == 403 and "own pages" in text
    _still_running(ui, storm_id)


def test_the_admin_acts_by_bearer_and_by_login(secured_ui):
    ui, _cluster, storm_id = secured_ui
    status, body = request(ui.url, "POST", f"/api/v1/topology/{storm_id}/deactivate", token=ADMIN_SECRET)[:2]
    assert status == 200 and body["status"] == "success"
    jar = _login(ui.url, ADMIN_SECRET)
    status, text = _post_with(jar, ui.url + f"/api/v1/topology/{storm_id}/activate")
    assert status == 200 and "success" in text
    _still_running(ui, storm_id)


def test_without_a_secret_everything_stays_open(tmp_path):
    ui = UiServer({"ui.host": "127.0.0.1", "ui.port": 0}, nimbus=_NoNimbus(), nimbus_address=("local", 0))
    ui.start()
    try:
        status, headers, text = _raw(ui.url + "/")
        assert status == 200 and "WWW-Authenticate" not in headers
        status, body, _ = request(ui.url, "GET", "/api/v1/cluster/summary")
        assert status == 503
        assert _raw(ui.url + "/login")[0] == 404  # no login page without a secret
    finally:
        ui.stop()


class _NoNimbus:
    def call(self, op, **args):
        from daemons.rpc.protocol import UnreachableError
        raise UnreachableError("no Nimbus in this test")


@pytest.mark.cluster  # starts a process
def test_the_ui_daemon_refuses_and_logs_the_client(tmp_path):
    """`storm-py ui` as its own process: reads need the secret; its log names who was refused."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "storm.yaml").write_text(yaml.safe_dump({
        "storm.local.dir": str(tmp_path / "local"), "ui.host": "127.0.0.1", "ui.port": 0,
        "nimbus.seeds": ["127.0.0.1"], "nimbus.thrift.port": 1, "nimbus.thrift.timeout": 1,
        "nimbus.authentication.secret": ADMIN_SECRET, "ui.readonly.secret": READONLY_SECRET}))
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
            assert status == 401 and "credentials" in body["errorMessage"]
            status, body, _ = request(base, "GET", "/api/v1/cluster/summary", token="nope")
            assert status == 401
            status, body, _ = request(base, "GET", "/api/v1/cluster/summary", token=READONLY_SECRET)
            assert status == 503  # let in; Nimbus is just not there
            ui_log = tmp_path / "local" / "logs" / "ui.log"
            logged = wait_until(lambda: ui_log.exists() and "wrong bearer secret" in ui_log.read_text()
                                and ui_log.read_text(), timeout=10, interval=0.1, message="the refusal in ui.log")
            assert "refused GET /api/v1/cluster/summary from 127.0.0.1: no credentials" in logged
            assert ADMIN_SECRET not in logged and READONLY_SECRET not in logged
        finally:
            code = stop_process(proc, 30, "storm-py ui", sig=signal.SIGTERM)
    assert code == 0, out_path.read_text()
