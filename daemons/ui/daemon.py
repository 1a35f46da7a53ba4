"""The UI daemon (`storm-py ui`): Flask routes (daemons/ui/app.py) served by waitress
(daemons/http_server.py). The UI keeps no state of its own: every request asks Nimbus, so a Nimbus
restart needs nothing here (requests answer 503 meanwhile)."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from daemons.http_server import BindError, WsgiServer
from daemons.https_server import TlsWsgiServer, http_disabled, tls_settings
from daemons.rpc.calls import NimbusCalls
from daemons.rpc.client import client_from_conf
from daemons.ui.app import make_app
from executor.lifecycle import Service

log = logging.getLogger(__name__)

UiBindError = BindError  # what a taken port raises (one clear line)


class UiServer(Service):
    """`nimbus`: how to reach Nimbus (default: an RpcClient from `nimbus.seeds`/`nimbus.thrift.port`);
    `host`/`port` default to `ui.host`/`ui.port` (port 0: a free one, see `.port`)."""

    def __init__(self, conf: Mapping[str, Any], *, nimbus: NimbusCalls | None = None,
                 nimbus_address: tuple[str, int] | None = None, host: str | None = None, port: int | None = None):
        super().__init__("ui")
        self.conf = dict(conf)
        self._host = str(host if host is not None else conf["ui.host"])
        self._port = int(port if port is not None else conf["ui.port"])
        self._nimbus = nimbus
        self._nimbus_address = nimbus_address
        self.server: WsgiServer | None = None
        self.https: TlsWsgiServer | None = None   # with ui.https.port (daemons/https_server.py)

    @property
    def port(self) -> int | None:
        return None if self.server is None else self.server.port

    @property
    def url(self) -> str:
        served = self.server or self.https
        return "" if served is None else served.url

    def _on_start(self) -> None:
        nimbus, address = self._nimbus, self._nimbus_address
        if nimbus is None:
            # A Nimbus that refuses connections is given up at once (a page says so) instead of
            # holding the page for nimbus.thrift.timeout; one that does not answer is waited for.
            client = client_from_conf(self.conf, refused_is_final=True)
            self.on_stop(client.close, "Nimbus client")
            nimbus, address = client, (client.hosts[0], client.port)
        host, port = address or ("localhost", 0)
        app = make_app(nimbus, self.conf, host, port)
        tls = tls_settings(self.conf, "ui")  # checked before anything listens
        if not http_disabled(self.conf, "ui"):
            self.server = self.start_child(WsgiServer("ui", app, self._host, self._port))
        if tls is not None:
            self.https = self.start_child(TlsWsgiServer("ui", app, self._host, tls))
        log.info("UI serving Storm's REST API on %s (Nimbus at %s:%s)",
                 " and ".join(s.url for s in (self.server, self.https) if s is not None), host, port)
