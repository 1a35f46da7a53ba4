"""The logviewer secured by nimbus.authentication.secret (the same rule as the UI, its own login):
over real HTTP, no credentials, a wrong bearer, a forged cookie or the UI's cookie get a 401 (JSON
for its API, the login form for log pages) showing no log line, the refusal is logged with the
client's address; the admin and the read-only secrets read, by bearer or through /login."""

from __future__ import annotations

import http.cookiejar
import logging
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from ui_http import raw, request

from daemons import http_auth
from daemons.http_auth import ADMIN, READ_ONLY, Secrets
from daemons.logviewer.daemon import Logviewer

pytestmark = pytest.mark.timeout(60)

ADMIN_SECRET, READONLY_SECRET = "lv-admin-secret", "lv-reader-secret"
WORKER_LOG = "wc-1-1000/6700/worker.log"
LINE = "a private log line"


@pytest.fixture
def logviewer(tmp_path):
    logs = tmp_path / "logs"
    worker = logs / "workers-artifacts" / "wc-1-1000" / "6700"
    worker.mkdir(parents=True)
    (worker / "worker.log").write_text(f"{LINE}\n" * 10)
    (logs / "nimbus.log").write_text(f"{LINE}\n")
    server = Logviewer({"storm.local.dir": str(tmp_path), "storm.log.dir": str(logs),
                        "nimbus.authentication.secret": ADMIN_SECRET, "ui.readonly.secret": READONLY_SECRET},
                       host="127.0.0.1", port=0)
    server.start()
    try:
        yield server
    finally:
        server.stop()


_raw = raw  # (tests/ui_http.py)


API = [f"/api/v1/log?file={WORKER_LOG}", "/api/v1/listLogs", "/api/v1/listLogs?topologyId=wc-1-1000"]
PAGES = [f"/log?file={WORKER_LOG}", "/daemonlog?file=nimbus.log", f"/download?file={WORKER_LOG}"]


def _refusals(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "refused" in r.getMessage()]


def test_no_credentials_get_a_401_and_no_log_line(logviewer, caplog):
    caplog.set_level(logging.WARNING)
    for path in API:
        status, headers, text = _raw(logviewer.url + path)
        assert status == 401 and headers["Content-Type"].startswith("application/json"), path
        assert headers["WWW-Authenticate"] == 'Bearer realm="storm-py"'
        assert '"error": "auth"' in text and "Authorization: Bearer" in text and LINE not in text
        assert "wc-1-1000" not in text
    for path in PAGES:
        status, headers, text = _raw(logviewer.url + path)
        assert status == 401 and headers["Content-Type"].startswith("text/html"), path
        assert "credentials" in text and "action='/login'" in text and LINE not in text
    assert any("from 127.0.0.1: no credentials" in m for m in _refusals(caplog))


def test_wrong_bearers_and_forged_cookies_are_refused(logviewer, caplog):
    caplog.set_level(logging.WARNING)
    status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file=WORKER_LOG, token="wrong")
    assert status == 401 and "wrong bearer secret" in body["errorMessage"]
    ui_key = http_auth.session_key(Secrets(ADMIN_SECRET, READONLY_SECRET), "ui")
    for cookie in (http_auth.sign_session(http_auth.session_key(Secrets("guessed"), "logviewer"), ADMIN, time.time()),
                   http_auth.sign_session(ui_key, ADMIN, time.time()),  # the UI's session is not the logviewer's
                   "admin.0000"):
        status, _h, text = _raw(logviewer.url + f"/log?file={WORKER_LOG}",
                                headers={"Cookie": f"storm-py-logviewer-session={cookie}"})
        assert status == 401 and "session cookie refused" in text and LINE not in text
    logged = _refusals(caplog)
    assert any("from 127.0.0.1: wrong bearer secret" in m for m in logged), logged
    assert any("from 127.0.0.1: session cookie refused: bad signature" in m for m in logged), logged


def test_both_secrets_read_by_bearer(logviewer):
    for token in (ADMIN_SECRET, READONLY_SECRET):
        status, body, _ = request(logviewer.url, "GET", "/api/v1/log", file=WORKER_LOG, start=0, length=19,
                                  token=token)
        assert status == 200 and body["data"] == f"{LINE}\n"
        status, page, ctype = request(logviewer.url, "GET", "/daemonlog", file="nimbus.log", token=token)
        assert status == 200 and LINE in page


def test_login_then_the_log_page(logviewer, caplog):
    caplog.set_level(logging.WARNING)
    status, _h, page = _raw(logviewer.url + f"/log?file={urllib.parse.quote(WORKER_LOG, safe='')}")
    assert status == 401 and "value='/log?file=wc-1-1000%2F6700%2Fworker.log'" in page
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = urllib.parse.urlencode({"secret": READONLY_SECRET, "next": f"/log?file={WORKER_LOG}"}).encode()
    with opener.open(urllib.request.Request(logviewer.url + "/login", data=form, method="POST"), timeout=30) as r:
        assert r.status == 200 and LINE in r.read().decode()  # redirected back to the log
    [cookie] = list(jar)
    assert cookie.name == "storm-py-logviewer-session" and cookie.has_nonstandard_attr("HttpOnly")
    assert http_auth.verify_session(http_auth.session_key(Secrets(ADMIN_SECRET, READONLY_SECRET), "logviewer"),
                                    cookie.value, time.time()) == READ_ONLY
    form = urllib.parse.urlencode({"secret": "not-it", "next": "/"}).encode()
    status, headers, page = _raw(logviewer.url + "/login", "POST", data=form)
    assert status == 401 and "Set-Cookie" not in headers and "Wrong secret" in page
    assert any("refused a login to the storm-py logviewer from 127.0.0.1: wrong secret" in m
               for m in _refusals(caplog))
    assert not any("not-it" in r.getMessage() for r in caplog.records)
