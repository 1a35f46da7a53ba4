"""HTTPS for the UI and the logviewer (Storm's `ui.https.*` / `logviewer.https.*` keys).

Waitress, which serves their plain HTTP (daemons/http_server.py), has no TLS, so the HTTPS
listener is cheroot (CherryPy's WSGI server: TLS from the standard library's ssl module,
embeddable, its own thread pool). Storm reads a Java keystore; here `<prefix>.https.keystore.path`
is a PEM file holding the certificate chain and its private key (or `<prefix>.https.cert.path`
the chain and the keystore the key), `<prefix>.https.key.password` the key's password if it
is encrypted. `<prefix>.disable.http.binding: true` leaves only HTTPS (Storm's
`ui.disable.http.binding`).
"""

from __future__ import annotations

import logging
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from daemons.http_server import BindError, display_host
from executor.errors import ClearError
from executor.lifecycle import Service

log = logging.getLogger(__name__)

_THREADS = 4
_STOP_JOIN_SECS = 5.0


class TlsConfigError(ClearError):
    """The HTTPS keys of a daemon are unusable (the message names the key and the file)."""


@dataclass(frozen=True)
class TlsSettings:
    port: int
    keystore: Path
    cert: Path | None = None
    key_password: str | None = None

    def __repr__(self) -> str:  # never the password
        return f"TlsSettings(port={self.port}, keystore={str(self.keystore)!r}, cert={self.cert!r})"


def tls_settings(conf: Mapping[str, Any], prefix: str) -> TlsSettings | None:
    """`prefix` "ui" or "logviewer": its HTTPS settings, or None when `<prefix>.https.port` is not
    set (null; 0 picks a free port)."""
    port = conf.get(f"{prefix}.https.port")
    if port is None:
        return None
    store = conf.get(f"{prefix}.https.keystore.path")
    if not store:
        raise TlsConfigError(f"config key {prefix}.https.port is set but {prefix}.https.keystore.path is not "
                             f"(a PEM file with the certificate chain and its private key)")
    cert = conf.get(f"{prefix}.https.cert.path")
    for key, value in ((f"{prefix}.https.keystore.path", store), (f"{prefix}.https.cert.path", cert)):
        if value and not Path(value).is_file():
            raise TlsConfigError(f"config key {key}: no file {value}")
    return TlsSettings(int(port), Path(store), Path(cert) if cert else None, conf.get(f"{prefix}.https.key.password"))


def served_port(conf: Mapping[str, Any], prefix: str) -> tuple[int | None, bool]:
    """The port links to a daemon ("ui", "logviewer") name, and whether over HTTPS: its HTTP
    port, or its HTTPS port when it serves HTTPS only (None: not known, e.g. a free port)."""
    if conf.get(f"{prefix}.disable.http.binding") and conf.get(f"{prefix}.https.port"):
        return int(conf[f"{prefix}.https.port"]) or None, True
    return int(conf.get(f"{prefix}.port") or 0) or None, False


def http_disabled(conf: Mapping[str, Any], prefix: str) -> bool:
    """Only HTTPS (`<prefix>.disable.http.binding: true`, which needs `<prefix>.https.port`)."""
    if not conf.get(f"{prefix}.disable.http.binding"):
        return False
    if conf.get(f"{prefix}.https.port") is None:
        raise TlsConfigError(f"config key {prefix}.disable.http.binding is true but {prefix}.https.port is not "
                             f"set: the daemon would serve nothing")
    return True


def server_context(tls: TlsSettings) -> ssl.SSLContext:
    """A server-side TLS context (TLS 1.2 at least) with the keystore's key and chain."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(tls.cert or tls.keystore), str(tls.keystore), password=tls.key_password)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"cannot use {tls.keystore}{' and ' + str(tls.cert) if tls.cert else ''} as the "
                             f"HTTPS certificate and key: {exc.reason or exc} (a PEM certificate chain and "
                             f"private key; an encrypted key needs its .https.key.password)") from None
    except OSError as exc:
        raise TlsConfigError(f"cannot read {tls.keystore}: {exc.strerror or exc}") from None
    return ctx


class TlsWsgiServer(Service):
    """Serves `app` over HTTPS on host:port (port 0: a free one, see `.port`) from start() to stop()."""

    def __init__(self, name: str, app: Callable[..., Any], host: str, tls: TlsSettings):
        super().__init__(f"{name}-https")
        self.app, self.host, self.tls = app, host, tls
        self.port: int | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"https://{display_host(self.host)}:{self.port}"

    def _on_start(self) -> None:
        from cheroot import wsgi
        from cheroot.ssl.builtin import BuiltinSSLAdapter

        context = server_context(self.tls)
        adapter = BuiltinSSLAdapter(str(self.tls.cert or self.tls.keystore), str(self.tls.keystore),
                                    private_key_password=self.tls.key_password)
        adapter.context = context  # ours: the key's password and the minimum version
        server = wsgi.Server((self.host, self.tls.port), self.app, numthreads=_THREADS,
                             server_name=f"storm-py-{self.name}")
        server.ssl_adapter = adapter
        try:
            server.prepare()  # binds: a taken port fails the start here, with one line
        except OSError as exc:
            raise BindError(f"{self.name} cannot listen on {self.host}:{self.tls.port}: "
                            f"{exc.strerror or exc}") from None
        self._server = server
        self.port = int(server.bind_addr[1])
        self._thread = threading.Thread(target=self._serve, name=f"{self.name}-loop", daemon=True)
        self._thread.start()
        self.on_stop(self._stop_server, "https server")

    def _serve(self) -> None:
        try:
            self._server.serve()
        except Exception as exc:  # the loop ended on its own: nothing is served any more
            self.fatal(f"https server stopped: {exc}", exc)

    def _stop_server(self) -> None:
        self._server.stop()
        if self._thread is not None:
            self._thread.join(_STOP_JOIN_SECS)
