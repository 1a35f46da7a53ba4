"""HTTPS for the UI and the logviewer (ui.https.* / logviewer.https.*): real TLS servers with a
certificate made by openssl, clients that verify it; plain HTTP off when asked; the session
cookie `Secure` over HTTPS; bad keys named in one line."""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request

import pytest

from daemons.https_server import TlsConfigError, tls_settings
from daemons.logviewer.daemon import Logviewer
from daemons.ui.daemon import UiServer

pytestmark = pytest.mark.timeout(120)

if shutil.which("openssl") is None:
    pytest.skip("needs the openssl command to make a certificate", allow_module_level=True)

SECRET = "tls-test-secret"


class _NoNimbus:
    def call(self, op, **args):
        from daemons.rpc.protocol import UnreachableError
        raise UnreachableError("no Nimbus in this test")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """(keystore.pem with the chain and key, cert.pem alone, an encrypted key, its password)."""
    d = tmp_path_factory.mktemp("tls")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "key.pem"),
                    "-out", str(d / "cert.pem"), "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
    (d / "keystore.pem").write_text((d / "cert.pem").read_text() + (d / "key.pem").read_text())
    subprocess.run(["openssl", "pkey", "-in", str(d / "key.pem"), "-aes256", "-passout", "pass:k3y-pass",
                    "-out", str(d / "key-encrypted.pem")], check=True, capture_output=True, timeout=60)
    return d


def _client(certificate) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificate / "cert.pem"))


def _get(url: str, ctx: ssl.SSLContext | None, token: str | None = None):
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as reply:
            return reply.status, dict(reply.headers), reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


@pytest.mark.cluster  # openssl makes the certificate
def test_the_ui_answers_over_https_only_when_asked(certificate):
    conf = {"ui.host": "127.0.0.1", "ui.port": 0, "nimbus.authentication.secret": SECRET, "ui.https.port": 0,
            "ui.https.keystore.path": str(certificate / "keystore.pem"), "ui.disable.http.binding": True}
    ui = UiServer(conf, nimbus=_NoNimbus(), nimbus_address=("local", 0))
    ui.start()
    try:
        assert ui.server is None and ui.url.startswith("https://127.0.0.1:")
        ctx = _client(certificate)
        status, headers, body = _get(ui.url + "/api/v1/cluster/summary", ctx)
        assert status == 401 and "Bearer" in headers.get("WWW-Authenticate", "")
        status, _, body = _get(ui.url + "/api/v1/cluster/summary", ctx, token=SECRET)
        assert status == 503 and "no Nimbus" in body  # through TLS and the secret to the (absent) Nimbus
        # A login over HTTPS gets a Secure cookie.
        conn = http.client.HTTPSConnection("127.0.0.1", ui.https.port, context=ctx, timeout=10)
        conn.request("POST", "/login", body=f"secret={SECRET}",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        reply = conn.getresponse()
        cookie = reply.getheader("Set-Cookie") or ""
        conn.close()
        assert reply.status in (302, 303) and "Secure" in cookie and "HttpOnly" in cookie, (reply.status, cookie)
        # A client that does not trust the certificate, and plain HTTP on the TLS port, get nothing.
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(ui.url + "/", timeout=10, context=ssl.create_default_context())
        plain = ui.url.replace("https://", "http://")
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            with urllib.request.urlopen(plain + "/api/v1/cluster/summary", timeout=10) as reply:
                assert reply.status != 200
    finally:
        ui.stop()


@pytest.mark.cluster  # openssl makes the certificate
def test_the_logviewer_serves_both_and_an_encrypted_key_needs_its_password(certificate, tmp_path):
    conf = {"storm.log.dir": str(tmp_path / "logs"), "logviewer.host": "127.0.0.1", "logviewer.port": 0,
            "logviewer.https.port": 0, "logviewer.https.cert.path": str(certificate / "cert.pem"),
            "logviewer.https.keystore.path": str(certificate / "key-encrypted.pem"),
            "logviewer.https.key.password": "k3y-pass"}
    viewer = Logviewer(conf)
    viewer.start()
    try:
        assert viewer.server is not None and viewer.https is not None
        status, _, body = _get(viewer.https.url + "/api/v1/listLogs", _client(certificate))
        assert status == 200, body
        assert _get(viewer.server.url + "/api/v1/listLogs", None)[0] == 200  # plain HTTP still on
    finally:
        viewer.stop()
    wrong = Logviewer({**conf, "logviewer.https.key.password": "guess"})
    with pytest.raises(TlsConfigError, match="key-encrypted.pem"):
        wrong.start()
    wrong.stop()


def test_bad_https_settings_are_named():
    assert tls_settings({}, "ui") is None
    with pytest.raises(TlsConfigError, match="ui.https.keystore.path is not"):
        tls_settings({"ui.https.port": 8443}, "ui")
    with pytest.raises(TlsConfigError, match="ui.https.keystore.path: no file /nonexistent.pem"):
        tls_settings({"ui.https.port": 8443, "ui.https.keystore.path": "/nonexistent.pem"}, "ui")
    ui = UiServer({"ui.host": "127.0.0.1", "ui.port": 0, "ui.disable.http.binding": True}, nimbus=_NoNimbus(),
                  nimbus_address=("local", 0))
    with pytest.raises(TlsConfigError, match="ui.disable.http.binding is true but ui.https.port"):
        ui.start()
    ui.stop()
