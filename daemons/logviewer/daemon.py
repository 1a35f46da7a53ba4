"""The logviewer daemon (`storm-py logviewer`): daemons/logviewer/app.py on waitress, serving the
logs under this host's `storm.log.dir` on `logviewer.host`:`logviewer.port`."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from cluster_state import local_layout
from cluster_state.config import default_config
from daemons.http_server import WsgiServer
from daemons.https_server import TlsWsgiServer, http_disabled, tls_settings
from daemons.logviewer import cleanup
from daemons.logviewer.app import make_app
from executor.lifecycle import PeriodicThread, Service

log = logging.getLogger(__name__)


class Logviewer(Service):
    def __init__(self, conf: Mapping[str, Any], *, host: str | None = None, port: int | None = None):
        super().__init__("logviewer")
        self.conf = {**default_config(), **conf}
        self.root = local_layout.log_dir(conf)
        self._host = str(host if host is not None else conf["logviewer.host"])
        self._port = int(port if port is not None else conf["logviewer.port"])
        self.server: WsgiServer | None = None
        self.https: TlsWsgiServer | None = None   # with logviewer.https.port

    @property
    def url(self) -> str:
        served = self.server or self.https
        return served.url if served is not None else ""

    def _on_start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        app = make_app(self.root, self.conf)
        tls = tls_settings(self.conf, "logviewer")
        if not http_disabled(self.conf, "logviewer"):
            self.server = self.start_child(WsgiServer("logviewer", app, self._host, self._port))
        if tls is not None:
            self.https = self.start_child(TlsWsgiServer("logviewer", app, self._host, tls))
        self.start_child(PeriodicThread("logviewer-cleanup", float(self.conf["logviewer.cleanup.interval.secs"]),
                                        lambda: cleanup.clean(self.conf, self.root)))
        log.info("logviewer serving the logs under %s on %s", self.root,
                 " and ".join(s.url for s in (self.server, self.https) if s is not None))
