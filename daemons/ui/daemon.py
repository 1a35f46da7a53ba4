"""The UI daemon (`storm-py ui`): Flask routes (daemons/ui/app.py) served by waitress.

Waitress is a pure-Python production WSGI server that can be embedded: it binds in
`create_server` (so a taken port fails the start with one clear error), serves from its own
thread pool, and `close()` ends its loop. The UI keeps no state of its own: every request asks
Nimbus, so a Nimbus restart needs nothing here (requests answer 503 meanwhile).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

import waitress

from daemons.rpc.client import client_from_conf
from daemons.ui.app import make_app
from daemons.ui.nimbus_calls import NimbusCalls
from executor.errors import ClearError
from executor.lifecycle import Service

log = logging.getLogger(__name__)

_THREADS = 4
_STOP_JOIN_SECS = 5.0


class UiBindError(ClearError):
    """The UI cannot listen on its address."""


class UiServer(Service):
    """`nimbus`: how to reach Nimbus (default: an RpcClient from `nimbus.seeds`/`nimbus.thrift.port`);
    `host`/`port` default to `ui.host`/`ui.port` (port 0: a free one, see `.port`)."""

    def __init__(self, conf: Mapping[str, Any], *, nimbus: NimbusCalls | None = None,
                 nimbus_address: tuple[str, int] | None = None, host: str | None = None, port: int | None = None):
        super().__init__("ui")
        self.conf = dict(conf)
        self.host = str(host if host is not None else conf["ui.host"])
        self._want_port = int(port if port is not None else conf["ui.port"])
        self._nimbus = nimbus
        self._nimbus_address = nimbus_address
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def _on_start(self) -> None:
        nimbus, address = self._nimbus, self._nimbus_address
        if nimbus is None:
            client = client_from_conf(self.conf)
            self.on_stop(client.close, "Nimbus client")
            nimbus, address = client, (client.hosts[0], client.port)
        host, port = address or ("localhost", 0)
        app = make_app(nimbus, self.conf, host, port)
        try:
            self._server = waitress.create_server(app, host=self.host, port=self._want_port, threads=_THREADS,
                                                  ident="storm-py-ui")
        except OSError as exc:
            raise UiBindError(f"ui cannot listen on {self.host}:{self._want_port}: {exc.strerror or exc}") from None
        self.port = int(self._server.effective_port)
        self._thread = threading.Thread(target=self._serve, name="ui-http", daemon=True)
        self._thread.start()
        self.on_stop(self._stop_server, "http server")
        log.info("UI serving Storm's REST API on %s (Nimbus at %s:%s)", self.url, host, port)

    def _serve(self) -> None:
        try:
            self._server.run()
        except Exception as exc:  # the loop ended on its own: the UI is no longer serving
            self.fatal(f"http server stopped: {exc}", exc)

    def _stop_server(self) -> None:
        self._server.close()
        self._server.task_dispatcher.shutdown(timeout=_STOP_JOIN_SECS)
        if self._thread is not None:
            self._thread.join(_STOP_JOIN_SECS)
