"""The logviewer daemon (`storm-py logviewer`): daemons/logviewer/app.py on waitress, serving the
logs under this host's `storm.log.dir` on `logviewer.host`:`logviewer.port`."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from cluster_state import local_layout
from cluster_state.config import default_config
from daemons.http_server import WsgiServer
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

    @property
    def url(self) -> str:
        return self.server.url if self.server is not None else ""

    def _on_start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.server = self.start_child(WsgiServer("logviewer", make_app(self.root, self.conf), self._host, self._port))
        self.start_child(PeriodicThread("logviewer-cleanup", float(self.conf["logviewer.cleanup.interval.secs"]),
                                        lambda: cleanup.clean(self.conf, self.root)))
        log.info("logviewer serving the logs under %s on %s", self.root, self.server.url)
